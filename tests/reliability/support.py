"""Helpers of the reliability suite: hostile strings, the CLI in a child process, processes."""

from __future__ import annotations

import contextlib
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


def run_cli(args: list[str], *, deadline: float, cwd: Path, env: dict[str, str] | None = None,
            ) -> CliRun:
    """Run the real CLI in a child process; fail the test if it outlives `deadline` seconds.

    Output goes to files (no pipe can fill up); the child is waited for with wait4 so its own
    peak RSS is known.
    """
    out_path, err_path = cwd / "cli.stdout", cwd / "cli.stderr"
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        child = subprocess.Popen([sys.executable, "-m", "fleetcheck", *args], cwd=cwd,
                                 stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                 env={**os.environ, **(env or {})}, start_new_session=True)
    limit = time.monotonic() + deadline
    while True:
        pid, status, usage = os.wait4(child.pid, os.WNOHANG)
        if pid == child.pid:
            break
        if time.monotonic() > limit:
            os.killpg(child.pid, signal.SIGKILL)
            os.wait4(child.pid, 0)
            pytest.fail(f"fleetcheck {' '.join(args)} did not end within {deadline} s")
        time.sleep(0.05)
    child.returncode = os.waitstatus_to_exitcode(status)
    return CliRun(child.returncode, out_path.read_bytes(), err_path.read_bytes(),
                  usage.ru_maxrss)


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
