"""`gate --nodes HOSTLIST`: a Slurm job's node set gated as one selection."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleetcheck.cli import main
from tests.nodeenv import make_node

pytestmark = pytest.mark.timeout(120)


def inventory(tmp_path: Path, kinds: dict[str, dict[str, Any]]) -> str:
    hosts = {}
    for name, kind in kinds.items():
        node = make_node(tmp_path / name, **kind)
        python3 = node.bindir / "python3"
        python3.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} "$@"\n')
        python3.chmod(0o755)
        hosts[name] = {"transport": "local", "probe_host": True, "timeout": 60,
                       "python": str(python3), "env": node.env}
    path = tmp_path / "inventory.yaml"
    path.write_text(yaml.safe_dump({"hosts": hosts}))
    return str(path)


def test_nodes_gates_exactly_the_hostlist_with_consistency_across_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = inventory(tmp_path, {"gpu01": {}, "gpu02": {}, "gpu03": {"torch": "2.10.0+cu130"}})
    assert main(["gate", path, "--nodes", "gpu[01-02]", "--playbook", "default"]) == 0
    assert capsys.readouterr().err == ""
    assert main(["gate", path, "--nodes", "gpu[01-03]", "--playbook", "pre-training"]) == 1
    assert capsys.readouterr().err.splitlines() == [
        "fleet: fail: torch version differs across the selection: 2.11.0+cu130 on 2 "
        "(gpu01, gpu02); 2.10.0+cu130 on 1 (gpu03) (fix: pin one torch version in every "
        "node's environment (most nodes run 2.11.0+cu130))"]


def test_nodes_outside_the_inventory_or_unparsable_are_usage_errors(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = inventory(tmp_path, {"gpu01": {}})
    assert main(["gate", path, "--nodes", "gpu[01-04],cpu7"]) == 2
    assert capsys.readouterr().err == (
        f"fleetcheck: error: --nodes: cpu7,gpu[02-04] not in the inventory {path} "
        "(4 of 5 nodes)\n")
    assert main(["gate", path, "--nodes", "gpu[01-"]) == 2
    assert capsys.readouterr().err.startswith("fleetcheck: error: --nodes 'gpu[01-': ")
    assert main(["gate", path, "--nodes", "gpu01", "--limit", "gpu01"]) == 2
    assert capsys.readouterr().err == (
        "fleetcheck: error: --nodes and --limit: give one (--nodes is the job's node set)\n")


def test_documents_gate_a_job_without_probing(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.nodedocs import doc, set_now, write

    set_now(monkeypatch)

    folder = tmp_path / "docs"
    folder.mkdir()
    write(folder / "gpu01.json", doc("gpu01", origin={"hostname": "x", "slurm_node": "gpu01"}))
    write(folder / "gpu02.json", doc("gpu02", torch="2.10.0+cu130"))
    write(folder / "gpu04.json", doc("gpu04", minutes_ago=240))
    assert main(["gate", "--documents", str(folder), "--nodes", "gpu01",
                 "--playbook", "default"]) == 0
    assert capsys.readouterr().err == ""
    playbook = tmp_path / "torch.yaml"
    playbook.write_text("consistency:\n  fail: [torch]\n")
    assert main(["gate", "--documents", str(folder), "--nodes", "gpu[01-02]",
                 "--playbook", str(playbook)]) == 1
    assert capsys.readouterr().err.splitlines() == [
        "fleet: fail: torch version differs across the selection: 2.10.0+cu130 on 1 (gpu02); "
        "2.11.0+cu130 on 1 (gpu01) (fix: pin one torch version in every node's environment)"]
    # A job node without a document, or with a stale one, is not verified: exit 3.
    assert main(["gate", "--documents", str(folder), "--nodes", "gpu[01,03-04]",
                 "--playbook", "default"]) == 3
    err = capsys.readouterr().err.splitlines()
    assert err[-2:] == [
        f"gpu03: error: no node document for gpu03 in {folder} (fix: check that the node's "
        "timer or DaemonSet writes its document (fleetcheck probe --format json -o "
        "DIR/NODE.json) there)",
        f"gpu04: error: stale node document: probed {doc('gpu04', 240)['probed_at']}, 4 h "
        "before the merge (--max-age 30 min) (fix: probe the node again (its timer, prolog "
        "or DaemonSet may have stopped), or raise --max-age)"]
    assert err[0].startswith("fleetcheck: gate: stale: ")
    assert main(["gate", "--documents", str(folder)]) == 2
    assert capsys.readouterr().err == (
        "fleetcheck: error: --documents needs --nodes HOSTLIST (the job's nodes)\n")
