"""History end to end on the loopback fleet: retention, drift, on-change hook, `fleetcheck diff`."""

from __future__ import annotations

import json
import platform
import shlex
import sys
from pathlib import Path

import pytest

from fleetcheck.cli import main
from fleetcheck.judgement.exit_codes import exit_code_for
from fleetcheck.report.history import run_files
from fleetcheck.report.reportio import load_report
from tests.gate.pythons import other_python, python_version

pytestmark = pytest.mark.sshd

HOOK = """\
import sys
with open(sys.argv[1], "a", encoding="utf-8") as out:
    out.write("--- call\\n" + sys.stdin.read())
"""


def statuses(report: Path) -> dict[str, str]:
    return {node["id"]: node["status"] for node in json.loads(report.read_text())["nodes"]}


def test_nightly_runs_keep_history_and_report_drift(fleet, capsys, tmp_path: Path) -> None:
    fleet.add_host("pve1")
    fleet.add_container("pve1", 101)
    stopping = fleet.add_container("pve1", 102)
    inventory = str(fleet.write_inventory(timeout=30))
    runs, calls, report = tmp_path / "runs", tmp_path / "hook-calls.txt", tmp_path / "r.json"
    hook_script = tmp_path / "hook.py"
    hook_script.write_text(HOOK, encoding="utf-8")
    hook = shlex.join([sys.executable, str(hook_script), str(calls)])

    def audit(on_change: str = hook) -> int:
        return main(["audit", inventory, "--history", str(runs), "--keep", "2",
                     "--on-change", on_change, "--output", str(report), "--no-progress"])

    # The first run has nothing to compare with; the second finds nothing changed.
    first_code = audit()
    (first,) = run_files(runs)
    assert audit() == first_code
    assert not calls.exists()
    before = statuses(report)

    # Drift: another Python in 101, 102 stopped, a new container 103.
    odd = other_python()
    (fleet.hosts["pve1"].dir / "containers" / "101" / "bin" / "python3").unlink()
    (fleet.hosts["pve1"].dir / "containers" / "101" / "bin" / "python3").symlink_to(odd)
    config = json.loads((stopping / "config.json").read_text())
    (stopping / "config.json").write_text(json.dumps({**config, "status": "stopped"}))
    fleet.add_container("pve1", 103)
    fleet.write_inventory(inventory, timeout=30)
    audit()
    after = statuses(report)
    ours = platform.python_version()
    text = calls.read_text(encoding="utf-8")
    assert text.count("--- call\n") == 1
    lines = text.splitlines()
    assert f"  version: pve1/101: Python version {ours} -> {python_version(odd)}" in lines
    assert f"  status: pve1/102: {before['pve1/102']} -> skipped: container stopped" in lines
    assert f"  new node: pve1/103 ({after['pve1/103']})" in lines

    # Retention: three runs with --keep 2 leave the newest two; the first is gone.
    kept = run_files(runs)
    assert len(kept) == 2
    assert first not in kept
    assert sorted(runs.iterdir()) == sorted(kept)

    # A failing hook is reported on stderr and leaves the exit code alone.
    (stopping / "config.json").write_text(json.dumps(config))
    capsys.readouterr()
    code = audit("/nonexistent/notify --token s3cret")
    assert code == exit_code_for(load_report(run_files(runs)[-1]))
    err = capsys.readouterr().err
    assert "fleetcheck: --on-change: /nonexistent/notify: command not found" in err.splitlines()
    assert "s3cret" not in err

    # `fleetcheck diff` between saved runs: 1 with changes, 0 without, 2 for a missing file.
    older, newer = run_files(runs)
    assert main(["diff", str(older), str(newer)]) == 1
    assert "  status: pve1/102: skipped -> " in capsys.readouterr().out
    assert main(["diff", str(newer), str(newer)]) == 0
    assert main(["diff", str(newer), str(tmp_path / "missing.json")]) == 2
    assert capsys.readouterr().err == f"fleetcheck: error: {tmp_path}/missing.json: no such file\n"
