"""The terminal matrix: one row per node grouped by host, then causes and fixes, then a summary."""

from __future__ import annotations

import io
import textwrap
from collections.abc import Mapping, Sequence

from rich.cells import cell_len
from rich.console import Console
from rich.text import Text

from fleetcheck.checks import COLUMNS
from fleetcheck.judgement.fixes import node_fix, root_cause
from fleetcheck.judgement.frameworks import framework_outcomes
from fleetcheck.judgement.statuses import PROBLEM_CHECK_STATUSES
from fleetcheck.render.matrix import (
    Row,
    build_rows,
    display_name,
    fallback_nodes,
    problem_nodes,
)
from fleetcheck.render.sanitize import terminal_block, terminal_line
from fleetcheck.report.content import NodeResult, Report

#: Columns dropped first when the terminal is narrow, those showing a problem last;
#: Node, Status and Triton always stay.
DROP_ORDER = ("fla", "cache", "libcuda", "headers", "driver", "torch", "gpus", "gpu_memory",
              "compiler")
_GAP = "  "
_NODE_MIN = 12
_NODE_NARROW = 22
_PROBLEM_STATES = frozenset(PROBLEM_CHECK_STATUSES)
_EVIDENCE_LINES = 6

STATE_STYLES = {
    "none": "dim",
    "pass": "green",
    "skip": "dim",
    "warn": "yellow",
    "error": "magenta",
    "fail": "bold red",
}
STATUS_STYLES = {
    "ok": "green",
    "skipped": "dim",
    "warn": "yellow",
    "unreachable": "magenta",
    "error": "magenta",
    "fail": "bold red",
}
_FALLBACK_STYLE = "bold white on red"


def _status_word(status: str) -> str:
    return status.upper() if status == "fail" else status


def _fit(text: str, width: int) -> str:
    """Cut to `width` terminal cells, marking the cut with an ellipsis."""
    if cell_len(text) <= width:
        return text
    cut = Text(text)
    cut.truncate(width, overflow="ellipsis")
    return cut.plain


def _pad(text: str, width: int) -> str:
    return text + " " * max(0, width - cell_len(text))


class _Layout:
    """Which columns fit and how wide each is; node ids and names are already sanitised."""

    def __init__(self, rows: list[Row], width: int | None) -> None:
        self.columns = [(key, heading) for key, heading in COLUMNS]
        self.names = {id(row): terminal_line(display_name(row.node)) for row in rows}
        self.widths: dict[str, int] = {"node": 4, "status": 6}
        for row in rows:
            self.widths["node"] = max(self.widths["node"], cell_len(self.names[id(row)]))
            self.widths["status"] = max(self.widths["status"], len(row.node.status))
        for key, heading in self.columns:
            cells = [c.text for row in rows for c in row.cells if c.column == key]
            texts = [heading] + [terminal_line(text) for text in cells]
            self.widths[key] = max(cell_len(text) for text in texts)
        # Columns where some node has a problem are the last to go: they explain the failures.
        troubled = {c.column for row in rows for c in row.cells if c.state in _PROBLEM_STATES}
        # Frameworks goes first even then: it restates the Triton verdict per framework, and
        # each framework's outcome has its own line under "Causes and fixes".
        self.drop_order = ["frameworks", *sorted(DROP_ORDER, key=lambda key: key in troubled)]
        self.dropped: list[str] = []
        if width is not None:
            self._fit_to(width)

    def total(self) -> int:
        keys = ["node", "status"] + [key for key, _ in self.columns]
        return sum(self.widths[key] for key in keys) + len(_GAP) * (len(keys) - 1)

    def _shrink_node(self, width: int, floor: int) -> None:
        overflow = self.total() - width
        if overflow > 0:
            current = self.widths["node"]
            self.widths["node"] = max(min(floor, current), current - overflow)

    def _fit_to(self, width: int) -> None:
        natural = self.widths["node"]
        # Long names give way first (down to a readable width), then whole columns.
        self._shrink_node(width, _NODE_NARROW)
        for key in self.drop_order:
            if self.total() <= width:
                break
            heading = dict(self.columns)[key]
            self.columns = [(k, h) for k, h in self.columns if k != key]
            self.dropped.append(heading)
        self._shrink_node(width, _NODE_MIN)
        spare = width - self.total()
        if spare > 0:
            self.widths["node"] = min(natural, self.widths["node"] + spare)

    def span_width(self) -> int:
        return sum(self.widths[key] for key, _ in self.columns) + len(_GAP) * (
            len(self.columns) - 1
        )


def _row_line(row: Row, layout: _Layout) -> Text:
    node = row.node
    line = Text()
    name = _pad(_fit(layout.names[id(row)], layout.widths["node"]), layout.widths["node"])
    line.append(name, style="bold red" if row.fallback else None)
    line.append(_GAP)
    status = _pad(_status_word(node.status), layout.widths["status"])
    line.append(status, style=STATUS_STYLES.get(node.status))
    if row.spans:
        line.append(_GAP)
        line.append(_fit(terminal_line(node.reason), layout.span_width()), style="italic")
        return line
    cells = {cell.column: cell for cell in row.cells}
    for key, _ in layout.columns:
        cell = cells[key]
        text = terminal_line(cell.text)
        style = STATE_STYLES.get(cell.state)
        if key == "triton" and row.fallback:
            text, style = text.upper(), _FALLBACK_STYLE
        line.append(_GAP)
        line.append(_fit(text, layout.widths[key]), style=style)
        line.append(" " * max(0, layout.widths[key] - cell_len(_fit(text, layout.widths[key]))))
    return line


def _table(rows: list[Row], layout: _Layout) -> list[Text]:
    headings = [_pad("NODE", layout.widths["node"]), _pad("STATUS", layout.widths["status"])]
    headings += [_pad(heading.upper(), layout.widths[key]) for key, heading in layout.columns]
    lines = [Text(_GAP.join(headings).rstrip(), style="bold")]
    previous_host: str | None = None
    for row in rows:
        if previous_host is not None and row.node.host != previous_host:
            lines.append(Text(""))
        previous_host = row.node.host
        line = _row_line(row, layout)
        line.rstrip()
        lines.append(line)
    return lines


def _hanging(prefix: Text, body: str, width: int | None, style: str | None = None) -> list[Text]:
    """`prefix` then `body`, wrapped under itself so a narrow terminal keeps the indent."""
    indent = prefix.cell_len
    if width is None or indent + cell_len(body) <= width or width - indent < 20:
        return [Text.assemble(prefix, Text(body, style=style or ""))]
    parts = textwrap.wrap(body, width - indent, break_on_hyphens=False) or [""]
    lines = [Text.assemble(prefix, Text(parts[0], style=style or ""))]
    lines += [Text.assemble(" " * indent, Text(part, style=style or "")) for part in parts[1:]]
    return lines


def _problem_lines(node: NodeResult, since: str | None, width: int | None) -> list[Text]:
    head = Text()
    head.append(terminal_line(display_name(node)), style="bold")
    head.append("  ")
    head.append(_status_word(node.status), style=STATUS_STYLES.get(node.status))
    if since:
        head.append(f"  failing since {terminal_line(since)}", style="dim")
    lines = [head, *_hanging(Text("  "), terminal_line(node.reason), width)]
    cause = root_cause(node)
    if cause is not None:
        for key, value in cause.evidence.items():
            if value is None or value == "" or value == [] or value == {}:
                continue  # nothing found is not evidence worth a line
            block = terminal_block(value).splitlines() or [""]
            label = Text(f"  {terminal_line(key)}: ", style="dim")
            lines += _hanging(label, block[0], width, "dim")
            for extra in block[1:_EVIDENCE_LINES]:
                lines += _hanging(Text(" " * label.cell_len), extra, width, "dim")
    fix = node_fix(node)
    if fix:
        lines += _hanging(Text("  fix: ", style="bold cyan"), terminal_line(fix), width)
    for item in framework_outcomes(node.facts):
        label = Text(f"  {item.label}: ", style="bold")
        lines += _hanging(label, terminal_line(item.detail), width, STATE_STYLES.get(item.state))
    return lines


def summary_line(report: Report) -> str:
    """'7 nodes: 2 ok, 1 warn, 1 fail, …; Triton falls back to CPU on 1: pve1/201'."""
    counts = [f"{count} {status}" for status, count in report.summary.items() if count]
    noun = "node" if len(report.nodes) == 1 else "nodes"
    text = f"{len(report.nodes)} {noun}: " + (", ".join(counts) if counts else "none")
    fallback = fallback_nodes(report)
    if fallback:
        ids = ", ".join(terminal_line(node.id) for node in fallback)
        text += f"; Triton falls back to CPU on {len(fallback)}: {ids}"
    if report.interrupted:
        text += "; run interrupted"
    return text


def render_terminal(
    report: Report,
    *,
    width: int | None = None,
    color: bool = False,
    failing_since: Mapping[str, str] | None = None,
    changes: Sequence[str] = (),
) -> str:
    """The matrix as text; with `color` rich styles become ANSI codes, else plain text."""
    failing_since = failing_since or {}
    rows = build_rows(report)
    layout = _Layout(rows, width)
    lines = _table(rows, layout)
    if layout.dropped:
        hidden = "(hidden for width: " + ", ".join(layout.dropped) + ")"
        lines += _hanging(Text(""), hidden, width, "dim")
    if report.fleet_checks:
        lines += [Text(""), Text("Fleet", style="bold")]
        for check in report.fleet_checks:
            style = STATE_STYLES.get(check.status, "")
            label = Text(f"  {terminal_line(check.status).upper():5} ", style=style)
            lines += _hanging(label, terminal_line(check.summary), width)
    problems = problem_nodes(report)
    if problems:
        lines += [Text(""), Text("Causes and fixes", style="bold")]
        for node in problems:
            lines += _problem_lines(node, failing_since.get(node.id), width)
    if changes:
        lines += [Text(""), Text("Changes since the previous run", style="bold")]
        for change in changes:
            lines += _hanging(Text("  - "), terminal_line(change), width)
    summary_style = "bold red" if fallback_nodes(report) else "bold"
    lines += [Text(""), *_hanging(Text(""), summary_line(report), width, summary_style)]
    return _print(lines, width, color)


def _print(lines: list[Text], width: int | None, color: bool) -> str:
    buffer = io.StringIO()
    console = Console(
        file=buffer,
        width=width or 10_000,
        force_terminal=color,
        no_color=not color,
        color_system="standard" if color else None,
        highlight=False,
        markup=False,
        emoji=False,
        legacy_windows=False,
    )
    for line in lines:
        # Evidence and fixes may exceed a narrow width: fold them rather than cut them.
        console.print(line, overflow="fold", crop=False, soft_wrap=width is None)
    return buffer.getvalue()
