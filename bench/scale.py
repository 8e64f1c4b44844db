"""Scale bench: one auditor's memory and CPU per node from 500 to 2,000 nodes.

    python bench/scale.py                       # 20 (the fixed cost), 500, 1000, 2000 nodes
    python bench/scale.py --sizes 20,200 --runs 1

The nodes are answered by asyncssh's in-process server, run in its own process (so that the
auditor's CPU and memory are its own): 20 containers per "host", every host a name in the
inventory for the same 127.0.0.1 port, and every `pct exec ... python3 -` channel answered
with a real probe reply (what the shipped probe printed on this machine) once its stdin, the
trivial probe, has been read to the end. No sshd, no `pct`, no Python start per node: what is
left is the auditor's own cost — SSH, parsing, judging, the JSON report.

The auditor is the real CLI (`fleetcheck audit INVENTORY --format json -o FILE`), given the
trivial probe as its payload through `AuditParts` (bench/fleetcheck_with_probe.py), measured
by bench/measure.py: user+sys CPU from wait4 and peak RSS (ru_maxrss, the VmHWM of the
auditor's process). The fixed cost (Python, imports, one connection) is the smallest size;
per node is the growth above it. Writes bench/scale.json and bench/scale.svg.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

CONTAINERS_PER_HOST = 20
NODE_TIMEOUT = 120.0


# -- the server (a separate process) ---------------------------------------------------------

async def serve(workdir: Path) -> None:
    """Listen on 127.0.0.1:0 (as many listeners as the file `listeners` says, one by default),
    answer every channel with the reply; write the ports, then wait."""
    from fleetcheck.transport.sshlib import asyncssh  # without its import-time warnings

    reply = (workdir / "reply.json").read_bytes()
    code = int((workdir / "reply.code").read_text())
    # The gate-latency bench's nodes take this long, costing no CPU (bench/gate_latency.py).
    sleep = float((workdir / "sleep").read_text()) if (workdir / "sleep").exists() else 0.0
    host_key = asyncssh.read_private_key(str(workdir / "host_key"))
    client_pub = (workdir / "client_key.pub").read_text()

    async def process(proc: asyncssh.SSHServerProcess[bytes]) -> None:
        await proc.stdin.read()  # the probe, to its end, as python3 - would
        if sleep:
            await asyncio.sleep(sleep)
        proc.stdout.write(reply)
        proc.exit(code)

    listeners = int((workdir / "listeners").read_text()) if (workdir / "listeners").exists() \
        else 1
    servers = [await asyncssh.listen(
        "127.0.0.1", 0, server_host_keys=[host_key], process_factory=process, encoding=None,
        authorized_client_keys=asyncssh.import_authorized_keys(client_pub))
        for _ in range(listeners)]
    (workdir / "port.tmp").write_text(" ".join(str(server.get_port()) for server in servers))
    os.replace(workdir / "port.tmp", workdir / "port")
    # Until the bench terminates this process (asyncio's Server.wait_closed returns at once
    # on Python 3.11 when the server was never closed).
    await asyncio.Event().wait()


# -- the bench ---------------------------------------------------------------------------------

def prepare(workdir: Path) -> Path:
    """The reply the server gives, and the trivial probe the auditor sends; returns the probe."""
    reply, code = probe_reply(workdir)
    (workdir / "reply.json").write_bytes(reply)
    (workdir / "reply.code").write_text(str(code))
    probe = workdir / "trivial_probe.py"
    probe.write_text(
        "import sys\n# The real probe's reply, printed as is: no inspection at all.\n"
        f"sys.stdout.write({reply.decode()!r})\nsys.exit({code})\n")
    return probe


def probe_reply(workdir: Path) -> tuple[bytes, int]:
    """What the shipped probe prints on this machine, and its exit status."""
    from fleetcheck.probe import probe_argv, probe_source
    from fleetcheck.transport.interface import NodeBudget

    argv = probe_argv(sys.executable, deep=False,
                      deadline=NodeBudget(NODE_TIMEOUT).probe_deadline)
    done = subprocess.run(argv, input=probe_source().encode(), capture_output=True,
                          timeout=NODE_TIMEOUT, check=False)
    json.loads(done.stdout)
    return done.stdout, done.returncode


def write_inventory(workdir: Path, nodes: int, port: int | list[int], *,
                    per_host: int = CONTAINERS_PER_HOST, **defaults: object) -> Path:
    """`nodes` containers, `per_host` to a host; hosts take the ports in turn."""
    import yaml

    ports = [port] if isinstance(port, int) else port
    hosts = {}
    for index in range(-(-nodes // per_host)):
        first = 101
        count = min(per_host, nodes - index * per_host)
        hosts[f"pve{index + 1}"] = {
            "address": "127.0.0.1", "ssh": {"port": ports[index % len(ports)]},
            "containers": [{"vmid": vmid} for vmid in range(first, first + count)]}
    data = {"defaults": {"timeout": NODE_TIMEOUT, "ssh": {
        "user": "root", "identity_file": str(workdir / "client_key"),
        "known_hosts": str(workdir / "known_hosts"), "config_file": "",
        "connect_timeout": 30}, **defaults}, "hosts": hosts}
    path = workdir / f"inventory-{nodes}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def start_server(workdir: Path, listeners: int = 1) -> tuple[subprocess.Popen[bytes], list[int]]:
    """The server process, and its ports: one listener by default (every host of the
    inventory on one port), or one per host as a real fleet has one sshd per host."""
    from fleetcheck.transport.sshlib import asyncssh

    (workdir / "listeners").write_text(str(listeners))
    host_key = asyncssh.generate_private_key("ssh-ed25519")
    host_key.write_private_key(str(workdir / "host_key"))
    client_key = asyncssh.generate_private_key("ssh-ed25519")
    client_key.write_private_key(str(workdir / "client_key"))
    client_key.write_public_key(str(workdir / "client_key.pub"))
    from bench.measure import fleet_cores, repo_pythonpath

    env = dict(os.environ, PYTHONPATH=repo_pythonpath(REPO))
    with fleet_cores():  # the nodes' server on the fleet's cores under --pin
        server = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--serve",
                                   str(workdir)], env=env)
    for _ in range(300):
        if (workdir / "port").exists():
            break
        if server.poll() is not None:
            raise SystemExit("bench/scale.py: the server exited before it listened")
        import time

        time.sleep(0.1)
    else:
        server.kill()
        raise SystemExit("bench/scale.py: the server did not listen within 30 s")
    ports = [int(port) for port in (workdir / "port").read_text().split()]
    key = host_key.export_public_key().decode()
    (workdir / "known_hosts").write_text("".join(f"[127.0.0.1]:{port} {key}" for port in ports))
    return server, ports


def measure(workdir: Path, nodes: int, port: int | list[int], timeout: float,
            server_pid: int, variant: str = "", payload: str = "trivial") -> dict[str, Any]:
    from bench.measure import repo_pythonpath, run_measured

    inventory = write_inventory(workdir, nodes, port)
    out = workdir / f"report-{nodes}.json"
    out.unlink(missing_ok=True)
    argv = [sys.executable, str(REPO / "bench" / "fleetcheck_with_probe.py"),
            str(workdir / "trivial_probe.py") if payload == "trivial" else "-",
            "audit", str(inventory), "--format", "json", "-o", str(out), "--no-progress"]
    # The server is this process's child too: not an orphan of the run to be reaped.
    env = dict(os.environ, PYTHONPATH=repo_pythonpath(REPO))
    if variant:
        env["BENCH_FIXES"] = variant  # bench/proposed_fixes.py
    measured = run_measured(argv, env=env, timeout=timeout,
                            known_children=lambda: {server_pid})
    report = json.loads(out.read_text()) if out.exists() else {"nodes": []}
    ok = sum(1 for node in report["nodes"] if node.get("status") not in ("error", "unreachable"))
    if ok != nodes:
        sys.stderr.write(measured.stderr.decode(errors="replace")[-2000:])
    return {"variant": variant or "fleetcheck", "nodes": nodes, "ok": ok,
            "wall_s": measured.wall_s, "cpu_s": measured.cpu_s,
            "peak_rss_kb": measured.peak_rss_mb * 1024, "load": measured.load_before}


def summarise(samples: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Medians per variant and size, and the growth per node above the smallest size."""
    rows: list[dict[str, Any]] = []
    for variant in dict.fromkeys(s["variant"] for s in samples):
        rows += _summarise([s for s in samples if s["variant"] == variant])
    return rows


def _summarise(samples: list[dict[str, Any]]) -> list[dict[str, Any]]:
    sizes = sorted({int(s["nodes"]) for s in samples})
    rows = []
    for size in sizes:
        runs = [s for s in samples if s["nodes"] == size]
        rows.append({
            "variant": runs[0]["variant"], "nodes": size, "runs": len(runs),
            "ok": min(r["ok"] for r in runs),
            "wall_s": statistics.median(r["wall_s"] for r in runs),
            "cpu_s": statistics.median(r["cpu_s"] for r in runs),
            "peak_rss_kb": statistics.median(r["peak_rss_kb"] for r in runs),
            "load": max(r["load"] for r in runs)})
    base = rows[0]
    previous = base
    for row in rows:
        grown = row["nodes"] - base["nodes"]
        row["rss_kb_per_node"] = (row["peak_rss_kb"] - base["peak_rss_kb"]) / grown \
            if grown else 0.0
        row["cpu_ms_per_node"] = 1000 * (row["cpu_s"] - base["cpu_s"]) / grown if grown else 0.0
        row["cpu_ms_per_node_total"] = 1000 * row["cpu_s"] / row["nodes"]
        step = row["nodes"] - previous["nodes"]
        row["rss_kb_per_node_step"] = (row["peak_rss_kb"] - previous["peak_rss_kb"]) / step \
            if step else 0.0
        row["cpu_ms_per_node_step"] = 1000 * (row["cpu_s"] - previous["cpu_s"]) / step \
            if step else 0.0
        previous = row
    return rows


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| auditor | nodes | ok | wall s | auditor CPU s | CPU ms/node (all) "
        "| CPU ms/node above fixed "
        "| CPU ms/node, this step | peak RSS MB | RSS KB/node above fixed | RSS KB/node, this step "
        "| runs | load |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for row in rows:
        lines.append(
            f"| {row['variant']} | {row['nodes']} | {row['ok']} | {row['wall_s']:.2f} "
            f"| {row['cpu_s']:.2f} "
            f"| {row['cpu_ms_per_node_total']:.2f} | {row['cpu_ms_per_node']:.2f} "
            f"| {row['cpu_ms_per_node_step']:.2f} | {row['peak_rss_kb'] / 1024:.1f} "
            f"| {row['rss_kb_per_node']:.1f} | {row['rss_kb_per_node_step']:.1f} "
            f"| {row['runs']} | {row['load']:.1f} |")
    return "\n".join(lines)


def svg(rows: list[dict[str, Any]]) -> str:
    """Two panels: per-node RSS and CPU above the fixed cost, against the node count."""
    rows = [row for row in rows if row["variant"] == "fleetcheck"]
    width, height, pad = 760, 300, 50
    panel = (width - 3 * pad) / 2
    xs = [row["nodes"] for row in rows[1:]] or [1]
    x_max = max(xs) * 1.05
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             'font-family="sans-serif" font-size="12">',
             f'<rect width="{width}" height="{height}" fill="white"/>']
    panels = (("peak RSS above fixed, KB per node", "rss_kb_per_node", 60.0, "#1f77b4"),
              ("auditor CPU above fixed, ms per node", "cpu_ms_per_node", 2.0, "#d62728"))
    for index, (title, key, target, colour) in enumerate(panels):
        left = pad + index * (panel + pad)
        top, bottom = 30, height - pad
        values = [row[key] for row in rows[1:]]
        y_max = max([target, *values]) * 1.25

        def x_at(value: float, left: float = left) -> float:
            return left + panel * value / x_max

        def y_at(value: float, top: int = top, bottom: int = bottom,
                 y_max: float = y_max) -> float:
            return bottom - (bottom - top) * value / y_max

        parts += [
            f'<text x="{left}" y="18" font-weight="bold">{title}</text>',
            f'<line x1="{left}" y1="{bottom}" x2="{left + panel}" y2="{bottom}" stroke="black"/>',
            f'<line x1="{left}" y1="{top}" x2="{left}" y2="{bottom}" stroke="black"/>',
            f'<line x1="{left}" y1="{y_at(target):.1f}" x2="{left + panel}" '
            f'y2="{y_at(target):.1f}" stroke="grey" stroke-dasharray="4 3"/>',
            f'<text x="{left + panel - 70}" y="{y_at(target) - 4:.1f}" fill="grey">'
            f'target {target:g}</text>',
            f'<text x="{left + panel / 2 - 20}" y="{height - 12}">nodes</text>',
        ]
        for tick in (0, y_max / 2, y_max):
            parts.append(f'<text x="{left - 40}" y="{y_at(tick) + 4:.1f}">{tick:.1f}</text>')
        points = [(x_at(row["nodes"]), y_at(row[key])) for row in rows[1:]]
        if points:
            parts.append('<polyline fill="none" stroke="{}" stroke-width="2" points="{}"/>'.format(
                colour, " ".join(f"{x:.1f},{y:.1f}" for x, y in points)))
        for row, (x, y) in zip(rows[1:], points, strict=True):
            parts += [f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{colour}"/>',
                      f'<text x="{x - 12:.1f}" y="{bottom + 15}">{row["nodes"]}</text>',
                      f'<text x="{x - 12:.1f}" y="{y - 7:.1f}">{row[key]:.1f}</text>']
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="20,500,1000,2000",
                        help="node counts, the smallest first: it is the fixed cost")
    parser.add_argument("--runs", type=int, default=3, help="runs per size (median)")
    parser.add_argument("--timeout", type=float, default=600.0,
                        help="seconds before one audit is killed")
    parser.add_argument("--out", default=str(REPO / "bench"),
                        help="directory for scale.json and scale.svg")
    parser.add_argument("--variants", default="",
                        help="also measure these bench/proposed_fixes.py variants (e.g. chacha)")
    parser.add_argument("--payload", choices=("trivial", "real"), default="trivial",
                        help="what the auditor sends each node: the trivial probe (default) or "
                        "the shipped probe (92 KB; the server still answers the same reply)")
    parser.add_argument("--pin", metavar="AUDITOR:FLEET", default="",
                        help="the auditor on these cores, the nodes' server on those (0-1:2-15)")
    parser.add_argument("--serve", metavar="DIR", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        asyncio.run(serve(Path(args.serve)))
        return 0
    from bench import measure as bench_measure
    from bench.measure import Pin, set_pin

    try:
        set_pin(Pin.parse(args.pin))
    except ValueError as exc:
        parser.error(str(exc))
    sizes = sorted(int(size) for size in args.sizes.split(","))
    variants = [name for name in args.variants.split(",") if name]
    workdir = Path(tempfile.mkdtemp(prefix="fc-scale-"))
    prepare(workdir)
    server, ports = start_server(workdir)
    samples = []
    try:
        for run in range(args.runs):
            # Interleaved: drift over time hits every size and variant alike.
            for size, variant in itertools.product(sizes, ["", *variants]):
                sample = measure(workdir, size, ports, args.timeout, server.pid, variant,
                                 args.payload)
                samples.append(sample)
                print(f"{sample['variant']:<10} {size:>5} nodes run {run + 1}/{args.runs}: "
                      f"{sample['wall_s']:6.2f} s "
                      f"wall, {sample['cpu_s']:6.2f} s cpu, {sample['peak_rss_kb'] / 1024:6.1f}"
                      f" MB, load {sample['load']:.1f}, ok {sample['ok']}/{size}",
                      file=sys.stderr, flush=True)
    finally:
        server.terminate()
        server.wait(10)
    rows = summarise(samples)
    out = Path(args.out)
    suffix = "" if args.payload == "trivial" else f"-{args.payload}"
    (out / f"scale{suffix}.json").write_text(
        json.dumps({"payload": args.payload, "cores": bench_measure.PIN.describe(),
                    "samples": samples, "rows": rows}, indent=1) + "\n")
    (out / f"scale{suffix}.svg").write_text(svg(rows))
    print(markdown(rows))
    return 0 if all(row["ok"] == row["nodes"] for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
