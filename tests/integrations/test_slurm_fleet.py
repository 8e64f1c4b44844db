"""fleetcheck across a real Slurm allocation: four Slurm nodes on this host (one slurmd each).

`srun -N4 … fleetcheck probe --format json` writes one node document per task (srun's own
`--output=DIR/%N-%t.json`: %N is the host name, the same for every node here, so the task
number keeps the files apart), and `fleetcheck merge DIR` must give the report a direct
`fleetcheck audit` of the same four nodes gives: the same statuses, causes and fleet checks.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.nodeenv import make_node

from .slurmkit import SlurmCluster, missing_binaries

pytestmark = pytest.mark.slow

NODES = ("gpu01", "gpu02", "gpu03", "gpu04")
#: Each node's fake environment: two healthy, one without a C compiler (Triton falls back),
#: one with another torch (a fleet mismatch).
NODE_KINDS: dict[str, dict[str, Any]] = {
    "gpu01": {}, "gpu02": {}, "gpu03": {"compiler": False},
    "gpu04": {"torch": "2.10.0+cu130"},
}


def _script(path: Path, body: str) -> None:
    path.write_text("#!/bin/sh\n" + body, encoding="utf-8")
    path.chmod(0o755)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    if os.geteuid() != 0:
        pytest.skip("needs root: slurmd runs as root (SlurmdUser=root)")
    missing = missing_binaries()
    if missing:
        pytest.skip(f"needs Debian's slurm-wlm and munge ({', '.join(missing)} missing; "
                    "scripts/test.sh installs them)")
    root = tmp_path_factory.mktemp("slurmfleet")
    (root / "nodes").mkdir()
    bindir = root / "bin"
    bindir.mkdir()
    q = shlex.quote
    # `fleetcheck` on a node: the probe runs in that Slurm node's own fake environment.
    _script(bindir / "fleetcheck",
            f'if [ "$1" = probe ]; then . {q(str(root / "nodes"))}/"$SLURMD_NODENAME.env"; fi\n'
            f'exec {q(sys.executable)} -m fleetcheck "$@"\n')
    kit = SlurmCluster(root, names=NODES)
    try:
        kit.start()
        yield kit
    finally:
        kit.stop()


def make_fleet(cluster: SlurmCluster) -> dict[str, dict[str, str]]:
    """Build each node's environment; return what the inventory needs for each."""
    hosts = {}
    for name, kind in NODE_KINDS.items():
        node = make_node(cluster.root / "nodes" / name, **kind)
        python3 = node.bindir / "python3"
        _script(python3, f'exec {shlex.quote(sys.executable)} "$@"\n')
        lines = [f"export {key}={shlex.quote(value)}" for key, value in node.env.items()]
        (cluster.root / "nodes" / f"{name}.env").write_text("\n".join(lines) + "\n")
        hosts[name] = {"python": str(python3), "env": node.env}
    return hosts


def run(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=180, check=False,
                          env=env)


def comparable(report: dict[str, Any]) -> dict[str, Any]:
    return {
        "nodes": sorted((n["id"], n["status"], n["reason"], n["triton"]["verdict"],
                         n["triton"]["cause"]) for n in report["nodes"]),
        "fleet": [(c["id"], c["status"], c["summary"]) for c in report["fleet_checks"]],
        "summary": report["summary"],
    }


def test_srun_fan_out_merges_into_the_direct_audits_report(cluster: SlurmCluster,
                                                           tmp_path: Path) -> None:
    hosts = make_fleet(cluster)
    docs = tmp_path / "docs"
    docs.mkdir()
    fleetcheck = str(cluster.root / "bin" / "fleetcheck")
    done = run("srun", "-N", str(len(NODES)), "--ntasks-per-node=1",
               f"--output={docs}/%N-%t.json", fleetcheck, "probe", "--format", "json",
               env=cluster.env)
    # gpu03 fails its probe (exit 1), so the step does too; every document is written anyway.
    assert done.returncode == 1, done.stderr + cluster.logs()
    files = sorted(docs.iterdir())
    assert len(files) == len(NODES)
    documents = [json.loads(path.read_text()) for path in files]
    assert {d["schema"] for d in documents} == {"fleetcheck.node/1"}
    assert sorted(d["origin"]["slurm_node"] for d in documents) == list(NODES)
    assert len({d["origin"]["slurm_job"] for d in documents}) == 1

    merged_path = tmp_path / "merged.json"
    merged_run = run(sys.executable, "-m", "fleetcheck", "merge", str(docs), "--format",
                     "json", "-o", str(merged_path))
    assert merged_run.returncode == 1, merged_run.stderr
    assert merged_run.stderr == ""

    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(yaml.safe_dump({"hosts": {
        name: {"transport": "local", "probe_host": True, "timeout": 60, **spec}
        for name, spec in hosts.items()}}))
    direct_path = tmp_path / "direct.json"
    direct = run(sys.executable, "-m", "fleetcheck", "audit", str(inventory), "--format",
                 "json", "-o", str(direct_path), "--no-progress")
    assert direct.returncode == 1, direct.stderr

    merged = json.loads(merged_path.read_text())
    audited = json.loads(direct_path.read_text())
    assert comparable(merged) == comparable(audited)
    statuses = {node: status for node, status, *_ in comparable(merged)["nodes"]}
    assert statuses == {"gpu01": "ok", "gpu02": "ok", "gpu03": "fail", "gpu04": "ok"}
    assert [c["id"] for c in merged["fleet_checks"]] == ["fleet_torch_mismatch"]

    # The same documents through stdin, concatenated as `cat` gives them, and as a tarball.
    joined = b"".join(path.read_bytes() for path in files)
    piped = subprocess.run([sys.executable, "-m", "fleetcheck", "merge", "-", "--format",
                            "json"], input=joined, capture_output=True, timeout=120,
                           check=False)
    assert comparable(json.loads(piped.stdout)) == comparable(merged)
    tarball = tmp_path / "docs.tar.gz"
    assert run("tar", "-C", str(docs), "-czf", str(tarball), ".").returncode == 0
    packed = run(sys.executable, "-m", "fleetcheck", "merge", str(tarball), "--format", "json")
    assert comparable(json.loads(packed.stdout)) == comparable(merged)
