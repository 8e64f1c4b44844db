"""Progress reporting from the library to whoever draws it (the CLI's progress bar)."""

from __future__ import annotations

from typing import Protocol

from fleetcheck.report.content import NodeResult


class AuditObserver(Protocol):
    """Called by the audit as it goes; must be cheap and must not raise."""

    def targets_resolved(self, total: int) -> None: ...

    def node_started(self, node_id: str) -> None: ...

    def node_finished(self, node: NodeResult) -> None: ...


class NullObserver:
    """Observes nothing (the default, and what runs without a TTY)."""

    def targets_resolved(self, total: int) -> None:
        pass

    def node_started(self, node_id: str) -> None:
        pass

    def node_finished(self, node: NodeResult) -> None:
        pass
