"""Run one command and measure it: wall time, CPU of its process tree, peak RSS, machine CPU.

- CPU of the tree: user+sys from `os.wait4` on the command (which includes every descendant
  it waited for) plus whatever orphans it left behind (ssh ControlPersist masters), which
  this process adopts as a child subreaper and reaps after the run.
- Peak RSS: `ru_maxrss` of the largest single process of the tree (reported by the small
  launcher bench/launch.py, so that the bench's own memory does not leak into it), plus a sampled
  sum over the whole tree (every 0.2 s from /proc), since a forking auditor (Ansible) spreads
  its memory over many processes.
- Machine CPU: busy jiffies from /proc/stat, so the work done on the "nodes" (sshd, pct and the
  probes, which are not descendants of the auditor) is counted too.
- Fleet CPU: the same node-side work, counted without anyone else's: the growth of the fleet's
  sshd listeners' own and reaped children's CPU (utime+stime+cutime+cstime in /proc/PID/stat;
  every session's shell, `timeout`, `pct` and probe is a descendant that sshd waited for), plus
  the auditor's tree. Unlike wall time and machine CPU it does not move with the load others
  put on a shared machine.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

PR_SET_CHILD_SUBREAPER = 36
SAMPLE_INTERVAL_S = 0.2
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
_PAGE_KB = os.sysconf("SC_PAGE_SIZE") // 1024
LAUNCHER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "launch.py")


def repo_pythonpath(repo: object) -> str:
    """PYTHONPATH for a child that imports the repository: it first, then what was already
    there (a machine without network carries fleetcheck's wheels on PYTHONPATH)."""
    return os.pathsep.join(part for part in (str(repo), os.environ.get("PYTHONPATH", "")) if part)


# -- the core split (--pin) ---------------------------------------------------------------------

def parse_cpus(text: str) -> set[int]:
    """`0-1,4` -> {0, 1, 4} (taskset's list form)."""
    cpus: set[int] = set()
    for part in text.split(","):
        low, _, high = part.strip().partition("-")
        if not low.isdigit() or (high and not high.isdigit()):
            raise ValueError(f"not a CPU list: {text!r}")
        cpus.update(range(int(low), int(high or low) + 1))
    return cpus


def cpus_text(cpus: set[int] | None) -> str:
    """{0, 1, 4} -> `0-1,4`; None -> `all`."""
    if not cpus:
        return "all"
    ranges: list[list[int]] = []
    for cpu in sorted(cpus):
        if ranges and cpu == ranges[-1][1] + 1:
            ranges[-1][1] = cpu
        else:
            ranges.append([cpu, cpu])
    return ",".join(f"{a}" if a == b else f"{a}-{b}" for a, b in ranges)


@dataclass(frozen=True)
class Pin:
    """Which cores the auditor runs on and which the fleet (its sshd and all they start, the
    floor's probes); None: no split, everything shares every core."""

    auditor: frozenset[int] | None = None
    fleet: frozenset[int] | None = None

    @classmethod
    def parse(cls, text: str | None) -> Pin:
        """`AUDITOR:FLEET` in taskset's list form, e.g. `0-1:2-15`; empty: no split."""
        if not text:
            return cls()
        auditor, sep, fleet = text.partition(":")
        if not sep:
            raise ValueError(f"--pin wants AUDITOR_CPUS:FLEET_CPUS (e.g. 0-1:2-15), not {text!r}")
        a, f = parse_cpus(auditor), parse_cpus(fleet)
        if a & f:
            raise ValueError(f"--pin: the auditor's and the fleet's cores overlap ({text})")
        available = os.sched_getaffinity(0)
        if not (a | f) <= available:
            raise ValueError(f"--pin {text}: this machine offers cores {cpus_text(available)}")
        return cls(frozenset(a), frozenset(f))

    def describe(self) -> str:
        if self.auditor is None:
            return f"shared ({len(os.sched_getaffinity(0))} cores)"
        return (f"auditor {cpus_text(set(self.auditor))} ({len(self.auditor)}), "
                f"fleet {cpus_text(set(self.fleet or ()))} ({len(self.fleet or ())})")

    def cores(self, role: str) -> frozenset[int] | None:
        return self.auditor if role == "auditor" else self.fleet


#: Set once by the entry point (bench/run.py --pin); every run_measured and fleet start reads it.
PIN = Pin()


def set_pin(pin: Pin) -> None:
    global PIN
    PIN = pin


def fleet_core_count() -> int:
    """Cores the fleet's work runs on (all of the machine's without a split)."""
    return len(PIN.fleet) if PIN.fleet else (os.cpu_count() or 1)


@contextmanager
def fleet_cores() -> Iterator[None]:
    """Run the block on the fleet's cores: servers started in it (sshd) inherit them."""
    if PIN.fleet is None:
        yield
        return
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, PIN.fleet)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


@dataclass(frozen=True)
class Measurement:
    """One timed run of one contender."""

    wall_s: float
    #: user+sys of the auditor's process tree (orphans it left included).
    cpu_s: float
    #: user+sys of the whole machine during the run (auditor, sshd, pct, probes).
    machine_cpu_s: float
    #: ru_maxrss: the largest single process of the auditor's tree, in MiB.
    peak_rss_mb: float
    #: Largest sampled sum of RSS over the auditor's tree, in MiB.
    tree_rss_mb: float
    returncode: int
    #: Largest sampled count of open file descriptors over the auditor's tree.
    peak_fds: int = 0
    #: 1-minute load average when the run started (others' work on the machine shows here).
    load_before: float = 0.0
    #: CPU the fleet's servers (sshd and everything they ran) spent during the run.
    server_cpu_s: float = 0.0
    stdout: bytes = b""
    stderr: bytes = b""


def become_subreaper() -> bool:
    """Adopt orphaned descendants (daemonised ssh masters) so that their CPU is counted."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def machine_busy_s() -> float:
    """Busy CPU seconds of the whole machine since boot (everything but idle and iowait)."""
    with open("/proc/stat") as stat:
        fields = stat.readline().split()[1:]
    values = [int(value) for value in fields]
    # user nice system idle iowait irq softirq steal (guest is already inside user)
    busy = sum(values[:8]) - values[3] - values[4]
    return busy / _CLOCK_TICKS


def _process_table() -> dict[int, tuple[int, int]]:
    """pid -> (ppid, rss pages) for every process we can read."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                raw = stat.read()
        except OSError:
            continue
        # The command name may contain spaces and parentheses: split after the last ')'.
        rest = raw[raw.rfind(b")") + 2 :].split()
        table[int(entry)] = (int(rest[1]), int(rest[21]))
    return table


def descendants(root: int, table: Mapping[int, tuple[int, int]]) -> set[int]:
    """Every pid below `root` in the table (root excluded)."""
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    found: set[int] = set()
    stack = [root]
    while stack:
        for child in children.get(stack.pop(), ()):
            if child not in found:
                found.add(child)
                stack.append(child)
    return found


def adopted_orphans(known: set[int]) -> set[int]:
    """Our direct children that we did not start ourselves (orphans reparented to us)."""
    me = os.getpid()
    return {pid for pid, (ppid, _) in _process_table().items()
            if ppid == me and pid not in known}


class _TreeSampler(threading.Thread):
    """Samples the RSS sum of a process tree (plus adopted orphans) until stopped."""

    def __init__(self, root: int, known_children: set[int]) -> None:
        super().__init__(daemon=True)
        self.root = root
        self.known = known_children
        self.peak_kb = 0
        self.peak_fds = 0
        self._stop_event = threading.Event()

    def run(self) -> None:
        me = os.getpid()
        while not self._stop_event.wait(SAMPLE_INTERVAL_S):
            table = _process_table()
            # The root is the launcher (bench/launch.py): only what it started counts.
            tree = descendants(self.root, table)
            tree |= {pid for pid, (ppid, _) in table.items()
                     if ppid == me and pid not in self.known and pid != self.root}
            total = sum(table[pid][1] for pid in tree if pid in table) * _PAGE_KB
            self.peak_kb = max(self.peak_kb, total)
            self.peak_fds = max(self.peak_fds, sum(_fd_count(pid) for pid in tree))

    def stop(self) -> None:
        self._stop_event.set()
        self.join(timeout=5)


def _fd_count(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0


def servers_cpu_s(pids: set[int]) -> float:
    """utime+stime+cutime+cstime of `pids` (the fleet's sshd listeners), in seconds."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as stat:
                raw = stat.read()
        except OSError:
            continue
        rest = raw[raw.rfind(b")") + 2 :].split()
        total += sum(int(field) for field in rest[11:15])
    return total / _CLOCK_TICKS


def _wait_servers_idle(pids: set[int], limit_s: float = 3.0) -> None:
    """Until no listener has a child left (sessions close after the auditor exits), bounded."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if not any(ppid in pids for ppid, _ in _process_table().values()):
            return
        time.sleep(0.05)


def _children_cpu() -> float:
    usage = os.times()
    return usage.children_user + usage.children_system


def run_measured(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    stdin_path: str | None = None,
    timeout: float = 1800.0,
    known_children: Callable[[], set[int]] = set,
    after: Callable[[], None] | None = None,
    role: str = "auditor",
) -> Measurement:
    """Run argv to completion (killed after `timeout`), measured as described above.

    `known_children` returns the pids of long-lived children (the fleet's sshd) that must not
    be mistaken for orphans of the run; `after` runs once the command exited and before the
    orphans are reaped (e.g. to stop ssh ControlPersist masters). `role` "auditor" or "fleet":
    whose cores the command runs on under --pin (the floor's probes are the fleet's work).
    """
    stdin = open(stdin_path, "rb") if stdin_path else subprocess.DEVNULL
    report_fd, report_path = tempfile.mkstemp(prefix="bench-launch-", suffix=".json")
    os.close(report_fd)
    known = set(known_children())
    load_before = os.getloadavg()[0]
    cpu_before = _children_cpu()
    busy_before = machine_busy_s()
    started = time.perf_counter()
    cores = PIN.cores(role)
    proc = subprocess.Popen(
        [sys.executable, "-I", "-S", LAUNCHER, report_path, "--", *argv],
        env=dict(env) if env is not None else None, cwd=cwd, stdin=stdin,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
        preexec_fn=(lambda: os.sched_setaffinity(0, cores)) if cores else None,
    )
    servers = set(known)
    deadline = started + timeout
    status = None
    rusage = None
    out_chunks: list[bytes] = []
    err_chunks: list[bytes] = []
    # From here on an interrupt stops the command (see below), also one that comes while the
    # sampler and the readers start (a loaded machine: the command may be well under way).
    try:
        servers_before = servers_cpu_s(servers)
        known.add(proc.pid)
        sampler = _TreeSampler(proc.pid, known)
        sampler.start()
        readers = [
            threading.Thread(target=lambda: out_chunks.append(proc.stdout.read()), daemon=True),
            threading.Thread(target=lambda: err_chunks.append(proc.stderr.read()), daemon=True),
        ]
        for reader in readers:
            reader.start()
        while status is None:
            pid, wait_status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid == proc.pid:
                status, rusage = wait_status, usage
                break
            if time.perf_counter() > deadline:
                os.killpg(proc.pid, signal.SIGKILL)
                _, status, rusage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.005)
    except BaseException:
        # Interrupted (Ctrl-C, a step's time limit): the command runs in its own session, so
        # it would outlive the bench and load the next measurement. Stop it first.
        os.killpg(proc.pid, signal.SIGKILL)
        os.wait4(proc.pid, 0)
        raise
    wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    for reader in readers:
        reader.join(timeout=10)
    sampler.stop()
    if after is not None:
        after()
    reap_orphans(known)
    _wait_servers_idle(servers)
    server_cpu = servers_cpu_s(servers) - servers_before
    busy = machine_busy_s() - busy_before
    cpu = _children_cpu() - cpu_before
    if stdin_path:
        stdin.close()
    try:
        with open(report_path) as handle:
            launched = json.load(handle)
    except (OSError, ValueError):
        launched = {"maxrss_kb": rusage.ru_maxrss}
    finally:
        os.unlink(report_path)
    return Measurement(
        wall_s=wall, cpu_s=cpu, machine_cpu_s=busy,
        peak_rss_mb=launched["maxrss_kb"] / 1024, tree_rss_mb=sampler.peak_kb / 1024,
        returncode=proc.returncode, load_before=load_before, peak_fds=sampler.peak_fds,
        server_cpu_s=server_cpu,
        stdout=b"".join(out_chunks), stderr=b"".join(err_chunks),
    )


def reap_orphans(known: set[int], grace_s: float = 5.0) -> None:
    """Terminate and reap the orphans a run left with us; bounded by `grace_s`."""
    orphans = adopted_orphans(known)
    for pid in orphans:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + grace_s
    pending = set(orphans)
    while pending and time.monotonic() < deadline:
        for pid in list(pending):
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                done = pid
            if done:
                pending.discard(pid)
        time.sleep(0.01)
    for pid in pending:
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
