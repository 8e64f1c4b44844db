"""The pre-job gate: one exit code, and one line per blocking node saying why and what to do."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fleetcheck.errors import FleetcheckError
from fleetcheck.judgement.exit_codes import EXIT_FAIL, EXIT_PASS, gate_exit_code
from fleetcheck.judgement.fixes import blocking_fix
from fleetcheck.judgement.frameworks import frameworks_badge
from fleetcheck.judgement.statuses import GATE_UNVERIFIED, HEALTHY_STATUSES
from fleetcheck.render.sanitize import sanitise
from fleetcheck.report.content import Report

if TYPE_CHECKING:
    from fleetcheck.inventory_data.model import Inventory
    from fleetcheck.judgement.policy import Policy

GATE_SCHEMA = "fleetcheck.gate/1"


class JobNodesError(FleetcheckError):
    """A job's node list that cannot be gated as given (does not parse, names unknown hosts)."""


def job_nodes(nodelist: str) -> list[str]:
    """The names of a Slurm hostlist (`gpu[01-08]`); JobNodesError for one that does not
    parse or names no node."""
    from fleetcheck.inventory_data.ranges import RangeError, expand_nodes

    try:
        names = expand_nodes(nodelist.strip())
    except RangeError as exc:
        raise JobNodesError(f"--nodes {exc}") from None
    if not names:
        raise JobNodesError("--nodes: the node list is empty")
    return names


def job_limit(nodelist: str, inventory: Inventory) -> str:
    """The --limit pattern selecting exactly the hosts of a Slurm hostlist (`gpu[01-08]`,
    `$SLURM_JOB_NODELIST`): the names folded back into one node set.

    Each name is a host of the inventory (a Slurm node's name is its host's); one the inventory
    does not know cannot be verified, and a gate that skipped it would pass a job on a node
    nobody looked at, so it is refused, by name, before anything is probed.
    """
    from fleetcheck.inventory_data.ranges import fold_nodes

    names = job_nodes(nodelist)
    known = {host.name for host in inventory.hosts}
    missing = [name for name in names if name not in known]
    if missing:
        raise JobNodesError(f"--nodes: {fold_nodes(missing)} not in the inventory "
                            f"{inventory.path} ({len(missing)} of {len(names)} nodes)")
    return fold_nodes(names)


#: The check of a job node that no gathered document speaks for.
MISSING_DOCUMENT_CHECK = "node_document_missing"


def documents_gate_report(inputs: list[str], nodelist: str, policy: Policy,
                          max_age_s: float) -> tuple[Report, list[str]]:
    """The gate's report from gathered node documents instead of probes: no SSH at all.

    The job's nodes (a Slurm hostlist) are taken from the documents `fleetcheck merge` reads
    (the node timers' or a DaemonSet's, in a shared folder); a node without one, or with one
    older than `max_age_s`, cannot be verified and blocks as any unverified node does. The
    policy's consistency checks run across the job's nodes only. Returns the report and the
    merge's lines for stderr (problems and notes).
    """
    import dataclasses

    from fleetcheck.judgement.consistency import fleet_checks
    from fleetcheck.report.content import Check, NodeResult
    from fleetcheck.report.merge import DUPLICATE_CHECK, merge_inputs, problem_lines

    names = job_nodes(nodelist)
    outcome = merge_inputs(inputs, policy=policy, max_age_s=max_age_s)
    found = {node.id: node for node in outcome.report.nodes}
    where = ", ".join(inputs)
    selected = []
    for name in names:
        node = found.get(name)
        if node is None:
            reason = f"no node document for {name} in {where}"
            node = NodeResult(id=name, host=name, vmid=None, name=name, status="error",
                              reason=reason, checks=(Check(
                                  MISSING_DOCUMENT_CHECK, "error", reason,
                                  "check that the node's timer or DaemonSet writes its document "
                                  "(fleetcheck probe --format json -o DIR/NODE.json) there"),))
        selected.append(node)
    checks = fleet_checks(selected, policy) + tuple(
        check for check in outcome.report.fleet_checks if check.id == DUPLICATE_CHECK)
    report = dataclasses.replace(outcome.report, nodes=tuple(selected), fleet_checks=checks)
    return report, problem_lines(outcome, names, command="gate")


def _blocking(report: Report) -> list[dict[str, str]]:
    """The nodes and fleet findings that stop the job: failures first, then unverified."""
    blocking = []
    for wanted in (("fail",), tuple(sorted(GATE_UNVERIFIED))):
        for node in report.nodes:
            if node.status in wanted:
                item = {"node": node.id, "status": node.status, "cause": node.reason,
                        "fix": blocking_fix(node)}
                frameworks = frameworks_badge(node.facts, problems_only=True)
                if frameworks:
                    item["frameworks"] = frameworks
                blocking.append(item)
        if wanted == ("fail",):
            for check in report.fleet_checks:
                if check.status == "fail":
                    blocking.append({"node": "fleet", "status": "fail",
                                     "cause": check.summary, "fix": check.fix, "check": check.id})
    return blocking


def gate_lines(report: Report) -> list[str]:
    """The gate's stderr: one line per blocking node, `NODE: STATUS: CAUSE (fix: FIX)`."""
    lines = []
    for item in _blocking(report):
        line = f"{sanitise(item['node'], 120)}: {item['status']}: {sanitise(item['cause'])}"
        if item["fix"]:
            line += f" (fix: {sanitise(item['fix'])})"
        if item.get("frameworks"):
            line += f" [{sanitise(item['frameworks'])}]"
        lines.append(line)
    if not report.nodes:
        lines.append("no node selected: nothing was verified")
    elif report.interrupted:
        lines.append("the gate was interrupted before every node was probed")
    return lines


def gate_json(report: Report) -> dict[str, Any]:
    """The gate's verdict for schedulers: exit code, result and the blocking nodes."""
    code = gate_exit_code(report)
    blocking = [
        {key: sanitise(value) for key, value in item.items()} for item in _blocking(report)
    ]
    return {
        "schema": GATE_SCHEMA,
        "result": {EXIT_PASS: "pass", EXIT_FAIL: "fail"}.get(code, "unverified"),
        "exit_code": code,
        "playbook": report.playbook,
        "started_at": report.started_at,
        "finished_at": report.finished_at,
        "interrupted": report.interrupted,
        "summary": report.summary,
        "blocking": blocking,
        "passed": [node.id for node in report.nodes if node.status in HEALTHY_STATUSES],
    }
