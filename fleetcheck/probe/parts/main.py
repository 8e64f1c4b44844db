"""The probe's command line and its one JSON document."""

import json
import os
import shutil
import signal
import sys
import tempfile
import time

from fleetcheck.probe.parts.catalogue import CHECK_IDS
from fleetcheck.probe.parts.core.assembly import Probe
from fleetcheck.probe.parts.core.base import bounded, clip, error_text
from fleetcheck.probe.parts.core.spawn import Deadline, kill_live, on_terminate

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
    started = time.monotonic()
    deep = "--deep" in argv
    tmp = probe = None
    try:
        for signum in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, on_terminate)
        deep, seconds, python = parse_args(argv)
        deadline = Deadline(seconds)
        tmp = tempfile.mkdtemp(prefix="fleetcheck-probe-")
        probe = Probe(deep, deadline, python, tmp)
        probe.gather()
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
