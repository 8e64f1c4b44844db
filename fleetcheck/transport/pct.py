"""Container transport: `pct exec VMID --keep-env 0 -- ...` through the host's transport."""

from __future__ import annotations

from fleetcheck.transport.interface import CommandResult, Transport

#: Error texts of pct (src/PVE/CLI/pct.pm, pve-common, pve-guest-common) and sudo -n.
NOT_RUNNING = "not running!"
NO_CONFIG = "does not exist"
NEEDS_ROOT = "please run as root"
SUDO_PROMPT_REFUSED = "sudo: a password is required"


def sudo_prefix(sudo: bool) -> list[str]:
    """`sudo -n` (never prompt: a prompt would hang the audit) when the host login is not root."""
    return ["sudo", "-n"] if sudo else []


def pct_exec_argv(vmid: int, argv: list[str], *, sudo: bool = False) -> list[str]:
    """argv for running `argv` inside container `vmid`.

    `--keep-env 0` keeps the SSH session's environment out of the container; `--` stops pct's
    Getopt from reading the command's own options.
    """
    return [*sudo_prefix(sudo), "pct", "exec", str(vmid), "--keep-env", "0", "--", *argv]


class PctTransport(Transport):
    """Runs commands in one container, sharing the host's SSH connection and channel bound."""

    def __init__(self, host: Transport, vmid: int, *, sudo: bool = False) -> None:
        self.host = host
        self.vmid = vmid
        self.sudo = sudo

    async def run(
        self, argv: list[str], *, input: bytes | None = None, timeout: float
    ) -> CommandResult:
        return await self.host.run(pct_exec_argv(self.vmid, argv, sudo=self.sudo),
                                  input=input, timeout=timeout)
