"""Container transport: `pct exec VMID --keep-env 0 -- ...` through the host's transport.

Owns pct's and `sudo -n`'s argv and the wording of their refusals (stderr texts, exit codes),
for probing a container and for `pct list` discovery alike.
"""

from __future__ import annotations

from fleetcheck import failures
from fleetcheck.failures import Refusal
from fleetcheck.text import last_line
from fleetcheck.transport.interface import CommandResult, NestedTransport, RunCommand, Transport
from fleetcheck.transport.refusals import (
    KILLED,
    no_such_guest,
    run_asking_after_a_silent_kill,
    sudo_wants_password,
    tool_not_found,
)

#: Error texts of pct (src/PVE/CLI/pct.pm, pve-common); sudo's and the shared ones are
#: `transport/refusals.py`'s.
NOT_RUNNING = "not running!"
NEEDS_ROOT = "please run as root"
#: `pct status VMID` of a stopped container (pct.pm: `print "status: $stat->{status}\n"`).
STATUS_STOPPED = "status: stopped"


def pve_refusal(stderr: str, host: str, tool: str = "pct") -> Refusal | None:
    """Why sudo or a Proxmox CLI tool (pct, qm) refused to run anything on `host`: sudo's
    prompt, the tool's root check (pve-common's, shared by both)."""
    asked = sudo_wants_password(stderr, host, tool)
    if asked is not None:
        return asked
    if NEEDS_ROOT in stderr:
        return Refusal("error", f"{tool} on {host} needs root: log in as root or set sudo: true",
                       failures.NEEDS_ROOT)
    return None


def pct_exec_failure(result: CommandResult, vmid: int, host: str) -> Refusal | None:
    """(status, reason) when pct or sudo, not the probe, refused to run (their stderr texts)."""
    stderr = result.stderr.decode("utf-8", "replace")
    refused = pve_refusal(stderr, host)
    if refused is not None:
        return refused
    if result.returncode == KILLED and f"{STATUS_STOPPED}\n" in stderr:
        # lxc-attach died with the container (137, no word), and `pct status` says stopped.
        return Refusal("error", f"container {vmid} stopped while probed (lxc-attach was "
                       "killed with it)", failures.NODE_NOT_RUNNING)
    if NOT_RUNNING in stderr and f"'{vmid}'" in stderr:
        return Refusal("skipped", "container stopped", failures.NODE_NOT_RUNNING)
    if no_such_guest(stderr):
        return Refusal("error", f"container {vmid} does not exist on {host}",
                       failures.NO_SUCH_NODE)
    return tool_not_found(result, stderr, host, ("sudo", "pct"))


def pve_list_failure(result: CommandResult, host: str, tool: str) -> Refusal:
    """Why `TOOL list` (pct, qm) on `host` gave no guest list."""
    refused = pve_refusal(result.stderr.decode("utf-8", "replace"), host, tool)
    if refused is not None:
        return refused
    if result.returncode == 127:
        return Refusal("error", f"{tool} not found on {host}: is it a Proxmox VE host?",
                       failures.TOOL_NOT_FOUND)
    if result.timed_out:
        return Refusal("error", f"`{tool} list` on {host} timed out", failures.TIMED_OUT)
    return Refusal("error", f"`{tool} list` on {host} failed ({result.returncode}): "
                   f"{last_line(result.stderr)}", failures.TOOL_REFUSED)


def sudo_prefix(sudo: bool) -> list[str]:
    """`sudo -n` (never prompt: a prompt would hang the audit) when the host login is not root."""
    return ["sudo", "-n"] if sudo else []


def pve_list_argv(tool: str, *, sudo: bool = False) -> list[str]:
    """`TOOL list` (pct, qm): the command that lists a host's guests; both refuse non-root,
    hence `sudo -n`."""
    return [*sudo_prefix(sudo), tool, "list"]


def pct_exec_argv(vmid: int, argv: list[str], *, sudo: bool = False) -> list[str]:
    """argv for running `argv` inside container `vmid`.

    `--keep-env 0` keeps the SSH session's environment out of the container; `--` stops pct's
    Getopt from reading the command's own options.
    """
    return [*sudo_prefix(sudo), "pct", "exec", str(vmid), "--keep-env", "0", "--", *argv]


class PctTransport(NestedTransport):
    """Runs commands in one container, sharing the host's SSH connection and channel bound."""

    def __init__(
        self, host: Transport, vmid: int, *, sudo: bool = False, host_name: str = "the host"
    ) -> None:
        super().__init__(host)
        self.vmid = vmid
        self.sudo = sudo
        self.host_name = host_name

    def wrap(self, argv: list[str]) -> list[str]:
        return pct_exec_argv(self.vmid, argv, sudo=self.sudo)

    async def through(
        self, outer_run: RunCommand, argv: list[str], input: bytes | None, timeout: float
    ) -> CommandResult:
        # lxc-attach says nothing when the container stops under it: pct is asked
        # (`status: stopped`, read by pct_exec_failure).
        return await run_asking_after_a_silent_kill(
            outer_run, self.wrap(argv), input, timeout,
            [*sudo_prefix(self.sudo), "pct", "status", str(self.vmid)])

    def explain_own(self, result: CommandResult) -> Refusal | None:
        return pct_exec_failure(result, self.vmid, self.host_name)
