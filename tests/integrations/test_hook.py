"""The --on-change hook: run as an argv with the diff on stdin; its failures are one line."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from fleetcheck.integrations.hook import run_on_change

RECORDER = """\
import sys
with open(sys.argv[1], "ab") as out:
    out.write(b"--- call\\n" + sys.stdin.buffer.read())
"""


def hook(tmp_path: Path, body: str, *args: str) -> str:
    script = tmp_path / "hook.py"
    script.write_text(body, encoding="utf-8")
    return shlex.join([sys.executable, str(script), *args])


def test_hook_gets_the_diff_on_stdin_once(tmp_path: Path) -> None:
    out = tmp_path / "got with space.txt"
    diff = "1 change(s) from a to b:\n  new failure: pve1/101: ok -> fail: no cc\n"
    assert run_on_change(hook(tmp_path, RECORDER, str(out)), diff) is None
    assert out.read_text(encoding="utf-8") == "--- call\n" + diff


def test_no_shell_is_involved(tmp_path: Path) -> None:
    out = tmp_path / "argv.txt"
    body = "import sys, json\nopen(sys.argv[1], 'w').write(json.dumps(sys.argv[2:]))\n"
    assert run_on_change(hook(tmp_path, body, str(out)) + " '$(id)' ';' '|' 'x'", "") is None
    assert out.read_text() == '["$(id)", ";", "|", "x"]'


def test_failing_hook_is_reported_without_its_arguments(tmp_path: Path) -> None:
    body = ("import sys\n"
            "print('post to', sys.argv[1], 'failed: 503', file=sys.stderr)\nsys.exit(4)\n")
    cmd = hook(tmp_path, body, "https://hooks.example/T0/SECRET-TOKEN")
    assert run_on_change(cmd, "x\n") == (
        f"{sys.executable}: exited with status 4: post to … failed: 503")


def test_missing_program_bad_quoting_and_empty_command() -> None:
    assert run_on_change("/nonexistent/notify --to sre", "x") == (
        "/nonexistent/notify: command not found")
    assert run_on_change("mail -s 'unclosed", "x") == (
        "cannot split the command: No closing quotation")
    assert run_on_change("   ", "x") == "empty command"


def test_hung_hook_is_stopped_with_what_it_started(tmp_path: Path) -> None:
    # The grandchild keeps the stderr pipe open: without killing the group this would hang.
    body = ("import subprocess, sys, time\n"
            "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
            "time.sleep(60)\n")
    assert run_on_change(hook(tmp_path, body), "x", timeout=0.5) == (
        f"{sys.executable}: timed out after 0.5 s")


def test_hook_output_does_not_reach_our_stdout(tmp_path: Path, capfd) -> None:
    assert run_on_change(hook(tmp_path, "print('hook chatter')\n"), "x") is None
    assert capfd.readouterr().out == ""
