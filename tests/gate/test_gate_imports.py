"""The gate's start imports what the gate runs and nothing the other commands need: every
module it loads before its first probe is time a job's start waits for (bench/results.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.timeout(120)

#: Modules a gate over SSH never needs: other commands' (history, reports, the gatekeeper's
#: installer, node health), the Proxmox API's client, package-resource machinery, difflib
#: (only a mistake's "did you mean").
NOT_ON_THE_GATES_PATH = (
    "fleetcheck.report.history", "fleetcheck.report.reportio", "fleetcheck.host_setup",
    "fleetcheck.integrations.health_check", "fleetcheck.outbound", "fleetcheck.transport.qemu_api",
    "fleetcheck.completion", "importlib.resources", "difflib", "zipfile",
)


def gate_modules(inventory: Path) -> tuple[int, list[str], str]:
    """`fleetcheck gate INVENTORY --playbook quick` in a process of its own: its exit code,
    every module it loaded, its stderr."""
    script = ("import json, sys\n"
              "from fleetcheck.cli import main\n"
              f"code = main(['gate', {str(inventory)!r}, '--playbook', 'quick'])\n"
              "print(json.dumps([code, sorted(sys.modules)]))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(REPO)), timeout=60, check=False)
    code, modules = json.loads(done.stdout.splitlines()[-1])
    return code, modules, done.stderr


def test_a_gate_loads_only_what_the_gate_runs(tmp_path: Path) -> None:
    # A host nothing listens for: the gate connects, is refused and says so (exit 3).
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text("")
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(yaml.safe_dump({
        "defaults": {"ssh": {"port": 1, "config_file": "none",
                             "known_hosts": str(known_hosts)}, "probe_host": True},
        "hosts": {"gpu01": {"address": "127.0.0.1"}}}))
    code, modules, stderr = gate_modules(inventory)
    assert code == 3, stderr
    assert "connection refused" in stderr
    assert "asyncssh" in modules and "fleetcheck.audit" in modules
    assert [name for name in modules if name.startswith(NOT_ON_THE_GATES_PATH)] == []


@pytest.mark.sshd
def test_a_gate_to_openssh_hosts_over_libssh2_never_imports_asyncssh(fleet) -> None:
    # OpenSSH 9.2's sshd, an ed25519 key and a known_hosts file fleetcheck reads itself:
    # `ssh.client: auto` takes libssh2, and nothing imports asyncssh (nor cryptography) for it.
    from fleetcheck.transport import libssh2

    if libssh2.library() is None:
        pytest.skip(f"no libssh2 here: {libssh2.problem()}")
    fleet.add_host("pve1")
    fleet.add_container("pve1", 101)
    code, modules, stderr = gate_modules(fleet.write_inventory(timeout=30))
    assert code == 0, stderr
    assert "fleetcheck.transport.libssh2" in modules
    assert [name for name in modules
            if name.startswith(("asyncssh", "cryptography", "fleetcheck.transport.sshlib"))] == []
