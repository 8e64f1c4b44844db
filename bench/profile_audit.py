"""Profile the auditor: `fleetcheck audit` under cProfile (CPU time) on a loopback fleet.

    python bench/profile_audit.py [--containers 500] [--probe trivial|real] [--top 25]
                                  [--shape nodes]

The trivial probe (the real probe's reply, printed) leaves only the auditor's own work.
Writes the pstats file next to the fleet and prints the top entries by own time and
cumulative time.
"""

from __future__ import annotations

import argparse
import io
import os
import pstats
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.run import build_fleet, real_probe, trivial_probe  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--containers", type=int, default=500)
    parser.add_argument("--probe", choices=("trivial", "real"), default="trivial")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--shape", choices=("containers", "nodes"), default="containers",
                        help="nodes: bare-metal nodes, one sshd and one connection each")
    parser.add_argument("--workdir")
    args = parser.parse_args()
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="fc-profile-"))
    workdir.mkdir(parents=True, exist_ok=True)
    fleet = build_fleet(args.containers, workdir, args.shape)
    try:
        probe = real_probe(workdir)
        if args.probe == "trivial":
            probe = trivial_probe(fleet, probe, workdir)
        stats_path = workdir / "audit.pstats"
        argv = [sys.executable, str(REPO / "bench" / "fleetcheck_with_probe.py"), probe.path,
                "audit", fleet.inventory_path, "--format", "json",
                "-o", str(workdir / "audit.json"), "--no-progress"]
        started = time.perf_counter()
        subprocess.run(argv, check=False, timeout=900, stdin=subprocess.DEVNULL,
                       env={**os.environ, "BENCH_PROFILE": str(stats_path)})
        print(f"audit of {args.containers} containers under cProfile: "
              f"{time.perf_counter() - started:.2f} s wall")
        for key in ("tottime", "cumulative"):
            out = io.StringIO()
            stats = pstats.Stats(str(stats_path), stream=out)
            stats.sort_stats(key).print_stats(args.top)
            print(out.getvalue())
    finally:
        fleet.close()
        if not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
