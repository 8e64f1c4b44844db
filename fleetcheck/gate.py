"""The pre-job gate: one exit code, and one line per blocking node saying why and what to do."""

from __future__ import annotations

import re
from typing import Any

from fleetcheck.checks import causal_rank
from fleetcheck.model import NodeResult, Report
from fleetcheck.render.sanitize import terminal_line
from fleetcheck.verdict import frameworks_badge

GATE_SCHEMA = "fleetcheck.gate/1"

EXIT_PASS = 0
EXIT_FAIL = 1
EXIT_UNVERIFIED = 3

#: For a gate, a node it could not look at is not a pass: skipped (stopped) ones included.
GATE_UNVERIFIED = frozenset({"error", "unreachable", "skipped"})

_UNVERIFIED_FIX = {
    "unreachable": "check that the node is up and reachable over SSH, then run the gate again",
    "skipped": "start the container, or leave it out of the selection (--limit)",
    "error": "run `fleetcheck audit` on this node for the probe's error output",
}

#: A probe that ran out of time: the node is slow (import torch, --deep), or hangs.
_TIMEOUT_FIX = ("raise `timeout` for this host or container in the inventory (--deep needs "
                "more), or look for what hangs: `fleetcheck probe` on the node itself")

#: An unreachable node's fix when SSH refused its host key (texts of transport/ssh.py).
_HOST_KEY_FIXES = (
    (re.compile(r"host key for .* is not in "),
     "check the host's key fingerprint out of band (ssh-keyscan -p PORT HOST | ssh-keygen -lf -, "
     "against ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub on its console), then add the "
     "key to known_hosts, or set ssh.host_key_policy: accept-new"),
    (re.compile(r"host key for .* does not match known_hosts"),
     "find out why the host key changed (reinstalled host, or another machine on its address) "
     "before removing the old key with ssh-keygen -R HOST"),
    (re.compile(r"jump host .* its host key is not trusted by "),
     "check the jump host's key fingerprint out of band (ssh-keyscan), then add it to "
     "known_hosts; if a key for it is already there and changed, find out why before "
     "ssh-keygen -R HOST"),
)

#: Longest cause or fix shown on one gate line; a node's text beyond that is noise.
_MAX_TEXT = 300


def sanitise(text: str, limit: int = _MAX_TEXT) -> str:
    """One terminal-safe line: whitespace runs (newlines too) become one space, other control
    characters are shown as `\\xNN` as every terminal renderer shows them, and long text is
    clipped to `limit` characters."""
    cleaned = terminal_line(" ".join(text.split()))
    return cleaned if len(cleaned) <= limit else cleaned[: limit - 1] + "…"


def _fix(node: NodeResult) -> str:
    if node.status == "unreachable":
        for pattern, fix in _HOST_KEY_FIXES:
            if pattern.match(node.reason):
                return fix
    if node.status in ("unreachable", "skipped"):
        return _UNVERIFIED_FIX[node.status]
    if node.status == "error" and node.reason.startswith("probe timed out after"):
        return _TIMEOUT_FIX
    # A failing verdict is the root cause the reason names; its fix comes first.
    if node.triton.verdict not in ("gpu", "unknown") and node.triton.fix:
        return node.triton.fix
    hits = sorted((c for c in node.checks if c.status == node.status and c.fix),
                  key=lambda c: causal_rank(c.id))
    if hits:
        return hits[0].fix
    return node.triton.fix or _UNVERIFIED_FIX.get(node.status, "")


def _blocking(report: Report) -> list[dict[str, str]]:
    """The nodes and fleet findings that stop the job: failures first, then unverified."""
    blocking = []
    for wanted in (("fail",), tuple(sorted(GATE_UNVERIFIED))):
        for node in report.nodes:
            if node.status in wanted:
                item = {"node": node.id, "status": node.status, "cause": node.reason,
                        "fix": _fix(node)}
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


def gate_exit_code(report: Report) -> int:
    """0 every selected node verified and passing; 1 something failed; 3 some not verified.

    An empty selection verifies nothing, so it cannot pass: 3.
    """
    statuses = {node.status for node in report.nodes}
    if "fail" in statuses or any(check.status == "fail" for check in report.fleet_checks):
        return EXIT_FAIL
    if statuses & GATE_UNVERIFIED or report.interrupted or not report.nodes:
        return EXIT_UNVERIFIED
    return EXIT_PASS


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
