"""Host keys are strict by default: a changed or unknown key is refused before anything runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.fleet import Fleet
from tests.reliability.support import run_cli

pytestmark = [pytest.mark.sshd, pytest.mark.timeout(90)]


def _audit(fleet: Fleet, tmp_path: Path, edit: Any = None,
           env: dict[str, str] | None = None) -> dict[str, dict[str, Any]]:
    data = fleet.inventory_data(timeout=20)
    if edit:
        edit(data)
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(yaml.safe_dump(data, sort_keys=False))
    run = run_cli(["audit", str(inventory), "--format", "json", "-o", str(tmp_path / "r.json"),
                   "--no-progress"], deadline=60, cwd=tmp_path, env=env)
    assert "Traceback" not in run.err, run.err
    return {node["id"]: node for node in json.loads((tmp_path / "r.json").read_text())["nodes"]}


@pytest.mark.parametrize("policy", [None, "strict", "accept-new"])
def test_a_changed_host_key_is_refused(policy: str | None, fleet: Fleet, tmp_path: Path,
                                       figures: Any) -> None:
    fleet.add_host("pve1", known="wrong", probe_host=True)
    fleet.add_container("pve1", 101, "crash")

    def edit(data: dict[str, Any]) -> None:
        if policy:
            data["defaults"]["ssh"]["host_key_policy"] = policy

    nodes = _audit(fleet, tmp_path, edit)
    logins = fleet.accepted_logins("pve1")
    figures.host_key(f"changed key accepted ({policy or 'default'})" if logins else None)
    assert logins == 0
    assert nodes["pve1"]["status"] == "unreachable"
    assert "does not match" in nodes["pve1"]["reason"], nodes["pve1"]


def test_an_unknown_host_key_is_refused_by_default(fleet: Fleet, tmp_path: Path,
                                                   figures: Any) -> None:
    fleet.add_host("pve1", known="absent", probe_host=True)
    known_hosts = fleet.known_hosts.read_text()
    nodes = _audit(fleet, tmp_path)
    logins = fleet.accepted_logins("pve1")
    figures.host_key("unknown key accepted (default policy)" if logins else None)
    assert logins == 0
    assert nodes["pve1"]["status"] == "unreachable"
    assert "not in" in nodes["pve1"]["reason"], nodes["pve1"]
    assert fleet.known_hosts.read_text() == known_hosts


def test_no_known_hosts_in_the_inventory_means_the_users_file(fleet: Fleet, tmp_path: Path,
                                                              figures: Any) -> None:
    """Without `known_hosts:`, ~/.ssh/known_hosts decides; a HOME without one trusts nobody."""
    fleet.add_host("pve1", probe_host=True)
    home = tmp_path / "home"
    home.mkdir()

    def edit(data: dict[str, Any]) -> None:
        del data["defaults"]["ssh"]["known_hosts"]

    nodes = _audit(fleet, tmp_path, edit, env={"HOME": str(home)})
    logins = fleet.accepted_logins("pve1")
    figures.host_key("accepted without any known_hosts" if logins else None)
    assert logins == 0
    assert nodes["pve1"]["status"] == "unreachable"
    assert not (home / ".ssh" / "known_hosts").exists()


def test_accept_new_trusts_once_then_pins(fleet: Fleet, tmp_path: Path, figures: Any) -> None:
    """accept-new (opt-in) records an unknown key; a later different key is then refused."""
    host = fleet.add_host("pve1", known="absent", probe_host=True)

    def edit(data: dict[str, Any]) -> None:
        data["defaults"]["ssh"]["host_key_policy"] = "accept-new"

    first = _audit(fleet, tmp_path, edit)
    assert first["pve1"]["status"] != "unreachable", first["pve1"]
    pinned = fleet.known_hosts.read_text()
    assert f"[127.0.0.1]:{host.port}" in pinned
    # The host's key changes (a new machine answers on the same address).
    logins = fleet.accepted_logins("pve1")
    fleet.close()
    host.host_key.unlink()
    host.host_key.with_suffix(".pub").unlink()
    from tests.fleet.kit import _keygen

    _keygen(host.host_key)
    fleet._start_sshd(host)
    second = _audit(fleet, tmp_path, edit)
    figures.host_key("changed key accepted after accept-new"
                     if fleet.accepted_logins("pve1") > 0 else None)
    assert second["pve1"]["status"] == "unreachable"
    assert "does not match" in second["pve1"]["reason"]
    assert fleet.known_hosts.read_text() == pinned
    assert logins >= 1
