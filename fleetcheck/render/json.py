"""The JSON renderers: the `fleetcheck.audit/1` document of DESIGN.md, nothing added, and a
probe's node document (`fleetcheck.node/1`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from fleetcheck.report.content import Report
from fleetcheck.report.reportio import dumps_report


def render_json(report: Report) -> str:
    """The audit JSON; strings stay exactly as the nodes sent them (JSON escapes controls)."""
    return dumps_report(report)


def render_node_document(document: Mapping[str, Any]) -> str:
    """The node document `fleetcheck probe --format json` prints and merge reads."""
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"
