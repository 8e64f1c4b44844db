"""The data that flows between stages: checks, verdicts, node results and the audit report."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fleetcheck.kindtable import default_kind

AUDIT_SCHEMA = "fleetcheck.audit/1"
PROBE_SCHEMA = "fleetcheck.probe/1"

#: Node statuses, the least severe first (the order of summaries and trends).
NODE_STATUSES = ("ok", "skipped", "warn", "unreachable", "error", "fail")
#: Check statuses.
CHECK_STATUSES = ("pass", "warn", "fail", "skip", "error")
#: Triton verdicts.
VERDICTS = ("gpu", "cpu-fallback", "no-gpu", "not-installed", "unknown")

#: What each status means is judgement/statuses.py's; the exit codes are judgement/exit_codes.py's.


@dataclass(frozen=True, slots=True)  # slots: a report holds dozens per node (docs/scaling.md)
class Check:
    """One finding of the probe (or of the fleet consistency rules)."""

    id: str
    status: str
    summary: str
    fix: str = ""
    evidence: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TritonVerdict:
    """Will Triton run on the GPU here, and if not, the one root cause and its fix."""

    verdict: str = "unknown"
    backend: str | None = None
    cause: str | None = None
    fix: str = ""


@dataclass(frozen=True)
class NodeResult:
    """Everything known about one node after an audit: a result, never an exception."""

    id: str
    host: str
    vmid: int | None
    name: str
    status: str
    reason: str
    triton: TritonVerdict = field(default_factory=TritonVerdict)
    checks: tuple[Check, ...] = ()
    facts: Mapping[str, Any] = field(default_factory=dict)
    duration_s: float = 0.0
    labels: tuple[str, ...] = ()
    #: Its kind (`fleetcheck/kinds/`); left out (a report from before kinds): the kinds'
    #: table's `default_kind` from vmid (`kindtable.py`).
    kind: str = ""
    #: The id of the node this one runs in (a guest's host, a container's guest), or None.
    #: Given by whoever makes the node (the audit from its target, a report from its JSON,
    #: which has carried it since it carried the kind); left out with the kind, the guest a
    #: VMID meant then runs on its host.
    parent: str | None = None

    def __post_init__(self) -> None:
        # Data below the kinds: the kinds' table (`kindtable.py`, which imports nothing) is
        # all it asks, never the registry (the kinds speak of NodeResults).
        if not self.kind:
            object.__setattr__(self, "kind", default_kind(self.vmid))
            if self.parent is None and self.vmid is not None and self.host != self.id:
                object.__setattr__(self, "parent", self.host)

    def check(self, check_id: str) -> Check | None:
        """The check with this id, or None."""
        for item in self.checks:
            if item.id == check_id:
                return item
        return None


@dataclass(frozen=True)
class Report:
    """One audit run: the nodes, and the findings that span several nodes."""

    started_at: str
    finished_at: str
    nodes: tuple[NodeResult, ...]
    inventory: str | None = None
    playbook: str | None = None
    fleet_checks: tuple[Check, ...] = ()
    interrupted: bool = False
    schema: str = AUDIT_SCHEMA

    @property
    def summary(self) -> dict[str, int]:
        """Count of nodes per status, every status present (zeros included)."""
        counts = Counter(node.status for node in self.nodes)
        return {status: counts.get(status, 0) for status in NODE_STATUSES}


@dataclass(frozen=True)
class RunSummary:
    """One past run, as the history keeps it for trends: when, and how many nodes per status."""

    started_at: str
    summary: Mapping[str, int]
    cpu_fallback: int
    path: str = ""
