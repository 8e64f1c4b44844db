"""Rendering an audit report: one module per format, `render()` picks one."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fleetcheck.errors import FleetcheckError
from fleetcheck.report.content import Report, RunSummary


class RenderError(FleetcheckError):
    """A report could not be rendered in the format asked for."""


def color_wanted(stream: object = None) -> bool:
    """Colour when writing to a terminal and NO_COLOR (https://no-color.org) is unset or empty."""
    target = sys.stdout if stream is None else stream
    isatty = getattr(target, "isatty", None)
    return bool(callable(isatty) and isatty()) and not os.environ.get("NO_COLOR")


def terminal_width(stream: object = None) -> int | None:
    """The terminal's width when writing to one; None (no limit) for files and pipes."""
    target = sys.stdout if stream is None else stream
    isatty = getattr(target, "isatty", None)
    if not (callable(isatty) and isatty()):
        return None
    return shutil.get_terminal_size(fallback=(100, 24)).columns


@dataclass(frozen=True)
class RenderContext:
    """What a renderer may use beside the report: the terminal, and the run history.

    `color` None means colour on a TTY without NO_COLOR, `width` None the terminal's width on
    a TTY and no limit otherwise, `width=0` no limit (for files). `history`, `failing_since`
    (node id -> since when it fails) and `changes` (one line each) come from the run history.
    """

    width: int | None = None
    color: bool | None = None
    history: Sequence[RunSummary] = ()
    failing_since: Mapping[str, str] = field(default_factory=dict)
    changes: Sequence[str] = ()


Renderer = Callable[[Report, RenderContext], str]
#: How `fleetcheck probe` writes its one node: from the one-node report and the node's
#: document (`fleetcheck.node/1`).
ProbeWriter = Callable[[Report, Mapping[str, Any], RenderContext], str]


@dataclass(frozen=True)
class Format:
    """One output format: its name (`--format`), the file suffixes that pick it (`-o FILE`),
    its renderer, and how `fleetcheck probe` writes one node in it (None: a format of fleet
    reports only)."""

    name: str
    suffixes: tuple[str, ...]
    render: Renderer
    probe: ProbeWriter | None = None


def _table(report: Report, context: RenderContext) -> str:
    from fleetcheck.render.terminal import render_terminal

    width = context.width
    return render_terminal(
        report,
        width=(width or None) if width is not None else terminal_width(),
        color=color_wanted() if context.color is None else context.color,
        failing_since=context.failing_since,
        changes=context.changes,
    )


def _html(report: Report, context: RenderContext) -> str:
    from fleetcheck.render.html import render_html

    return render_html(report, history=context.history, failing_since=context.failing_since,
                       changes=context.changes)


def _json(report: Report, context: RenderContext) -> str:
    from fleetcheck.render.json import render_json

    return render_json(report)


def _junit(report: Report, context: RenderContext) -> str:
    from fleetcheck.render.junit import render_junit

    return render_junit(report)


def _prometheus(report: Report, context: RenderContext) -> str:
    from fleetcheck.render.prometheus import render_prometheus

    return render_prometheus(report)


def _one_node_report(renderer: Renderer) -> ProbeWriter:
    """A probe written as `renderer` writes its one-node report."""
    return lambda report, document, context: renderer(report, context)


def _node_document(report: Report, document: Mapping[str, Any], context: RenderContext) -> str:
    """A probe's JSON: the node document merge reads, not a one-node audit report."""
    from fleetcheck.render.json import render_node_document

    return render_node_document(document)


#: The formats, by name: the one registry `--format`, `-o FILE`, `render`, `render_probe`,
#: the CLI's help and so the completion scripts and man page read.
REGISTRY: dict[str, Format] = {f.name: f for f in (
    Format("table", (), _table, _one_node_report(_table)),
    Format("html", (".html", ".htm"), _html),
    Format("json", (".json",), _json, _node_document),
    Format("junit", (".xml",), _junit),
    Format("prometheus", (".prom",), _prometheus, _one_node_report(_prometheus)),
)}
FORMATS = tuple(REGISTRY)
#: The formats `fleetcheck probe` writes its one node in.
PROBE_FORMATS = tuple(name for name, f in REGISTRY.items() if f.probe is not None)


def format_for_path(path: str, formats: Iterable[str] = FORMATS) -> str | None:
    """The format of `formats` a file's suffix names (`report.html` -> html), or None."""
    suffix = os.path.splitext(path)[1].lower()
    return next((name for name in formats if suffix and suffix in REGISTRY[name].suffixes),
                None)


def suffixes(formats: Iterable[str] = FORMATS) -> tuple[str, ...]:
    """The file suffixes that pick one of `formats`, in the registry's order."""
    return tuple(suffix for name in formats for suffix in REGISTRY[name].suffixes)


def render(
    report: Report,
    fmt: str,
    *,
    width: int | None = None,
    color: bool | None = None,
    history: Sequence[RunSummary] = (),
    failing_since: Mapping[str, str] | None = None,
    changes: Sequence[str] = (),
) -> str:
    """The report as text in `fmt` (one of FORMATS); the options are a `RenderContext`'s."""
    if fmt not in REGISTRY:
        raise RenderError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    context = RenderContext(width=width, color=color, history=history,
                            failing_since=failing_since or {}, changes=changes)
    return REGISTRY[fmt].render(report, context)


def render_probe(
    report: Report,
    document: Mapping[str, Any],
    fmt: str,
    *,
    width: int | None = None,
    color: bool | None = None,
) -> str:
    """One probed node in `fmt` (one of PROBE_FORMATS): its one-node `report`, or its node
    `document`, as the format writes a probe."""
    writer = REGISTRY[fmt].probe if fmt in REGISTRY else None
    if writer is None:
        raise RenderError(f"unknown format {fmt!r} for a probe; choose one of "
                          f"{', '.join(PROBE_FORMATS)}")
    return writer(report, document, RenderContext(width=width, color=color))
