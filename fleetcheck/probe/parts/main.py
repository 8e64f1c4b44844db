"""The probe's command line and its one JSON document."""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from fleetcheck.probe.parts.catalogue import CHECK_IDS
from fleetcheck.probe.parts.core.assembly import Probe
from fleetcheck.probe.parts.core.base import bounded, clip, error_text
from fleetcheck.probe.parts.core.spawn import RESTARTED, Deadline, kill_live, on_terminate
from fleetcheck.probe.parts.facts.gather import gpu_signs

PROBE_SCHEMA = "fleetcheck.probe/1"

PROBE_VERSION = "1"


def parse_args(argv):
    """(deep, deadline, python) from argv after `-`; raises ValueError on bad usage."""
    deep, deadline, python = False, None, None
    items = list(argv)
    while items:
        item = items.pop(0)
        if item == "--deep":
            deep = True
        elif item in ("--deadline", "--python"):
            if not items:
                raise ValueError("%s needs a value" % item)
            value = items.pop(0)
            if item == "--deadline":
                deadline = float(value)
                if not deadline > 0:
                    raise ValueError("--deadline must be > 0")
            else:
                python = value
        elif item.startswith("--deadline="):
            deadline = float(item.split("=", 1)[1])
        elif item.startswith("--python="):
            python = item.split("=", 1)[1]
        else:
            raise ValueError("unknown argument %r" % item)
    if deadline is None:
        deadline = 175.0 if deep else 55.0
    return deep, deadline, python


#: What the probe's interpreter runs when it starts again lean (`restart_lean`): the probe's
#: code objects from the file descriptor argv[1] (marshal: the same interpreter made them),
#: the first start's clock from argv[2], then the probe as `python -` runs it.
LEAN_LOADER = ("import marshal,os,sys;f=int(sys.argv[1]);t=float(sys.argv[2]);del sys.argv[1:3];"
               "h=os.fdopen(f,'rb');c=marshal.loads(h.read());h.close();sys.argv[0]='-';"
               "__file__='<stdin>';" + RESTARTED + "=t;del f,t,h;exec(c)")


def restart_lean(argv, started, signs):
    """On a node with a GPU, start this interpreter again (the same process: exec) with the
    probe's code objects loaded, not compiled. Compiling the 350 KB probe leaves CPython's
    allocator holding about 6 MB more than the code needs (measured with 3.12: 13.1 MB of
    the probe's own where loading the same code in a fresh interpreter holds 7.4), and that
    interpreter waits beside the workload's at the workload's peak, under the job's memory
    limit. `signs`: gpu_signs(). Returns where it cannot, or need not: the probe then goes on
    in this process."""
    if __name__ != "__main__" or RESTARTED in globals():
        return
    memfd = getattr(os, "memfd_create", None)  # Python 3.8+, Linux
    flags = getattr(subprocess, "_args_from_interpreter_flags", None)
    exe = sys.executable
    if memfd is None or flags is None or not exe or not any(signs[3:]):
        return
    frame = sys._getframe()  # up to the frame running this module's own code
    while not (frame.f_code.co_name == "<module>" and frame.f_globals is globals()):
        back = frame.f_back
        if back is None:
            return
        frame = back
    fd = None
    try:
        if not os.path.samefile(exe, "/proc/self/exe"):
            return  # another interpreter's marshal would not load
        import marshal
        data = marshal.dumps(frame.f_code)
        fd = memfd("fleetcheck-probe", 0)  # inherited by the exec, gone once read
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.lseek(fd, 0, os.SEEK_SET)
        sys.stdout.flush()
        sys.stderr.flush()
        os.execv(exe, [exe, *flags(), "-c", LEAN_LOADER, str(fd), repr(started), *argv])
    except (OSError, ValueError):
        if fd is not None:
            os.close(fd)


def failure_document(message, deep, started):
    """The JSON printed when the probe itself breaks: every check an error, verdict unknown."""
    return {
        "schema": PROBE_SCHEMA, "probe_version": PROBE_VERSION,
        "duration_s": round(time.monotonic() - started, 3), "deep": deep, "facts": {},
        "checks": [{"id": check_id, "status": "error", "summary": clip(message, 400), "fix": "",
                    "evidence": {}} for check_id in CHECK_IDS],
        "triton": {"verdict": "unknown", "backend": None, "cause": None, "fix": ""},
        "status": "error", "reason": clip("probe error: " + message, 400),
    }


EXIT_CODES = {"ok": 0, "warn": 0, "fail": 1, "error": 3}


def main(argv):
    started = globals().get(RESTARTED) or time.monotonic()
    deep = "--deep" in argv
    tmp = probe = None
    try:
        deep, seconds, python = parse_args(argv)
        signs = gpu_signs()
        restart_lean(argv, started, signs)
        for signum in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, on_terminate)
        deadline = Deadline(seconds, started)
        tmp = tempfile.mkdtemp(prefix="fleetcheck-probe-")
        probe = Probe(deep, deadline, python, tmp)
        probe.gather(signs)
        checks = probe.run_checks()
        triton, status, reason = probe.verdict(checks)
        probe.facts["frameworks"] = probe.frameworks(checks, triton)
        document = {
            "schema": PROBE_SCHEMA, "probe_version": PROBE_VERSION,
            "duration_s": round(time.monotonic() - started, 3), "deep": deep,
            "facts": bounded(probe.facts), "checks": checks, "triton": triton,
            "status": status, "reason": reason,
        }
    except BaseException as exc:  # the global guard: a JSON document, never a traceback
        document = failure_document(error_text(exc), deep, started)
    finally:
        # A second TERM while cleaning up must not leave helpers or the temp dir behind.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        kill_live()
        if probe is not None:
            try:
                probe.remove_workload_dirs()
            except Exception:
                pass
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    text = json.dumps(document, sort_keys=False, separators=(",", ":"))
    sys.stdout.write(text + "\n")
    sys.stdout.flush()
    return EXIT_CODES.get(document["status"], 3)


if __name__ == "__main__":
    code = main(sys.argv[1:])
    # Daemon reader threads may still hold pipes of killed grandchildren: exit without waiting.
    sys.stderr.flush()
    os._exit(code)
