"""Container transport: `pct exec VMID --keep-env 0 -- ...` through the host's transport."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from fleetcheck.transport.interface import CommandResult, RunCommand, Transport

#: Error texts of pct (src/PVE/CLI/pct.pm, pve-common, pve-guest-common) and sudo -n.
NOT_RUNNING = "not running!"
NO_CONFIG = "does not exist"
NEEDS_ROOT = "please run as root"
SUDO_PROMPT_REFUSED = "sudo: a password is required"


def pct_refusal(stderr: str, host: str) -> str | None:
    """Why sudo or pct refused to run anything on `host` (sudo's prompt, pct's root check)."""
    if SUDO_PROMPT_REFUSED in stderr:
        return (f"sudo on {host} asks for a password (sudo -n): allow the login to run "
                "pct without a password (NOPASSWD)")
    if NEEDS_ROOT in stderr:
        return f"pct on {host} needs root: log in as root or set sudo: true"
    return None


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

    @contextlib.asynccontextmanager
    async def session(self) -> AsyncIterator[RunCommand]:
        """One of the host's session slots, running commands in this container."""
        async with self.host.session() as host_run:

            async def run(
                argv: list[str], *, input: bytes | None = None, timeout: float
            ) -> CommandResult:
                return await host_run(pct_exec_argv(self.vmid, argv, sudo=self.sudo),
                                      input=input, timeout=timeout)

            yield run
