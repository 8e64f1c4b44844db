"""The probe's deadline and subprocesses: started now, collected later, killed at their timeout.

A helper the job's limits refuse to start (no process, no pipe, no memory for it: EAGAIN,
EMFILE, ENFILE, ENOMEM) is tried again as the probe's other helpers end, and else recorded with
its errno and whether the probe held anything else then (`alone`: the job itself cannot start a
process); one the cgroup's OOM killer killed is recorded with the cgroup's oom_kill count before
and after. One reader thread serves every helper's pipes (the job's process limit counts
threads: the probe's own tasks are its main thread and that one); where the limit refuses even
that thread, the pipes are read when the helper is collected. The evaluation names the limit
from these.
"""

import errno
import json
import os
import re
import select
import signal
import subprocess
import sys
import threading
import time

from fleetcheck.probe.parts.core.base import clip, error_text, host_path, read_text

RESERVE_S = 0.4  # kept back from the deadline to assemble and print the JSON

MARK = "@@fleetcheck@@ "

#: The errnos of a process the job's limits did not let start: the fork (EAGAIN: the process
#: count; ENOMEM), the pipes (EMFILE, ENFILE), the exec (ENOMEM).
LIMIT_ERRNOS = ("EAGAIN", "EMFILE", "ENFILE", "ENOMEM")


def own_cgroup():
    """This process's cgroup v2 path ("/" at the root of its cgroup namespace), or None."""
    group = None
    for line in (read_text(host_path("/proc/self/cgroup")) or "").splitlines():
        if line.startswith("0::"):
            group = line[3:].strip() or "/"
    return group


def cgroup_file(group, name):
    """The path of a cgroup v2 file of `group` (under the sysroot)."""
    return host_path("/sys/fs/cgroup" + (group or "/").rstrip("/") + "/" + name)


def cgroup_chain(group):
    """`group` and each cgroup above it up to the root ("/"), nearest first; none for None."""
    while group is not None:
        yield group
        group = None if group in ("", "/") else os.path.dirname(group.rstrip("/")) or "/"


def oom_kills():
    """How many processes of this process's cgroup the OOM killer killed (memory.events'
    oom_kill, which counts the kills under any ancestor's memory.max too), or None."""
    group = own_cgroup()
    if group is None:
        return None
    match = re.search(r"^oom_kill (\d+)$", read_text(cgroup_file(group, "memory.events")) or "",
                      re.M)
    return int(match.group(1)) if match else None


#: The global the probe's interpreter finds set when it started again lean (main.py's
#: `restart_lean`): the first start's monotonic clock.
RESTARTED = "__fleetcheck_started__"


class Deadline:
    """One deadline for the whole probe; every subprocess timeout is taken from it."""

    def __init__(self, seconds, start=None):
        self.start = time.monotonic() if start is None else start
        self.end = self.start + max(1.0, float(seconds))

    def remaining(self):
        return self.end - time.monotonic() - RESERVE_S

    def timeout(self, cap=None):
        left = max(0.05, self.remaining())
        return left if cap is None else min(cap, left)

    def elapsed(self):
        return time.monotonic() - self.start


#: What the probe started, in order (each helper's label): the probe's cost, in its facts.
STARTED: list = []

#: Helpers still running; killed with their process groups if the probe is terminated.
LIVE: "set[Spawned]" = set()


class Terminated(BaseException):
    """SIGTERM or SIGHUP: what the host's `timeout -k` or a container shutdown sends."""


#: Helpers being started: a TERM that comes then waits until the helper is in LIVE (else one
#: started by Popen but not yet registered would outlive the probe), then is raised.
STARTING: list = []
#: The signals that waited so.
DEFERRED: list = []


def on_terminate(signum, frame):
    if STARTING:
        DEFERRED.append(signum)
        return
    raise Terminated("probe terminated by signal %d" % signum)


def kill_live():
    for spawned in list(LIVE):
        spawned.kill()


class Reader:
    """The one thread that reads every helper's stdout and stderr (poll(2): no fd of its own,
    which a job out of fds may not have), each into its sink up to the helper's max_out."""

    def __init__(self):
        self.lock = threading.Lock()
        self.pipes: dict = {}  # fd -> [stream, sink, spawned, bytes read]
        self.thread = None

    def add(self, spawned, stream, sink):
        """Read `stream` from now on; False when no thread can be started for it."""
        with self.lock:
            if self.thread is None:
                thread = threading.Thread(target=self.run, daemon=True)
                try:
                    thread.start()
                except RuntimeError:  # can't start new thread: the job's process limit
                    return False
                self.thread = thread
            self.pipes[stream.fileno()] = [stream, sink, spawned, 0]
            return True

    def run(self):
        while True:
            try:
                self.read_some()
            except Exception:  # never the probe's end: its helpers would block on full pipes
                time.sleep(0.05)

    def read_some(self):
        """One poll of every pipe (50 ms at most), what is ready read or closed at its end."""
        with self.lock:
            fds = list(self.pipes)
        if not fds:
            time.sleep(0.05)
            return
        poller = select.poll()
        for fd in fds:
            poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
        try:
            ready = poller.poll(50)
        except OSError:
            ready = []
        for fd, _ in ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                chunk = b""
            with self.lock:
                entry = self.pipes.get(fd)
                if entry is None:
                    continue
                if chunk:
                    entry[3] += len(chunk)
                    entry[2].keep(entry[1], entry[3], chunk)
                    continue
                del self.pipes[fd]
            # The pipe's end: its fd counts against the job's open-file limit.
            close_quietly(entry[0])
            entry[2].pipe_done()


READER = Reader()


class Spawned:
    """A subprocess started now and collected later, killed (with its group) at its timeout."""

    def __init__(self, argv, timeout, env=None, cwd=None, max_out=1 << 20, label=None):
        self.argv = list(argv)
        self.label = label or os.path.basename(str(argv[0]))
        self.timeout = timeout
        self.started = time.monotonic()
        self.out: list = []
        self.err: list = []
        self.max_out = max_out
        self.error = None
        self.errno = None
        self.alone = None
        self.proc = None
        self.unread: list = []
        self.open_pipes = 0
        self.drained = threading.Event()
        self._result = None
        self.oom_before = oom_kills()
        self._start(env, cwd)
        if self.proc is None:
            return
        self.open_pipes = 2
        for stream, sink in ((self.proc.stdout, self.out), (self.proc.stderr, self.err)):
            if not READER.add(self, stream, sink):
                # No thread for the reader (the job's process limit counts threads): the pipe
                # is read when the helper is collected.
                self.unread.append((stream, sink))
                self.pipe_done()

    def _start(self, env, cwd):
        """Popen; a start the job's limits refuse is tried again each time one of the probe's
        other helpers ends (their processes, threads and pipes count against the same
        limits), for at most half of this helper's time."""
        give_up = self.started + self.timeout / 2
        while True:
            others = [s for s in LIVE if s.holds()]
            failure = self._popen(env, cwd)
            if failure is None:
                return
            self.error = error_text(failure)
            self.errno = errno.errorcode.get(failure.errno or 0)
            if self.errno not in LIMIT_ERRNOS:
                return
            # Nothing else of the probe's held a process or a pipe: the job cannot start one.
            self.alone = not others
            if not others or not release(others, give_up):
                return
            waited = time.monotonic() - self.started
            self.timeout = max(0.05, self.timeout - waited)
            self.started = time.monotonic()
            give_up = min(give_up, self.started + self.timeout / 2)

    def _popen(self, env, cwd):
        """Start the process (None), or the OSError that refused it."""
        STARTING.append(self)
        try:
            try:
                self.proc = subprocess.Popen(
                    self.argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE, env=env, cwd=cwd, start_new_session=True)
            except OSError as exc:
                return exc
            # Its own session keeps it out of the probe's group, so the probe must kill it.
            LIVE.add(self)
            STARTED.append(self.label)
            self.error = self.errno = self.alone = None
            return None
        finally:
            STARTING.remove(self)
            if DEFERRED and not STARTING:
                raise Terminated("probe terminated by signal %d" % DEFERRED[0])

    def holds(self):
        """Whether its process runs or its pipes are still open in the probe."""
        return self.proc is not None and (self.proc.poll() is None or bool(self.unread)
                                          or not self.drained.is_set())

    def keep(self, sink, size, chunk):
        if size <= self.max_out:
            sink.append(chunk)

    def pipe_done(self):
        """One of its pipes ended (or is left to be read when it is collected)."""
        with READER.lock:
            self.open_pipes -= 1
            if self.open_pipes <= 0:
                self.drained.set()

    def _read_unread(self, until):
        """Read the pipes no thread reads, until both end, or the process has ended a second
        ago (a process it left behind may hold them, as with the reader thread), or `until`;
        False when `until` came first."""
        import selectors
        # poll(2) needs no fd of its own (epoll does), which a job out of fds may not have.
        selector = getattr(selectors, "PollSelector", selectors.DefaultSelector)()
        sizes = {}
        for stream, sink in self.unread:
            selector.register(stream, selectors.EVENT_READ, sink)
            sizes[stream] = 0
        ended = None
        try:
            while selector.get_map():
                now = time.monotonic()
                if ended is None and self.proc is not None and self.proc.poll() is not None:
                    ended = now
                if ended is not None and now - ended > 1:
                    break
                left = until - now
                if left <= 0:
                    return False
                for key, _ in selector.select(min(left, 0.1)):
                    try:
                        chunk = os.read(key.fd, 65536)
                    except OSError:
                        chunk = b""
                    if not chunk:
                        selector.unregister(key.fileobj)
                        close_quietly(key.fileobj)
                        continue
                    sizes[key.fileobj] += len(chunk)
                    self.keep(key.data, sizes[key.fileobj], chunk)
            return True
        finally:
            for key in list(selector.get_map().values()):
                close_quietly(key.fileobj)
            self.unread = []
            selector.close()

    def kill(self):
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except OSError:
            try:
                self.proc.kill()
            except OSError:
                pass

    def result(self):
        """{rc, stdout, stderr, timed_out, error, seconds, errno, alone, oom_kill}; waits at
        most until the timeout. errno: the limit errno that refused its start, alone: whether
        the probe held nothing else then; oom_kill: [before, after] the cgroup's OOM kill count
        when it died of SIGKILL and the count rose."""
        if self._result is not None:
            return self._result
        timed_out = False
        rc = None
        oom = None
        if self.proc is not None:
            left = max(0.05, self.timeout - (time.monotonic() - self.started))
            if self.unread and not self._read_unread(time.monotonic() + left):
                timed_out = True
                self.kill()
            try:
                rc = self.proc.wait(timeout=max(0.05, self.timeout - (
                    time.monotonic() - self.started)))
            except subprocess.TimeoutExpired:
                timed_out = True
                self.kill()
                try:
                    self.proc.wait(timeout=2)
                except subprocess.TimeoutExpired:
                    pass
            # What it wrote before it ended: the reader's end of its pipes, which a busy node
            # may take long to reach (never cut at 1 s: a lost line is a false failure); a
            # process it left holding them ends the wait at its deadline, 10 s at most.
            self.drained.wait(timeout=min(10.0, max(1.0, self.timeout - (
                time.monotonic() - self.started))))
            for stream, _ in self.unread:
                close_quietly(stream)
            if rc == -signal.SIGKILL and not timed_out:
                # Not the probe's kill: the OOM killer's, if the cgroup counted one meanwhile.
                after = oom_kills()
                if after is not None and self.oom_before is not None and after > self.oom_before:
                    oom = [self.oom_before, after]
        LIVE.discard(self)
        self._result = {
            "rc": rc,
            "stdout": b"".join(self.out).decode("utf-8", "replace"),
            "stderr": b"".join(self.err).decode("utf-8", "replace"),
            "timed_out": timed_out,
            "error": self.error,
            "seconds": round(time.monotonic() - self.started, 3),
            "errno": self.errno,
            "alone": self.alone,
            "oom_kill": oom,
        }
        return self._result


def close_quietly(stream):
    try:
        stream.close()
    except (OSError, ValueError):
        pass


def release(others, until):
    """Wait until one of the probe's helpers in `others` has ended and let go of its pipes
    (collecting it), or `until`; whether one did."""
    while time.monotonic() < until:
        for spawned in others:
            if spawned.proc.poll() is not None:
                spawned.result()
                return True
        time.sleep(0.05)
    return False


def stage_lines(stdout):
    """The JSON lines a helper script printed behind MARK, by stage."""
    stages = {}
    for line in stdout.splitlines():
        if not line.startswith(MARK):
            continue
        try:
            data = json.loads(line[len(MARK):])
        except ValueError:
            continue
        if isinstance(data, dict) and isinstance(data.get("stage"), str):
            stages[data["stage"]] = data
    return stages


def run_inline(script):
    """Run a helper script in this interpreter, capturing what it prints."""
    import io
    buffer = io.StringIO()
    saved = sys.stdout
    sys.stdout = buffer
    try:
        exec(compile(script, "<fleetcheck>", "exec"), {"__name__": "fleetcheck_inline"})
    finally:
        sys.stdout = saved
    return buffer.getvalue()


def stage_answer(result, what, last_line=False):
    """A stage's JSON answer (its whole stdout, or its last line), or {"error": ...} naming why
    it gave none: `what` timed out (with "timed_out"), else the stage's error or stderr."""
    if result["timed_out"]:
        return {"error": "%s timed out after %.1f s" % (what, result["seconds"]),
                "timed_out": True}
    text = result["stdout"].strip()
    try:
        return json.loads(text.splitlines()[-1] if last_line else text)
    except (ValueError, IndexError):
        answer = {"error": result["error"] or clip(result["stderr"] or died(result), 1000)}
        # What the evaluation names the limit from: the errno that refused the start, the
        # cgroup's OOM kill.
        for key in ("errno", "alone", "oom_kill"):
            if result.get(key) is not None:
                answer[key] = result[key]
        return answer


def died(result):
    """'no output', or the signal that killed a helper which said nothing."""
    rc = result.get("rc")
    if isinstance(rc, int) and rc < 0:
        try:
            name = signal.Signals(-rc).name
        except ValueError:
            name = "signal %d" % -rc
        return "killed by %s (rc %d)%s, no output" % (name, rc, " by the cgroup's OOM killer" if
                                                      result.get("oom_kill") else "")
    return "no output"
