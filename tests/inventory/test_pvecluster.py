"""A whole Proxmox cluster from one API URL (`sources: [{proxmox: ...}]`), against the fake API."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from fleetcheck.inventory import DiscoveryError, InventoryError, load_inventory
from fleetcheck.inventory.pvecluster import missing_guest_privilege
from fleetcheck.inventory_data.pveapi import discover_guests_via_api
from tests.fakes.pve_api import FakePveApi

TOKEN_ENV = "FLEETCHECK_TEST_PVE_TOKEN"


def write(tmp_path: Path, api: FakePveApi, extra: str = "", host: str = "") -> Path:
    path = tmp_path / "fleet.yaml"
    path.write_text(
        "defaults:\n"
        f"  api: {{user: fleet@pve, token_name: audit, token_env: {TOKEN_ENV}}}\n"
        "sources:\n"
        "  - proxmox:\n"
        f"      url: {api.url}\n"
        f"      verify_tls: {api.ca_path}\n"
        "      timeout: 5\n" + host + extra)
    return path


@pytest.fixture(autouse=True)
def token(pve_api: FakePveApi, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TOKEN_ENV, pve_api.secret)


def test_one_url_gives_every_node_with_its_address_and_api(
    pve_api: FakePveApi, tmp_path: Path
) -> None:
    path = write(tmp_path, pve_api, "hosts:\n  pve3:\n    ssh: {user: audit}\n    sudo: true\n")
    inventory = load_inventory(str(path))

    assert [(h.name, h.address, h.containers, h.vms, h.ssh.user, h.sudo)
            for h in inventory.hosts] == [
        ("pve1", "10.1.2.6", "all", "all", None, False),
        ("pve2", "10.1.2.7", "all", "all", None, False),
        ("pve3", "10.1.2.8", "all", "all", "audit", True),
    ]
    assert {(h.api.url, h.api.node, h.api.token_env) for h in inventory.hosts  # type: ignore
            } == {(pve_api.url, "pve1", TOKEN_ENV), (pve_api.url, "pve2", TOKEN_ENV),
                  (pve_api.url, "pve3", TOKEN_ENV)}
    assert inventory.groups == {"gpu-dc": ("pve1", "pve2", "pve3")}
    assert inventory.warnings == ()
    assert inventory.hosts[0].origin == f"{path}:4 (Proxmox cluster {pve_api.url})"
    assert [request[1] for request in pve_api.requests] == [
        "/api2/json/cluster/status", "/api2/json/cluster/resources?type=vm"]


def test_each_node_lists_its_own_guests_tags_as_labels_stopped_skipped(
    pve_api: FakePveApi, tmp_path: Path
) -> None:
    from fleetcheck.inventory import targets_for_host

    inventory = load_inventory(str(write(tmp_path, pve_api)))
    pve1 = inventory.hosts[0]
    lxc, vms = asyncio.run(discover_guests_via_api(pve1))
    nodes = targets_for_host(pve1, lxc, vms)
    assert [(n.id, type(n).__name__, getattr(n, "reason", ""), n.labels) for n in nodes] == [
        ("pve1/101", "Target", "", ("gpu", "prod")),
        ("pve1/102", "Target", "", ("gpu",)),
        ("pve1/103", "SkippedTarget", "container stopped, locked: backup", ()),
        ("pve1/9000", "SkippedTarget", "template", ()),
        ("pve1/200", "Target", "", ()),
    ]


def test_a_token_that_sees_no_guests_is_warned_with_the_missing_privilege(
    pve_api: FakePveApi, tmp_path: Path
) -> None:
    pve_api.privileges = {"/": {"Sys.Audit"}}
    inventory = load_inventory(str(write(tmp_path, pve_api)))
    assert [h.name for h in inventory.hosts] == ["pve1", "pve2", "pve3"]
    label = f"{tmp_path / 'fleet.yaml'}:4: sources[0].proxmox"
    assert inventory.warnings == (
        f"{label}: Proxmox API {pve_api.url}: token fleet@pve!audit sees no guests: it lacks "
        "VM.Audit on /vms (its permissions: /) (Proxmox leaves out what a token may not "
        "audit); grant: pveum acl modify /vms -token 'fleet@pve!audit' -role PVEAuditor",)
    # Discovery of a node then says so too, instead of auditing nothing.
    with pytest.raises(DiscoveryError) as info:
        asyncio.run(discover_guests_via_api(inventory.hosts[0]))
    assert str(info.value) == (
        f"pve1: Proxmox API {pve_api.url}: token fleet@pve!audit sees no guests: it lacks "
        "VM.Audit on /vms (its permissions: /); grant: pveum acl modify /vms -token "
        "'fleet@pve!audit' -role PVEAuditor")


def test_a_token_with_guests_on_a_pool_only_is_not_warned(
    pve_api: FakePveApi, tmp_path: Path
) -> None:
    pve_api.overrides["/cluster/resources?type=vm"] = []
    pve_api.privileges = {"/": {"Sys.Audit"}, "/pool/gpu": {"VM.Audit"}}
    assert load_inventory(str(write(tmp_path, pve_api))).warnings == ()
    assert missing_guest_privilege({"/vms/101": {"VM.Audit": 1}}) is None
    assert missing_guest_privilege({}) == "it lacks VM.Audit on /vms (its permissions: none)"


def test_without_sys_audit_on_root_the_node_names_stand_for_addresses(
    pve_api: FakePveApi, tmp_path: Path
) -> None:
    pve_api.privileges = {"/vms": {"VM.Audit"}, "/nodes": {"Sys.Audit"}}
    inventory = load_inventory(str(write(tmp_path, pve_api)))
    assert [(h.name, h.address) for h in inventory.hosts] == [("pve1", "pve1"),
                                                              ("pve2", "pve2")]
    assert inventory.warnings == (
        f"{tmp_path / 'fleet.yaml'}:4: sources[0].proxmox: Proxmox API {pve_api.url}: token "
        "fleet@pve!audit lacks Sys.Audit on / (GET /cluster/status refused): node addresses "
        "are their names; grant: pveum acl modify / -token 'fleet@pve!audit' -role PVEAuditor",)


def test_a_wrong_token_or_url_is_one_line_and_nothing_is_probed(
    pve_api: FakePveApi, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TOKEN_ENV, "wrong-secret-value")
    with pytest.raises(InventoryError) as info:
        load_inventory(str(write(tmp_path, pve_api)))
    assert str(info.value) == (
        f"{tmp_path / 'fleet.yaml'}:4: sources[0].proxmox: Proxmox API {pve_api.url}: 401 "
        f"invalid token value!: token fleet@pve!audit refused (check the secret in "
        f"${TOKEN_ENV})")
    assert "wrong-secret-value" not in str(info.value)


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("      node: pve1\n",
         "fleet.yaml:8: sources[0].proxmox.node: unknown key (valid: url, user, token_name, "
         "token_env, token_file, verify_tls, timeout)"),
        ("    enabled: maybe\n",
         "fleet.yaml:8: sources[0].enabled: must be true or false, got 'maybe'"),
        ("    host: {containers: some}\n",
         "fleet.yaml:4: sources[0].proxmox: Proxmox cluster URL: host pve1: "
         "host.containers: must be 'all' or a list of VMIDs, got 'some'"),
    ],
)
def test_source_entry_mistakes(pve_api: FakePveApi, tmp_path: Path, entry: str,
                               message: str) -> None:
    with pytest.raises(InventoryError) as info:
        load_inventory(str(write(tmp_path, pve_api, host=entry)))
    assert str(info.value) == message.replace(
        "fleet.yaml", str(tmp_path / "fleet.yaml")).replace("URL", pve_api.url)


def test_a_disabled_source_is_not_read(pve_api: FakePveApi, tmp_path: Path) -> None:
    path = write(tmp_path, pve_api, "hosts:\n  gpu1: {probe_host: true}\n",
                 host="    enabled: false\n")
    assert [h.name for h in load_inventory(str(path)).hosts] == ["gpu1"]
    assert pve_api.requests == []
