"""What the real probe's size costs the auditor: auditor CPU per node, probe by probe.

    python bench/probecost.py [--nodes 50] [--runs 3] [--pin A:F] [--results FILE]

One loopback fleet of bare-metal nodes (bench/nodes.py: one OpenSSH sshd each), one
`fleetcheck audit` per run, the probes interleaved run by run:

- `trivial`: prints the real probe's reply (the one it printed on the first node), nothing else;
- `trivial-padded`: the same script padded with one comment line to the real probe's size, so it
  differs from `trivial` only in the bytes sent on each connection's stdin;
- `trivial-padded-zlib`: padded to the size of the real probe compressed with zlib (level 9),
  what a compressed launch would send;
- `sleep`: `trivial-padded` that sleeps --sleep seconds before it prints: the node's run as
  long as the real probe's, without its work (channels open as long, the same keepalives);
- `sleep-busy`: `sleep` while the real probe runs --busy times at once, over and over, on the
  machine beside the audit (not through it): the node's work competing for the auditor's
  cores and caches, as the real probe's does on a loopback fleet;
- `real`: the shipped probe (the node does its real work; same reply size).

Every node replies the same JSON in all of them, so `trivial-padded` − `trivial` is the cost
of sending the probe, `sleep` − `trivial-padded` that of a longer run, `sleep-busy` − `sleep`
that of the node's work beside the auditor, and `real` − `sleep-busy` what none of these
explain. CPU is user+sys of the auditor's process (os.wait4), not wall time: the machine may be
shared. The default runs all six, interleaved run by run.
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
import zlib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.measure import repo_pythonpath  # noqa: E402
from bench.run import build_fleet, real_probe, trivial_probe  # noqa: E402

#: py-spy's samples per second (bench/profile_diff.py assumes this rate).
SPY_RATE = 250


PROBES = ("trivial", "trivial-padded", "trivial-padded-zlib", "sleep", "sleep-busy", "real")


def sleeping(source: Path, seconds: float, dest: Path) -> Path:
    """`source` that sleeps `seconds` first."""
    dest.write_bytes(f"import time\ntime.sleep({seconds!r})\n".encode() + source.read_bytes())
    return dest


class Busy:
    """The real probe run `count` at a time, over and over, until stopped."""

    def __init__(self, count: int, probe: Path, argv: tuple[str, ...], env: dict[str, str]):
        self.count, self.probe, self.argv, self.env = count, probe, argv, env
        self.procs: list[subprocess.Popen[bytes]] = []
        self.stopped = False
        self.runs = 0

    def __enter__(self) -> Busy:
        self.procs = [self._start() for _ in range(self.count)]
        return self

    def _start(self) -> subprocess.Popen[bytes]:
        with open(self.probe, "rb") as stdin:
            return subprocess.Popen(list(self.argv), stdin=stdin, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL, env=self.env)

    def poll(self) -> None:
        for index, proc in enumerate(self.procs):
            if proc.poll() is not None and not self.stopped:
                self.runs += 1
                self.procs[index] = self._start()

    def __exit__(self, *exc: object) -> None:
        self.stopped = True
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
            proc.wait()


def padded(source: Path, size: int, dest: Path) -> Path:
    """`source` with one comment line appended so that the file is `size` bytes."""
    text = source.read_bytes()
    pad = size - len(text) - 3
    if pad < 0:
        raise SystemExit(f"bench: {source} is already larger than {size} bytes")
    dest.write_bytes(text + b"\n#" + b"x" * pad + b"\n")
    return dest


def audit_cpu(argv: list[str], env: dict[str, str], busy: Busy | None = None
              ) -> dict[str, float]:
    """Run one audit (with `busy` beside it); its user and system CPU (os.wait4), wall time."""
    load = os.getloadavg()[0]
    started = time.perf_counter()
    with tempfile.TemporaryFile() as errors:
        proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=errors)
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid == proc.pid:
                break
            if busy is not None:
                busy.poll()
            time.sleep(0.05)
        errors.seek(0)
        stderr = errors.read()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode not in (0, 1, 2):
        raise SystemExit(f"bench: audit exited {proc.returncode}: {stderr.decode()[-500:]}")
    return {"user_s": usage.ru_utime, "sys_s": usage.ru_stime,
            "cpu_s": usage.ru_utime + usage.ru_stime,
            "wall_s": time.perf_counter() - started, "load": load}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=50)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--probes", default=",".join(PROBES),
                        help="which of them (comma list)")
    parser.add_argument("--sleep", type=float, default=20.0,
                        help="seconds the `sleep` probes sleep (default 20)")
    parser.add_argument("--busy", type=int, default=2,
                        help="real probes run at once beside `sleep-busy` (default 2)")
    parser.add_argument("--results", help="write the runs and medians here (JSON)")
    parser.add_argument("--workdir")
    parser.add_argument("--profile", metavar="DIR",
                        help="run every audit under cProfile (CPU time, bench/"
                        "fleetcheck_with_probe.py) and write DIR/PROBE-RUN.pstats; the CPU "
                        "figures then include the profiler's overhead")
    parser.add_argument("--spy", metavar="DIR",
                        help="run every audit under `py-spy record` (sampling, outside the "
                        "process: no overhead in it) and write DIR/PROBE-RUN.txt, collapsed "
                        "stacks (bench/profile_diff.py reads them)")
    args = parser.parse_args()
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="fc-probecost-"))
    workdir.mkdir(parents=True, exist_ok=True)
    fleet = build_fleet(args.nodes, workdir, "nodes")
    try:
        real = real_probe(workdir)
        trivial = trivial_probe(fleet, real, workdir)
        real_size = Path(real.path).stat().st_size
        zlib_size = len(zlib.compress(Path(real.path).read_bytes(), 9))
        probes = {
            "trivial": trivial.path,
            "trivial-padded": str(padded(Path(trivial.path), real_size,
                                         workdir / "trivial_padded.py")),
            "trivial-padded-zlib": str(padded(Path(trivial.path), zlib_size,
                                              workdir / "trivial_padded_zlib.py")),
            "sleep": str(padded(sleeping(Path(trivial.path), args.sleep,
                                         workdir / "trivial_sleep.py"),
                                real_size, workdir / "trivial_sleep_padded.py")),
            "real": "-",
        }
        probes["sleep-busy"] = probes["sleep"]
        chosen = args.probes.split(",")
        unknown = set(chosen) - set(probes)
        if unknown:
            parser.error(f"unknown probes: {', '.join(sorted(unknown))}")
        probes = {name: probes[name] for name in chosen}
        env = {**os.environ, "PYTHONPATH": repo_pythonpath(REPO)}
        runs: dict[str, list[dict[str, float]]] = {name: [] for name in probes}
        for run in range(args.runs):
            for name, path in probes.items():
                out = workdir / f"audit-{name}.json"
                out.unlink(missing_ok=True)
                argv = [sys.executable, str(REPO / "bench" / "fleetcheck_with_probe.py"), path,
                        "audit", fleet.inventory_path, "--format", "json", "-o", str(out),
                        "--no-progress"]
                run_env = env
                if args.profile:
                    Path(args.profile).mkdir(parents=True, exist_ok=True)
                    run_env = {**env, "BENCH_PROFILE": str(
                        Path(args.profile).resolve() / f"{name}-{run + 1}.pstats")}
                if args.spy:
                    Path(args.spy).mkdir(parents=True, exist_ok=True)
                    spy = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or \
                        shutil.which("py-spy")
                    if not spy:
                        parser.error("--spy needs py-spy (pip install py-spy)")
                    argv = [spy, "record", "--rate", str(SPY_RATE), "--format", "raw",
                            "--output", str(Path(args.spy) / f"{name}-{run + 1}.txt"),
                            "--", *argv]
                if name == "sleep-busy":
                    node_env = dict(fleet.node_envs[fleet.hosts[0].name])
                    python = shutil.which("python3", path=node_env["PATH"]) or "python3"
                    with Busy(args.busy, Path(real.path), (python, *real.argv[1:]),
                              node_env) as busy:
                        row = audit_cpu(argv, run_env, busy)
                    row["busy_runs"] = busy.runs
                else:
                    row = audit_cpu(argv, run_env)
                report = json.loads(out.read_text())
                row["ok"] = sum(1 for node in report.get("nodes", ())
                                if node.get("status") not in ("error", "unreachable"))
                runs[name].append(row)
                print(f"run {run + 1} {name:20} cpu {row['cpu_s']:6.3f} s (user "
                      f"{row['user_s']:.3f}, sys {row['sys_s']:.3f}; "
                      f"{row['cpu_s'] * 1000 / args.nodes:5.2f} ms/node) wall "
                      f"{row['wall_s']:6.2f} s load {row['load']:5.1f} "
                      f"ok {row['ok']}/{args.nodes}", flush=True)
        medians = {name: {key: statistics.median(r[key] for r in rows) * 1000 / args.nodes
                          for key in ("cpu_s", "user_s", "sys_s")}
                   for name, rows in runs.items()}
        base = medians[chosen[0]]["cpu_s"]
        print(f"\nauditor CPU ms per node, median of {args.runs} ({args.nodes} nodes; "
              f"real probe {real_size} bytes, zlib {zlib_size}):")
        for name, value in medians.items():
            print(f"  {name:20} {value['cpu_s']:6.2f} (user {value['user_s']:5.2f}, sys "
                  f"{value['sys_s']:5.2f}; {value['cpu_s'] - base:+5.2f} vs {chosen[0]})")
        if args.results:
            Path(args.results).write_text(json.dumps({
                "nodes": args.nodes, "runs": runs, "ms_per_node": medians,
                "real_size": real_size, "zlib_size": zlib_size,
                "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                "python": sys.version.split()[0], "uptime": os.getloadavg(),
            }, indent=1) + "\n")
    finally:
        fleet.close()
        if not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
