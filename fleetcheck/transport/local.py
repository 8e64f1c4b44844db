"""Local transport: the machine fleetcheck runs on, the probe as a subprocess."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal

from fleetcheck.budget import PIPE_DRAIN_WAIT
from fleetcheck.transport.interface import (
    OUTPUT_CAP,
    STDERR_CAP,
    BudgetFor,
    CommandResult,
    NodeBudget,
    Transport,
    TransportError,
    signal_name,
)


async def _read_capped(stream: asyncio.StreamReader, cap: int) -> tuple[bytes, bool]:
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = await stream.read(65536)
        if not chunk:
            return b"".join(chunks), False
        if size + len(chunk) > cap:
            chunks.append(chunk[: cap - size])
            return b"".join(chunks), True
        chunks.append(chunk)
        size += len(chunk)


def _kill_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


class LocalTransport(Transport):
    """Runs argv here, in its own process group, so a timeout kills the probe and its children."""

    def __init__(self, *, output_cap: int = OUTPUT_CAP, budget: BudgetFor = NodeBudget) -> None:
        self.output_cap = output_cap
        self.budget = budget

    def packs_probe(self) -> bool:
        """Yes: not for the bytes, for the memory (`python -` keeps the probe's parse tree
        while it runs: 13 MB beside the workload's interpreter; transport/packing.py)."""
        return True

    async def run(
        self, argv: list[str], *, input: bytes | None = None, timeout: float
    ) -> CommandResult:
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
            )
        except FileNotFoundError:
            return CommandResult(127, b"", f"{argv[0]}: not found\n".encode())
        except OSError as exc:
            raise TransportError(f"cannot run {argv[0]}: {exc}", kind="error") from None
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        try:
            if input:
                proc.stdin.write(input)
            proc.stdin.close()
        except (BrokenPipeError, ConnectionResetError):
            pass  # exited before reading its input; its output says why
        out_task = asyncio.ensure_future(_read_capped(proc.stdout, self.output_cap))
        err_task = asyncio.ensure_future(_read_capped(proc.stderr, STDERR_CAP))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        timed_out = False
        try:
            _, truncated = await asyncio.wait_for(asyncio.shield(out_task), timeout)
            if truncated:
                _kill_group(proc.pid, signal.SIGKILL)
            await asyncio.wait_for(proc.wait(), max(0.1, deadline - loop.time()))
        except asyncio.TimeoutError:
            timed_out = True
            _kill_group(proc.pid, signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), self.budget(timeout).kill_after)
            except asyncio.TimeoutError:
                pass
        finally:
            # Children that outlive the probe would keep running and hold its pipes open.
            _kill_group(proc.pid, signal.SIGKILL)
            if proc.returncode is None:
                await proc.wait()
            await _close_stdin(proc.stdin)
        stdout, truncated = await _drain(out_task)
        stderr, _ = await _drain(err_task)
        code = proc.returncode
        if code is not None and code < 0:
            # Killed by a signal: report it as sshd's exit-signal would be.
            return CommandResult(None, stdout, stderr, timed_out=timed_out, truncated=truncated,
                                 signal=signal_name(-code))
        return CommandResult(code, stdout, stderr, timed_out=timed_out, truncated=truncated)


async def _close_stdin(stdin: asyncio.StreamWriter) -> None:
    """Once the child is gone: drop the input it did not read and see its stdin pipe closed,
    taking the BrokenPipeError that the close ends with when the child exited first.

    The asyncio of Python 3.10 and of early 3.11 releases (Debian 12's 3.11.2; 3.11.7 has the
    fix) leaves that error unretrieved and logs it ("Future exception was never retrieved")
    when the garbage collector frees it, at any later moment: noise on stderr; and where that
    collection runs inside an `ast.parse` on 3.11, formatting the error's traceback parses too,
    and the outer parse fails with "SystemError: AST constructor recursion depth mismatch"
    (CPython gh-106905)."""
    transport = stdin.transport
    if transport.get_write_buffer_size():
        transport.abort()  # its close would wait for a reader that is gone
    closing = asyncio.ensure_future(stdin.wait_closed())
    # Shielded: a cancelled run leaves the close to finish, its error taken by the shield.
    with contextlib.suppress(BrokenPipeError, ConnectionResetError, asyncio.TimeoutError):
        await asyncio.wait_for(asyncio.shield(closing), PIPE_DRAIN_WAIT)


async def _drain(task: asyncio.Future[tuple[bytes, bool]]) -> tuple[bytes, bool]:
    """A reader's result; a pipe held open by an escaped grandchild is given up after
    `PIPE_DRAIN_WAIT`."""
    try:
        return await asyncio.wait_for(task, PIPE_DRAIN_WAIT)
    except asyncio.TimeoutError:
        return b"", False
