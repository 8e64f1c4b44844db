"""Owns a node's root cause and fix: `root_cause` and `node_fix` for reports, `blocking_fix` for
the gate, `failure_id`, the id of a failure outside the probe (`failures.py`), and
`failure_fix`, that failure's fix where it has one (reports and the gate alike)."""

from __future__ import annotations

from fleetcheck import failures
from fleetcheck.checks import causal_rank, cause_fix
from fleetcheck.judgement.statuses import PROBLEM_CHECK_STATUSES
from fleetcheck.report.content import Check, NodeResult


def root_cause(node: NodeResult) -> Check | None:
    """The check that explains the node's status: Triton's cause, else the first non-pass one."""
    if node.triton.cause:
        match = node.check(node.triton.cause)
        if match is not None and match.status != "pass":
            return match
    for status in PROBLEM_CHECK_STATUSES:
        hits = [c for c in node.checks if c.status == status]
        if hits:
            return min(hits, key=lambda c: causal_rank(c.id))
    return None


def node_fix(node: NodeResult) -> str:
    """The fix shown beside a node in the matrix, the HTML report and the terminal.

    A node that a failure outside the probe stopped gets that failure's fix where it has one
    (`failure_fix`: the gate says the same). A check or a verdict without a fix of its own (a
    report of an older probe) gets its cause's record, filled with the node's facts: a
    failing node always says what to change.
    """
    known = failure_fix(node)
    if known:
        return known
    cause = root_cause(node)
    if node.triton.verdict == "cpu-fallback":
        return node.triton.fix or cause_fix(node.triton.cause, node.facts) or (
            cause_fix(cause.id, node.facts) if cause is not None else "")
    return _check_fix(cause, node.facts) if cause is not None else ""


def _check_fix(check: Check, facts: object) -> str:
    """A check's own fix; for a failing check without one, its cause's record's."""
    return check.fix or (cause_fix(check.id, facts) if check.status == "fail" else "")


_UNVERIFIED_FIX = {
    "unreachable": "check that the node is up and reachable over SSH, then run the gate again",
    "skipped": "start the container, or leave it out of the selection (--limit)",
    "error": "run `fleetcheck audit` on this node for the probe's error output",
}

#: A probe that ran out of time: the node is slow (import torch, --deep), or hangs.
_TIMEOUT_FIX = ("raise `timeout` for this host or container in the inventory (--deep needs "
                "more), or look for what hangs: `fleetcheck probe` on the node itself")

#: An unreachable node's fix when SSH refused a host key, by the failure's id.
_HOST_KEY_FIXES = {
    failures.HOST_KEY_UNKNOWN:
        "check the host's key fingerprint out of band (ssh-keyscan -p PORT HOST | ssh-keygen "
        "-lf -, against ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub on its console), then "
        "add the key to known_hosts, or set ssh.host_key_policy: accept-new",
    failures.HOST_KEY_CHANGED:
        "find out why the host key changed (reinstalled host, or another machine on its "
        "address) before removing the old key with ssh-keygen -R HOST",
    failures.JUMP_HOST_KEY:
        "check the jump host's key fingerprint out of band (ssh-keyscan), then add it to "
        "known_hosts; if a key for it is already there and changed, find out why before "
        "ssh-keygen -R HOST",
}

#: An error node's fix when a tool refused before the probe ran, by the refusal's id.
_REFUSAL_FIXES = {
    failures.GATEKEEPER_REFUSED:
        "the host's audit key runs only what its fleetcheck gatekeeper allows: after an "
        "upgrade, run `fleetcheck host-setup --key KEY.pub | ssh root@HOST python3 -` again "
        "to add this probe's hash (`fleetcheck probe --script --sha256`)",
    failures.AGENT_NOT_CONFIGURED:
        "enable the VM's guest agent (`qm set VMID --agent 1`) and install qemu-guest-agent "
        "in the guest",
    failures.AGENT_NOT_ANSWERING:
        "start qemu-guest-agent in the guest (systemctl enable --now qemu-guest-agent)",
    failures.SUDO_PASSWORD:
        "allow the login to run the tool with `sudo -n` (a NOPASSWD sudoers rule)",
    failures.INTERPRETER_MISSING:
        "point the node's `python` in the inventory (defaults, host, container or its oci "
        "entry) at the interpreter the workload runs there (a venv's or conda's python3), or "
        "install python3 on the node",
    failures.INTERPRETER_TOO_OLD:
        "point the node's `python` in the inventory (defaults, host, container or its oci "
        "entry) at the workload's own interpreter there, Python 3.8 or newer (a venv's or "
        "conda's python3): the probe runs under it and judges it",
}

def failure_id(node: NodeResult) -> str | None:
    """The id of a node's failure outside the probe (`fleetcheck/failures.py`), set where it
    happened (a report saved before ids gets it when read: `reportio.node_from_dict`)."""
    return node.triton.cause if node.triton.cause in failures.FAILURE_IDS else None


def failure_fix(node: NodeResult) -> str:
    """The fix of a failure outside the probe that has one (a host key SSH refused, a probe
    out of time, a tool's refusal, the interpreter), by its id; "" for any other node."""
    failure = failure_id(node)
    if node.status == "unreachable" and failure in _HOST_KEY_FIXES:
        return _HOST_KEY_FIXES[failure]
    if node.status == "error" and failure == failures.TIMED_OUT:
        return _TIMEOUT_FIX
    if node.status == "error" and failure in _REFUSAL_FIXES:
        return _REFUSAL_FIXES[failure]
    return ""


def blocking_fix(node: NodeResult) -> str:
    """What to do about a node that blocks a gate: the gate line's and gate JSON's fix."""
    known = failure_fix(node)
    if known:
        return known
    if node.status in ("unreachable", "skipped"):
        return _UNVERIFIED_FIX[node.status]
    # A failing verdict is the root cause the reason names; its fix comes first.
    if node.triton.verdict not in ("gpu", "unknown") and node.triton.fix:
        return node.triton.fix
    recorded = cause_fix(node.triton.cause, node.facts)
    if node.triton.verdict == "cpu-fallback" and recorded:
        return recorded
    hits = sorted((c for c in node.checks if c.status == node.status),
                  key=lambda c: causal_rank(c.id))
    for hit in hits:
        fix = _check_fix(hit, node.facts)
        if fix:
            return fix
    return node.triton.fix or _UNVERIFIED_FIX.get(node.status, "")
