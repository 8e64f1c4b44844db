"""The audit JSON renderer: the `fleetcheck.audit/1` document of DESIGN.md, nothing added."""

from __future__ import annotations

from fleetcheck.model import Report
from fleetcheck.reportio import dumps_report


def render_json(report: Report) -> str:
    """The audit JSON; strings stay exactly as the nodes sent them (JSON escapes controls)."""
    return dumps_report(report)
