"""`fleetcheck fix` refusals (one line, exit 2, nothing probed) and the step runner's bounds."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from fleetcheck.cli import main
from fleetcheck.fix.apply import FIX_FAILED, NOT_APPLIED, NodeOutcome, run_steps
from fleetcheck.fix.plan import NodePlan, Step
from fleetcheck.model import NodeResult
from fleetcheck.transport.interface import NodeBudget
from fleetcheck.transport.local import LocalTransport

SAVED = {"schema": "fleetcheck.audit/1", "started_at": "2026-12-01T10:00:00Z",
         "finished_at": "2026-12-01T10:00:09Z", "inventory": None, "nodes": []}


def _one_error(capsys: Any) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


@pytest.mark.parametrize(("argv", "message"), [
    (["--history", "h"], "fleetcheck: error: --history needs --apply"),
    (["--apply"], "fleetcheck: error: --apply without a terminal to confirm on needs --yes"),
])
def test_refusals_before_anything_is_probed(tmp_path: Path, capsys: Any,
                                            monkeypatch: pytest.MonkeyPatch,
                                            argv: list[str], message: str) -> None:
    monkeypatch.setattr(sys.stdin, "isatty", lambda: False)
    assert main(["fix", str(tmp_path / "inventory.yaml"), *argv]) == 2
    assert _one_error(capsys).startswith(message)


def test_saved_results_without_an_inventory_cannot_be_applied(tmp_path: Path,
                                                              capsys: Any) -> None:
    saved = tmp_path / "audit.json"
    saved.write_text(json.dumps(SAVED))
    assert main(["fix", str(saved)]) == 3  # nothing verified in it, nothing to plan
    assert "0 failing node(s)" in capsys.readouterr().out
    assert main(["fix", str(saved), "--apply", "--yes"]) == 2
    assert "names no inventory file" in _one_error(capsys)


@pytest.mark.parametrize(("name", "content", "problem"), [
    ("missing.json", None, "no such file"),
    ("bad.json", "{not json", "not valid JSON"),
    ("inventory.yaml", "hosts: [", "inventory.yaml"),
])
def test_unreadable_input_is_one_line(tmp_path: Path, capsys: Any, name: str,
                                      content: str | None, problem: str) -> None:
    path = tmp_path / name
    if content is not None:
        path.write_text(content)
    assert main(["fix", str(path)]) == 2
    assert problem in _one_error(capsys)


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
