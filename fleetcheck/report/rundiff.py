"""What changed between two runs: node statuses, Triton verdicts, versions, fleet checks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fleetcheck.judgement.consistency import fact_label, fact_value
from fleetcheck.judgement.policy import CONSISTENCY_KEYS
from fleetcheck.judgement.statuses import FAILING_STATUSES, HEALTHY_STATUSES
from fleetcheck.render.sanitize import sanitise
from fleetcheck.report.content import NodeResult, Report


@dataclass(frozen=True)
class Change:
    """One difference between two runs, about a node (or "fleet" for a fleet finding)."""

    kind: str
    node: str
    old: str | None = None
    new: str | None = None
    detail: str = ""


#: Change kinds, in the order the text shows them.
CHANGE_KINDS = (
    "new-failure", "recovered", "status", "verdict", "version", "appeared", "gone", "fleet",
)

_TITLES = {
    "new-failure": "new failure", "recovered": "recovered", "status": "status",
    "verdict": "Triton verdict", "version": "version", "appeared": "new node",
    "gone": "node gone", "fleet": "fleet",
}


@dataclass(frozen=True)
class ReportDiff:
    """What changed from one run to the next."""

    old_started_at: str
    new_started_at: str
    changes: tuple[Change, ...] = ()

    @property
    def changed(self) -> bool:
        return bool(self.changes)

    def lines(self) -> list[str]:
        """The diff as text, one line per change, printable characters only."""
        span = f"from {self.old_started_at or '?'} to {self.new_started_at or '?'}"
        if not self.changes:
            return [f"no changes {span}"]
        return [f"{len(self.changes)} change(s) {span}:"] + [_change_line(c) for c in self.changes]

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": "fleetcheck.diff/1",
            "old_started_at": self.old_started_at,
            "new_started_at": self.new_started_at,
            "changed": self.changed,
            "changes": [
                {"kind": c.kind, "node": c.node, "old": c.old, "new": c.new, "detail": c.detail}
                for c in self.changes
            ],
        }


def _change_line(change: Change) -> str:
    title = _TITLES.get(change.kind, change.kind)
    node = sanitise(change.node, 120)
    old, new = sanitise(change.old or "-", 120), sanitise(change.new or "-", 120)
    detail = sanitise(change.detail)
    if change.kind == "appeared":
        text = f"{node} ({new})"
    elif change.kind == "gone":
        text = f"{node} (was {old})"
    elif change.kind == "version":
        text = f"{node}: {detail} {old} -> {new}"
        detail = ""
    else:
        text = f"{node}: {old} -> {new}"
    return f"  {title}: {text}" + (f": {detail}" if detail else "")


def _node_changes(old: NodeResult, new: NodeResult) -> list[Change]:
    changes = []
    if old.status != new.status:
        if new.status == "fail":
            kind = "new-failure"
        elif old.status in FAILING_STATUSES and new.status in HEALTHY_STATUSES:
            kind = "recovered"
        else:
            kind = "status"
        changes.append(Change(kind, new.id, old.status, new.status,
                              new.reason if kind != "recovered" else ""))
    if old.triton.verdict != new.triton.verdict:
        changes.append(Change("verdict", new.id, old.triton.verdict, new.triton.verdict,
                              new.triton.cause or ""))
    for key in CONSISTENCY_KEYS:
        before, after = fact_value(old.facts, key), fact_value(new.facts, key)
        # A fact only one run has (node unreachable, probe cut short) is not drift.
        if before is not None and after is not None and before != after:
            changes.append(Change("version", new.id, before, after, fact_label(key)))
    return changes


def diff_reports(old: Report, new: Report) -> ReportDiff:
    """What changed from `old` to `new`: per node, the fleet findings, nodes come and gone."""
    changes: list[Change] = []
    old_nodes = {node.id: node for node in old.nodes}
    new_nodes = {node.id: node for node in new.nodes}
    for node_id, node in new_nodes.items():
        if node_id in old_nodes:
            changes.extend(_node_changes(old_nodes[node_id], node))
        else:
            changes.append(Change("appeared", node_id, None, node.status, ""))
    for node_id, node in old_nodes.items():
        if node_id not in new_nodes:
            changes.append(Change("gone", node_id, node.status, None, ""))
    old_fleet = {check.id: check for check in old.fleet_checks}
    new_fleet = {check.id: check for check in new.fleet_checks}
    for check_id in sorted(set(old_fleet) | set(new_fleet)):
        before, after = old_fleet.get(check_id), new_fleet.get(check_id)
        was = before.status if before else "pass"
        now = after.status if after else "pass"
        if was != now:
            changes.append(Change("fleet", check_id, was, now, after.summary if after else ""))
    rank = {kind: index for index, kind in enumerate(CHANGE_KINDS)}
    changes.sort(key=lambda change: (rank.get(change.kind, len(rank)), change.node))
    return ReportDiff(old.started_at, new.started_at, tuple(changes))
