"""QEMU VMs through the guest agent: `qm guest exec` over the host's transport.

Owns qm's argv, the in-guest `timeout -k` wrapper, the reading of the agent's reply (the
JSON of qemu-server's `$print_agent_result`: exitcode, exited, out-data, err-data,
out-truncated, err-truncated, or `{"pid": N}` alone when qm's own --timeout passed) and the
wording of qm's and the agent's refusals (src/PVE/CLI/qm.pm, src/PVE/QemuServer/Agent.pm).

qm exits 0 whatever the guest command did: the guest's exit status is only in the JSON.
The agent cannot kill a guest process, so every guest command runs under the guest's own
coreutils `timeout -k`; qm's --timeout and the host's `timeout` are backstops beyond it.
"""

from __future__ import annotations

import json
from typing import Any

from fleetcheck import failures
from fleetcheck.failures import Refusal
from fleetcheck.text import last_line
from fleetcheck.transport.interface import (
    BudgetFor,
    CommandResult,
    NestedTransport,
    NodeBudget,
    RunCommand,
    Transport,
    TransportError,
    signal_name,
)
from fleetcheck.transport.pct import sudo_prefix
from fleetcheck.transport.refusals import no_such_guest, sudo_wants_password, tool_not_found

#: qm.pm: `die "'input-data' (STDIN) is limited to 1 MiB, aborting\n"` beyond 1024 * 1024.
QM_STDIN_LIMIT = 1024 * 1024
#: QGA's GUEST_EXEC_MAX_OUTPUT: each stream is cut there, silently but for *-truncated.
AGENT_OUTPUT_CAP = 16 * 1024 * 1024

#: Texts of qm and the agent (qemu-server Agent.pm assert_agent_available, QMPClient.pm).
NO_AGENT_CONFIGURED = "No QEMU guest agent configured"
AGENT_NOT_RUNNING = "QEMU guest agent is not running"
STDIN_TOO_LARGE = "'input-data' (STDIN) is limited to 1 MiB"
QM_TIMEOUT_REACHED = "timeout reached, returning pid"
#: PVE::QMPClient's die for a failed agent exchange: `VM N qmp command 'guest-exec' failed -
#: ...` up to PVE 8 (it named every peer qmp), `VM N qga command '...'` since its peers have types.
QMP_CLIENT_KINDS = ("qga", "qmp")


def guest_command(argv: list[str], budget: NodeBudget) -> list[str]:
    """`timeout -k K T ARGV...`: the guest bounds its own command (the agent has no kill)."""
    return ["timeout", "-k", str(budget.guest_kill_after), str(budget.guest_timeout), *argv]


def qm_exec_argv(vmid: int, guest_argv: list[str], qm_wait: int, *, sudo: bool = False,
                 ) -> list[str]:
    """`qm guest exec VMID --pass-stdin 1 --timeout N -- CMD...`.

    `--` keeps qm's Getopt (permute mode) from reading the guest command's own options.
    """
    return [*sudo_prefix(sudo), "qm", "guest", "exec", str(vmid), "--pass-stdin", "1",
            "--timeout", str(qm_wait), "--", *guest_argv]


def agent_bytes(text: Any) -> bytes:
    """The bytes of an out-data/err-data string as qm and the API hand it over.

    qemu-server base64-decodes the agent's data and prints it with `to_json(utf8 => 1)`, so
    each byte became one character U+0000..U+00FF: latin-1 gives the bytes back. A string
    with a wider character was not double-encoded (a different server) and is read as UTF-8.
    """
    if not isinstance(text, str):
        return b""
    try:
        return text.encode("latin-1")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace")


def result_from_status(status: Any, where: str) -> CommandResult:
    """A guest command's CommandResult from the agent's exec-status object.

    `exitcode` 124 or 137 is the in-guest `timeout` ending the command; `signal` without an
    exitcode is a command killed otherwise; `out-truncated` is QGA's 16 MiB cut.
    """
    if not isinstance(status, dict):
        raise TransportError(f"{where}: the guest agent's answer is not an object",
                             kind="error")
    if not status.get("exited"):
        return CommandResult(None, b"", b"", timed_out=True)
    stdout = agent_bytes(status.get("out-data"))
    stderr = agent_bytes(status.get("err-data"))
    truncated = bool(status.get("out-truncated"))
    code = status.get("exitcode")
    number = status.get("signal")
    if not isinstance(code, int) or isinstance(code, bool):
        if isinstance(number, int) and not isinstance(number, bool):
            return CommandResult(None, stdout, stderr, truncated=truncated,
                                 signal=signal_name(number))
        raise TransportError(f"{where}: the guest agent reported no exit code", kind="error")
    return CommandResult(code, stdout, stderr, timed_out=code in (124, 137),
                         truncated=truncated)


def parse_qm_reply(result: CommandResult, where: str) -> CommandResult:
    """The guest command's result from what `qm guest exec` printed over the host transport.

    qm's own failures (non-zero exit: no agent, VM stopped, stdin too large...) come back
    as they are, for `qm_exec_failure` to word; so do a host-side timeout, signal or cut.
    """
    if result.returncode != 0 or result.timed_out or result.truncated or result.signal:
        return result
    try:
        reply = json.loads(result.stdout.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        head = result.stdout.strip()[:60].decode("utf-8", "replace")
        raise TransportError(f"{where}: `qm guest exec` printed no JSON"
                             + (f" (output begins {head!r})" if head else ""),
                             kind="error") from None
    if isinstance(reply, dict) and "pid" in reply and "exited" not in reply:
        # qm's --timeout passed first: the guest's `timeout` should have ended it before.
        return CommandResult(None, b"", result.stderr, timed_out=True)
    return result_from_status(reply, where)


def qm_exec_failure(result: CommandResult, vmid: int, host: str) -> Refusal | None:
    """(status, reason) when qm, the agent or sudo refused to run the guest command."""
    stderr = result.stderr.decode("utf-8", "replace")
    asked = sudo_wants_password(stderr, host, "qm")
    if asked is not None:
        return asked
    if NO_AGENT_CONFIGURED in stderr:
        return Refusal("error", f"VM {vmid} has no QEMU guest agent configured: set it with "
                       f"`qm set {vmid} --agent 1` and install qemu-guest-agent in the guest",
                       failures.AGENT_NOT_CONFIGURED)
    if f"VM {vmid} is not running" in stderr or f"VM {vmid} not running" in stderr:
        return Refusal("skipped", "VM stopped", failures.NODE_NOT_RUNNING)
    if AGENT_NOT_RUNNING in stderr:
        return Refusal("error", f"the QEMU guest agent in VM {vmid} does not answer: start "
                       "qemu-guest-agent in the guest (or the agent is disabled)",
                       failures.AGENT_NOT_ANSWERING)
    if STDIN_TOO_LARGE in stderr:
        return Refusal("error", f"qm on {host} refused the probe: its stdin is limited to "
                       "1 MiB", failures.INPUT_REFUSED)
    if no_such_guest(stderr):
        return Refusal("error", f"VM {vmid} does not exist on {host}", failures.NO_SUCH_NODE)
    agent_failed = any(f"{kind} command '" in stderr for kind in QMP_CLIENT_KINDS)
    if agent_failed and "failed - client closed connection" in stderr:
        # PVE::QMPClient: the VM's QEMU closed the agent socket mid-command (stopped or killed).
        return Refusal("error", f"VM {vmid} went away while probed: its QEMU closed the guest "
                       "agent's connection (VM stopped or killed)", failures.AGENT_FAILED)
    if agent_failed or "Agent error" in stderr:
        detail = last_line(result.stderr)
        if "timeout" in detail and ("execute" in detail or "not found" in detail):
            return Refusal("error", f"VM {vmid} has no `timeout` command (coreutils): "
                           f"fleetcheck probes Linux guests; agent said: {detail}",
                           failures.NOT_LINUX)
        return Refusal("error", f"guest agent of VM {vmid}: {detail}", failures.AGENT_FAILED)
    if "TIMEOUT /?" in stderr or "TIMEOUT /?" in result.stdout.decode("utf-8", "replace"):
        # Windows' own timeout.exe answered the `timeout -k` wrapper.
        return Refusal("skipped", "Windows guest: fleetcheck probes Linux guests",
                       failures.NOT_LINUX)
    return tool_not_found(result, stderr, host, ("sudo", "qm"))


class VmWording:
    """What the two ways into a VM (`qm guest exec`, the API's agent/exec) say alike: where
    the command ran, and qm's and the agent's refusals."""

    vmid: int
    host_name: str

    @property
    def where(self) -> str:
        return f"VM {self.vmid} on {self.host_name}"

    def explain_own(self, result: CommandResult) -> Refusal | None:
        return qm_exec_failure(result, self.vmid, self.host_name)


class QemuTransport(VmWording, NestedTransport):
    """Runs commands in one VM through `qm guest exec` on its host's transport."""

    def __init__(
        self, host: Transport, vmid: int, *, sudo: bool = False, host_name: str = "the host",
        budget: BudgetFor = NodeBudget,
    ) -> None:
        super().__init__(host)
        self.vmid = vmid
        self.sudo = sudo
        self.host_name = host_name
        self.budget = budget

    async def through(
        self, outer_run: RunCommand, argv: list[str], input: bytes | None, timeout: float
    ) -> CommandResult:
        # `timeout` is the node's: the host's `timeout` around qm gets it whole, qm and the
        # guest's own `timeout` the shorter deadlines the budget derives from it.
        budget = self.budget(timeout)
        qm_argv = qm_exec_argv(self.vmid, guest_command(argv, budget), budget.guest_wait,
                               sudo=self.sudo)
        result = await outer_run(qm_argv, input=input, timeout=timeout)
        return parse_qm_reply(result, self.where)
