"""Benchmark fleetcheck against the floor, ansible-core and a plain ssh loop on a loopback fleet.

    python bench/run.py --quick          # 100 containers, one run each, < 2 minutes
    python bench/run.py                  # 10, 100 and 500 containers, median of 3 runs,
                                         # writes bench/results.md and bench/results.json
    python bench/run.py --kinds          # QEMU VMs and Docker containers against their own
                                         # floor (bench/kinds.py; prints markdown rows)
    python bench/run.py --shape nodes --contenders floor,fleetcheck,pdsh,clush
                                         # bare-metal nodes, one sshd each (bench/nodes.py):
                                         # fleetcheck against pdsh and ClusterShell's clush
    python bench/run.py --shape nodes --pin 0-1:2-15 ...
                                         # the auditor on cores 0-1, the fleet (sshd, probes,
                                         # the floor) on 2-15

Set-up (Debian 12, as root): `bench/setup.sh` installs OpenSSH's server and client, pdsh and
clustershell from Debian, and ansible-core into the venv.

Each fleet is built with the tests' fleet kit (an OpenSSH sshd per host on 127.0.0.1 and the
`pct` stand-in, 20 containers per host). Every contender runs once with fleetcheck's real probe
and once with a trivial probe that prints a valid probe reply (what the real probe printed in
the first container) and does nothing else, which isolates the orchestration.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench import measure  # noqa: E402
from bench.contenders import CONTENDERS, Context, Outcome, Probe  # noqa: E402
from bench.fleet import BenchFleet  # noqa: E402
from bench.measure import Pin, become_subreaper, fleet_cores, set_pin  # noqa: E402
from bench.report import Row, quick_line, write_results  # noqa: E402

CONTAINERS_PER_HOST = 20
#: Node timeout given to every probe (the same deadline argument for every contender).
NODE_TIMEOUT = 120.0


def build_fleet(containers: int, workdir: Path, shape: str = "containers") -> BenchFleet:
    """`containers`: Proxmox hosts of 20 containers (the tests' kit); `nodes`: bare-metal
    nodes, one sshd each (bench/nodes.py). Servers start on the fleet's cores (--pin)."""
    if shape == "nodes":
        from bench.nodes import build_node_fleet

        return build_node_fleet(containers, workdir, timeout=NODE_TIMEOUT)
    from bench.kit import build_bench_fleet

    hosts = max(1, -(-containers // CONTAINERS_PER_HOST))
    per_host = min(containers, CONTAINERS_PER_HOST)
    with fleet_cores():
        return build_bench_fleet(hosts, per_host, workdir, timeout=NODE_TIMEOUT)


def real_probe(workdir: Path) -> Probe:
    from fleetcheck.probe import probe_argv, probe_source
    from fleetcheck.transport.interface import NodeBudget

    path = workdir / "probe.py"
    path.write_text(probe_source())
    argv = probe_argv("python3", deep=False, deadline=NodeBudget(NODE_TIMEOUT).probe_deadline)
    return Probe("real", str(path), tuple(argv))


def trivial_probe(fleet: BenchFleet, real: Probe, workdir: Path) -> Probe:
    """A probe that only prints what the real probe printed in the first container."""
    host = fleet.hosts[0]
    if fleet.bare:
        env = dict(fleet.node_envs[host.name])
        argv = [shutil.which("python3", path=env["PATH"]) or "python3", *real.argv[1:]]
        where = host.name
    else:
        env = fleet.pct_env(host)
        argv = [*fleet.pct_prefix(host), "exec", str(host.vmids[0]), "--keep-env", "0", "--",
                *real.argv]
        where = f"{host.name}/{host.vmids[0]}"
    with open(real.path, "rb") as stdin:
        done = subprocess.run(argv, stdin=stdin, capture_output=True, env=env,
                              timeout=NODE_TIMEOUT, check=False)
    reply = done.stdout.decode()
    try:
        json.loads(reply)
    except ValueError:
        raise SystemExit(f"bench: the real probe printed no JSON in {where}"
                         f" (exit {done.returncode}): "
                         f"{done.stderr.decode(errors='replace')[-500:]}") from None
    path = workdir / "trivial_probe.py"
    path.write_text("import sys\n"
                    "# The real probe's reply, printed as is: no inspection at all.\n"
                    f"sys.stdout.write({reply!r})\n"
                    f"sys.exit({done.returncode})\n")
    return Probe("trivial", str(path), real.argv)


#: --quick measures only what its line needs: the floor and fleetcheck with the real probe,
#: fleetcheck and ansible with the trivial one.
QUICK_SKIP = {"real": ("ansible",), "trivial": ("floor",)}

#: Seconds the latency probe sleeps: a GPU node's probe spends 4-6 s mostly waiting on
#: `import torch` (docs/probe-performance.md); sleeping costs the loopback machine no CPU.
LATENCY_PROBE_SLEEP = 2.0


def latency_probe(trivial: Probe, workdir: Path, sleep: float = LATENCY_PROBE_SLEEP) -> Probe:
    """The trivial probe after a sleep: what concurrency buys when nodes are slow, not busy."""
    path = workdir / "latency_probe.py"
    path.write_text(f"import time\ntime.sleep({sleep})\n"
                    + Path(trivial.path).read_text())
    return Probe("latency", str(path), trivial.argv)


def measure_size(containers: int, contenders: list[str], probes: list[str], runs: int,
                 workdir: Path, timeout: float, log, loop_runs: int,
                 quick: bool = False,
                 latency_sleep: float = LATENCY_PROBE_SLEEP,
                 shape: str = "containers",
                 real_contenders: tuple[str, ...] = (),
                 checkpoint: Callable[[list[Row]], None] | None = None) -> list[Row]:
    size_dir = workdir / f"fleet-{containers}"
    size_dir.mkdir(parents=True, exist_ok=True)
    log(f"building a fleet of {containers} {shape}")
    fleet = build_fleet(containers, size_dir, shape)
    rows: list[Row] = []
    try:
        real = real_probe(size_dir)
        trivial = trivial_probe(fleet, real, size_dir)
        kinds = {"real": real, "trivial": trivial,
                 "latency": latency_probe(trivial, size_dir, latency_sleep)}
        for kind in probes:
            probe = kinds[kind]
            names = [name for name in contenders if name not in QUICK_SKIP.get(kind, ())] \
                if quick else contenders
            if kind == "real" and real_contenders:
                names = [name for name in names if name in real_contenders]
            outcomes: dict[str, list[Outcome]] = {name: [] for name in names}
            for run in range(runs):
                # Interleaved, so that drift over time hits every contender alike.
                for name in names:
                    if name == "ssh-loop" and run >= loop_runs:
                        continue
                    outcome = CONTENDERS[name](Context(fleet, probe, size_dir, timeout))
                    outcomes[name].append(outcome)
                    m = outcome.measurement
                    log(f"  {containers:>4} {kind:<7} {name:<16} run {run + 1}/{runs}: "
                        f"{m.wall_s:7.2f} s wall, {m.cpu_s:6.2f} s cpu, "
                        f"load {m.load_before:4.1f}, "
                        f"{m.peak_rss_mb:6.1f} MB, ok {outcome.ok}/{outcome.total}"
                        + (f" ({outcome.note})" if outcome.note else "")
                        + ("" if outcome.ok == outcome.total
                           else f"\n{m.stderr.decode(errors='replace')[-800:]}"))
            for name in names:
                rows.append(Row.from_outcomes(containers, kind, name, outcomes[name],
                                              shape=shape, cores=measure.PIN.describe()))
            if checkpoint is not None:
                checkpoint(rows)  # each probe's rows kept as soon as they are measured
    finally:
        fleet.close()
    return rows


def machine_description() -> dict[str, object]:
    def version(argv: list[str]) -> str:
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
        except OSError:
            return "absent"
        return (done.stdout or done.stderr).strip().splitlines()[0] if (
            done.stdout or done.stderr) else "?"

    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "cores": os.cpu_count(),
        "core_split": measure.PIN.describe(),
        "pdsh": version(["pdsh", "-V"]),
        "clush": version(["clush", "--version"]),
        "sshd": version([os.environ.get("BENCH_SSHD") or "/usr/sbin/sshd", "-V"]),
        "cpu": cpu,
        "memory_gb": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "python": platform.python_version(),
        "openssh": version(["ssh", "-V"]),
        "ansible": version([str(Path(sys.executable).with_name("ansible")), "--version"]),
    }


def save_results(path: Path, rows: list[Row], runs: int) -> None:
    machine = machine_description()
    write_results(path, rows, machine, runs)
    path.with_suffix(".json").write_text(
        json.dumps({"machine": machine, "runs": runs, "rows": [asdict(row) for row in rows]},
                   indent=1) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="100 containers, one run each: floor and fleetcheck with the real "
                        "probe, fleetcheck and ansible with the trivial one")
    parser.add_argument("--sizes", default="10,100,500", help="container counts (comma list)")
    parser.add_argument("--runs", type=int, default=3, help="runs per measurement (median)")
    parser.add_argument("--contenders", default="floor,fleetcheck,ansible,ssh-loop",
                        help=f"subset of {','.join(CONTENDERS)}")
    parser.add_argument("--real-contenders", default="", metavar="NAMES",
                        help="with the real probe, only these of --contenders (its runs are "
                        "the long ones)")
    parser.add_argument("--probes", default="real,trivial",
                        help="real, trivial and/or latency (the trivial probe after a 2 s sleep)")
    parser.add_argument("--latency-sleep", type=float, default=LATENCY_PROBE_SLEEP,
                        metavar="SECONDS", help="how long the latency probe sleeps (default 2)")
    parser.add_argument("--timeout", type=float, default=900.0,
                        help="seconds before one contender's run is killed")
    parser.add_argument("--results", default=str(REPO / "bench" / "results.md"),
                        help="where to write the table (not written with --quick)")
    parser.add_argument("--loop-runs-large", type=int, default=1, metavar="N",
                        help="runs of the sequential ssh loop at 500+ containers (default 1: "
                        "it takes minutes per run)")
    parser.add_argument("--workdir", help="keep the fleets and outputs here (default: a "
                        "temporary directory, removed at the end)")
    parser.add_argument("--shape", choices=("containers", "nodes"), default="containers",
                        help="containers: Proxmox hosts of 20 containers; nodes: bare-metal "
                        "nodes, one sshd each, the fleet pdsh and clush need (bench/nodes.py)")
    parser.add_argument("--pin", metavar="AUDITOR:FLEET", default="",
                        help="run the auditor on these cores and the fleet (its sshd and all "
                        "they start, the floor's probes) on those, e.g. 0-1:2-15")
    parser.add_argument("--kinds", action="store_true",
                        help="measure VMs (qm guest exec) and Docker containers against their "
                        "own floor instead (bench/kinds.py, median of --runs)")
    args = parser.parse_args(argv)
    if args.kinds:
        from bench.kinds import main as kinds_main

        return kinds_main(["--runs", str(args.runs)])
    if args.quick:
        sizes, runs = [100], 1
        contenders = ["floor", "fleetcheck", "ansible"]
    else:
        sizes = [int(size) for size in args.sizes.split(",")]
        runs = args.runs
        contenders = args.contenders.split(",")
    probes = args.probes.split(",")
    unknown = [name for name in contenders if name not in CONTENDERS]
    if unknown:
        parser.error(f"unknown contenders: {', '.join(unknown)}")
    try:
        set_pin(Pin.parse(args.pin))
    except ValueError as exc:
        parser.error(str(exc))
    become_subreaper()
    started = time.monotonic()

    def log(message: str) -> None:
        print(f"[{time.monotonic() - started:7.1f}s] {message}", file=sys.stderr, flush=True)

    workdir = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="fc-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    rows: list[Row] = []
    try:
        for size in sizes:
            loop_runs = runs if size < 500 else min(runs, args.loop_runs_large)
            done = list(rows)

            def checkpoint(size_rows: list[Row], done: list[Row] = done) -> None:
                if not args.quick:
                    save_results(Path(args.results), done + size_rows, runs)

            rows += measure_size(size, contenders, probes, runs, workdir, args.timeout, log,
                                 loop_runs, quick=args.quick, latency_sleep=args.latency_sleep,
                                 shape=args.shape, real_contenders=tuple(
                                     name for name in args.real_contenders.split(",") if name),
                                 checkpoint=checkpoint)
            if not args.quick:
                # After every size, so that a long run interrupted later still leaves figures.
                save_results(Path(args.results), rows, runs)
                log(f"wrote {args.results}")
    finally:
        if not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    line = quick_line(rows, 100 if 100 in sizes else sizes[-1])
    print(line)
    return 0 if all(row.ok == row.total for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
