"""A stage's answer read from a real subprocess (`Spawned`): its JSON, its last line's JSON, or
an error that names why it gave none (a timeout, the stage's stderr)."""

from __future__ import annotations

import sys

from fleetcheck.probe.parts.spawn import Spawned, stage_answer


def run(code: str, timeout: float = 30.0) -> dict:
    return Spawned([sys.executable, "-c", code], timeout).result()


def test_the_whole_stdout_is_the_answer() -> None:
    assert stage_answer(run('print(\'{"ok": 1}\')'), "libcuda probe") == {"ok": 1}


def test_the_last_line_is_the_answer_after_the_stage_s_own_output() -> None:
    result = run('print("a library wrote this"); print(\'{"ok": 2}\')')
    assert stage_answer(result, "HIP probe", last_line=True) == {"ok": 2}
    assert "error" in stage_answer(result, "libcuda probe")


def test_no_answer_is_named_from_the_stage_s_stderr() -> None:
    answer = stage_answer(run('import sys; sys.exit("libcuda.so.1: cannot open")'), "x")
    assert list(answer) == ["error"]
    assert answer["error"].strip() == "libcuda.so.1: cannot open"
    assert stage_answer(run("pass"), "HIP probe", last_line=True) == {"error": "no output"}


def test_a_stage_killed_at_its_timeout_says_so() -> None:
    answer = stage_answer(run("import time; time.sleep(60)", timeout=0.5), "HIP probe")
    assert answer["timed_out"] is True
    assert answer["error"].startswith("HIP probe timed out after ")
