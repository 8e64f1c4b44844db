"""Gate latency: `fleetcheck gate` on 100 nodes against the slowest single probe, in one run.

    python bench/gate_latency.py                # 100 nodes, latency probe sleeping 2 s, 3 runs

The fleet is the loopback kit's (an OpenSSH sshd per host, the `pct` stand-in). Every node's
probe is the latency probe: a 2 s sleep (a GPU node waiting on `import torch` costs no CPU),
then the real probe's reply. The gate is the real CLI (`fleetcheck gate INVENTORY`, through
bench/fleetcheck_with_probe.py, which hands it the probe and times each node's command with
bench/timed.py). Measured per run: the gate's wall time from the outside (Python's start
included, as a scheduler's prolog would see it), the slowest node's command, and the gate's
own cost = wall - slowest probe.

A gate costs one probe only when every node can run at once: at most `ssh.max_sessions`
nodes run on one host's connection (OpenSSH's MaxSessions is 10), and at most `concurrency`
in the fleet. So the default shape is 20 hosts of 5 containers with `concurrency: 100`; the
`--per-host 20` shape (three waves of 8 per host) is measured too, to show what waves cost.

    python bench/gate_latency.py --servers inprocess --shapes 5 --runs 9 --baseline ../before
                                                # this checkout against another, interleaved

With `--baseline DIR` (another checkout of fleetcheck, e.g. `git worktree add ../before
HEAD~1`), every run times both codes in turn against the same fleet, so that a shared
machine's load falls on both alike; the table has one row per code.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.measure import (  # noqa: E402
    Pin,
    become_subreaper,
    fleet_cores,
    repo_pythonpath,
    run_measured,
    set_pin,
)
from bench.run import NODE_TIMEOUT, latency_probe, real_probe, trivial_probe  # noqa: E402


def floor_spec(inventory: Path, probe_path: str, workdir: Path) -> Path:
    """bench/gate_floor.py's spec for the in-process fleet of `inventory`."""
    import yaml

    data = yaml.safe_load(inventory.read_text())
    ssh = data["defaults"]["ssh"]
    spec = {"hosts": [[name, host["ssh"]["port"], [c["vmid"] for c in host["containers"]]]
                      for name, host in data["hosts"].items()],
            "user": ssh["user"], "identity_file": ssh["identity_file"],
            "known_hosts": ssh["known_hosts"], "stdin": probe_path,
            "timeout": data["defaults"]["timeout"]}
    path = workdir / "floor.json"
    path.write_text(json.dumps(spec))
    return path


def one_shape(nodes: int, per_host: int, runs: int, sleep: float, workdir: Path,
              concurrency: int, where: str,
              codes: tuple[tuple[str, Path], ...] = (("this", REPO),)) -> list[dict[str, Any]]:
    from bench import scale
    from bench.kit import build_bench_fleet

    if where == "sshd":
        with fleet_cores():
            fleet = build_bench_fleet(-(-nodes // per_host), per_host, workdir,
                                      timeout=NODE_TIMEOUT, concurrency=concurrency)
        inventory, server_pids, close = fleet.inventory_path, fleet.server_pids, fleet.close
        probe_path = latency_probe(trivial_probe(fleet, real_probe(workdir), workdir), workdir,
                                   sleep).path
    else:
        # asyncssh's in-process server (bench/scale.py) sleeps, then answers: no node CPU.
        probe_path = str(scale.prepare(workdir))
        (workdir / "sleep").write_text(str(sleep))
        # One listener per host, as a fleet has one sshd per host (connection attempts are
        # bounded per server: one port for every host would ramp 8 at a time).
        server, ports = scale.start_server(workdir, listeners=-(-nodes // per_host))  # fleet cores
        inventory = str(scale.write_inventory(workdir, nodes, ports, per_host=per_host,
                                              concurrency=concurrency))

        def server_pids() -> set[int]:
            return {server.pid}

        def close() -> None:
            server.terminate()
            server.wait(10)
    samples: list[dict[str, Any]] = []
    try:
        for run, (code, checkout) in ((run, code) for run in range(runs) for code in codes):
            times_path = workdir / f"times-{run}-{code}.json"
            argv = [sys.executable, str(checkout / "bench" / "fleetcheck_with_probe.py"),
                    probe_path, "gate", inventory, "--playbook", "quick"]
            if code == "floor":
                argv = [sys.executable, str(REPO / "bench" / "gate_floor.py"),
                        str(floor_spec(Path(inventory), probe_path, workdir))]
            env = dict(os.environ, PYTHONPATH=repo_pythonpath(checkout),
                       BENCH_TIMES=str(times_path))
            launched = time.monotonic()
            measured = run_measured(argv, env=env, timeout=600, known_children=server_pids)
            gone = time.monotonic()
            times = json.loads(times_path.read_text())
            durations = [end - start for _, start, end in times["nodes"]]
            sample = {
                "code": code, "wall_s": measured.wall_s, "cpu_s": measured.cpu_s,
                "returncode": measured.returncode, "load": measured.load_before,
                "gate_said": measured.stderr.decode(errors="replace").strip().splitlines()[:3],
                "starts_s": sorted(round(s - times["started"], 3) for _, s, _ in times["nodes"]),
                "nodes": len(durations), "slowest_probe_s": max(durations),
                "first_start_s": min(s for _, s, _ in times["nodes"]) - times["started"],
                # When the audit first asked for a session (its start before that: imports,
                # inventory, ssh_config), and the wait from there to the first probe (the
                # connection: TCP, key exchange, login, the channel); a baseline too old to
                # say has neither.
                **({"first_asked_s": min(t for _, t in times["asked"]) - times["started"],
                    "connect_s": min(s for _, s, _ in times["nodes"])
                    - min(t for _, t in times["asked"])} if times.get("asked") else {}),
                "last_end_s": max(e for _, _, e in times["nodes"]) - times["started"],
                # From the last node's exit status to the CLI's return: verdicts, the gate's
                # lines, the connections' close.
                "after_last_s": times["ended"] - max(e for _, _, e in times["nodes"]),
                # Python's start up to the CLI's first line (the bench's small launcher
                # included), and from the CLI's return to the process's end as this bench saw
                # it (the interpreter's shutdown; its wait loop polls every 5 ms).
                "start_s": times["started"] - launched,
                "exit_s": gone - times["ended"],
            }
            sample["gate_cost_s"] = sample["wall_s"] - sample["slowest_probe_s"]
            samples.append(sample)
            print(f"{where}: {nodes} nodes, {per_host}/host, {code}, run {run + 1}/{runs}: gate "
                  f"{sample['wall_s']:.2f} s wall (exit {measured.returncode}), slowest probe "
                  f"{sample['slowest_probe_s']:.2f} s, cost {sample['gate_cost_s']:.2f} s, "
                  f"first probe at {sample['first_start_s']:.2f} s, load {sample['load']:.1f}",
                  file=sys.stderr, flush=True)
    finally:
        close()
    from bench import measure

    results: list[dict[str, Any]] = []
    for code, _ in codes:
        mine = [s for s in samples if s["code"] == code]
        median = {key: statistics.median(float(s[key]) for s in mine)
                  for key in ("wall_s", "slowest_probe_s", "gate_cost_s", "first_start_s",
                              "cpu_s", "start_s", "exit_s", "after_last_s", "first_asked_s",
                              "connect_s")
                  if all(key in s for s in mine)}
        spread = {key: [min(float(s[key]) for s in mine), max(float(s[key]) for s in mine)]
                  for key in ("gate_cost_s", "first_start_s")}
        results.append({"where": where, "code": code, "cores": measure.PIN.describe(),
                        "nodes": nodes, "per_host": per_host, "concurrency": concurrency,
                        "runs": runs, "sleep_s": sleep, "median": median, "spread": spread,
                        "load_max": max(s["load"] for s in mine), "samples": mine})
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--shapes", default="5,20",
                        help="containers per host, one fleet each (comma list)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--servers", default="inprocess,sshd",
                        help="inprocess (asyncssh's server: the auditor alone) and/or sshd "
                        "(the loopback kit: node CPU included)")
    parser.add_argument("--sleep", type=float, default=2.0, help="seconds the probe sleeps")
    parser.add_argument("--out", default=str(REPO / "bench" / "gate_latency.json"))
    parser.add_argument("--pin", metavar="AUDITOR:FLEET", default="",
                        help="the gate on these cores, the nodes' servers on those (0-1:2-15)")
    parser.add_argument("--baseline", metavar="DIR",
                        help="another checkout of fleetcheck, run in turn with this one")
    parser.add_argument("--floor", action="store_true",
                        help="run bench/gate_floor.py in turn too (the least an asyncssh gate "
                        "does; --servers inprocess)")
    args = parser.parse_args(argv)
    codes: tuple[tuple[str, Path], ...] = (("this", REPO),)
    if args.floor:
        if args.servers != "inprocess":
            parser.error("--floor needs --servers inprocess")
        codes = (("floor", REPO), *codes)
    if args.baseline:
        codes = (("baseline", Path(args.baseline).resolve()), *codes)
    try:
        set_pin(Pin.parse(args.pin))
    except ValueError as exc:
        parser.error(str(exc))
    become_subreaper()
    # Bytecode first, as an installed fleetcheck has it (pip compiles at install): where
    # PYTHONDONTWRITEBYTECODE is set (the device's image sets it), every run of a checkout
    # would compile its modules again (0.09 s more per gate on the H100: bench/results.md).
    import compileall

    for _, checkout in codes:
        for package in ("fleetcheck", "bench"):
            compileall.compile_dir(str(checkout / package), quiet=1)
    results = []
    for where in args.servers.split(","):
        for per_host in (int(shape) for shape in args.shapes.split(",")):
            with tempfile.TemporaryDirectory(prefix="fc-gate-") as workdir:
                results += one_shape(args.nodes, per_host, args.runs, args.sleep,
                                     Path(workdir), max(64, args.nodes), where, codes)
    Path(args.out).write_text(json.dumps(results, indent=1) + "\n")
    print("| code | nodes' server | nodes | containers per host | concurrency | gate wall s "
          "| slowest probe s | gate cost s (wall - slowest; min-max) | first probe starts at s "
          "(min-max) | Python start s | first session asked at s | connection s "
          "| last probe's end to the CLI's return s | exit s | gate CPU s | runs | load | cores |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for result in results:
        m, spread = result["median"], result["spread"]
        cost, first = spread["gate_cost_s"], spread["first_start_s"]
        print(f"| {result['code']} | {result['where']} | {result['nodes']} | {result['per_host']} "
              f"| {result['concurrency']} "
              f"| {m['wall_s']:.2f} | {m['slowest_probe_s']:.2f} "
              f"| {m['gate_cost_s']:.2f} ({cost[0]:.2f}-{cost[1]:.2f}) "
              f"| {m['first_start_s']:.2f} ({first[0]:.2f}-{first[1]:.2f}) "
              f"| {m['start_s']:.3f} "
              + "".join(f"| {m[key]:.3f} " if key in m else "| " for key in
                        ("first_asked_s", "connect_s"))
              + f"| {m['after_last_s']:.3f} | {m['exit_s']:.3f} "
              f"| {m['cpu_s']:.2f} | {result['runs']} "
              f"| {result['load_max']:.1f} | {result['cores']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
