"""Owns the refusals that every kind wrapping a command reads the same way: `sudo -n`'s
password prompt, `env: 'TOOL'` with exit 127 (the tool is not installed), and Proxmox's
"Configuration file ... does not exist" (no such guest). pct.py, qemu.py and oci.py word
their tool's own refusals and call these for the shared ones.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from fleetcheck import failures
from fleetcheck.budget import STATE_QUESTION_TIMEOUT
from fleetcheck.failures import Refusal
from fleetcheck.transport.interface import CommandResult, RunCommand

#: sudo's answer under `-n` when the login needs a password (sudo's plugins/sudoers).
SUDO_PROMPT_REFUSED = "sudo: a password is required"


def sudo_wants_password(stderr: str, where: str, tool: str) -> Refusal | None:
    """Why `sudo -n TOOL` did not run on `where`: it asked for a password; else None."""
    if SUDO_PROMPT_REFUSED in stderr:
        return Refusal("error", f"sudo on {where} asks for a password (sudo -n): allow the "
                       f"login to run {tool} without a password (NOPASSWD)",
                       failures.SUDO_PASSWORD)
    return None


def tool_not_found(result: CommandResult, stderr: str, where: str,
                   tools: Iterable[str]) -> Refusal | None:
    """Which of `tools` `env` could not find on `where` (exit 127, `env: 'TOOL'`), or None."""
    if result.returncode != 127:
        return None
    for tool in tools:
        if f"env: '{tool}'" in stderr:
            return Refusal("error", f"{tool} not found on {where}", failures.TOOL_NOT_FOUND)
    return None


def no_such_guest(stderr: str) -> bool:
    """Whether pve-guest-common said the guest has no configuration (it does not exist)."""
    return "Configuration file" in stderr and "does not exist" in stderr


#: The exit status of a command killed by SIGKILL, as lxc-attach, docker exec and podman exec
#: relay it (128 + 9) when the container stops under it; they print nothing then.
KILLED = 137


def killed_silently(result: CommandResult) -> bool:
    """Whether the command ended as one does whose container stopped under it: exit 137 and
    nothing on stdout or stderr (LXC 5.0's lxc-attach, docker 20.10 and 28, podman 4.3 alike;
    a probe the OOM killer ended looks the same, so the runtime is asked which it was)."""
    return (result.returncode == KILLED and not result.stdout.strip()
            and not result.stderr.strip())


async def run_asking_after_a_silent_kill(
    outer_run: RunCommand, argv: list[str], input: bytes | None, timeout: float,
    state_argv: list[str],
) -> CommandResult:
    """Run `argv` through `outer_run`; if it was killed without a word, ask the runtime once
    (`state_argv`, through the same parent) and add its answer to the result's stderr, where
    the kind's own refusal reading finds it. A runtime that cannot be asked (a gatekeeper
    installed before the question was in its grammar) leaves the plain exit status."""
    result = await outer_run(argv, input=input, timeout=timeout)
    if killed_silently(result):
        asked = await outer_run(state_argv, input=None,
                                timeout=min(timeout, STATE_QUESTION_TIMEOUT))
        if asked.returncode == 0:
            result = dataclasses.replace(result, stderr=result.stderr + asked.stdout)
    return result
