"""The Proxmox API token at least privilege: what each documented role lets discovery see and do.

Against the fake API over real HTTPS, which checks privileges as pve-access-control does and
answers Proxmox's 403 "Permission check failed (PATH, PRIV)".
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from fleetcheck.inventory import ApiOptions, DiscoveryError, HostSpec, discover_via_api
from tests.fakes.pve_api import FIXTURES_DIR, FakePveApi, serve_pve_api

TOKEN_ENV = "FLEETCHECK_TEST_PVE_TOKEN"


@pytest.fixture
def api(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakePveApi]:
    if not (FIXTURES_DIR / "FIXTURES.md").is_file():
        pytest.skip(f"shared Proxmox fixtures not found at {FIXTURES_DIR}")
    with serve_pve_api(FakePveApi(FIXTURES_DIR), tmp_path / "tls") as served:
        monkeypatch.setenv(TOKEN_ENV, served.secret)
        yield served


def discovered(api: FakePveApi) -> list[int]:
    options = ApiOptions(url=api.url, user=api.user, token_name=api.token_name,
                         token_env=TOKEN_ENV, verify_tls=str(api.ca_path), node="pve1",
                         timeout=5.0)
    host = HostSpec(name="pve1", address="127.0.0.1", containers="all", api=options)
    return [found.vmid for found in asyncio.run(discover_via_api(host))]


def call(api: FakePveApi, method: str, path: str, **kwargs: Any) -> requests.Response:
    return requests.request(
        method, f"{api.url}/api2/json{path}", verify=str(api.ca_path), timeout=5,
        headers={"Authorization": f"PVEAPIToken={api.user}!{api.token_name}={api.secret}"},
        **kwargs)


def test_vm_audit_on_vms_is_enough_for_discovery(api: FakePveApi) -> None:
    everything = discovered(api)
    api.privileges = {"/vms": {"VM.Audit"}}
    assert discovered(api) == everything == [101, 102, 103, 9000]  # 9000: a template


def test_a_pool_grant_shows_that_pool_only(api: FakePveApi) -> None:
    api.privileges = {"/pool/gpu": {"VM.Audit"}}
    api.pools = {101: "gpu", 102: "gpu"}
    assert discovered(api) == [101, 102]
    assert call(api, "GET", "/nodes/pve1/lxc/101/config").status_code == 200


def test_without_vm_audit_lists_are_empty_and_a_guest_is_403(api: FakePveApi) -> None:
    api.privileges = {"/nodes": {"Sys.Audit"}}
    # Proxmox filters lists rather than refusing them: the token sees no container at all,
    # which discovery reads against /access/permissions instead of auditing nothing.
    with pytest.raises(DiscoveryError) as info:
        discovered(api)
    assert str(info.value) == (
        f"pve1: Proxmox API {api.url}: token fleet@pve!audit sees no guests: it lacks "
        "VM.Audit on /vms (its permissions: /nodes); grant: pveum acl modify /vms -token "
        "'fleet@pve!audit' -role PVEAuditor")
    answer = call(api, "GET", "/nodes/pve1/lxc/101/config")
    assert (answer.status_code, answer.reason) == (
        403, "Permission check failed (/vms/101, VM.Audit)")
    assert answer.json() == {"data": None,
                             "message": "Permission check failed (/vms/101, VM.Audit)\n"}
    assert call(api, "GET", "/access/permissions").json()["data"] == {"/nodes": {"Sys.Audit": 1}}


@pytest.mark.parametrize(("major", "granted", "status", "reason"), [
    (9, {"VM.Audit", "VM.GuestAgent.Unrestricted"}, 200, "OK"),
    (9, {"VM.Audit", "VM.Monitor"}, 403,
     "Permission check failed (/vms/200, VM.GuestAgent.Unrestricted)"),
    (8, {"VM.Audit", "VM.Monitor"}, 200, "OK"),
    (8, {"VM.Audit"}, 403, "Permission check failed (/vms/200, VM.Monitor)"),
])
def test_guest_agent_exec_needs_its_privilege(
    api: FakePveApi, major: int, granted: set[str], status: int, reason: str
) -> None:
    api.pve_major = major
    api.privileges = {"/vms/200": granted}
    answer = call(api, "POST", "/nodes/pve1/qemu/200/agent/exec",
                  data={"command": "python3", "input-data": "x"})
    assert (answer.status_code, answer.reason) == (status, reason)
    if status == 200:
        assert answer.json() == {"data": {"pid": 4242}}


def test_no_privilege_separation_means_everything(api: FakePveApi) -> None:
    assert dataclasses.replace(api).privileges is None
    assert call(api, "POST", "/nodes/pve1/qemu/200/agent/exec").status_code == 200
