"""The loopback fleet's `pct` and `qm` stand-ins (tests/fleet/pct_standin.py, qm_standin.py)
pinned to the real path of the real-runtime fleet: the same cases through `pct` over the real
lxc-attach into real LXC containers (tests/runtimes/pct_lxc.py) and `qm` over a real
qemu-guest-agent's socket (tests/runtimes/qm_agent.py), and through the stand-in, must agree
on what fleetcheck reads: the exit code, stdout and stderr (the refusals' texts), and the
node's outcome (`pct_exec_failure`, `qm_exec_failure`, `parse_qm_reply`).

The real path's Perl parts (pct's config and running checks, qm's and QMPClient's dies) are
themselves stand-ins written from pve-container's and qemu-server's source; lxc-attach, its
environment and exit codes, and everything the agent answers are the real tools'.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from fleetcheck.transport.interface import CommandResult
from fleetcheck.transport.pct import pct_exec_failure
from fleetcheck.transport.qemu import parse_qm_reply, qm_exec_failure
from tests.runtimes.conftest import Scenario

pytestmark = [pytest.mark.timeout(600)]
FLEET = Path(__file__).resolve().parents[1] / "fleet"


def _standin_host(tmp_path: Path) -> Path:
    """A host dir named as the real one (pve1: the texts name the node) with the stand-ins'
    pct and qm, and their containers and VMs in the states of the real fleet's."""
    host = tmp_path / "pve1"
    for tool, source in (("pct", "pct_standin.py"), ("qm", "qm_standin.py")):
        path = host / "bin" / tool
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"#!{sys.executable}\n" + (FLEET / source).read_text())
        path.chmod(0o755)
    for vmid, status in ((101, "running"), (102, "stopped")):
        cdir = host / "containers" / str(vmid)
        cdir.mkdir(parents=True)
        (cdir / "config.json").write_text(json.dumps({"name": f"ct{vmid}", "status": status}))
    # The real fleet's VMs (conftest.build): 301 with an agent that answers, 302 running with
    # an agent that does not, 303 configured but not running, 304 without `agent:`.
    for vmid, status, agent in ((301, "running", "on"), (302, "running", "off"),
                                (303, "stopped", "on"), (304, "running", "none")):
        vdir = host / "vms" / str(vmid)
        vdir.mkdir(parents=True)
        (vdir / "config.json").write_text(json.dumps({
            "name": f"vm{vmid}", "status": status, "agent": agent,
            "env": {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}}))
    return host


def _both(scenario: Scenario, tmp_path: Path, tool: str, args: list[str],
          stdin: bytes | None = None) -> tuple[CommandResult, CommandResult]:
    """The real tool's result and the stand-in's (run side by side)."""
    fleet = scenario.fleet
    real_tool = str(fleet.hosts["pve1"].dir / "bin" / tool)
    fake_tool = str(_standin_host(tmp_path) / "bin" / tool)
    procs = [subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)
             for argv in (fleet.ns([real_tool, *args]), [fake_tool, *args])]
    results = []
    for proc in procs:
        out, err = proc.communicate(stdin, timeout=120)
        results.append(CommandResult(proc.returncode, out, err))
    return results[0], results[1]


PCT_CASES = {
    "runs": (101, ["sh", "-c", "echo out; echo err >&2; exit 3"]),
    "reads-stdin": (101, ["cat"]),
    "no-such-command": (101, ["no-such-command"]),
    "not-executable": (101, ["/etc/passwd"]),
    "stopped": (102, ["true"]),
    "missing": (109, ["true"]),
}


@pytest.mark.parametrize("case", sorted(PCT_CASES))
def test_pct_standin_agrees_with_lxc_attach(scenario: Scenario, tmp_path: Path,
                                            case: str) -> None:
    vmid, command = PCT_CASES[case]
    argv = ["exec", str(vmid), "--keep-env", "0", "--", *command]
    real, fake = _both(scenario, tmp_path, "pct", argv, stdin=b"the probe\n")
    assert (fake.returncode, fake.stdout, fake.stderr) == (
        real.returncode, real.stdout, real.stderr)
    assert pct_exec_failure(fake, vmid, "pve1") == pct_exec_failure(real, vmid, "pve1")


def test_pct_standin_gives_lxc_attachs_environment(scenario: Scenario,
                                                   tmp_path: Path) -> None:
    # `--keep-env 0` is lxc-attach --clear-env: the variables it sets, nothing of the host's
    # (a stand-in container's own `env:` comes on top of these in the loopback fleet).
    real, fake = _both(scenario, tmp_path, "pct", ["exec", "101", "--keep-env", "0", "--",
                                                   "env"])
    assert real.returncode == fake.returncode == 0
    assert sorted(fake.stdout.decode().splitlines()) == sorted(
        real.stdout.decode().splitlines())


QM_CASES = {
    "runs": (301, ["--", "sh", "-c", "echo out; echo err >&2; exit 3"]),
    "reads-stdin": (301, ["--pass-stdin", "1", "--", "cat"]),
    "no-such-command": (301, ["--", "no-such-command"]),
    "qm-timeout": (301, ["--timeout", "1", "--", "sleep", "2"]),
    "agent-off": (302, ["--", "true"]),
    "stopped": (303, ["--", "true"]),
    "no-agent": (304, ["--", "true"]),
    "missing": (309, ["--", "true"]),
}


@pytest.mark.parametrize("case", sorted(QM_CASES))
def test_qm_standin_agrees_with_the_real_agent(scenario: Scenario, tmp_path: Path,
                                               case: str) -> None:
    vmid, rest = QM_CASES[case]
    real, fake = _both(scenario, tmp_path, "qm", ["guest", "exec", str(vmid), *rest],
                       stdin=b"the probe\n")
    assert (fake.returncode, fake.stderr) == (real.returncode, real.stderr)
    assert qm_exec_failure(fake, vmid, "pve1") == qm_exec_failure(real, vmid, "pve1")
    if real.returncode != 0:
        assert fake.stdout == real.stdout == b""
        return
    # qm's JSON: the same keys (a pid differs), the same guest result as fleetcheck reads it.
    real_reply, fake_reply = json.loads(real.stdout), json.loads(fake.stdout)
    assert sorted(fake_reply) == sorted(real_reply)
    assert fake.stdout.startswith(b'{\n   "') and real.stdout.startswith(b'{\n   "')
    if "pid" not in real_reply:
        assert fake_reply == real_reply
    where = f"VM {vmid} on pve1"
    assert parse_qm_reply(fake, where) == parse_qm_reply(real, where)


@pytest.mark.parametrize("peer", ["qga", "qmp"])
def test_both_qmpclient_wordings_of_a_closed_agent_connection(peer: str) -> None:
    # PVE::QMPClient dies `VM N qmp command '...' failed - ...` up to PVE 8 (every peer was
    # "qmp"), `VM N qga command '...'` once its peers have types: the real-runtime qm speaks
    # the newer one, so the older is read here.
    died = CommandResult(255, b"", f"VM 301 {peer} command 'guest-exec-status' failed - client "
                                   "closed connection\n".encode())
    assert qm_exec_failure(died, 301, "pve1") == (
        "error", "VM 301 went away while probed: its QEMU closed the guest agent's connection "
                 "(VM stopped or killed)")
