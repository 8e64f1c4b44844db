"""The HTML report: one self-contained, offline file with the matrix, causes, fixes and trends."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined

from fleetcheck import kinds
from fleetcheck.checks import COLUMNS, check_title
from fleetcheck.judgement.fixes import node_fix, root_cause
from fleetcheck.judgement.frameworks import framework_outcomes
from fleetcheck.judgement.statuses import FAILING_STATUSES
from fleetcheck.render.matrix import (
    Row,
    build_rows,
    display_name,
    fallback_nodes,
    gpu_rows,
    problem_nodes,
)
from fleetcheck.render.sanitize import as_text, terminal_block, terminal_line
from fleetcheck.render.trend import trend_chart
from fleetcheck.report.content import NODE_STATUSES, Check, NodeResult, Report, RunSummary
from fleetcheck.timestamps import parse_timestamp

_STATUS_RANK = {status: index for index, status in enumerate(NODE_STATUSES)}
_FACT_ITEMS_MAX = 400


@dataclass(frozen=True)
class CheckView:
    id: str
    title: str
    status: str
    summary: str
    fix: str
    evidence: tuple[tuple[str, str], ...]


def _check_view(check: Check, facts: object = None) -> CheckView:
    evidence = tuple((as_text(k), as_text(v)) for k, v in check.evidence.items())
    return CheckView(check.id, check_title(check.id, facts), check.status, check.summary,
                     check.fix, evidence)


def flatten_facts(value: Any, prefix: str = "") -> list[tuple[str, str]]:
    """Facts as (dotted key, text) pairs, nested mappings and lists of mappings unfolded."""
    if isinstance(value, Mapping):
        items: list[tuple[str, str]] = []
        for key, item in value.items():
            items += flatten_facts(item, f"{prefix}.{key}" if prefix else as_text(key))
        return items
    if isinstance(value, list) and any(isinstance(item, (Mapping, list)) for item in value):
        items = []
        for index, item in enumerate(value):
            items += flatten_facts(item, f"{prefix}[{index}]")
        return items
    if isinstance(value, list):
        return [(prefix, ", ".join(as_text(item) for item in value))]
    return [(prefix, "null" if value is None else as_text(value))]


def _duration(report: Report) -> str:
    started, finished = parse_timestamp(report.started_at), parse_timestamp(report.finished_at)
    if started is None or finished is None:
        return ""
    seconds = max(0, round(finished - started))
    return f"{seconds // 60} min {seconds % 60} s" if seconds >= 60 else f"{seconds} s"


def _row_view(index: int, row: Row, failing_since: Mapping[str, str]) -> dict[str, Any]:
    node = row.node
    return {
        "index": index,
        "node": node,
        "name": display_name(node),
        "host_first": False,
        "place": kinds.place(node),
        "fallback": row.fallback,
        "failing": node.status in FAILING_STATUSES,
        "status_rank": _STATUS_RANK.get(node.status, len(NODE_STATUSES)),
        "since": failing_since.get(node.id, ""),
        "cells": [
            {"cell": cell, "checks": [_check_view(c, node.facts) for c in cell.checks],
             "title": dict(COLUMNS)[cell.column]}
            for cell in row.cells
        ],
        "checks": [_check_view(c, node.facts) for c in node.checks],
        "facts": flatten_facts(node.facts)[:_FACT_ITEMS_MAX],
        "gpus": gpu_rows(node.facts),
        "frameworks": framework_outcomes(node.facts),
    }


def _problem_view(node: NodeResult, failing_since: Mapping[str, str]) -> dict[str, Any]:
    cause = root_cause(node)
    return {
        "node": node,
        "name": display_name(node),
        "cause": _check_view(cause, node.facts) if cause else None,
        "fix": node_fix(node),
        "since": failing_since.get(node.id, ""),
        "frameworks": framework_outcomes(node.facts),
    }


def _inline_hash(text: str) -> str:
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return "'sha256-" + base64.b64encode(digest).decode("ascii") + "'"


@cache
def _environment() -> Environment:
    env = Environment(
        loader=PackageLoader("fleetcheck.render", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    # Node strings may hold terminal escapes: show them as visible text, then HTML-escape.
    env.filters["line"] = terminal_line
    env.filters["block"] = terminal_block
    return env


def _asset(name: str) -> str:
    env = _environment()
    assert env.loader is not None
    source, _, _ = env.loader.get_source(env, name)
    return source


def render_html(
    report: Report,
    *,
    history: Sequence[RunSummary] = (),
    failing_since: Mapping[str, str] | None = None,
    changes: Sequence[str] = (),
) -> str:
    """The report as one HTML document: inline CSS and JS (allowed by hash), no network loads."""
    failing_since = failing_since or {}
    rows = [_row_view(i, row, failing_since) for i, row in enumerate(build_rows(report))]
    previous_host = None
    for view in rows:
        view["host_first"] = view["node"].host != previous_host
        previous_host = view["node"].host
    css, script = _asset("report.css"), _asset("report.js")
    fallback = [_problem_view(n, failing_since) for n in fallback_nodes(report)]
    context = {
        "report": report,
        "summary": report.summary,
        "statuses": NODE_STATUSES,
        "duration": _duration(report),
        "columns": COLUMNS,
        "rows": rows,
        "fallback": fallback,
        "problems": [_problem_view(n, failing_since) for n in problem_nodes(report)],
        "changes": list(changes),
        "trend": trend_chart(report, history),
        "css": css,
        "script": script,
        "csp": (
            "default-src 'none'; img-src data:; base-uri 'none'; form-action 'none'; "
            f"style-src {_inline_hash(css)}; script-src {_inline_hash(script)}"
        ),
    }
    return _environment().get_template("report.html.j2").render(context)
