"""One library call per command: a request in, the whole outcome out.

`audit(AuditRequest)` returns the report with its fleet checks, the `--limit` error, what
changed since the last run, the history the renderers show and the exit code; `gate`,
`probe` and `fix_before` go through the same audit path, so `fleetcheck fix` plans from a
report with fleet checks like `fleetcheck audit` writes. The command line (`cli.py`) only
parses, calls one of these, renders and exits; a program embedding fleetcheck calls them the
same way.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fleetcheck.model import NodeResult, Report, RunSummary
from fleetcheck.verdict import DEFAULT_POLICY, EXIT_USAGE, Policy, exit_code_for

if TYPE_CHECKING:
    from fleetcheck.audit import AuditParts
    from fleetcheck.inventory.model import Inventory
    from fleetcheck.observer import AuditObserver

#: How many runs a history keeps when `--keep` is not given.
DEFAULT_KEEP = 90


@dataclass(frozen=True)
class AuditRequest:
    """What to audit and how: the inventory, the playbook's policy, the selection, the
    history to compare with and keep the run in."""

    inventory: Inventory
    policy: Policy = DEFAULT_POLICY
    limit: Sequence[str] = ()
    deep: bool = False
    #: The whole audit's deadline (None: the inventory's).
    timeout: float | None = None
    #: A history folder: the last run to compare with, where this run is kept.
    history: str | None = None
    #: A command run with what changed, once the run is kept (`--on-change`).
    on_change: str | None = None
    keep: int | None = None
    parts: AuditParts | None = None
    observer: AuditObserver | None = None


@dataclass
class AuditOutcome:
    """Everything an audit found and what follows from it."""

    request: AuditRequest
    #: The report, its fleet checks included.
    report: Report
    #: Patterns of `--limit` that selected nothing once discovery ran (exit code 2).
    limit_error: str | None = None
    #: What changed since the history's last run, one line each.
    changes: list[str] = field(default_factory=list)
    history: Sequence[RunSummary] = ()
    failing_since: Mapping[str, str] = field(default_factory=dict)
    #: Lines for the operator (stderr), in the order they arose.
    notices: list[str] = field(default_factory=list)
    #: Whether `record` keeps the run in the history (not an interrupted or mistaken run).
    keep_run: bool = False
    hook_input: str | None = None

    @property
    def exit_code(self) -> int:
        return EXIT_USAGE if self.limit_error else int(exit_code_for(self.report))

    def render(self, fmt: str, **options: Any) -> str:
        from fleetcheck.render import render

        return render(self.report, fmt, history=self.history,
                      failing_since=self.failing_since, changes=self.changes, **options)

    def record(self) -> list[str]:
        """Keep the run in the history and then run the `--on-change` hook (once the report
        is written: the hook may read it); the warnings, one line each."""
        warnings: list[str] = []
        hook_input = self.hook_input
        if self.keep_run and self.request.history:
            from fleetcheck.history import HistoryError, save_run

            try:
                save_run(self.request.history, self.report,
                         keep=self.request.keep or DEFAULT_KEEP)
            except HistoryError as exc:
                # The report is written; a history that cannot take the run is a warning.
                warnings.append(f"warning: {exc}")
                hook_input = None
        if hook_input is not None and self.request.on_change:
            from fleetcheck.hook import run_on_change

            problem = run_on_change(self.request.on_change, hook_input)
            if problem:
                warnings.append(f"--on-change: {problem}")
        return warnings


async def _audit_into(audit: Awaitable[Report], into: list[Report]) -> None:
    """Await the audit and keep its report in `into`, so that the task's own result is None.

    On Python 3.11 `asyncio.run` ends by checking its SIGINT handler with `signal.getsignal`,
    which formats the handler, a partial holding the main task, with %r: a task whose result
    was the report had the whole report repr'd twice (0.1 ms of CPU per node, 0.2 s at 2,000).
    """
    into.append(await audit)


def _collect(request: AuditRequest, notices: list[str]) -> Report:
    """Run the audit; Ctrl-C returns what was gathered."""
    from fleetcheck.audit import AuditParts, AuditRun
    from fleetcheck.inventory import check_limit

    check_limit(request.inventory, list(request.limit))
    run = AuditRun(request.inventory, limit=list(request.limit) or None,
                   deep=request.deep or request.policy.deep, policy=request.policy,
                   observer=request.observer, audit_timeout=request.timeout,
                   **vars(request.parts or AuditParts()))
    try:
        reports: list[Report] = []
        asyncio.run(_audit_into(run.run(), reports))
        return reports[0]
    except KeyboardInterrupt:
        notices.append("interrupted: writing what was gathered")
        return run.partial_report()


def _unmatched_limit(inventory: Inventory, limit: Sequence[str], report: Report) -> str | None:
    """The error for --limit patterns that selected nothing once containers were discovered."""
    if not limit or report.interrupted:
        return None
    from fleetcheck.inventory import unmatched_limit_error
    from fleetcheck.verdict import UNVERIFIED_STATUSES

    # A host that could not be listed stands for its containers: not a typo in --limit.
    unlisted = [n.id for n in report.nodes if n.vmid is None and n.status in
                UNVERIFIED_STATUSES]
    return unmatched_limit_error(list(limit), [(n.id, n.labels) for n in report.nodes],
                                 inventory.groups, unlisted)


def with_fleet_checks(report: Report, policy: Policy) -> Report:
    """`report` with the fleet-wide consistency checks of `policy`."""
    from fleetcheck.consistency import fleet_checks

    return dataclasses.replace(report, fleet_checks=fleet_checks(report.nodes, policy),
                               playbook=policy.name)


def audit(request: AuditRequest) -> AuditOutcome:
    """Audit the inventory and read the history: the whole outcome of `fleetcheck audit`."""
    notices: list[str] = []
    report = with_fleet_checks(_collect(request, notices), request.policy)
    outcome = AuditOutcome(request, report, notices=notices,
                           limit_error=_unmatched_limit(request.inventory, request.limit,
                                                        report))
    if not request.history:
        return outcome
    from fleetcheck import history as hist
    from fleetcheck.rundiff import diff_reports

    outcome.keep_run = not report.interrupted and not outcome.limit_error
    previous = hist.previous_run(request.history, None)
    if previous is not None and not outcome.limit_error:
        diff = diff_reports(previous, report)
        outcome.changes = diff.lines()
        if diff.changed and request.on_change and outcome.keep_run:
            outcome.hook_input = "\n".join(outcome.changes) + "\n"
    if report.interrupted:
        # A partial run would read as failures now and recoveries tomorrow.
        notices.append("the audit was interrupted: this run is not kept in the history")
    outcome.history = hist.history_summaries(request.history)
    outcome.failing_since = hist.failing_since(request.history, report)
    return outcome


@dataclass
class GateOutcome:
    """`fleetcheck gate`: the report (fleet checks included), its lines and exit code."""

    report: Report
    limit_error: str | None
    notices: list[str]

    @property
    def lines(self) -> list[str]:
        """What the gate says on stderr, one line per blocking node."""
        from fleetcheck.gate import gate_lines

        return gate_lines(self.report)

    def json(self) -> dict[str, Any]:
        from fleetcheck.gate import gate_json

        return gate_json(self.report)

    @property
    def exit_code(self) -> int:
        from fleetcheck.gate import gate_exit_code

        return EXIT_USAGE if self.limit_error else int(gate_exit_code(self.report))


def gate(request: AuditRequest) -> GateOutcome:
    """Audit the selection for a job's start: the policy's own `deep`, no history."""
    outcome = audit(dataclasses.replace(request, history=None, on_change=None))
    return GateOutcome(outcome.report, outcome.limit_error, outcome.notices)


def fix_before(request: AuditRequest) -> AuditOutcome:
    """The state `fleetcheck fix` plans from when it probes the inventory now: the same audit
    as `fleetcheck audit`, fleet checks included (no history: fix keeps its own)."""
    return audit(dataclasses.replace(request, history=None, on_change=None))


@dataclass(frozen=True)
class ProbeRequest:
    """`fleetcheck probe` / `health`: this machine, with its interpreter and the policy."""

    python: str | None = None
    deep: bool = False
    #: The node timeout (None: the default for a plain or a deep probe).
    timeout: float | None = None
    policy: Policy = DEFAULT_POLICY


@dataclass(frozen=True)
class ProbeOutcome:
    node: NodeResult
    report: Report
    #: The node document (`fleetcheck.node/1`) `probe --format json` prints and merge reads.
    document: Mapping[str, Any]

    @property
    def exit_code(self) -> int:
        return int(exit_code_for(self.report))


def probe(request: ProbeRequest) -> ProbeOutcome:
    """Probe the machine fleetcheck runs on: its node, as a report and a node document."""
    from fleetcheck.audit import local_node_result
    from fleetcheck.nodedoc import node_document
    from fleetcheck.timestamps import utc_now
    from fleetcheck.transport.interface import node_timeout

    deep = request.deep or request.policy.deep
    started = utc_now()
    node = local_node_result(python=request.python, deep=deep,
                             timeout=node_timeout(request.timeout, deep=deep),
                             policy=request.policy)
    finished = utc_now()
    report = Report(started_at=started, finished_at=finished, nodes=(node,), inventory=None,
                    playbook=request.policy.name)
    return ProbeOutcome(node, report, node_document(node, finished))
