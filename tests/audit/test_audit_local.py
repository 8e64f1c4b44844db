"""The local machine as a node: `fleetcheck probe` (local_node_result) and `transport: local`."""

from __future__ import annotations

import asyncio
import inspect
import socket
from pathlib import Path

import pytest

from fleetcheck.audit import AuditRun, local_node_result, run_audit
from fleetcheck.inventory_data.model import HostSpec, Inventory
from fleetcheck.transport.interface import NodeBudget
from tests.nodeenv import make_node

pytestmark = pytest.mark.timeout(60)


def test_local_node_result_runs_the_probe_here(tmp_path: Path) -> None:
    node = make_node(tmp_path / "node", compiler=False)
    result = local_node_result(python=node.python, env=node.env, timeout=30)
    assert (result.id, result.host, result.vmid) == (socket.gethostname(),) * 2 + (None,)
    assert (result.status, result.triton.verdict, result.triton.cause) == (
        "fail", "cpu-fallback", "no_c_compiler")


def test_local_node_result_missing_python(tmp_path: Path) -> None:
    result = local_node_result(python=str(tmp_path / "nope" / "python3"), timeout=10)
    assert (result.status, result.reason) == (
        "error", f"{tmp_path / 'nope' / 'python3'} not found on {socket.gethostname()}")


def test_local_transport_host_in_an_inventory(tmp_path: Path) -> None:
    node = make_node(tmp_path / "node")
    host = HostSpec(name="here", address=None, transport="local", probe_host=True,
                    python=node.python, env=node.env, timeout=30)
    report = asyncio.run(run_audit(Inventory(path="inline", hosts=(host,))))
    assert [(n.id, n.status, n.reason) for n in report.nodes] == [
        ("here", "ok", "Triton gpu (cuda)")]


def probe_deadline(timeout: float) -> float:
    return NodeBudget(timeout).probe_deadline


def test_probe_deadline_stays_short_of_the_node_timeout() -> None:
    assert [probe_deadline(t) for t in (60, 20, 6, 2, 0.5)] == [55.0, 15.0, 3.0, 1.0, 0.2]


def test_run_audit_takes_exactly_the_runs_options() -> None:
    # AuditRun's keyword options, by name and type (help() shows them, mypy checks a call),
    # not `**options: Any`, which let any misspelt option through the type check.
    assert inspect.signature(run_audit).parameters == inspect.signature(AuditRun).parameters
