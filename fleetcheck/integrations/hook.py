"""The --on-change hook: one command, run without a shell, fed the diff, bounded in time."""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess

from fleetcheck.render.sanitize import sanitise


def run_on_change(cmd: str, diff_text: str, timeout: float = 60) -> str | None:
    """Run `cmd` (split like a shell would, but run without one) with the diff on stdin.

    Returns None when it succeeded, else one line saying what went wrong. The line names the
    program only, never its arguments: a webhook URL with a token is a common argument.
    """
    try:
        argv = shlex.split(cmd)
    except ValueError as exc:
        return f"cannot split the command: {exc}"
    if not argv:
        return "empty command"
    program = argv[0]
    try:
        # Its own session, so a timeout kills what it started too; its stdout is not ours
        # (ours may be the report itself).
        proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except FileNotFoundError:
        return f"{program}: command not found"
    except PermissionError:
        return f"{program}: permission denied"
    except OSError as exc:
        return f"{program}: cannot run: {exc.strerror or exc}"
    try:
        _, stderr = proc.communicate(diff_text.encode("utf-8"), timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return f"{program}: timed out after {timeout:g} s"
    if proc.returncode != 0:
        said = stderr.decode("utf-8", "replace").strip().splitlines()
        last = said[-1] if said else ""
        for secret in argv[1:]:
            if len(secret) >= 4:
                last = last.replace(secret, "…")
        status = (f"killed by signal {-proc.returncode}" if proc.returncode < 0
                  else f"exited with status {proc.returncode}")
        return f"{program}: {status}" + (f": {sanitise(last, 200)}" if last else "")
    return None
