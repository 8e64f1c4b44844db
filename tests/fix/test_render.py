"""The fix renderers: exact plan text, the before -> after table, hostile node text."""

from __future__ import annotations

from fleetcheck.fix import plan_report
from fleetcheck.fix.apply import NodeOutcome, StepRun
from fleetcheck.fix.render import record_dict, render_outcomes, render_plan
from fleetcheck.report.content import Check, NodeResult, Report, TritonVerdict

FACTS = {"os": {"id": "ubuntu", "id_like": "debian", "version_id": "24.04"},
         "python": {"executable": "/usr/bin/python3", "version": "3.12.3"}}


def _failing(node_id: str, reason: str = "Triton cpu-fallback: no C compiler") -> NodeResult:
    host, _, vmid = node_id.partition("/")
    return NodeResult(
        id=node_id, host=host, vmid=int(vmid), name="n", status="fail", reason=reason,
        triton=TritonVerdict("cpu-fallback", None, "no_c_compiler"),
        checks=(Check("no_c_compiler", "fail", "no C compiler"),
                Check("python_headers_missing", "fail", "Python.h missing",
                      evidence={"include": "/usr/include/python3.12",
                                "python_h_exists": False})),
        facts=FACTS)


def test_plan_text_is_exact() -> None:
    ok = NodeResult(id="pve1/100", host="pve1", vmid=100, name="n", status="ok", reason="ok")
    fix = plan_report(Report(started_at="", finished_at="", nodes=(ok, _failing("pve1/101"))))
    assert render_plan(fix, apply=False) == (
        "fleetcheck fix: 1 failing node(s), 2 command(s) to run on 1 node(s); dry run: nothing "
        "is changed (--apply runs the commands)\n"
        "\n"
        "pve1/101  fail  Triton cpu-fallback: no C compiler\n"
        "  causes: no_c_compiler, python_headers_missing\n"
        "  runs inside LXC container 101 on pve1, as root, through `pct exec 101`; stops at the "
        "first failing command:\n"
        "    1. refresh the package lists  [no_c_compiler]\n"
        "       $ env LC_ALL=C DEBIAN_FRONTEND=noninteractive apt-get update\n"
        "    2. install gcc libc6-dev python3.12-dev  [no_c_compiler]\n"
        "       $ env LC_ALL=C DEBIAN_FRONTEND=noninteractive apt-get install -y "
        "--no-install-recommends --no-upgrade gcc libc6-dev python3.12-dev\n"
        "  leaves alone: the workload's Python packages (torch, triton, flash-linear-attention);"
        " the workload's environment and the user's Triton cache; the host: container "
        "configuration, drivers, services\n"
        "\n"
        "not touched (no failing cause): 1 node(s)\n")


def test_hostile_text_from_a_node_is_made_visible_not_obeyed() -> None:
    node = _failing("pve1/101", reason="\x1b[2J\x1b]0;owned\x07fail\u202e")
    fix = plan_report(Report(started_at="", finished_at="", nodes=(node,)))
    text = render_plan(fix, apply=True)
    assert "\x1b" not in text and "\u202e" not in text
    assert "\\x1b[2J\\x1b]0;owned\\x07fail\\u202e" in text


def test_before_after_table_is_exact() -> None:
    fix = plan_report(Report(started_at="", finished_at="",
                             nodes=(_failing("pve1/101"), _failing("pve1/102"))))
    fixed, failed = (NodeOutcome(plan) for plan in fix.plans)
    for outcome in (fixed, failed):
        outcome.ran = [StepRun(step=outcome.plan.steps[0], argv=outcome.plan.steps[0].argv,
                               returncode=0)]
        outcome.finished = True
    fixed.ran.append(StepRun(step=fixed.plan.steps[1], argv=fixed.plan.steps[1].argv,
                             returncode=0))
    fixed.after = NodeResult(id="pve1/101", host="pve1", vmid=101, name="n", status="ok",
                             reason="Triton gpu (cuda)", triton=TritonVerdict("gpu", "cuda"))
    failed.ran.append(StepRun(step=failed.plan.steps[1], argv=("apt-get", "install"),
                              returncode=100, stderr="E: Unable to locate package gcc\n"))
    failed.after = _failing("pve1/102")
    assert render_outcomes([fixed, failed]) == (
        "node      before                ran  after                 outcome\n"
        "pve1/101  fail (no_c_compiler)  2/2  ok (gpu)              fixed\n"
        "pve1/102  fail (no_c_compiler)  1/2  fail (no_c_compiler)  fix failed\n"
        "  └ apt-get install: exit status 100: E: Unable to locate package gcc\n")
    record = record_dict(fix, [fixed, failed], started_at="s", finished_at="f", applied=True,
                         interrupted=False, inventory="inventory.yaml")
    assert [n["outcome"] for n in record["nodes"]] == ["fixed", "fix failed"]
    assert record["nodes"][1]["ran"][1]["stderr"] == "E: Unable to locate package gcc\n"
