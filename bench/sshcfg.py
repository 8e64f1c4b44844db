"""ssh_config at fleet scale: what reading one costs fleetcheck, per host and per audit.

    python bench/sshcfg.py                    # resolution micro-bench, then audits of
                                              # 100, 500 and 1,000 one-node hosts
    python bench/sshcfg.py --sizes 100 --runs 1 --no-audit

Two measurements, each at 100, 500 and 1,000 hosts behind an ssh_config of as many
`Host nodeNNNN` blocks (HostName, Port, User, IdentityFile, IdentitiesOnly,
UserKnownHostsFile, StrictHostKeyChecking; a `Host *` block last, as sites have):

- **resolution**: `SshFiles.settings(host)` for every host, as an audit calls it (the file
  parsed once, on the first host), against the same hosts with the values in the inventory
  (`config_file: none`), and against asyncssh's own parse of the whole file per host (what
  fleetcheck did before: `SSHClientConfig.load` for each host). Median of `--runs`.
- **audit**: the real CLI auditing the N hosts (one node each, `probe_host`) on asyncssh's
  in-process server with one listener per host (bench/scale.py's server, in its own process),
  once with the inventory naming port, user, key and known_hosts and once through the
  ssh_config alone (`address: nodeNNNN`, `config_file`, nothing else about SSH). Auditor CPU
  (user+sys, bench/measure.py), median of `--runs`, and the ratio.

Writes bench/sshcfg.json; prints markdown rows (docs/scaling.md has the figures).
"""

from __future__ import annotations

import argparse
import itertools
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

NODE_TIMEOUT = 120.0
#: Hosts whose asyncssh parse is timed for the "before" column (one parse reads the whole file).
PARSE_SAMPLE = 20


def node_name(index: int) -> str:
    return f"node{index:04d}"


def write_ssh_config(path: Path, ports: list[int], *, key: Path, known_hosts: Path) -> Path:
    """One `Host nodeNNNN` block per port, then a catch-all block."""
    blocks = [
        f"Host {node_name(index + 1)}\n    HostName 127.0.0.1\n    Port {port}\n"
        f"    User root\n    IdentityFile {key}\n    IdentitiesOnly yes\n"
        f"    UserKnownHostsFile {known_hosts}\n    StrictHostKeyChecking yes\n"
        for index, port in enumerate(ports)]
    blocks.append("Host *\n    ServerAliveInterval 30\n    ConnectTimeout 30\n")
    path.write_text("\n".join(blocks))
    return path


def write_inventories(workdir: Path, ports: list[int]) -> tuple[Path, Path]:
    """(direct, through ssh_config): the same one-node hosts, the SSH values in the inventory
    or in the ssh_config alone."""
    import yaml

    key, known = workdir / "client_key", workdir / "known_hosts"
    config = write_ssh_config(workdir / f"ssh_config-{len(ports)}", ports, key=key,
                              known_hosts=known)
    direct = {"defaults": {"timeout": NODE_TIMEOUT, "ssh": {
        "user": "root", "identity_file": str(key), "known_hosts": str(known),
        "config_file": "none", "connect_timeout": 30}},
        "hosts": {node_name(i + 1): {"address": "127.0.0.1", "ssh": {"port": port},
                                     "probe_host": True, "containers": []}
                  for i, port in enumerate(ports)}}
    via = {"defaults": {"timeout": NODE_TIMEOUT, "ssh": {"config_file": str(config)}},
           "hosts": {node_name(i + 1): {"address": node_name(i + 1), "probe_host": True,
                                        "containers": []}
                     for i in range(len(ports))}}
    paths = (workdir / f"inventory-direct-{len(ports)}.yaml",
             workdir / f"inventory-sshcfg-{len(ports)}.yaml")
    for path, data in zip(paths, (direct, via), strict=True):
        path.write_text(yaml.safe_dump(data, sort_keys=False))
    return paths


# -- resolution ------------------------------------------------------------------------------

def resolution(workdir: Path, hosts: int, runs: int) -> dict[str, Any]:
    """Seconds to resolve every host, median of `runs`: fleetcheck through the ssh_config,
    fleetcheck with the inventory's values, asyncssh's parse per host."""
    from fleetcheck.inventory import load_inventory
    from fleetcheck.transport.ssh_settings import SshFiles
    from fleetcheck.transport.sshlib import asyncssh

    ports = [20000 + index for index in range(hosts)]
    (workdir / "client_key").touch()
    direct_path, via_path = write_inventories(workdir, ports)
    direct = load_inventory(str(direct_path)).hosts
    via = load_inventory(str(via_path)).hosts
    config = str(workdir / f"ssh_config-{hosts}")

    def timed(specs: Any) -> float:
        files = SshFiles()  # one per audit: the file is parsed on the first host
        started = time.process_time()
        for spec in specs:
            files.settings(spec)
        return time.process_time() - started

    sampled = range(0, hosts, max(1, hosts // PARSE_SAMPLE))

    def per_host_parse() -> float:
        # A sample of the hosts (every file parse costs the same): scaled to all of them.
        started = time.process_time()
        for index in sampled:
            asyncssh.config.SSHClientConfig.load(None, [config], False, False, False, "root",
                                                 (), node_name(index + 1), ())
        return (time.process_time() - started) * hosts / len(sampled)

    samples: dict[str, list[float]] = {"sshcfg": [], "direct": [], "asyncssh_per_host": []}
    for _ in range(runs):
        samples["sshcfg"].append(timed(via))
        samples["direct"].append(timed(direct))
        samples["asyncssh_per_host"].append(per_host_parse())
    row: dict[str, Any] = {"hosts": hosts, "runs": runs}
    for name, values in samples.items():
        row[f"{name}_us_per_host"] = 1e6 * statistics.median(values) / hosts
    row["ratio"] = row["sshcfg_us_per_host"] / row["direct_us_per_host"]
    return row


# -- whole audits ------------------------------------------------------------------------------

def audits(workdir: Path, sizes: list[int], runs: int, timeout: float) -> list[dict[str, Any]]:
    from bench.measure import run_measured
    from bench.scale import prepare, start_server

    prepare(workdir)
    server, ports = start_server(workdir, listeners=max(sizes))
    samples: list[dict[str, Any]] = []
    try:
        inventories = {size: write_inventories(workdir, ports[:size]) for size in sizes}
        env = dict(os.environ, PYTHONPATH=str(REPO))
        for run, size, variant in itertools.product(range(runs), sizes, ("direct", "sshcfg")):
            inventory = inventories[size][variant == "sshcfg"]
            out = workdir / f"report-{variant}-{size}.json"
            out.unlink(missing_ok=True)
            argv = [sys.executable, str(REPO / "bench" / "fleetcheck_with_probe.py"),
                    str(workdir / "trivial_probe.py"), "audit", str(inventory),
                    "--format", "json", "-o", str(out), "--no-progress"]
            measured = run_measured(argv, env=env, timeout=timeout,
                                    known_children=lambda: {server.pid})
            report = json.loads(out.read_text()) if out.exists() else {"nodes": []}
            ok = sum(1 for node in report["nodes"]
                     if node.get("status") not in ("error", "unreachable"))
            if ok != size:
                sys.stderr.write(measured.stderr.decode(errors="replace")[-2000:])
            samples.append({"variant": variant, "hosts": size, "ok": ok,
                            "wall_s": measured.wall_s, "cpu_s": measured.cpu_s,
                            "load": measured.load_before})
            print(f"{variant:<7} {size:>5} hosts run {run + 1}/{runs}: "
                  f"{measured.wall_s:6.2f} s wall, {measured.cpu_s:6.2f} s cpu, ok {ok}/{size}",
                  file=sys.stderr, flush=True)
    finally:
        server.terminate()
        server.wait(10)
    rows = []
    for size in sizes:
        row: dict[str, Any] = {"hosts": size, "runs": runs}
        for variant in ("direct", "sshcfg"):
            mine = [s for s in samples if s["hosts"] == size and s["variant"] == variant]
            row[f"{variant}_ok"] = min(s["ok"] for s in mine)
            row[f"{variant}_cpu_s"] = statistics.median(s["cpu_s"] for s in mine)
            row[f"{variant}_wall_s"] = statistics.median(s["wall_s"] for s in mine)
            row[f"{variant}_cpu_ms_per_node"] = 1000 * row[f"{variant}_cpu_s"] / size
        row["cpu_ratio"] = row["sshcfg_cpu_s"] / row["direct_cpu_s"]
        row["load"] = max(s["load"] for s in samples if s["hosts"] == size)
        rows.append(row)
    return rows


def markdown(resolved: list[dict[str, Any]], audited: list[dict[str, Any]]) -> str:
    lines = ["| Host blocks = hosts | through ssh_config, µs/host | inventory only, µs/host "
             "| ratio | asyncssh parse per host (before), µs/host | runs |",
             "|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| {r['hosts']} | {r['sshcfg_us_per_host']:.0f} | {r['direct_us_per_host']:.0f} "
              f"| {r['ratio']:.2f} | {r['asyncssh_per_host_us_per_host']:.0f} | {r['runs']} |"
              for r in resolved]
    if audited:
        lines += ["", "| hosts (one node each) | inventory: CPU s (ms/node) | ssh_config: CPU s "
                  "(ms/node) | CPU ratio | wall s inventory / ssh_config "
                  "| ok inventory/ssh_config | runs | load |",
                  "|---:|---:|---:|---:|---:|---:|---:|---:|"]
        lines += [f"| {r['hosts']} | {r['direct_cpu_s']:.2f} ({r['direct_cpu_ms_per_node']:.2f}) "
                  f"| {r['sshcfg_cpu_s']:.2f} ({r['sshcfg_cpu_ms_per_node']:.2f}) "
                  f"| {r['cpu_ratio']:.3f} | {r['direct_wall_s']:.2f} / {r['sshcfg_wall_s']:.2f} "
                  f"| {r['direct_ok']}/{r['sshcfg_ok']} | {r['runs']} | {r['load']:.1f} |"
                  for r in audited]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="100,500,1000", help="host counts")
    parser.add_argument("--runs", type=int, default=5, help="runs per size (median)")
    parser.add_argument("--no-audit", action="store_true", help="the resolution bench only")
    parser.add_argument("--timeout", type=float, default=900.0,
                        help="seconds before one audit is killed")
    parser.add_argument("--out", default=str(REPO / "bench" / "sshcfg.json"))
    args = parser.parse_args(argv)
    sizes = sorted(int(size) for size in args.sizes.split(","))
    workdir = Path(tempfile.mkdtemp(prefix="fc-sshcfg-"))
    resolved = [resolution(workdir, size, args.runs) for size in sizes]
    audited = [] if args.no_audit else audits(workdir, sizes, args.runs, args.timeout)
    Path(args.out).write_text(json.dumps({"resolution": resolved, "audit": audited},
                                         indent=1) + "\n")
    print(markdown(resolved, audited))
    ok = all(r["direct_ok"] == r["sshcfg_ok"] == r["hosts"] for r in audited)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
