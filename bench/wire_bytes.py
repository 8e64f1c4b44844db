"""The probe's bytes on the wire per node: what the auditor sends and receives per node.

    python bench/wire_bytes.py                          # 20 nodes, this checkout
    python bench/wire_bytes.py --nodes 50 --baseline ../before

`fleetcheck audit` (the real CLI, the shipped probe as its payload) against asyncssh's
in-process server (bench/scale.py: one listener per host, one node per host, the real probe's
reply to every channel once its stdin has been read to the end), run under `strace -f -e
trace=sendto,recvfrom`: the bytes are the sum of what the auditor's sendto and recvfrom calls
returned (asyncio sends and receives every SSH packet with them; files are written with
write), divided by the nodes. Key exchange, authentication, the command line, the probe on
stdin and the reply, all of it encrypted and framed: what the node's network carries. With
`--baseline DIR`, another checkout of fleetcheck is measured the same way, in turn.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.measure import repo_pythonpath  # noqa: E402

#: `PID sendto(FD, ..., N, ...) = RESULT` and recvfrom alike, as strace -f writes them.
_CALL = re.compile(rb"^\d+\s+(sendto|recvfrom)\(.*\)\s+=\s+(\d+)\s*$", re.MULTILINE)


def probe_size(checkout: Path) -> int:
    """The size of the probe `checkout` ships (its own source, sent as the payload)."""
    done = subprocess.run(
        [sys.executable, "-c", "from fleetcheck.probe import probe_source;"
         "print(len(probe_source().encode()))"],
        env=dict(os.environ, PYTHONPATH=repo_pythonpath(checkout)), cwd=checkout,
        capture_output=True, text=True, check=True, timeout=60)
    return int(done.stdout)


def measure(checkout: Path, inventory: Path, workdir: Path, nodes: int) -> dict[str, object]:
    trace = workdir / f"strace-{checkout.name}.txt"
    out = workdir / f"audit-{checkout.name}.json"
    argv = ["strace", "-f", "-qq", "-e", "trace=sendto,recvfrom", "-e", "signal=none",
            "-o", str(trace), sys.executable, str(checkout / "bench" / "fleetcheck_with_probe.py"),
            "-", "audit", str(inventory), "--format", "json", "-o", str(out), "--no-progress"]
    subprocess.run(argv, env=dict(os.environ, PYTHONPATH=repo_pythonpath(checkout)),
                   capture_output=True, timeout=600, check=False)
    sent = received = 0
    for call, result in _CALL.findall(trace.read_bytes()):
        if call == b"sendto":
            sent += int(result)
        else:
            received += int(result)
    report = json.loads(out.read_text())
    replied = sum(1 for node in report["nodes"] if node["status"] not in ("error", "unreachable"))
    return {"checkout": str(checkout), "nodes": nodes, "replied": replied,
            "probe_bytes": probe_size(checkout),
            "sent_kb_per_node": sent / nodes / 1000,
            "received_kb_per_node": received / nodes / 1000}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=20)
    parser.add_argument("--baseline", metavar="DIR",
                        help="another checkout of fleetcheck, measured the same way")
    args = parser.parse_args(argv)
    if not shutil.which("strace"):
        raise SystemExit("bench: wire_bytes needs strace")
    from bench import scale

    checkouts = [REPO] + ([Path(args.baseline).resolve()] if args.baseline else [])
    rows = []
    with tempfile.TemporaryDirectory(prefix="fc-wire-") as tmp:
        workdir = Path(tmp)
        scale.prepare(workdir)  # the reply every channel gets
        server, ports = scale.start_server(workdir, listeners=args.nodes)
        try:
            inventory = scale.write_inventory(workdir, args.nodes, ports, per_host=1)
            for checkout in checkouts:
                rows.append(measure(checkout, inventory, workdir, args.nodes))
        finally:
            server.terminate()
            server.wait(10)
    print("| checkout | nodes | replied | probe source bytes | sent KB/node | received KB/node |")
    print("|---|---:|---:|---:|---:|---:|")
    for row in rows:
        print(f"| {row['checkout']} | {row['nodes']} | {row['replied']} | {row['probe_bytes']} "
              f"| {row['sent_kb_per_node']:.1f} | {row['received_kb_per_node']:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
