"""The gate bench's floor (bench/gate_floor.py) against asyncssh's in-process server of the
scale bench: every node of the inventory it is given is probed once, on one connection per
host, and timed, so that bench/gate_latency.py compares fleetcheck with it node for node."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from bench import scale
from bench.gate_latency import floor_spec

REPO = Path(__file__).resolve().parents[2]


def test_the_floor_probes_every_node_of_the_inventory_once(tmp_path: Path) -> None:
    (tmp_path / "reply.json").write_text(json.dumps({"schema": "any", "checks": []}))
    (tmp_path / "reply.code").write_text("0")
    probe = tmp_path / "probe.py"
    probe.write_text("print('the probe')\n")
    server, ports = scale.start_server(tmp_path, listeners=2)
    try:
        inventory = scale.write_inventory(tmp_path, 5, ports, per_host=3)
        spec = floor_spec(inventory, str(probe), tmp_path)
        times = tmp_path / "times.json"
        done = subprocess.run(
            [sys.executable, str(REPO / "bench" / "gate_floor.py"), str(spec)],
            env=dict(os.environ, PYTHONPATH=str(REPO), BENCH_TIMES=str(times)),
            capture_output=True, text=True, timeout=120, check=False)
    finally:
        server.terminate()
        server.wait(30)
    assert (done.returncode, done.stdout) == (0, "ok=5 total=5\n"), done.stderr
    recorded = json.loads(times.read_text())
    assert sorted(node for node, _, _ in recorded["nodes"]) == [
        "pve1/101", "pve1/102", "pve1/103", "pve2/101", "pve2/102"]
    assert all(recorded["started"] <= start <= end <= recorded["ended"]
               for _, start, end in recorded["nodes"])
