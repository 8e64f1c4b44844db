"""Rendering `fleetcheck fix`: the plan as text, the before -> after table, the JSON record.

Everything taken from a node (reasons, paths, command output) passes the terminal
sanitiser before it is printed; commands are shown with shlex.join, as a shell would read them.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import Any

from fleetcheck.fix.apply import NodeOutcome, StepRun
from fleetcheck.fix.plan import FixPlan, NodePlan
from fleetcheck.judgement.fixes import root_cause
from fleetcheck.judgement.statuses import HEALTHY_STATUSES
from fleetcheck.render.sanitize import terminal_line
from fleetcheck.report.content import NodeResult

FIX_SCHEMA = "fleetcheck.fix/1"


def command_line(argv: Sequence[str]) -> str:
    """argv as one shell-quoted line (display only: commands are always run as argv)."""
    return terminal_line(shlex.join(argv))


def _cause_word(node: NodeResult) -> str:
    cause = root_cause(node)
    return cause.id if cause is not None else (node.triton.cause or "-")


def _plan_lines(plan: NodePlan) -> list[str]:
    node = plan.node
    lines = [f"{terminal_line(node.id)}  {node.status}  {terminal_line(node.reason)}"]
    if plan.causes:
        lines.append(f"  causes: {', '.join(plan.causes)}")
    if plan.steps:
        lines.append(f"  runs {terminal_line(plan.where)}; stops at the first failing command:")
        for number, step in enumerate(plan.steps, 1):
            lines.append(f"    {number}. {terminal_line(step.why)}  [{step.cause}]")
            shown = command_line(step.argv)
            if step.input is not None:
                shown += f"  <<< {terminal_line(step.input.strip())}"
            lines.append(f"       $ {shown}")
    else:
        lines.append("  runs nothing on this node")
    for who, heading in (("host", "for the host's admin"), ("person", "for a person")):
        actions = [action for action in plan.manual if action.who == who]
        if not actions:
            continue
        lines.append(f"  {heading} (printed, never run):")
        for action in actions:
            lines.append(f"    {action.cause}: {terminal_line(action.summary)}")
            lines.extend(f"      {terminal_line(line)}" for line in action.lines if line)
    if plan.note:
        lines.append(f"  note: {terminal_line(plan.note)}")
    lines.append(f"  leaves alone: {'; '.join(plan.leaves_alone)}")
    return lines


def render_plan(fix: FixPlan, *, apply: bool) -> str:
    """The plan, per failing node; the header says whether anything will run."""
    commands = sum(len(plan.steps) for plan in fix.plans)
    nodes = len(fix.runnable)
    if apply:
        mode = "--apply: they run as root, each node's in order"
    else:
        mode = "dry run: nothing is changed (--apply runs the commands)"
    lines = [f"fleetcheck fix: {len(fix.plans)} failing node(s), {commands} command(s) to run "
             f"on {nodes} node(s); {mode}", ""]
    for plan in fix.plans:
        lines.extend(_plan_lines(plan))
        lines.append("")
    for node_id, status, reason in fix.unverified:
        lines.append(f"not planned ({status}, could not be probed): {terminal_line(node_id)}: "
                     f"{terminal_line(reason)}")
    if fix.untouched:
        lines.append(f"not touched (no failing cause): {len(fix.untouched)} node(s)")
    return "\n".join(lines).rstrip("\n") + "\n"


def _after_word(node: NodeResult | None) -> str:
    if node is None:
        return "-"
    if node.status in HEALTHY_STATUSES:
        return f"{node.status} ({node.triton.verdict})"
    return f"{node.status} ({_cause_word(node)})"


def _detail(outcome: NodeOutcome) -> str:
    failed = outcome.failed_step
    if failed is not None:
        return f"{command_line(failed.argv)}: {terminal_line(failed.failure())}"
    after = outcome.after
    if after is not None and after.status not in HEALTHY_STATUSES:
        return terminal_line(after.reason)
    return ""


def render_outcomes(outcomes: Sequence[NodeOutcome]) -> str:
    """The before -> after table, one row per planned node, and a line of detail under it."""
    header = ("node", "before", "ran", "after", "outcome")
    rows = []
    for item in outcomes:
        before = item.plan.node
        rows.append((terminal_line(item.node_id), f"{before.status} ({_cause_word(before)})",
                     f"{sum(run.ok for run in item.ran)}/{len(item.plan.steps)}",
                     terminal_line(_after_word(item.after)), item.outcome))
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]

    def line(cells: tuple[str, ...]) -> str:
        return "  ".join(cell.ljust(width) for cell, width in zip(cells, widths, strict=True))

    lines = [line(header).rstrip()]
    for item, row in zip(outcomes, rows, strict=True):
        lines.append(line(row).rstrip())
        detail = _detail(item)
        if detail:
            lines.append(f"  └ {detail}")
    return "\n".join(lines) + "\n"


def _step_run_dict(run: StepRun) -> dict[str, Any]:
    return {"argv": list(run.argv), "cause": run.step.cause, "why": run.step.why,
            "returncode": run.returncode, "timed_out": run.timed_out, "signal": run.signal,
            "error": run.error or None, "duration_s": round(run.duration_s, 3),
            "stdout": run.stdout, "stderr": run.stderr, "ok": run.ok}


def _brief(node: NodeResult | None) -> dict[str, Any] | None:
    if node is None:
        return None
    return {"status": node.status, "reason": node.reason, "verdict": node.triton.verdict,
            "cause": node.triton.cause}


def plan_dict(plan: NodePlan) -> dict[str, Any]:
    """One node's plan as JSON: steps (argv lists), printed actions, where, what it leaves."""
    return {
        "id": plan.node.id, "where": plan.where, "causes": list(plan.causes),
        "steps": [{"cause": s.cause, "why": s.why, "argv": list(s.argv), "input": s.input}
                  for s in plan.steps],
        "manual": [{"cause": m.cause, "who": m.who, "summary": m.summary, "lines": list(m.lines)}
                   for m in plan.manual],
        "note": plan.note, "leaves_alone": list(plan.leaves_alone),
    }


def record_dict(
    fix: FixPlan, outcomes: Sequence[NodeOutcome], *, started_at: str, finished_at: str,
    applied: bool, interrupted: bool, inventory: str | None,
) -> dict[str, Any]:
    """The JSON record of a fix run: what was planned, what ran where, before and after."""
    by_id = {item.node_id: item for item in outcomes}
    nodes = []
    for plan in fix.plans:
        item = by_id.get(plan.node.id)
        entry = plan_dict(plan)
        entry.update({
            "before": _brief(plan.node),
            "ran": [_step_run_dict(run) for run in item.ran] if item else [],
            "after": _brief(item.after) if item else None,
            "outcome": item.outcome if item else ("not applied" if applied or not plan.steps
                                                  else "dry run"),
        })
        nodes.append(entry)
    return {
        "schema": FIX_SCHEMA, "started_at": started_at, "finished_at": finished_at,
        "inventory": inventory, "source": fix.source, "applied": applied,
        "interrupted": interrupted, "nodes": nodes,
        "unverified": [{"id": i, "status": s, "reason": r} for i, s, r in fix.unverified],
        "untouched": list(fix.untouched),
    }
