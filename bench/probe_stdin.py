"""The probe launched three ways, in turn: as the bare script (`PYTHON - < probe.py`), as
fleetcheck launches it (`PYTHON -c BOOTSTRAP` with zlib(probe) on stdin, transport/packing.py)
and as a file (`PYTHON probe.py`).

Usage: python bench/probe_stdin.py [--python PYTHON] [--runs N] [--no-gpu-stack] [--no-strace]
                                   PROBE...

Runs each launch of each probe N times (`--deadline 60`), all interleaved so that the
machine's load falls on all alike, with stdin a pipe, as ssh and srun give it; prints per
launch the median wall time, the median CPU of the probe's process tree (user + system, from
the children's rusage), the verdict, and how many read(2) calls the interpreter made on its
stdin when `strace` is here (one extra run, not timed; a minute for the bare script's
366,650 calls; --no-strace leaves it out). --no-gpu-stack runs it as
`bench/probe_profile_gpu.sh` does for a node without one: PATH of the system's folders only,
FLEETCHECK_SYSROOT an empty folder.

CPython's tokenizer reads a script given as `python -` one byte per read(2): 366,650 calls
for the fifth round's probe (docs/probe-performance.md, "The bare script's stdin").
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.measure import _children_cpu  # noqa: E402
from fleetcheck.transport.packing import packed_launch  # noqa: E402


def launches(probe: Path) -> list[tuple[str, list[str], bytes]]:
    """(name, argv after PYTHON, stdin) of each launch of `probe`; the packed one is
    fleetcheck's own (`packed_launch`)."""
    text = probe.read_bytes()
    packed, payload = packed_launch(["-"], text)
    return [("python -", ["-"], text), ("packed", packed, payload), ("file", [str(probe)], b"")]


def run(python: str, argv: list[str], stdin: bytes,
        env: dict[str, str]) -> tuple[float, float, str]:
    """(wall s, CPU s, verdict) of one run, its stdin a pipe."""
    cpu, started = _children_cpu(), time.monotonic()
    done = subprocess.run([python, *argv, "--deadline", "60"], input=stdin, env=env,
                          capture_output=True, timeout=300, check=False)
    wall = time.monotonic() - started
    try:
        verdict = str(json.loads(done.stdout)["triton"]["verdict"])
    except (ValueError, KeyError, TypeError):
        verdict = f"no document (exit {done.returncode})"
    return wall, _children_cpu() - cpu, verdict


def stdin_reads(python: str, argv: list[str], stdin: bytes, env: dict[str, str],
                folder: Path) -> int | None:
    """read(2) calls on fd 0 by the probe's own process (strace), or None without strace."""
    strace = shutil.which("strace")
    if strace is None:
        return None
    log = folder / "strace.log"
    log.unlink(missing_ok=True)
    subprocess.run([strace, "-o", str(log), "-e", "trace=read", python, *argv, "--deadline",
                    "60"], input=stdin, env=env, capture_output=True, timeout=600, check=False)
    if not log.exists():
        return None
    return sum(line.startswith("read(0,") for line in log.read_text().splitlines())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("probes", nargs="+", type=Path)
    parser.add_argument("--python", default="python3")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--no-gpu-stack", action="store_true")
    parser.add_argument("--no-strace", action="store_true",
                        help="do not count the stdin reads (strace makes each one slow)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="fc-stdin-") as tmp:
        folder = Path(tmp)
        env = dict(os.environ)
        if args.no_gpu_stack:
            (folder / "empty-sysroot").mkdir()
            env.update(PATH="/usr/local/bin:/usr/bin:/bin",
                       FLEETCHECK_SYSROOT=str(folder / "empty-sysroot"))
        python = shutil.which(args.python, path=env["PATH"]) or args.python
        cases = {(p.name, name): (argv, stdin)
                 for p in args.probes for name, argv, stdin in launches(p)}
        results: dict[tuple[str, str], list[tuple[float, float, str]]] = {c: [] for c in cases}
        for _ in range(args.runs):
            for case, (argv, stdin) in cases.items():
                results[case].append(run(python, argv, stdin, env))
        reads = {case: None if args.no_strace else stdin_reads(python, argv, stdin, env, folder)
                 for case, (argv, stdin) in cases.items()}
    print(f"{python}, {args.runs} runs each, interleaved"
          f"{' (no GPU stack)' if args.no_gpu_stack else ''}; load {os.getloadavg()[0]:.2f}")
    for case, runs in results.items():
        walls = [wall for wall, _, _ in runs]
        cpus = [cpu for _, cpu, _ in runs]
        verdicts = sorted({verdict for _, _, verdict in runs})
        print(f"{case[0]} {case[1]}: wall {statistics.median(walls):.3f} s ({min(walls):.3f}-"
              f"{max(walls):.3f}), CPU {statistics.median(cpus):.3f} s ({min(cpus):.3f}-"
              f"{max(cpus):.3f}), verdict {', '.join(verdicts)}, stdin reads "
              f"{reads[case] if reads[case] is not None else 'n/a (no strace)'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
