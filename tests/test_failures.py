"""Failures outside the probe carry an id where they happen; the verdict reads the id."""

from __future__ import annotations

import asyncio
import dataclasses
import re
from pathlib import Path
from typing import Any

import pytest

from fleetcheck import failures
from fleetcheck.audit import node_from_result
from fleetcheck.host_setup import script_module
from fleetcheck.inventory_data.model import HostSpec, Target
from fleetcheck.judgement.fixes import blocking_fix, failure_id, node_fix
from fleetcheck.judgement.policy import DEFAULT_POLICY
from fleetcheck.report.content import NodeResult, TritonVerdict
from fleetcheck.report.reportio import node_from_dict, node_to_dict
from fleetcheck.transport import kubectl, oci, pct, qemu, refusals
from fleetcheck.transport.interface import CommandResult, TransportError
from fleetcheck.transport.oci import oci_exec_failure
from fleetcheck.transport.pct import PctTransport, pct_exec_failure
from fleetcheck.transport.qemu import QemuTransport
from fleetcheck.transport.ssh import SshTransport
from tests.transport.sshserver import FakeHost, echo_stdin


def _node(status: str, reason: str, cause: str | None) -> NodeResult:
    return NodeResult(id="pve1", host="pve1", vmid=None, name="pve1", status=status,
                      reason=reason, triton=TritonVerdict(cause=cause))


def test_the_id_decides_whatever_the_wording_says() -> None:
    changed = _node("unreachable", "a sentence another version words otherwise",
                    failures.HOST_KEY_CHANGED)
    assert failure_id(changed) == failures.HOST_KEY_CHANGED
    assert "ssh-keygen -R HOST" in blocking_fix(changed)
    # Wording that reads like a host-key refusal does not override the id set at the source.
    plain = _node("unreachable", "host key for pve1 (x) is not in /k", failures.UNREACHABLE)
    assert failure_id(plain) == failures.UNREACHABLE
    assert blocking_fix(plain).startswith("check that the node is up")
    timed = _node("error", "anything", failures.TIMED_OUT)
    assert blocking_fix(timed).startswith("raise `timeout`")


def test_a_report_from_before_ids_is_read_by_its_wording() -> None:
    old = _node("unreachable", "host key for pve1 (10.0.0.1:22) is not in /root/.ssh/kh", None)
    # The verdict reads only the id; reading the saved node back gives it the id once.
    assert failure_id(old) is None
    assert failure_id(node_from_dict(node_to_dict(old))) == failures.HOST_KEY_UNKNOWN


def test_an_unknown_host_key_is_refused_with_its_id(tmp_path: Path) -> None:
    fake = FakeHost(tmp_path, echo_stdin)

    async def main() -> TransportError:
        async with fake as spec:
            # Another known_hosts: the server's key is unknown there.
            other = tmp_path / "other_known_hosts"
            other.write_text("")
            spec = dataclasses.replace(spec, ssh=dataclasses.replace(
                spec.ssh, known_hosts=str(other)))
            ssh = SshTransport(spec)
            try:
                with pytest.raises(TransportError) as caught:
                    await ssh.run(["true"], timeout=10)
            finally:
                await ssh.close()
            return caught.value

    error = asyncio.run(main())
    assert (error.kind, error.cause) == ("unreachable", failures.HOST_KEY_UNKNOWN)
    assert "is not in" in str(error)


# The refusals of the tools before the probe: an id where the tool's text is read ----------

def _target(vmid: int | None = None, kind: str = "") -> Target:
    host = HostSpec(name="pve1", address="127.0.0.1")
    return Target(host=host, vmid=vmid, name="n", python="python3", env={}, labels=(),
                  timeout=30, kind=kind)


def test_a_gatekeeper_refusal_is_an_error_node_with_its_id_and_its_fix() -> None:
    stderr = b"fleetcheck-gatekeeper: refused: probe sha256 ab12... is not in /etc/f\n"
    refused = CommandResult(returncode=script_module().EXIT_REFUSED, stdout=b"", stderr=stderr)
    target = _target(101)
    container = PctTransport(SshTransport(target.host), 101, host_name="pve1")
    node = node_from_result(target, container, refused, DEFAULT_POLICY, 0.1)
    assert (node.status, node.triton.cause) == ("error", failures.GATEKEEPER_REFUSED)
    assert failure_id(node) == failures.GATEKEEPER_REFUSED
    assert "fleetcheck host-setup" in blocking_fix(node)
    assert node_fix(node) == blocking_fix(node)
    # The same exit status without the gatekeeper's line is the probe's own: no id.
    other = CommandResult(returncode=script_module().EXIT_REFUSED, stdout=b"", stderr=b"boom\n")
    crashed = node_from_result(target, container, other, DEFAULT_POLICY, 0.1)
    assert (crashed.reason, crashed.triton.cause) == ("probe exited with status 77: boom", None)
    assert blocking_fix(crashed).startswith("run `fleetcheck audit` on this node")


def test_a_vm_without_its_guest_agent_is_named_by_id_whatever_qm_words() -> None:
    vm = QemuTransport(SshTransport(_target().host), 300, host_name="pve1")
    target = _target(300, "qemu")
    for stderr, cause in (
        (b"No QEMU guest agent configured\n", failures.AGENT_NOT_CONFIGURED),
        (b"QEMU guest agent is not running\n", failures.AGENT_NOT_ANSWERING),
        (b"VM 300 not running\n", failures.NODE_NOT_RUNNING),
    ):
        result = CommandResult(returncode=255, stdout=b"", stderr=stderr)
        refusal = vm.explain_failure(result)
        assert refusal is not None and refusal.cause == cause
        node = node_from_result(target, vm, result, DEFAULT_POLICY, 0.1)
        assert (node.status, node.reason, node.triton.cause) == (*refusal, cause)
    agentless = _node("error", "any wording at all", failures.AGENT_NOT_CONFIGURED)
    assert "qm set VMID --agent 1" in blocking_fix(agentless)


@pytest.mark.parametrize(("refusal", "pair", "cause"), [
    (lambda r: pct_exec_failure(r, 101, "pve1"),
     ("error", "sudo on pve1 asks for a password (sudo -n): allow the login to run pct without "
      "a password (NOPASSWD)"), failures.SUDO_PASSWORD),
    (lambda r: oci_exec_failure(r, "docker", "trainer", "pve1"),
     ("error", "sudo on pve1 asks for a password (sudo -n): allow the login to run docker "
      "without a password (NOPASSWD)"), failures.SUDO_PASSWORD),
])
def test_every_wrapping_tool_gives_the_shared_refusal_one_id(
    refusal: Any, pair: tuple[str, str], cause: str
) -> None:
    result = CommandResult(returncode=1, stdout=b"", stderr=b"sudo: a password is required\n")
    found = refusal(result)
    # A pair as before (what it compares and unpacks as), with its id beside.
    assert found == pair and found.cause == cause
    status, reason = found
    assert (status, reason) == pair


def test_every_refusal_id_is_owned_by_failures() -> None:
    for module in (pct, qemu, oci, kubectl, refusals):
        text = Path(module.__file__ or "").read_text()
        for name in re.findall(r"failures\.([A-Z_]+)", text):
            assert getattr(failures, name) in failures.FAILURE_IDS, (module.__name__, name)


#: What real interpreters too old for the probe print when they are given it (CPython 2.7.18
#: and 3.6.15, the shipped probe): through the packed launch (`-c` with the zlib bootstrap,
#: transport/packing.py; the guest agent's base64 one reads `sys.stdin.buffer` alike) and as
#: `python -` (the runtimes' and the API's unpacked launch). Every one exits 1 with no output.
OLD_INTERPRETERS = {
    "2.7 packed": ("Traceback (most recent call last):\n"
                   '  File "<string>", line 1, in <module>\n'
                   "AttributeError: 'file' object has no attribute 'buffer'\n"),
    "2.7 stdin": ('  File "<stdin>", line 56\n'
                  "SyntaxError: Non-ASCII character '\\xe2' in file <stdin> on line 56, but no "
                  "encoding declared; see http://python.org/dev/peps/pep-0263/ for details\n"),
    "3.6 packed": ("Traceback (most recent call last):\n"
                   '  File "<string>", line 1, in <module>\n'
                   '  File "<stdin>", line 12\n'
                   "SyntaxError: future feature annotations is not defined\n"),
    "3.6 stdin": ('  File "<stdin>", line 12\n'
                  "SyntaxError: future feature annotations is not defined\n"),
}


@pytest.mark.parametrize("said", sorted(OLD_INTERPRETERS))
def test_an_interpreter_too_old_for_the_probe_is_named_with_its_fix(said: str) -> None:
    stderr = OLD_INTERPRETERS[said].encode()
    target = dataclasses.replace(_target(101), python="/usr/bin/python3")
    container = PctTransport(SshTransport(target.host), 101, host_name="pve1")
    node = node_from_result(target, container, CommandResult(1, b"", stderr), DEFAULT_POLICY,
                            0.1)
    last = stderr.decode().strip().splitlines()[-1]
    assert (node.status, node.triton.cause) == ("error", failures.INTERPRETER_TOO_OLD)
    assert node.reason.startswith(
        "/usr/bin/python3 in container is too old for the probe (it needs Python "
        "3.8 or newer): ")
    assert last[:60] in node.reason
    assert failure_id(node) == failures.INTERPRETER_TOO_OLD
    assert blocking_fix(node).startswith("point the node's `python` in the inventory")
    # The reports' fix (the terminal's, the HTML's) is the gate's.
    assert node_fix(node) == blocking_fix(node)
    # Read back from a saved report, the id stays.
    assert failure_id(node_from_dict(node_to_dict(node))) == failures.INTERPRETER_TOO_OLD


def test_a_syntax_error_of_another_kind_stays_the_probes_own() -> None:
    # A probe that printed its document keeps it; another SyntaxError (a damaged copy) is no
    # interpreter's age.
    target = _target(101)
    container = PctTransport(SshTransport(target.host), 101, host_name="pve1")
    for stderr in (b'  File "<stdin>", line 3\nSyntaxError: invalid syntax\n',
                   b"SyntaxError: future feature annotations is not defined (in my own code)\n"):
        node = node_from_result(target, container, CommandResult(1, b"", stderr),
                                DEFAULT_POLICY, 0.1)
        assert node.triton.cause is None
        assert node.reason.startswith("probe exited with status 1: SyntaxError")
        assert node_fix(node) == ""  # nothing known to change: the reason says what it said


def test_a_missing_interpreter_says_where_to_point_python() -> None:
    target = _target(101)
    container = PctTransport(SshTransport(target.host), 101, host_name="pve1")
    node = node_from_result(target, container, CommandResult(127, b"", b""), DEFAULT_POLICY,
                            0.1)
    assert (node.status, node.triton.cause) == ("error", failures.INTERPRETER_MISSING)
    assert "install python3 on the node" in blocking_fix(node)
