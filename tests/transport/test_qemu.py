"""QemuTransport: `qm guest exec` over a real sshd, against the qm stand-in's texts and JSON."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import subprocess
from typing import Any

import pytest

from fleetcheck.inventory_data.model import HostSpec, SshOptions
from fleetcheck.transport.interface import CommandResult, NodeBudget, TransportError
from fleetcheck.transport.qemu import (
    QemuTransport,
    guest_command,
    parse_qm_reply,
    qm_exec_argv,
    result_from_status,
)
from fleetcheck.transport.ssh import SshTransport
from tests.fleet import Fleet

pytestmark = [pytest.mark.sshd, pytest.mark.timeout(90)]


def host_spec(fleet: Fleet, name: str, **extra: Any) -> HostSpec:
    options = SshOptions(user="root", port=fleet.hosts[name].port,
                         identity_file=str(fleet.client_key),
                         known_hosts=str(fleet.known_hosts), config_file="")
    return dataclasses.replace(HostSpec(name=name, address="127.0.0.1", ssh=options), **extra)


def run_in_vm(fleet: Fleet, vmid: int, argv: list[str], *, input: bytes | None = None,
              timeout: float = 20) -> tuple[CommandResult, QemuTransport]:
    async def go() -> tuple[CommandResult, QemuTransport]:
        ssh = SshTransport(host_spec(fleet, "pve1"))
        vm = QemuTransport(ssh, vmid, host_name="pve1")
        try:
            async with vm.session() as run:
                return await run(argv, input=input, timeout=timeout), vm
        finally:
            await ssh.close()

    return asyncio.run(go())


def test_guest_exit_code_output_and_every_byte_value_pass_through(fleet: Fleet) -> None:
    fleet.add_host("pve1")
    fleet.add_vm("pve1", 300)
    script = ("import sys,os; data=sys.stdin.buffer.read(); sys.stdout.buffer.write(data); "
              "sys.stderr.write('HOME=%s' % os.environ.get('HOME')); sys.exit(3)")
    blob = bytes(range(256)) * 64
    result, _ = run_in_vm(fleet, 300, ["python3", "-c", script], input=blob)
    # qm itself exited 0: the guest's status came from the JSON, its bytes through latin-1.
    assert (result.returncode, result.stdout, result.stderr) == (3, blob, b"HOME=None")
    assert not result.timed_out


@pytest.mark.parametrize(
    ("agent", "kind", "vmid", "expected"),
    [
        ("none", "healthy", 300, ("error", "VM 300 has no QEMU guest agent configured: set it "
                                  "with `qm set 300 --agent 1` and install qemu-guest-agent "
                                  "in the guest")),
        ("off", "healthy", 300, ("error", "the QEMU guest agent in VM 300 does not answer: "
                                 "start qemu-guest-agent in the guest (or the agent is "
                                 "disabled)")),
        ("on", "stopped", 300, ("skipped", "VM stopped")),
        ("on", "healthy", 999, ("error", "VM 999 does not exist on pve1")),
    ],
    ids=["no-agent", "agent-off", "stopped", "missing"],
)
def test_qm_refusals_are_worded_by_the_transport(
    fleet: Fleet, agent: str, kind: str, vmid: int, expected: tuple[str, str]
) -> None:
    fleet.add_host("pve1")
    fleet.add_vm("pve1", 300, kind, agent=agent)
    result, vm = run_in_vm(fleet, vmid, ["python3", "-"], input=b"print(1)\n")
    assert result.returncode == 255
    assert vm.explain_failure(result) == expected


def test_stdin_over_one_mib_is_refused_by_qm(fleet: Fleet) -> None:
    fleet.add_host("pve1")
    fleet.add_vm("pve1", 300)
    result, vm = run_in_vm(fleet, 300, ["python3", "-"], input=b"#" * (1024 * 1024 + 1))
    assert result.stderr == b"'input-data' (STDIN) is limited to 1 MiB, aborting\n"
    assert vm.explain_failure(result) == (
        "error", "qm on pve1 refused the probe: its stdin is limited to 1 MiB")


def test_a_missing_interpreter_is_the_guest_timeouts_127(fleet: Fleet) -> None:
    fleet.add_host("pve1")
    fleet.add_vm("pve1", 300, "no-python")
    result, vm = run_in_vm(fleet, 300, ["python3", "-"], input=b"print(1)\n")
    assert result.returncode == 127
    assert b"python3" in result.stderr
    assert vm.explain_failure(result) is None  # the scheduler words "python3 not found"


def test_a_hanging_guest_command_is_ended_by_the_guests_own_timeout(fleet: Fleet) -> None:
    fleet.add_host("pve1")
    fleet.add_vm("pve1", 300, "hang")
    result, _ = run_in_vm(fleet, 300, ["python3", "-"], input=b"", timeout=7)
    assert result.timed_out
    assert fleet.wait_no_leftovers(10) == []


def test_qm_timeout_answer_and_text_from_the_stand_in(fleet: Fleet) -> None:
    host = fleet.add_host("pve1")
    fleet.add_vm("pve1", 300)
    qm = host.dir / "bin" / "qm"
    proc = subprocess.run([str(qm), *qm_exec_argv(300, ["sleep", "3"], 1)[1:]],
                          capture_output=True, input=b"", timeout=30)
    assert (proc.returncode, proc.stderr) == (0, b"timeout reached, returning pid\n")
    assert proc.stdout.startswith(b'{\n   "pid" : ') and proc.stdout.endswith(b"\n}\n")
    reply = CommandResult(0, proc.stdout, proc.stderr)
    assert parse_qm_reply(reply, "VM 300").timed_out
    fleet.wait_no_leftovers(10)


def test_argv_shape_and_deadlines() -> None:
    budget = NodeBudget(60)
    assert (budget.guest_wait, budget.guest_timeout, budget.guest_kill_after) == (59, 56, 2)
    assert guest_command(["python3", "-"], budget) == ["timeout", "-k", "2", "56", "python3",
                                                       "-"]
    assert qm_exec_argv(300, ["timeout", "-k", "2", "56", "python3", "-"], 59, sudo=True) == [
        "sudo", "-n", "qm", "guest", "exec", "300", "--pass-stdin", "1", "--timeout", "59",
        "--", "timeout", "-k", "2", "56", "python3", "-"]
    # Every deadline stays below the next one, down to a one-second node timeout.
    for timeout in (1, 2, 5, 10, 30, 60, 61.5, 600):
        each = NodeBudget(timeout)
        assert each.guest_timeout >= 1 and each.guest_wait >= 1
        if timeout >= 5:
            assert each.guest_timeout + each.guest_kill_after < each.guest_wait < timeout
        if timeout >= 10:
            # The probe reports before the guest's own timeout ends it.
            assert each.probe_deadline < each.guest_timeout


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        ({"exited": 1, "exitcode": 0, "out-data": "ok\n"}, CommandResult(0, b"ok\n", b"")),
        ({"exited": 1, "exitcode": 124}, CommandResult(124, b"", b"", timed_out=True)),
        ({"exited": 1, "signal": 9}, CommandResult(None, b"", b"", signal="KILL")),
        ({"exited": 1, "exitcode": 0, "out-data": "x", "out-truncated": 1},
         CommandResult(0, b"x", b"", truncated=True)),
        ({"exited": 0}, CommandResult(None, b"", b"", timed_out=True)),
        ({"exited": 1, "exitcode": 0, "out-data": "\u00e9"}, CommandResult(0, b"\xe9", b"")),
    ],
    ids=["ok", "guest-timeout", "signal", "truncated", "running", "byte"],
)
def test_agent_status_objects(status: dict[str, Any], expected: CommandResult) -> None:
    assert result_from_status(status, "VM 1") == expected


@pytest.mark.parametrize("stdout", [b"", b"not json", b"[1, 2]", b'{"exited": 1}'])
def test_qm_output_that_is_not_its_json_is_an_error(stdout: bytes) -> None:
    with pytest.raises(TransportError) as info:
        parse_qm_reply(CommandResult(0, stdout, b""), "VM 300 on pve1")
    assert info.value.kind == "error"
    assert str(info.value).startswith("VM 300 on pve1: ")


def test_qm_json_is_read_as_printed() -> None:
    text = json.dumps({"exitcode": 1, "exited": 1, "err-data": "boom\n"}, indent=3)
    assert parse_qm_reply(CommandResult(0, text.encode(), b""), "VM 1") == CommandResult(
        1, b"", b"boom\n")


@pytest.mark.parametrize(
    ("result", "expected"),
    [
        (CommandResult(1, b"", b"ERROR: Invalid syntax. Default option is not allowed more "
                               b"than '1' time(s).\r\nType \"TIMEOUT /?\" for usage.\r\n"),
         ("skipped", "Windows guest: fleetcheck probes Linux guests")),
        (CommandResult(255, b"", b"VM 300 qga command 'guest-exec-status' failed - got "
                                 b"timeout\n"),
         ("error", "guest agent of VM 300: VM 300 qga command 'guest-exec-status' failed - "
                   "got timeout")),
        (CommandResult(255, b"", b"VM 300 qga command 'guest-exec-status' failed - client "
                                 b"closed connection\n"),
         ("error", "VM 300 went away while probed: its QEMU closed the guest agent's "
                   "connection (VM stopped or killed)")),
        (CommandResult(1, b"", b"sudo: a password is required\n"),
         ("error", "sudo on pve1 asks for a password (sudo -n): allow the login to run qm "
                   "without a password (NOPASSWD)")),
        (CommandResult(127, b"", b"env: 'qm': No such file or directory\n"),
         ("error", "qm not found on pve1")),
        (CommandResult(2, b"", b"Traceback ...\nValueError: x\n"), None),
    ],
    ids=["windows", "agent-timeout", "vm-gone", "sudo", "no-qm", "guest-failure"],
)
def test_qm_and_agent_texts(result: CommandResult, expected: tuple[str, str] | None) -> None:
    from fleetcheck.transport.qemu import qm_exec_failure

    assert qm_exec_failure(result, 300, "pve1") == expected
