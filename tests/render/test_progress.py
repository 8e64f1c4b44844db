"""The progress observer: nothing off a TTY; on one, a bar and the failing nodes as they come."""

from __future__ import annotations

import io

from fleetcheck.observer import NullObserver
from fleetcheck.render.progress import ProgressObserver, progress_observer
from fleetcheck.report.content import NodeResult


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_not_a_tty_gets_the_null_observer() -> None:
    stream = io.StringIO()
    with progress_observer(stream) as observer:
        assert isinstance(observer, NullObserver)
        observer.targets_resolved(2)
    assert stream.getvalue() == ""


def test_disabled_gets_the_null_observer_even_on_a_tty() -> None:
    with progress_observer(_Tty(), enabled=False) as observer:
        assert isinstance(observer, NullObserver)


def test_tty_draws_and_announces_failing_nodes_sanitised() -> None:
    stream = _Tty()
    with progress_observer(stream) as observer:
        assert isinstance(observer, ProgressObserver)
        observer.targets_resolved(2)
        observer.node_started("pve1")
        observer.node_started("pve1/201")
        assert observer.in_flight == ["pve1", "pve1/201"]
        observer.node_finished(NodeResult("pve1", "pve1", None, "pve1", "ok", "fine"))
        observer.node_finished(NodeResult("pve1/201", "pve1", 201, "t", "fail",
                                          "Triton cpu-fallback: \x1b[2J[bold]no compiler"))
        task = observer.progress.tasks[0]
        assert (task.completed, task.total) == (2, 2)
    output = stream.getvalue()
    assert "pve1/201: Triton cpu-fallback: \\x1b[2J[bold]no compiler" in output
    assert "\x1b[2J" not in output
    assert "pve1: fine" not in output
