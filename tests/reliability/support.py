"""Helpers of the reliability suite: hostile strings, the CLI in a child process, processes."""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

#: Strings a compromised or broken node (or a careless inventory) could hand us.
HOSTILE_STRINGS = (
    "\x1b[2J\x1b[H\x1b[31mOWNED\x1b[0m",  # clear screen, colours
    "\x1b]0;pwned\x07",  # set the terminal title (OSC)
    "\x1b]8;;http://evil.invalid/\x1b\\click\x1b]8;;\x1b\\",  # OSC 8 hyperlink
    "\x9b31mC1-CSI",  # one-byte CSI
    "line1\nline2\r\nline3\rX",
    "\x00NUL\x01\x02\x7f",
    "<script>alert(1)</script>",
    '"><img src=x onerror=alert(1)>',
    "</td></tr></table><h1>injected</h1>",
    "javascript:alert(1)",
    "{{ 7*7 }}{% raw %}",
    "]]><!--<![CDATA[",
    "&amp;&lt;&#0;&#x1b;",
    "a\u202egnp.exe",  # right-to-left override
    "\ufeffBOM\u2028LS\u2029PS",
    "\ud800",  # lone surrogate (what surrogateescape makes of invalid UTF-8)
    "'; DROP TABLE nodes; --",
    '$(touch /tmp/x) `id` ;id|id&&id',
    'metric{label="x"} 1\n# TYPE evil counter\nevil 1',
    "\\\"\\n\\",
    "x" * 10_000,
    "\U0001f525" * 50,
)


# -- running the CLI and watching processes -----------------------------------------------------


@dataclass(frozen=True)
class CliRun:
    """A finished `python -m fleetcheck ...`: exit code, output and peak memory."""

    returncode: int
    stdout: bytes
    stderr: bytes
    max_rss_kib: int

    @property
    def err(self) -> str:
        return self.stderr.decode("utf-8", "replace")


def _vm_hwm_kib(pid: int) -> int:
    """The process's peak resident set since its exec (/proc VmHWM), 0 if unreadable."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


class CliProcess:
    """`python -m fleetcheck ARGS` running in a child process (its own session)."""

    def __init__(self, args: list[str], *, cwd: Path, env: dict[str, str] | None = None) -> None:
        self.args = args
        self.out_path, self.err_path = cwd / "cli.stdout", cwd / "cli.stderr"
        with open(self.out_path, "wb") as out, open(self.err_path, "wb") as err:
            self.child = subprocess.Popen(
                [sys.executable, "-m", "fleetcheck", *args], cwd=cwd, stdin=subprocess.DEVNULL,
                stdout=out, stderr=err, env={**os.environ, **(env or {})},
                start_new_session=True)

    def finish(self, deadline: float) -> CliRun:
        """Wait (bounded); fail the test if the CLI outlives `deadline` seconds from now.

        The peak RSS is the largest VmHWM read while it runs: wait4's ru_maxrss would also
        count the memory of the (large) pytest process that spawned it, which Linux carries
        over into the child's maximum at exec. Only if no reading was made (a child that ended
        at once) does ru_maxrss stand in, an over-estimate.
        """
        limit = time.monotonic() + deadline
        peak_kib = 0
        while True:
            peak_kib = max(peak_kib, _vm_hwm_kib(self.child.pid))
            pid, status, usage = os.wait4(self.child.pid, os.WNOHANG)
            if pid == self.child.pid:
                break
            if time.monotonic() > limit:
                os.killpg(self.child.pid, signal.SIGKILL)
                os.wait4(self.child.pid, 0)
                pytest.fail(f"fleetcheck {' '.join(self.args)} did not end within {deadline} s")
            time.sleep(0.02)
        self.child.returncode = os.waitstatus_to_exitcode(status)
        return CliRun(self.child.returncode, self.out_path.read_bytes(),
                      self.err_path.read_bytes(), peak_kib or usage.ru_maxrss)


def run_cli(args: list[str], *, deadline: float, cwd: Path, env: dict[str, str] | None = None,
            ) -> CliRun:
    """Run the real CLI in a child process and wait for it (see CliProcess.finish)."""
    return CliProcess(args, cwd=cwd, env=env).finish(deadline)


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (children, grandchildren...), from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat_line = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat_line.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def cmdline(pid: int) -> str:
    try:
        return (Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode(
            "utf-8", "replace").strip()
    except OSError:
        return ""


def kill_pids(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def wait_until(predicate: Callable[[], object], seconds: float, what: str) -> object:
    """Poll `predicate` (bounded: `seconds`); its first truthy value, or fail naming `what`."""
    limit = time.monotonic() + seconds
    while time.monotonic() < limit:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    pytest.fail(f"timed out after {seconds} s waiting for {what}")


@contextlib.contextmanager
def silent_server() -> Iterator[int]:
    """A TCP server on 127.0.0.1 that accepts connections and never says a word; its port."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    server.settimeout(0.2)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            accepted.append(conn)

    thread = threading.Thread(target=accept, name="silent-server", daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1]
    finally:
        stop.set()
        thread.join(5)
        for conn in accepted:
            conn.close()
        server.close()


def mount_tmpfs(target: Path, options: str) -> None:
    subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(target)],
                   check=True, capture_output=True)


def fill_filesystem(folder: Path) -> None:
    """Take every free block of the filesystem holding `folder` (bounded: it is 64 KiB)."""
    with open(folder / "filler", "wb", buffering=0) as handle:
        for _ in range(1024):
            try:
                if not handle.write(b"\0" * 4096):
                    return
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
                return
    raise AssertionError("the tiny filesystem never filled up")


def key_paths(node: object, prefix: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    """Every key path of a nested dict/list, the root included."""
    out = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            out += key_paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            out += key_paths(value, (*prefix, index))
    return out
