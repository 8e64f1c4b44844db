"""The probe's deadline and subprocesses: started now, collected later, killed at their timeout."""

import json
import os
import signal
import subprocess
import sys
import threading
import time

from fleetcheck.probe.parts.base import clip, error_text

RESERVE_S = 0.4  # kept back from the deadline to assemble and print the JSON

MARK = "@@fleetcheck@@ "


class Deadline:
    """One deadline for the whole probe; every subprocess timeout is taken from it."""

    def __init__(self, seconds):
        self.start = time.monotonic()
        self.end = self.start + max(1.0, float(seconds))

    def remaining(self):
        return self.end - time.monotonic() - RESERVE_S

    def timeout(self, cap=None):
        left = max(0.05, self.remaining())
        return left if cap is None else min(cap, left)

    def elapsed(self):
        return time.monotonic() - self.start


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


class Spawned:
    """A subprocess started now and collected later, killed (with its group) at its timeout."""

    def __init__(self, argv, timeout, env=None, cwd=None, max_out=1 << 20):
        self.argv = list(argv)
        self.timeout = timeout
        self.started = time.monotonic()
        self.out: list = []
        self.err: list = []
        self.max_out = max_out
        self.error = None
        self.proc = None
        self.threads = []
        self._result = None
        STARTING.append(self)
        try:
            try:
                self.proc = subprocess.Popen(
                    self.argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE, env=env, cwd=cwd, start_new_session=True)
            except OSError as exc:
                self.error = error_text(exc)
                return
            # Its own session keeps it out of the probe's group, so the probe must kill it.
            LIVE.add(self)
        finally:
            STARTING.remove(self)
            if DEFERRED and not STARTING:
                raise Terminated("probe terminated by signal %d" % DEFERRED[0])
        for stream, sink in ((self.proc.stdout, self.out), (self.proc.stderr, self.err)):
            thread = threading.Thread(target=self._drain, args=(stream, sink), daemon=True)
            thread.start()
            self.threads.append(thread)

    def _drain(self, stream, sink):
        size = 0
        try:
            while True:
                chunk = stream.read1(65536) if hasattr(stream, "read1") else stream.read(65536)
                if not chunk:
                    break
                size += len(chunk)
                if size <= self.max_out:
                    sink.append(chunk)
        except (OSError, ValueError):
            pass

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
        """{rc, stdout, stderr, timed_out, error, seconds}; waits at most until the timeout."""
        if self._result is not None:
            return self._result
        timed_out = False
        rc = None
        if self.proc is not None:
            left = max(0.05, self.timeout - (time.monotonic() - self.started))
            try:
                rc = self.proc.wait(timeout=left)
            except subprocess.TimeoutExpired:
                timed_out = True
                self.kill()
                try:
                    self.proc.wait(timeout=2)
                except subprocess.TimeoutExpired:
                    pass
            for thread in self.threads:
                thread.join(timeout=1)
        LIVE.discard(self)
        self._result = {
            "rc": rc,
            "stdout": b"".join(self.out).decode("utf-8", "replace"),
            "stderr": b"".join(self.err).decode("utf-8", "replace"),
            "timed_out": timed_out,
            "error": self.error,
            "seconds": round(time.monotonic() - self.started, 3),
        }
        return self._result


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
        return {"error": result["error"] or clip(result["stderr"] or "no output", 1000)}
