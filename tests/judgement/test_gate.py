"""Gate exit codes, stderr lines and JSON on constructed reports."""

from __future__ import annotations

from typing import Any

import pytest

from fleetcheck.judgement.exit_codes import gate_exit_code
from fleetcheck.judgement.gate import gate_json, gate_lines
from fleetcheck.report.content import Check, NodeResult, Report, TritonVerdict
from fleetcheck.report.reportio import report_from_dict, report_to_dict

NO_CC = Check("no_c_compiler", "fail", "no C compiler: CC unset, no gcc or clang on PATH",
              "apt-get install gcc libc6-dev python3.12-dev")


def node(node_id: str, status: str, reason: str = "", **kwargs: Any) -> NodeResult:
    host, _, vmid = node_id.partition("/")
    return NodeResult(node_id, host, int(vmid) if vmid else None, node_id, status,
                      reason or status, **kwargs)


def report(*nodes: NodeResult, fleet: tuple[Check, ...] = (), interrupted: bool = False) -> Report:
    return Report("2026-12-01T02:15:00Z", "2026-12-01T02:15:09Z", nodes, playbook="pre-training",
                  fleet_checks=fleet, interrupted=interrupted)


def saved(before_ids: Report) -> Report:
    """A report saved before failures had ids (no `triton.cause`), as reading it back gives it."""
    return report_from_dict(report_to_dict(before_ids))


FAILED = node("pve1/101", "fail", "Triton cpu-fallback: no C compiler",
              triton=TritonVerdict("cpu-fallback", None, "no_c_compiler", NO_CC.fix),
              checks=(NO_CC,))
HEALTHY = node("pve1", "ok", "Triton gpu (cuda)")
WARNED = node("pve2/200", "warn", "FLA older than 0.5")
DOWN = node("pve3", "unreachable", "ssh: connection refused")
STOPPED = node("pve2/201", "skipped", "container stopped")
BROKEN = node("pve2/202", "error", "probe crashed",
              checks=(Check("triton_target", "error", "probe crashed", "see the probe log"),))
DRIFT = Check("fleet_driver_mismatch", "fail", "NVIDIA driver differs", "same driver everywhere",
              {"550.54": ["pve1"], "535.1": ["pve2"]})


@pytest.mark.parametrize(
    ("nodes", "fleet", "interrupted", "code"),
    [
        ((HEALTHY, WARNED), (), False, 0),
        ((HEALTHY, FAILED), (), False, 1),
        ((HEALTHY, DOWN), (), False, 3),
        ((HEALTHY, STOPPED), (), False, 3),
        ((HEALTHY, BROKEN), (), False, 3),
        ((FAILED, DOWN, STOPPED), (), False, 1),
        ((HEALTHY, WARNED), (DRIFT,), False, 1),
        ((HEALTHY,), (Check("fleet_fla_mismatch", "warn", "FLA differs"),), False, 0),
        ((HEALTHY,), (), True, 3),
        ((), (), False, 3),
    ],
)
def test_exit_codes(nodes: tuple[NodeResult, ...], fleet: tuple[Check, ...], interrupted: bool,
                    code: int) -> None:
    assert gate_exit_code(report(*nodes, fleet=fleet, interrupted=interrupted)) == code


def test_lines_name_each_blocking_node_with_cause_and_fix_failures_first() -> None:
    lines = gate_lines(report(DOWN, HEALTHY, WARNED, FAILED, STOPPED, BROKEN, fleet=(DRIFT,)))
    assert lines == [
        "pve1/101: fail: Triton cpu-fallback: no C compiler "
        "(fix: apt-get install gcc libc6-dev python3.12-dev)",
        "fleet: fail: NVIDIA driver differs (fix: same driver everywhere)",
        "pve3: unreachable: ssh: connection refused "
        "(fix: check that the node is up and reachable over SSH, then run the gate again)",
        "pve2/201: skipped: container stopped "
        "(fix: start the container, or leave it out of the selection (--limit))",
        "pve2/202: error: probe crashed (fix: see the probe log)",
    ]


def test_a_passing_gate_prints_nothing() -> None:
    assert gate_lines(report(HEALTHY, WARNED)) == []


def test_empty_selection_and_interruption_say_so() -> None:
    assert gate_lines(report()) == ["no node selected: nothing was verified"]
    assert gate_lines(report(HEALTHY, interrupted=True)) == [
        "the gate was interrupted before every node was probed"]


def test_hostile_reason_cannot_drive_the_terminal() -> None:
    evil = node("pve9", "fail", "\x1b[2J\x1b]0;pwned\x07bad\nsecond line\r\u202e")
    # Shown escaped, as the terminal table shows them; whitespace runs are one space.
    assert gate_lines(report(evil)) == [
        "pve9: fail: \\x1b[2J\\x1b]0;pwned\\x07bad second line \\u202e"]


def test_long_causes_are_clipped() -> None:
    (line,) = gate_lines(report(node("pve9", "fail", "x" * 1000)))
    assert line == "pve9: fail: " + "x" * 299 + "…"


def test_host_key_errors_point_at_known_hosts() -> None:
    unknown = node("pve4", "unreachable",
                   "host key for pve4 (10.1.2.9:22) is not in /root/.ssh/known_hosts")
    changed = node("pve5", "unreachable",
                   "host key for pve5 does not match known_hosts — possible man-in-the-middle")
    jump = node("pve6", "unreachable", "jump host admin@bastion for pve6 failed: its host key "
                "is not trusted by /root/.ssh/known_hosts")
    assert gate_lines(saved(report(jump)))[0].endswith(
        "(fix: check the jump host's key fingerprint out of band (ssh-keyscan), then add it to "
        "known_hosts; if a key for it is already there and changed, find out why before "
        "ssh-keygen -R HOST)")
    assert gate_lines(saved(report(unknown, changed, DOWN))) == [
        "pve4: unreachable: host key for pve4 (10.1.2.9:22) is not in /root/.ssh/known_hosts "
        "(fix: check the host's key fingerprint out of band (ssh-keyscan -p PORT HOST | "
        "ssh-keygen -lf -, against ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub on its "
        "console), then add the key to known_hosts, or set ssh.host_key_policy: accept-new)",
        "pve5: unreachable: host key for pve5 does not match known_hosts — possible "
        "man-in-the-middle (fix: find out why the host key changed (reinstalled host, or "
        "another machine on its address) before removing the old key with ssh-keygen -R HOST)",
        "pve3: unreachable: ssh: connection refused (fix: check that the node is up and "
        "reachable over SSH, then run the gate again)",
    ]


def test_json_for_schedulers() -> None:
    data = gate_json(report(HEALTHY, FAILED, DOWN))
    assert data == {
        "schema": "fleetcheck.gate/1",
        "result": "fail",
        "exit_code": 1,
        "playbook": "pre-training",
        "started_at": "2026-12-01T02:15:00Z",
        "finished_at": "2026-12-01T02:15:09Z",
        "interrupted": False,
        "summary": {"ok": 1, "skipped": 0, "warn": 0, "unreachable": 1, "error": 0, "fail": 1},
        "blocking": [
            {"node": "pve1/101", "status": "fail", "cause": "Triton cpu-fallback: no C compiler",
             "fix": "apt-get install gcc libc6-dev python3.12-dev"},
            {"node": "pve3", "status": "unreachable", "cause": "ssh: connection refused",
             "fix": "check that the node is up and reachable over SSH, then run the gate again"},
        ],
        "passed": ["pve1"],
    }
    assert gate_json(report(HEALTHY))["result"] == "pass"
    assert gate_json(report(DOWN))["result"] == "unverified"


def test_a_probe_timeout_points_at_the_timeout() -> None:
    slow = node("pve1/105", "error", "probe timed out after 60 s")
    crashed = node("pve1/106", "error", "probe exited with status 2: boom")
    assert gate_lines(saved(report(slow, crashed))) == [
        "pve1/105: error: probe timed out after 60 s (fix: raise `timeout` for this host or "
        "container in the inventory (--deep needs more), or look for what hangs: "
        "`fleetcheck probe` on the node itself)",
        "pve1/106: error: probe exited with status 2: boom (fix: run `fleetcheck audit` on this "
        "node for the probe's error output)",
    ]
