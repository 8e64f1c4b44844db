"""SshTransport against asyncssh's in-process server: command lines, reuse, lost connections."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from fleetcheck.transport.interface import NodeBudget, TransportError
from fleetcheck.transport.pct import PctTransport
from fleetcheck.transport.ssh import SshTransport
from fleetcheck.transport.sshlib import asyncssh
from tests.transport.sshserver import FakeHost, echo_stdin

pytestmark = pytest.mark.timeout(30)


def test_pct_command_line_is_quoted_once_and_connection_reused(tmp_path: Path) -> None:
    fake = FakeHost(tmp_path, echo_stdin)

    async def main() -> tuple[list[Any], str]:
        async with fake as spec:
            ssh = SshTransport(spec)
            try:
                results = [
                    await PctTransport(ssh, 101).run(
                        ["env", "CC=/usr/bin/gcc 12", "python3", "-", "--deadline", "55"],
                        input=b"probe", timeout=60),
                    await PctTransport(ssh, 102, sudo=True).run(["python3", "-"], timeout=2.5),
                ]
            finally:
                await ssh.close()
            return results, ssh.tag

    (first, second), tag = asyncio.run(main())
    assert (first.returncode, first.stdout, first.stderr) == (7, b"probe", b"note\n")
    assert (second.returncode, second.stdout) == (7, b"")
    assert fake.commands == [
        f"timeout -k 5 60 env FLEETCHECK_RUN={tag} pct exec 101 --keep-env 0 -- "
        "env 'CC=/usr/bin/gcc 12' python3 - --deadline 55",
        f"timeout -k 5 2.5 env FLEETCHECK_RUN={tag} sudo -n pct exec 102 --keep-env 0 -- "
        "python3 -",
    ]
    assert fake.connections == 1


def test_connection_lost_mid_command_is_an_error_not_a_crash(tmp_path: Path) -> None:
    async def drop(proc: asyncssh.SSHServerProcess[bytes]) -> None:
        proc.channel.get_connection().abort()

    async def main() -> None:
        async with FakeHost(tmp_path, drop) as spec:
            ssh = SshTransport(spec)
            try:
                await ssh.run(["python3", "-"], input=b"x", timeout=10)
            finally:
                await ssh.close()

    with pytest.raises(TransportError) as caught:
        asyncio.run(main())
    assert (caught.value.kind, str(caught.value)) == (
        "error", "connection to pve1 lost while the command ran")


def test_refused_sessions_are_retried_then_reported(tmp_path: Path) -> None:
    fake = FakeHost(tmp_path, echo_stdin, refuse_sessions=True)

    async def main() -> None:
        async with fake as spec:
            ssh = SshTransport(spec)
            try:
                await ssh.run(["true"], timeout=10)
            finally:
                await ssh.close()

    with pytest.raises(TransportError) as caught:
        asyncio.run(main())
    assert (caught.value.kind, str(caught.value)) == (
        "error", "pve1 refused a new SSH session: open failed")


def test_client_side_timeout_gives_up_and_kills_the_tagged_command(tmp_path: Path) -> None:
    async def hang(proc: asyncssh.SSHServerProcess[bytes]) -> None:
        if proc.command and proc.command.startswith("pkill"):
            proc.exit(0)
            return
        await asyncio.sleep(30)

    fake = FakeHost(tmp_path, hang)

    async def main() -> tuple[Any, str]:
        async with fake as spec:
            # The remote `timeout` would end it; this host ignores it, so the client gives up.
            ssh = SshTransport(
                spec, budget=lambda timeout: NodeBudget(timeout, kill_after=0, client_grace=0.2)
            )
            try:
                result = await ssh.run(["sleep", "100"], timeout=0.3)
            finally:
                await ssh.close()
            return result, ssh.tag

    result, tag = asyncio.run(main())
    assert (result.timed_out, result.returncode) == (True, None)
    assert fake.commands[-1] == f"pkill -TERM -f -- 'FLEETCHECK_RU[N]={tag}'"


def test_death_by_signal_is_reported_as_the_signal(tmp_path: Path) -> None:
    async def killed(proc: asyncssh.SSHServerProcess[bytes]) -> None:
        proc.exit_with_signal("KILL")

    async def main() -> Any:
        async with FakeHost(tmp_path, killed) as spec:
            ssh = SshTransport(spec)
            try:
                return await ssh.run(["python3", "-"], input=b"x", timeout=10)
            finally:
                await ssh.close()

    result = asyncio.run(main())
    assert (result.returncode, result.signal, result.timed_out) == (None, "KILL", False)


def test_an_error_is_not_asyncssh_s_while_asyncssh_is_half_imported(monkeypatch) -> None:
    # A libssh2 failure is classified while an opener thread may be importing asyncssh (its
    # post-quantum question): a module still being built has none of its error classes yet.
    import sys
    import types

    from fleetcheck.transport import ssh

    half = types.ModuleType("fleetcheck.transport.sshlib")  # `asyncssh` not bound yet
    monkeypatch.setitem(sys.modules, "fleetcheck.transport.sshlib", half)
    assert not ssh._raised_by_asyncssh(TimeoutError(), "HostKeyNotVerifiable")
    half.asyncssh = types.ModuleType("asyncssh")  # bound, its classes not all there
    assert not ssh._raised_by_asyncssh(TimeoutError(), "HostKeyNotVerifiable", "Error")
    monkeypatch.undo()
    assert ssh._raised_by_asyncssh(asyncssh.PermissionDenied("no"), "PermissionDenied")
