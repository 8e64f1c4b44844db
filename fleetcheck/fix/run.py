"""`fleetcheck fix --apply`: run each node's plan where its probe ran, then probe it again.

The audit's scheduler (`audit.AuditRun`, given the same `AuditParts`: the transport factory,
the probe, the node budget) does the reaching: inventory, discovery, one connection per host,
the transport of each node kind, bounds, Ctrl-C. This module gives it a `before_probe` step
that runs the node's plan through the node's own transport, each command bounded by the
node's budget, so the after-probe follows on the same connection. Only the nodes with steps
to run are selected; a node without a plan that the scheduler still reaches is probed and
never touched.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from fleetcheck import failures, kinds
from fleetcheck.audit import AuditParts, AuditRun
from fleetcheck.fix.apply import NodeOutcome, StepRun, run_steps
from fleetcheck.fix.plan import FixPlan, node_kind
from fleetcheck.inventory import Inventory, Target
from fleetcheck.judgement.policy import DEFAULT_POLICY, Policy
from fleetcheck.judgement.statuses import UNVERIFIED_STATUSES
from fleetcheck.observer import AuditObserver
from fleetcheck.report.content import NodeResult, Report
from fleetcheck.transport.interface import Transport, TransportError
from fleetcheck.transport.pct import sudo_prefix


class FixRun:
    """One `--apply` in progress; `outcomes()` and `after_report()` may be read at any time."""

    def __init__(
        self,
        inventory: Inventory,
        plan: FixPlan,
        *,
        policy: Policy = DEFAULT_POLICY,
        deep: bool = False,
        observer: AuditObserver | None = None,
        audit_timeout: float | None = None,
        parts: AuditParts | None = None,
    ) -> None:
        self.plan = plan
        self.parts = parts or AuditParts()
        self._outcomes = {item.node.id: NodeOutcome(item) for item in plan.runnable}
        if not self._outcomes:
            raise ValueError("no node has a step to run")
        # Exact ids, so that no glob widens the selection. A host's id also selects its
        # containers: those are probed again, never touched (`_repair` has no plan for them).
        limit = [_literal(node_id) for node_id in self._outcomes]
        # The audit's own scheduler, given the same parts (transport factory, probe, budget):
        # each node kind's transport comes from the factory, so a fix runs wherever a probe can.
        self.audit = AuditRun(inventory, limit=limit, deep=deep, policy=policy,
                              observer=observer, audit_timeout=audit_timeout,
                              before_probe=self._repair, **vars(self.parts))
        self._after: Report | None = None

    async def _repair(self, target: Target, transport: Transport) -> None:
        outcome = self._outcomes.get(target.id)
        if outcome is None:
            return  # selected by accident of a pattern: probed, never touched
        # A host's own login may not be root: its commands go through `sudo -n` when the
        # inventory says so. Inside a container or VM the transport already runs as root.
        # `sudo -n` only for the host's own login (the root of the tree: no kind above it).
        root = kinds.depth(node_kind(outcome.plan.node)) == 0
        prefix = sudo_prefix(target.host.sudo) if root else []
        try:
            async with transport.session() as run:
                await run_steps(outcome, run, budget=self.parts.budget(target.timeout),
                                prefix=prefix)
        except TransportError as exc:
            # No session at all (the host went away since the first probe): the first step
            # could not run; the after-probe will say how the node looks now.
            if not outcome.finished:
                first = outcome.plan.steps[len(outcome.ran)]
                outcome.ran.append(StepRun(step=first, argv=tuple(first.argv),
                                           error=f"{exc.kind}: {exc}"))
                outcome.finished = True

    async def run(self) -> Report:
        """Apply every plan and probe the nodes again; the after-probe's report."""
        self._after = await self.audit.run()
        return self._after

    def after_report(self) -> Report:
        """The after-probe so far (every node known; unfinished ones as interrupted)."""
        return self._after if self._after is not None else self.audit.partial_report()

    def outcomes(self) -> list[NodeOutcome]:
        """Each planned node's outcome, with its after-probe when there is one."""
        after = {node.id: node for node in self.after_report().nodes}
        result = []
        for node_id, outcome in self._outcomes.items():
            node = after.get(node_id)
            host = after.get(outcome.plan.node.host)
            if node is None and host is not None and host.status in UNVERIFIED_STATUSES:
                node = host  # a host that could not be reached stands for its nodes
            if node is not None and node.triton.cause != failures.INTERRUPTED:
                outcome.after = node
            result.append(outcome)
        return result


def _literal(node_id: str) -> str:
    """A --limit pattern matching exactly `node_id` (glob characters bracketed)."""
    return "".join(f"[{char}]" if char in "*?[" else char for char in node_id)


def merged_report(before: Report, after: Report, *, interrupted: bool) -> Report:
    """The selection as it stands after the fix: re-probed nodes replaced, others as before."""
    fresh: dict[str, NodeResult] = {node.id: node for node in after.nodes}
    nodes = tuple(fresh.get(node.id, node) for node in before.nodes)
    return dataclasses.replace(before, started_at=after.started_at,
                               finished_at=after.finished_at, nodes=nodes,
                               interrupted=interrupted or after.interrupted)


def selected_nodes(report: Report, limit: Sequence[str]) -> Report:
    """The nodes of a saved report that `--limit` selects (groups are the inventory's)."""
    if not limit:
        return report
    from fleetcheck.inventory import matches_limit

    nodes = tuple(node for node in report.nodes
                  if matches_limit(node.id, node.labels, list(limit), {}))
    return dataclasses.replace(report, nodes=nodes)
