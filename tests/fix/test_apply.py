"""The step runner: the first failing command stops a node's plan, each command bounded."""

from __future__ import annotations

import asyncio
from pathlib import Path

from fleetcheck.fix.apply import FIX_FAILED, NOT_APPLIED, NodeOutcome, run_steps
from fleetcheck.fix.plan import NodePlan, Step
from fleetcheck.report.content import NodeResult
from fleetcheck.transport.interface import NodeBudget
from fleetcheck.transport.local import LocalTransport


def _plan(*argvs: tuple[str, ...]) -> NodePlan:
    node = NodeResult(id="here", host="here", vmid=None, name="here", status="fail",
                      reason="r")
    return NodePlan(node=node, where="here", causes=("no_c_compiler",),
                    steps=tuple(Step("no_c_compiler", "step", argv) for argv in argvs))


def test_the_first_failing_command_stops_the_plan() -> None:
    outcome = NodeOutcome(_plan(("true",), ("sh", "-c", "echo nope >&2; exit 7"), ("true",)))
    assert asyncio.run(run_steps(outcome, LocalTransport().run, budget=NodeBudget(10))) is False
    assert [run.returncode for run in outcome.ran] == [0, 7]
    assert outcome.failed_step is not None
    assert outcome.failed_step.failure() == "exit status 7: nope"
    assert outcome.outcome == FIX_FAILED


def test_a_command_is_bounded_by_the_node_timeout() -> None:
    outcome = NodeOutcome(_plan(("sleep", "30"), ("true",)))
    assert asyncio.run(run_steps(outcome, LocalTransport().run, budget=NodeBudget(0.5))) is False
    (run,) = outcome.ran
    assert run.timed_out and run.duration_s < 10
    assert run.failure().startswith("timed out after")


def test_stdin_reaches_the_command_and_privilege_goes_first(tmp_path: Path) -> None:
    target = tmp_path / "entry.conf"
    plan = _plan()
    plan = NodePlan(node=plan.node, where="", causes=(), steps=(
        Step("libcuda_not_in_ldcache", "write", ("tee", str(target)), input="/opt/lib\n"),))
    outcome = NodeOutcome(plan)
    assert asyncio.run(run_steps(outcome, LocalTransport().run, budget=NodeBudget(10),
                                 prefix=["env"])) is True
    assert outcome.ran[0].argv == ("env", "tee", str(target))
    assert target.read_text() == "/opt/lib\n"
    assert NodeOutcome(_plan()).outcome == NOT_APPLIED
