"""How large a central audit's Prometheus textfile gets: series and bytes at N nodes.

One real probe reply (the shipped probe on a fake 8-GPU H200 node from tests/nodeenv.py, so
every version fact is there) is parsed once and copied under N node ids, one fail in ten with
its cause (the Triton fallback family is labelled by cause). The report of N nodes is rendered
by fleetcheck's own Prometheus renderer; the figures are its sample lines (series) per metric
family and its size. Usage: python -m bench.textfile_size [--nodes 1000 10000] [--json FILE]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from fleetcheck.report.content import NodeResult, Report


def probed_node(workdir: Path, **kind: Any) -> NodeResult:
    """One node, probed for real: the shipped probe in a fake GPU node's environment."""
    from fleetcheck.audit import local_node_result
    from tests import nodeenv

    made = nodeenv.make_node(workdir / f"node-{len(list(workdir.iterdir()))}", **kind)
    python3 = made.bindir / "python3"
    python3.write_text(f"#!/bin/sh\nexec {sys.executable} \"$@\"\n")
    python3.chmod(0o755)
    return local_node_result(python=str(python3), env=made.env, timeout=60)


def fleet_report(healthy: NodeResult, failing: NodeResult, nodes: int) -> Report:
    chosen = [dataclasses.replace(failing if index % 10 == 9 else healthy,
                                  id=f"gpu{index:05d}", host=f"gpu{index:05d}",
                                  name=f"gpu{index:05d}") for index in range(nodes)]
    return Report(started_at="2026-12-02T01:00:00Z", finished_at="2026-12-02T01:16:00Z",
                  nodes=tuple(chosen), inventory="bench", playbook="nightly")


def measure(text: str) -> dict[str, Any]:
    families: Counter[str] = Counter()
    for line in text.splitlines():
        if line and not line.startswith("#"):
            families[line.split("{", 1)[0].split(" ", 1)[0]] += 1
    return {"series": sum(families.values()), "bytes": len(text.encode()),
            "families": dict(families.most_common())}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--json", metavar="FILE", help="also write the figures here")
    args = parser.parse_args(argv)
    from fleetcheck.render import render

    with tempfile.TemporaryDirectory(prefix="fleetcheck-textfile-") as tmp:
        workdir = Path(tmp)
        healthy = probed_node(workdir, gpus=8)
        failing = probed_node(workdir, gpus=8, compiler=False)
    assert healthy.status == "ok" and failing.triton.verdict == "cpu-fallback", (
        healthy.reason, failing.reason)
    rows = []
    for count in args.nodes:
        text = render(fleet_report(healthy, failing, count), "prometheus")
        row = {"nodes": count, **measure(text)}
        rows.append(row)
        print(f"{count:>6} nodes: {row['series']:>9,} series, {row['bytes'] / 1e6:7.1f} MB, "
              f"{row['series'] / count:.1f} series and {row['bytes'] / count / 1000:.1f} KB "
              "per node")
    for family, series in rows[-1]["families"].items():
        print(f"  {family}: {series / rows[-1]['nodes']:.1f} per node")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
