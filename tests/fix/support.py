"""Probed fake nodes for the fix tests: the real probe run on tests/nodeenv.py nodes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fleetcheck.model import NodeResult
from fleetcheck.probe.results import parse_probe_output
from fleetcheck.verdict import evaluate_node
from tests.nodeenv import make_amd_node, make_node, run_probe


def probed(root: Path, node_id: str = "pve1/101", *, amd: bool = False,
           **options: Any) -> NodeResult:
    """Build a fake node (an AMD one with `amd`), run the real probe on it, and judge it as the
    audit does."""
    node = (make_amd_node if amd else make_node)(root, **options)
    _code, document, _stderr = run_probe(node)
    output = parse_probe_output(json.dumps(document).encode())
    status, reason = evaluate_node(output.checks, output.triton, facts=output.facts)
    host, _, vmid = node_id.partition("/")
    return NodeResult(id=node_id, host=host, vmid=int(vmid) if vmid else None, name=node_id,
                      status=status, reason=reason, triton=output.triton,
                      checks=tuple(output.checks), facts=output.facts)
