"""The progress bar on stderr while probing: an AuditObserver drawn with rich, on a TTY only.

rich is imported only when a bar is drawn: off a terminal (the gate, a cron job, a Slurm
prolog) importing it would cost about 30 ms of every run's start for nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, TextIO

from fleetcheck.judgement.statuses import FAILING_STATUSES
from fleetcheck.observer import AuditObserver, NullObserver
from fleetcheck.render.sanitize import terminal_line
from fleetcheck.report.content import NodeResult

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

#: Node statuses announced above the bar as they arrive, so problems show before the end.
ANNOUNCED = FAILING_STATUSES
_SHOWN_IN_FLIGHT = 3


class ProgressObserver:
    """Advances a rich progress bar as nodes finish; names the nodes still being probed."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        self.task: TaskID = progress.add_task("resolving targets", total=None)
        self.in_flight: list[str] = []

    def _describe(self) -> None:
        shown = ", ".join(self.in_flight[:_SHOWN_IN_FLIGHT])
        more = len(self.in_flight) - _SHOWN_IN_FLIGHT
        text = shown + (f" +{more}" if more > 0 else "")
        self.progress.update(self.task, description=terminal_line(text or "probing"))

    def targets_resolved(self, total: int) -> None:
        self.progress.update(self.task, total=total, description="probing")

    def node_started(self, node_id: str) -> None:
        self.in_flight.append(node_id)
        self._describe()

    def node_finished(self, node: NodeResult) -> None:
        if node.id in self.in_flight:
            self.in_flight.remove(node.id)
        self.progress.advance(self.task)
        self._describe()
        if node.status in ANNOUNCED:
            from rich.text import Text

            from fleetcheck.render.terminal import STATUS_STYLES

            line = Text()
            line.append(f"{node.status:11}", style=STATUS_STYLES.get(node.status, ""))
            line.append(f" {terminal_line(node.id)}: {terminal_line(node.reason)}")
            self.progress.console.print(line, overflow="ellipsis", no_wrap=True)


def _is_tty(stream: TextIO) -> bool:
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(callable(isatty) and isatty())
    except ValueError:  # a closed stream
        return False


@contextmanager
def progress_observer(
    stream: TextIO | None = None, enabled: bool = True
) -> Iterator[AuditObserver]:
    """An observer drawing a progress bar on `stream` (stderr); a NullObserver off a TTY."""
    import sys

    target = sys.stderr if stream is None else stream
    if not enabled or not _is_tty(target):
        yield NullObserver()
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
    )

    console = Console(file=target, markup=False, highlight=False, emoji=False)
    progress = Progress(
        SpinnerColumn(),
        TextColumn("{task.description}", markup=False),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    )
    with progress:
        yield ProgressObserver(progress)
