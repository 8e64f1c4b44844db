"""Probed fake nodes: the real probe run on tests/nodeenv.py nodes, judged as the audit does."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fleetcheck.audit import node_from_result
from fleetcheck.inventory_data.model import HostSpec, Target
from fleetcheck.judgement.policy import DEFAULT_POLICY
from fleetcheck.report.content import NodeResult
from fleetcheck.transport.interface import CommandResult
from fleetcheck.transport.local import LocalTransport
from tests.nodeenv import make_amd_node, make_node, run_probe


def probed(root: Path, node_id: str = "pve1/101", *, amd: bool = False,
           **options: Any) -> NodeResult:
    """Build a fake node (an AMD one with `amd`), run the real probe on it, and judge it as the
    audit does (the scheduler's own `node_from_result`)."""
    node = (make_amd_node if amd else make_node)(root, **options)
    code, document, stderr = run_probe(node)
    host, _, vmid = node_id.partition("/")
    target = Target(host=HostSpec(name=host, address=None), vmid=int(vmid) if vmid else None,
                    name=node_id, python="python3", env={}, labels=(), timeout=60.0)
    result = CommandResult(code, json.dumps(document).encode(), stderr.encode())
    return node_from_result(target, LocalTransport(), result, DEFAULT_POLICY, 0.0)


def node_facts(os_id: str, like: str | None = None, version: str = "1",
               python: str = "3.12.3", include: str = "/usr/include/python3.12") -> dict[str, Any]:
    """A probed node's facts of its distribution (/etc/os-release) and interpreter."""
    return {"os": {"id": os_id, "id_like": like, "version_id": version},
            "python": {"executable": "/usr/bin/python3", "version": python}}
