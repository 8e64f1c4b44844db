"""Benchmark the VM and Docker/Podman paths against their own floor.

    python bench/kinds.py                 # 2 hosts x 10 VMs and 2 hosts x 10 docker containers
    python bench/kinds.py --per-host 20 --hosts 5 --runs 3

For each kind the same loopback fleet (tests/fleet: an sshd per host, the `qm` and `docker`
stand-ins) is probed twice with fleetcheck's real probe:

- floor: the very command fleetcheck sends, run through the stand-in directly (no SSH, no
  fleetcheck), as many at a time as fleetcheck runs: `qm guest exec VMID --pass-stdin 1
  --timeout N -- timeout -k 2 G python3 - ARGS < probe.py` or `docker exec -i NAME python3 -
  ARGS < probe.py`;
- fleetcheck: `fleetcheck audit` of an inventory listing only those nodes.

Prints one markdown row per (kind, contender) and the ratio fleetcheck/floor (target <= 1.2).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.measure import (  # noqa: E402
    Measurement,
    become_subreaper,
    repo_pythonpath,
    run_measured,
)

NODE_TIMEOUT = 120.0
CHANNELS_PER_HOST = 8
CONCURRENCY = 64


def build(root: Path, hosts: int, per_host: int) -> tuple[object, Path, Path]:
    """A fleet with `per_host` VMs and `per_host` docker containers per host; two inventories."""
    import yaml

    from tests.fleet import Fleet

    fleet = Fleet(root)
    for index in range(hosts):
        name = f"pve{index + 1}"
        fleet.add_host(name, containers="listed", vms="listed")
        for number in range(per_host):
            fleet.add_vm(name, 301 + number)
            fleet.add_oci(name, "docker", f"c{number}", mode="listed")
    data = fleet.inventory_data(timeout=NODE_TIMEOUT)
    vms, oci = json.loads(json.dumps(data)), json.loads(json.dumps(data))
    for entry in vms["hosts"].values():
        entry.pop("oci", None)
        entry.pop("containers", None)
    for entry in oci["hosts"].values():
        entry.pop("vms", None)
        entry.pop("containers", None)
    paths = root / "vms.yaml", root / "oci.yaml"
    for path, content in zip(paths, (vms, oci), strict=True):
        path.write_text(yaml.safe_dump(content, sort_keys=False))
    return fleet, *paths


def floor_commands(fleet: object, kind: str) -> list[list[str]]:
    from fleetcheck.probe import probe_argv
    from fleetcheck.transport.interface import NodeBudget
    from fleetcheck.transport.qemu import guest_command, qm_exec_argv

    budget = NodeBudget(NODE_TIMEOUT)
    argv = probe_argv("python3", deep=False, deadline=budget.probe_deadline)
    commands = []
    for host in fleet.hosts.values():  # type: ignore[attr-defined]
        bindir = host.dir / "bin"
        if kind == "qemu":
            for vmid in host.vm_ids:
                qm = qm_exec_argv(vmid, guest_command(argv, budget), budget.guest_wait)
                commands.append([str(bindir / "qm"), *qm[1:]])
        else:
            for name in host.oci[None][2]:
                commands.append([str(bindir / "docker"), "exec", "-i", name, *argv])
    return commands


def measure(fleet: object, kind: str, inventory: Path, workdir: Path, runs: int
            ) -> dict[str, list[tuple[Measurement, int, int]]]:
    probe = workdir / "probe.py"
    from fleetcheck.probe import probe_source

    probe.write_text(probe_source())
    hosts = len(fleet.hosts)  # type: ignore[attr-defined]
    commands = floor_commands(fleet, kind)
    first = next(iter(fleet.hosts.values()))  # type: ignore[attr-defined]
    env = {"PATH": f"{first.dir / 'bin'}:/usr/local/bin:/usr/bin:/bin",
           "FLEETCHECK_FLEET_MARK": fleet.mark}  # type: ignore[attr-defined]
    spec = workdir / f"floor-{kind}.json"
    spec.write_text(json.dumps({"jobs": min(CONCURRENCY, CHANNELS_PER_HOST * hosts),
                                "stdin": str(probe), "env": env, "commands": commands}))
    servers = lambda: {h.process.pid for h in fleet.hosts.values()  # type: ignore[attr-defined]  # noqa: E731
                       if h.process}
    results: dict[str, list[tuple[Measurement, int, int]]] = {"floor": [], "fleetcheck": []}
    for _ in range(runs):
        floor = run_measured([sys.executable, str(REPO / "bench" / "floor.py"), str(spec)],
                             timeout=900, known_children=servers)
        ok = int(floor.stdout.split(b"ok=")[1].split()[0]) if b"ok=" in floor.stdout else 0
        results["floor"].append((floor, ok, len(commands)))
        out = workdir / f"fleetcheck-{kind}.json"
        out.unlink(missing_ok=True)
        environ = dict(os.environ, PYTHONPATH=repo_pythonpath(REPO))
        audit = run_measured([sys.executable, "-m", "fleetcheck", "audit", str(inventory),
                              "--format", "json", "-o", str(out), "--no-progress"],
                             env=environ, timeout=900, known_children=servers)
        nodes = json.loads(out.read_text())["nodes"] if out.exists() else []
        good = sum(1 for node in nodes if node["status"] not in ("error", "unreachable"))
        results["fleetcheck"].append((audit, good, len(commands)))
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=2)
    parser.add_argument("--per-host", type=int, default=10)
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args(argv)
    become_subreaper()
    with tempfile.TemporaryDirectory(prefix="fc-bench-kinds-") as tmp:
        workdir = Path(tmp)
        fleet, vms, oci = build(workdir / "fleet", args.hosts, args.per_host)
        try:
            print("| kind | nodes | contender | wall s (median) | cpu s | ok | vs floor |")
            print("|---|---|---|---|---|---|---|")
            healthy = True
            for kind, inventory in (("qemu", vms), ("docker", oci)):
                results = measure(fleet, kind, inventory, workdir, args.runs)
                floor_wall = statistics.median(m.wall_s for m, _, _ in results["floor"])
                for contender, runs in results.items():
                    wall = statistics.median(m.wall_s for m, _, _ in runs)
                    cpu = statistics.median(m.cpu_s for m, _, _ in runs)
                    ok, total = min(r[1] for r in runs), runs[0][2]
                    healthy = healthy and ok == total
                    print(f"| {kind} | {total} | {contender} | {wall:.2f} | {cpu:.2f} | "
                          f"{ok}/{total} | {wall / floor_wall:.2f}x |")
        finally:
            fleet.close()  # type: ignore[attr-defined]
    return 0 if healthy else 1


if __name__ == "__main__":
    sys.exit(main())
