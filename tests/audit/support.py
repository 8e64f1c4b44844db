"""Helpers shared by the audit tests: run an audit of a test fleet, read its rows."""

from __future__ import annotations

import asyncio

from fleetcheck.audit import run_audit
from fleetcheck.inventory import load_inventory
from fleetcheck.model import Report
from tests.fleet import Fleet

GPU_OK = ("ok", "Triton gpu (cuda)")


def audit(fleet: Fleet, **kwargs: object) -> Report:
    inventory = load_inventory(str(fleet.inventory))
    return asyncio.run(run_audit(inventory, **kwargs))  # type: ignore[arg-type]


def rows(report: Report) -> list[tuple[str, str, str]]:
    return [(node.id, node.status, node.reason) for node in report.nodes]
