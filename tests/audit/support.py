"""Helpers shared by the audit tests: run an audit of a test fleet, read its rows, and pass
its deadline at a moment the test chooses."""

from __future__ import annotations

import asyncio

from fleetcheck.audit import run_audit
from fleetcheck.inventory import load_inventory
from fleetcheck.observer import NullObserver
from fleetcheck.report.content import NodeResult, Report
from tests.fleet import Fleet

GPU_OK = ("ok", "Triton gpu (cuda)")


def audit(fleet: Fleet, **kwargs: object) -> Report:
    inventory = load_inventory(str(fleet.inventory))
    return asyncio.run(run_audit(inventory, **kwargs))  # type: ignore[arg-type]


def rows(report: Report) -> list[tuple[str, str, str]]:
    return [(node.id, node.status, node.reason) for node in report.nodes]


class MovableClock(asyncio.SelectorEventLoop):
    """An event loop whose clock the test can move on: every timer the audit set (its deadline
    among them) sees the time jump, as it would after that many seconds had passed."""

    def __init__(self) -> None:
        super().__init__()
        self.ahead = 0.0

    def time(self) -> float:
        return super().time() + self.ahead


class DeadlineWhenFinished(NullObserver):
    """Moves the audit's clock past its deadline once every node in `nodes` has finished."""

    def __init__(self, loop: MovableClock, nodes: set[str], deadline: float) -> None:
        self.loop, self.waiting, self.deadline = loop, set(nodes), deadline
        self.passed = False

    def node_finished(self, node: NodeResult) -> None:
        self.waiting.discard(node.id)
        if not self.waiting and not self.passed:
            self.passed = True
            self.loop.ahead += self.deadline


def audit_until_deadline(fleet: Fleet, finished: set[str], *, deadline: float = 120,
                         **kwargs: object) -> Report:
    """Audit with `deadline` as audit_timeout, passed as soon as the `finished` nodes are done
    (at the latest, `deadline` seconds from now: when they never finish, the test fails on
    what its report shows)."""
    loop = MovableClock()
    observer = DeadlineWhenFinished(loop, finished, deadline)
    asyncio.set_event_loop(loop)  # as asyncio.run does, on this loop
    try:
        return loop.run_until_complete(run_audit(
            load_inventory(str(fleet.inventory)), observer=observer, audit_timeout=deadline,
            **kwargs))  # type: ignore[arg-type]
    finally:
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.run_until_complete(loop.shutdown_default_executor())
        asyncio.set_event_loop(None)
        loop.close()
