"""Run the real `fleetcheck` CLI with another probe script in place of the shipped one.

Usage: python bench/fleetcheck_with_probe.py PROBE.py audit INVENTORY --format json -o FILE

Used only when fleetcheck offers no option or environment variable to choose the probe
source: it replaces `fleetcheck.probe.probe_source` before the audit module is imported (and
again after, in case that module bound the name itself), then calls `fleetcheck.cli.main`.
Everything else — inventory, SSH, rendering, the JSON file — is the shipped code path.

With BENCH_FIXES=gcm, the proposed fixes of bench/proposed_fixes.py are
applied first (PROBE.py may then be "-" for the shipped probe).

With BENCH_PROFILE=FILE in the environment, the run is profiled on CPU time (not wall time:
on a loaded 2-core machine a wall-clock profile charges `socket.send` for the time the
kernel spends running sshd) and the pstats are written to FILE.
"""

from __future__ import annotations

import importlib
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main(argv: list[str]) -> int:
    probe = importlib.import_module("fleetcheck.probe")
    if argv[0] != "-":
        source = Path(argv[0]).read_text()

        def probe_source() -> str:
            return source

        probe.probe_source = probe_source  # type: ignore[attr-defined]
    probe_source = probe.probe_source
    try:
        audit = importlib.import_module("fleetcheck.audit")
    except ImportError:
        audit = None
    if audit is not None and hasattr(audit, "probe_source"):
        audit.probe_source = probe_source
    if os.environ.get("BENCH_FIXES"):
        from bench.proposed_fixes import apply

        apply(os.environ["BENCH_FIXES"])
    from fleetcheck.cli import main as cli_main

    return cli_main(argv[1:])


def profiled(argv: list[str], stats_path: str) -> int:
    import cProfile

    profiler = cProfile.Profile(time.process_time)
    try:
        return profiler.runcall(main, argv)
    finally:
        profiler.dump_stats(stats_path)


if __name__ == "__main__":
    if os.environ.get("BENCH_PROFILE"):
        sys.exit(profiled(sys.argv[1:], os.environ["BENCH_PROFILE"]))
    sys.exit(main(sys.argv[1:]))
