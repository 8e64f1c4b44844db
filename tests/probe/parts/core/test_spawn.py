"""A stage's answer read from a real subprocess (`Spawned`): its JSON, its last line's JSON, or
an error that names why it gave none (a timeout, the stage's stderr)."""

from __future__ import annotations

import signal
import subprocess
import sys
from typing import Any

import pytest

from fleetcheck.probe.parts.core import spawn
from fleetcheck.probe.parts.core.spawn import Spawned, stage_answer


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


def test_a_term_while_a_helper_starts_waits_until_it_can_be_killed(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # The TERM comes right after the fork, before the helper is registered (a race a loaded
    # node meets): it must not leave the helper running (tests/reliability's footprint test).
    real_popen = subprocess.Popen

    def popen_then_term(*args: Any, **kwargs: Any) -> subprocess.Popen[bytes]:
        started = real_popen(*args, **kwargs)
        spawn.on_terminate(signal.SIGTERM, None)
        return started

    monkeypatch.setattr(spawn.subprocess, "Popen", popen_then_term)
    with pytest.raises(spawn.Terminated):
        spawn.Spawned([sys.executable, "-c", "import time; time.sleep(300)"], 30)
    monkeypatch.undo()
    helpers = list(spawn.LIVE)
    assert len(helpers) == 1 and helpers[0].proc is not None
    spawn.kill_live()
    assert helpers[0].proc.wait(10) == -signal.SIGKILL
    spawn.LIVE.clear()
    spawn.DEFERRED.clear()
    assert spawn.STARTING == []
