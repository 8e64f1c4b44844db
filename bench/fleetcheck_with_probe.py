"""Run the real `fleetcheck` CLI with another probe script in place of the shipped one.

Usage: python bench/fleetcheck_with_probe.py PROBE.py audit INVENTORY --format json -o FILE

The probe payload is handed to `fleetcheck.cli.main` as an `AuditParts` (the audit's injected
parts); nothing is patched. Everything else — inventory, SSH, rendering, the JSON file — is the
shipped code path.

With BENCH_FIXES=chacha, the transport factory of bench/proposed_fixes.py carries that
variant (PROBE.py may then be "-" for the shipped probe).

With BENCH_TIMES=FILE, each node's command is timed (bench/timed.py) and the times are
written to FILE as JSON: {"started": process start, "ended": CLI return, "nodes": [[id, start,
end], ...], "asked": [[id, time], ...]}, all on the monotonic clock ("asked": when the audit
first asked for each node's session, before its host's connection was open).

With BENCH_PROFILE=FILE in the environment, the run is profiled on CPU time (not wall time:
on a loaded 2-core machine a wall-clock profile charges `socket.send` for the time the
kernel spends running sshd) and the pstats are written to FILE.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

STARTED = time.monotonic()
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main(argv: list[str]) -> int:
    from fleetcheck.audit import AuditParts
    from fleetcheck.cli import main as cli_main

    probe = None if argv[0] == "-" else Path(argv[0]).read_bytes()
    transports = None
    if os.environ.get("BENCH_FIXES"):
        from bench.proposed_fixes import transport_factory

        transports = transport_factory(os.environ["BENCH_FIXES"])
    times_path = os.environ.get("BENCH_TIMES")
    if not times_path:
        return cli_main(argv[1:], parts=AuditParts(transports=transports, probe=probe))
    from bench.timed import TimedTransports

    timed = TimedTransports(transports)
    try:
        return cli_main(argv[1:], parts=AuditParts(transports=timed, probe=probe))
    finally:
        Path(times_path).write_text(json.dumps(
            {"started": STARTED, "ended": time.monotonic(), "nodes": timed.times,
             "asked": timed.asked}))


def profiled(argv: list[str], stats_path: str) -> int:
    import cProfile

    profiler = cProfile.Profile(time.process_time)
    try:
        return profiler.runcall(main, argv)
    finally:
        profiler.dump_stats(stats_path)


if __name__ == "__main__":
    from fleetcheck.cli import finish  # the command's own ending (os._exit once flushed)

    if os.environ.get("BENCH_PROFILE"):
        finish(profiled(sys.argv[1:], os.environ["BENCH_PROFILE"]))
    finish(main(sys.argv[1:]))
