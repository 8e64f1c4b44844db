"""One library call per command: a request in, the whole outcome out.

`audit(AuditRequest)` returns the report with its fleet checks, the `--limit` error, what
changed since the last run, the history the renderers show and the exit code; `gate`,
`probe` and `fix_before` go through the same audit path, so `fleetcheck fix` plans from a
report with fleet checks like `fleetcheck audit` writes; `report` and `diff` read saved
audits. The command line (`cli/`, one module per command) only parses, calls one of these (or
the one library call a command stands for), renders and exits; a program embedding fleetcheck
calls them the same way.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fleetcheck.errors import FleetcheckError
from fleetcheck.judgement.exit_codes import EXIT_PASS, EXIT_USAGE, exit_code_for
from fleetcheck.judgement.policy import DEFAULT_POLICY, Policy
from fleetcheck.report.content import NodeResult, Report, RunSummary

if TYPE_CHECKING:
    from fleetcheck.audit import AuditParts
    from fleetcheck.inventory_data.model import Inventory
    from fleetcheck.observer import AuditObserver
    from fleetcheck.report.rundiff import ReportDiff

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


class CommandError(FleetcheckError):
    """What was asked of a command cannot be done as asked (nothing was changed); exit 2."""


@dataclass(frozen=True)
class Keeping:
    """Where a run is kept and who hears what changed: `--history`, `--keep`, `--on-change`."""

    history: str | None = None
    on_change: str | None = None
    keep: int | None = None


@dataclass
class AuditOutcome:
    """Everything an audit (or a merge) found and what follows from it."""

    #: The report, its fleet checks included.
    report: Report
    keeping: Keeping = Keeping()
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
    #: The least exit code the outcome has whatever its nodes say (a merge with an input it
    #: could not read: unverified).
    least_exit: int = EXIT_PASS

    @property
    def exit_code(self) -> int:
        if self.limit_error:
            return EXIT_USAGE
        code = int(exit_code_for(self.report))
        return self.least_exit if code == EXIT_PASS else code

    def render(self, fmt: str, **options: Any) -> str:
        from fleetcheck.render import render

        return render(self.report, fmt, history=self.history,
                      failing_since=self.failing_since, changes=self.changes, **options)

    def record(self) -> list[str]:
        """Keep the run in the history and then run the `--on-change` hook (once the report
        is written: the hook may read it); the warnings, one line each."""
        warnings: list[str] = []
        hook_input = self.hook_input
        keeping = self.keeping
        if self.keep_run and keeping.history:
            warning = _save(keeping.history, self.report, keeping.keep)
            if warning:
                warnings.append(warning)
                hook_input = None
        if hook_input is not None and keeping.on_change:
            from fleetcheck.integrations.hook import run_on_change

            problem = run_on_change(keeping.on_change, hook_input)
            if problem:
                warnings.append(f"--on-change: {problem}")
        return warnings


def _save(history: str, report: Report, keep: int | None) -> str | None:
    """Keep `report` in the history; a warning when the history cannot take it (the report
    is written already: that is no reason to fail the command)."""
    from fleetcheck.report.history import DEFAULT_KEEP, HistoryError, save_run

    try:
        save_run(history, report, keep=keep or DEFAULT_KEEP)
    except HistoryError as exc:
        return f"warning: {exc}"
    return None


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
    from fleetcheck.judgement.statuses import UNVERIFIED_STATUSES

    # A host that could not be listed stands for its containers: not a typo in --limit.
    unlisted = [n.id for n in report.nodes if n.vmid is None and n.status in
                UNVERIFIED_STATUSES]
    return unmatched_limit_error(list(limit), [(n.id, n.labels) for n in report.nodes],
                                 inventory.groups, unlisted)


def with_fleet_checks(report: Report, policy: Policy) -> Report:
    """`report` with the fleet-wide consistency checks of `policy`."""
    from fleetcheck.judgement.consistency import fleet_checks

    return dataclasses.replace(report, fleet_checks=fleet_checks(report.nodes, policy),
                               playbook=policy.name)


def audit(request: AuditRequest) -> AuditOutcome:
    """Audit the inventory and read the history: the whole outcome of `fleetcheck audit`."""
    notices: list[str] = []
    report = with_fleet_checks(_collect(request, notices), request.policy)
    outcome = AuditOutcome(report, Keeping(request.history, request.on_change, request.keep),
                           notices=notices,
                           limit_error=_unmatched_limit(request.inventory, request.limit,
                                                        report))
    return _with_history(outcome)


def _with_history(outcome: AuditOutcome) -> AuditOutcome:
    """`outcome` with what its history says: what changed since the last run, the trend, the
    failing-since dates, and whether the run is kept (not an interrupted or mistaken one)."""
    history = outcome.keeping.history
    if not history:
        return outcome
    from fleetcheck.report import history as hist
    from fleetcheck.report.rundiff import diff_reports

    report = outcome.report
    outcome.keep_run = not report.interrupted and not outcome.limit_error
    previous = hist.previous_run(history, None)
    if previous is not None and not outcome.limit_error:
        diff = diff_reports(previous, report)
        outcome.changes = diff.lines()
        if diff.changed and outcome.keeping.on_change and outcome.keep_run:
            outcome.hook_input = "\n".join(outcome.changes) + "\n"
    if report.interrupted:
        # A partial run would read as failures now and recoveries tomorrow.
        outcome.notices.append("the audit was interrupted: this run is not kept in the history")
    outcome.history = hist.history_summaries(history)
    outcome.failing_since = hist.failing_since(history, report)
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
        from fleetcheck.judgement.gate import gate_lines

        return gate_lines(self.report)

    def json(self) -> dict[str, Any]:
        from fleetcheck.judgement.gate import gate_json

        return gate_json(self.report)

    @property
    def exit_code(self) -> int:
        from fleetcheck.judgement.gate import gate_exit_code

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

    def render(self, fmt: str, **options: Any) -> str:
        """The node in `fmt`, as that format writes a probe (json: the node document)."""
        from fleetcheck.render import render_probe

        return render_probe(self.report, self.document, fmt, **options)


def probe(request: ProbeRequest) -> ProbeOutcome:
    """Probe the machine fleetcheck runs on: its node, as a report and a node document."""
    from fleetcheck.audit import local_node_result
    from fleetcheck.report.nodedoc import node_document
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


def report(results: str, history: str | None = None) -> AuditOutcome:
    """`fleetcheck report`: a saved audit (JSON, or .json.gz from a history) with what
    `history` says of it (the trend, failing since), to render again; nothing is kept."""
    from fleetcheck.report.reportio import load_report

    outcome = AuditOutcome(load_report(results))
    if history:
        from fleetcheck.report import history as hist

        outcome.history = hist.history_summaries(history)
        outcome.failing_since = hist.failing_since(history, outcome.report)
    return outcome


def diff(old: str, new: str) -> ReportDiff:
    """`fleetcheck diff`: what changed between two saved audits."""
    from fleetcheck.report.reportio import load_report
    from fleetcheck.report.rundiff import diff_reports

    return diff_reports(load_report(old), load_report(new))


@dataclass(frozen=True)
class GateDocumentsRequest:
    """`fleetcheck gate --documents PATH --nodes HOSTLIST`: the job's nodes judged from the
    node documents they wrote, probing nothing."""

    documents: Sequence[str]
    nodes: str
    policy: Policy = DEFAULT_POLICY
    #: The oldest document that counts (None: `budget.DEFAULT_MAX_AGE_S`).
    max_age_s: float | None = None


def gate_documents(request: GateDocumentsRequest) -> GateOutcome:
    """The gate over gathered node documents; the merge's lines for them are its notices."""
    from fleetcheck.budget import DEFAULT_MAX_AGE_S
    from fleetcheck.judgement.gate import documents_gate_report

    report, notes = documents_gate_report(list(request.documents), request.nodes,
                                          request.policy,
                                          request.max_age_s or DEFAULT_MAX_AGE_S)
    return GateOutcome(report, None, notes)


@dataclass(frozen=True)
class MergeRequest:
    """`fleetcheck merge`: node documents (files, folders, tarballs, `-`) into one report."""

    inputs: Sequence[str]
    policy: Policy = DEFAULT_POLICY
    id_template: str = "auto"
    #: A document probed longer ago leaves its node unverified (None: the nodes' default).
    max_age_s: float | None = None
    keeping: Keeping = Keeping()


def merge(request: MergeRequest) -> AuditOutcome:
    """The merged report with its fleet checks and what its history says, as `audit` gives;
    the documents not merged as given are its notices, and an unread input makes it exit 3
    at least."""
    from fleetcheck.budget import DEFAULT_MAX_AGE_S
    from fleetcheck.judgement.exit_codes import EXIT_UNVERIFIED
    from fleetcheck.report.merge import merge_inputs, problem_lines

    merged = merge_inputs(request.inputs, policy=request.policy,
                          id_template=request.id_template,
                          max_age_s=request.max_age_s or DEFAULT_MAX_AGE_S)
    unread = any(problem.kind == "unread" for problem in merged.problems)
    outcome = AuditOutcome(merged.report, request.keeping, notices=problem_lines(merged),
                           least_exit=EXIT_UNVERIFIED if unread else EXIT_PASS)
    return _with_history(outcome)


@dataclass(frozen=True)
class HealthRequest:
    """`fleetcheck health`: this node's health from the cache or a probe now, and, with
    `slurm`, the node drained or resumed to match."""

    #: The verdict `probe --cache FILE` saved; None: probe now.
    cache: str | None = None
    #: A cached verdict older than this is not verified (None: `DEFAULT_MAX_AGE_S`).
    max_age_s: float | None = None
    probe: ProbeRequest = ProbeRequest()
    #: node-problem-detector's message (80 characters) instead of `STATE: MESSAGE`.
    npd: bool = False
    slurm: bool = False
    #: The Slurm node (None: $SLURMD_NODENAME, else the short host name).
    node: str | None = None
    drain_unverified: bool = False
    #: `--max-out` (an `outbound.OutBound`); None: no bound.
    bound: Any = None


@dataclass(frozen=True)
class HealthOutcome:
    health: Any
    #: The one line for stdout.
    line: str
    #: What was done in Slurm (or why not), for stderr.
    notices: Sequence[str] = ()

    @property
    def exit_code(self) -> int:
        return int(self.health.exit_code)


def health(request: HealthRequest) -> HealthOutcome:
    """This node's health (ok, fail, unknown), its line, and what Slurm was told."""
    from fleetcheck.budget import DEFAULT_MAX_AGE_S
    from fleetcheck.integrations import health_check

    if request.cache:
        verdict = health_check.read_cache(request.cache,
                                        request.max_age_s or DEFAULT_MAX_AGE_S)
    else:
        from fleetcheck.report.reportio import node_to_dict

        probed = probe(request.probe)
        verdict = health_check.health_of_node(node_to_dict(probed.node), probed.exit_code)
    line = (health_check.npd_message(verdict) if request.npd
            else f"{verdict.state}: {verdict.message}")
    notices: list[str] = []
    if request.slurm:
        try:
            done = health_check.apply_to_slurm(
                verdict, request.node or health_check.slurm_node_name(),
                drain_unknown=request.drain_unverified, bound=request.bound)
        except health_check.SlurmError as exc:
            done = str(exc)
        notices.append(f"health: {done}")
    return HealthOutcome(verdict, line, notices)


@dataclass(frozen=True)
class FixRequest:
    """`fleetcheck fix`: plan the repair of the failing nodes of `source` (an inventory,
    probed now, or a saved audit) and, with `apply`, run it and probe again."""

    source: str
    policy: Policy = DEFAULT_POLICY
    limit: Sequence[str] = ()
    apply: bool = False
    #: `--max-out` (an `outbound.OutBound`); None: the default bound.
    bound: Any = None
    #: The deadline of each phase (the first probe; the repair and the probe after it).
    timeout: float | None = None
    #: With `apply`: keep the after-state in this history like any audit.
    history: str | None = None
    parts: AuditParts | None = None
    observer: AuditObserver | None = None
    #: Reads an inventory (its warnings are the caller's to show); None: `load_inventory`,
    #: its warnings among the outcome's notices.
    load_inventory: Any = None

    def check(self) -> None:
        """CommandError for options that do not go together (before anything is read)."""
        if self.history and not self.apply:
            raise CommandError("--history needs --apply (a dry run probes nothing new)")


@dataclass
class FixPlanned:
    """The state fix plans from, the plan, and whether it is applied."""

    request: FixRequest
    inventory: Inventory | None
    before: Report
    plan: Any
    #: Whether `fix_apply` runs the plan (asked to, something to run, within the bound).
    applying: bool
    started_at: str
    notices: list[str] = field(default_factory=list)

    @property
    def runnable(self) -> Sequence[Any]:
        return list(self.plan.runnable)

    @property
    def command_count(self) -> int:
        return sum(len(item.steps) for item in self.runnable)

    @property
    def exit_code(self) -> int:
        """The audit's exit code for the state planned from (nothing applied)."""
        return int(exit_code_for(self.before))

    def record(self, outcomes: Sequence[Any] = (), *, applied: bool = False,
               interrupted: bool = False) -> dict[str, Any]:
        """The `fleetcheck.fix/1` record of the plan and of what ran where."""
        from fleetcheck.fix.render import record_dict
        from fleetcheck.timestamps import utc_now

        return record_dict(self.plan, list(outcomes), started_at=self.started_at,
                           finished_at=utc_now(), applied=applied, interrupted=interrupted,
                           inventory=self.before.inventory)


def _inventory_loader(request: FixRequest, notices: list[str]) -> Any:
    if request.load_inventory is not None:
        return request.load_inventory
    from fleetcheck.inventory import load_inventory

    def load(path: str) -> Inventory:
        inventory = load_inventory(path)
        notices.extend(f"warning: {warning}" for warning in inventory.warnings)
        return inventory

    return load


def _fix_state(request: FixRequest, notices: list[str]) -> tuple[Inventory | None, Report]:
    """The state to plan from: a saved audit (and, to apply, the inventory it names), or a
    probe of the inventory now, fleet checks included."""
    load = _inventory_loader(request, notices)
    if request.source.lower().endswith((".json", ".gz")):
        from fleetcheck.fix.run import selected_nodes
        from fleetcheck.report.reportio import load_report

        before = selected_nodes(load_report(request.source), list(request.limit))
        if not request.apply:
            return None, before
        if not before.inventory or before.inventory.startswith("<"):
            raise CommandError(f"{request.source}: names no inventory file to reach its nodes "
                               "through; run `fleetcheck fix INVENTORY --apply`")
        return load(before.inventory), before
    inventory = load(request.source)
    outcome = fix_before(AuditRequest(inventory, request.policy, limit=tuple(request.limit),
                                      timeout=request.timeout, parts=request.parts,
                                      observer=request.observer))
    notices.extend(outcome.notices)
    if outcome.limit_error:
        raise CommandError(outcome.limit_error)
    return inventory, outcome.report


def fix_plan(request: FixRequest) -> FixPlanned:
    """The first half of `fleetcheck fix`: the state, its plan, and whether it may be applied
    (never when the first probe was interrupted, nor beyond `--max-out`)."""
    from fleetcheck.fix import plan_report
    from fleetcheck.outbound import DEFAULT_OUT_BOUND, parse_out_bound
    from fleetcheck.timestamps import utc_now

    request.check()
    bound = request.bound if request.bound is not None else parse_out_bound(DEFAULT_OUT_BOUND)
    started = utc_now()
    notices: list[str] = []
    inventory, before = _fix_state(request, notices)
    plan = plan_report(before, source=request.source)
    runnable = plan.runnable
    if request.apply and before.interrupted:
        # A partial picture is no ground for changing nodes: plan it, apply nothing.
        notices.append("the first probe was interrupted: nothing is applied")
    applying = bool(request.apply and runnable and not before.interrupted)
    if applying:
        allowed = bound.allowed(len(before.nodes))
        if len(runnable) > allowed:
            # One bad image fails every node at once; repairing them all at once is how a
            # wrong fix takes the whole fleet down.
            notices.append(f"fix: not repairing {len(runnable)} of {len(before.nodes)} "
                           f"nodes at once (--max-out {bound.describe(len(before.nodes))}); "
                           "nothing was changed: narrow the selection with --limit, or raise "
                           "--max-out")
            applying = False
    elif request.apply and not before.interrupted:
        notices.append("nothing to apply: no failing node has a step fleetcheck runs")
    return FixPlanned(request, inventory, before, plan, applying, started, notices)


@dataclass
class FixOutcome:
    """What `fix --apply` ran, the state after it, and the exit code for that state."""

    planned: FixPlanned
    #: Each node's `fix.apply.NodeOutcome`: the steps run, before and after.
    outcomes: list[Any]
    #: The before-report with the nodes probed again replaced by their after-state.
    state: Report
    interrupted: bool
    notices: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return int(exit_code_for(self.state))

    def record(self) -> dict[str, Any]:
        return self.planned.record(self.outcomes, applied=True, interrupted=self.interrupted)


def fix_apply(planned: FixPlanned, *, observer: AuditObserver | None = None,
              on_record: Any = None) -> FixOutcome:
    """The second half of `fleetcheck fix --apply`: run the plan on the nodes, probe them
    again, keep the after-state in the history. `on_record(dict)` gets the record however
    the run ends (a Ctrl-C, an error), so it says every command that ran, where, and how."""
    from fleetcheck.fix.run import FixRun, merged_report

    if not planned.applying or planned.inventory is None:
        raise CommandError("nothing to apply")
    request = planned.request
    notices: list[str] = []
    interrupted = False
    run = FixRun(planned.inventory, planned.plan, policy=request.policy,
                 deep=request.policy.deep, observer=observer or request.observer,
                 audit_timeout=request.timeout, parts=request.parts)
    try:
        asyncio.run(run.run())
    except KeyboardInterrupt:
        notices.append("interrupted: recording what ran")
        interrupted = True
    finally:
        after = run.after_report()
        interrupted = interrupted or after.interrupted
        outcome = FixOutcome(planned, run.outcomes(),
                             merged_report(planned.before, after, interrupted=interrupted),
                             interrupted, notices)
        if on_record is not None:
            on_record(outcome.record())
    if request.history and not outcome.state.interrupted:
        warning = _save(request.history, outcome.state, None)
        if warning:
            notices.append(warning)
    return outcome
