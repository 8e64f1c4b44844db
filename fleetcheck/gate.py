"""The pre-job gate: one exit code, and one line per blocking node saying why and what to do."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fleetcheck.model import Report
from fleetcheck.render.sanitize import sanitise
from fleetcheck.verdict import (
    EXIT_FAIL,
    EXIT_PASS,
    GATE_UNVERIFIED,
    blocking_fix,
    frameworks_badge,
    gate_exit_code,
)

if TYPE_CHECKING:
    from fleetcheck.inventory.model import Inventory

GATE_SCHEMA = "fleetcheck.gate/1"


class JobNodesError(Exception):
    """A job's node list that cannot be gated as given (does not parse, names unknown hosts)."""


def job_limit(nodelist: str, inventory: Inventory) -> str:
    """The --limit pattern selecting exactly the hosts of a Slurm hostlist (`gpu[01-08]`,
    `$SLURM_JOB_NODELIST`): the names folded back into one node set.

    Each name is a host of the inventory (a Slurm node's name is its host's); one the inventory
    does not know cannot be verified, and a gate that skipped it would pass a job on a node
    nobody looked at, so it is refused, by name, before anything is probed.
    """
    from fleetcheck.inventory.ranges import RangeError, expand_nodes, fold_nodes

    try:
        names = expand_nodes(nodelist.strip())
    except RangeError as exc:
        raise JobNodesError(f"--nodes {exc}") from None
    if not names:
        raise JobNodesError("--nodes: the node list is empty")
    known = {host.name for host in inventory.hosts}
    missing = [name for name in names if name not in known]
    if missing:
        raise JobNodesError(f"--nodes: {fold_nodes(missing)} not in the inventory "
                            f"{inventory.path} ({len(missing)} of {len(names)} nodes)")
    return fold_nodes(names)


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
        "passed": [node.id for node in report.nodes if node.status in ("ok", "warn")],
    }
