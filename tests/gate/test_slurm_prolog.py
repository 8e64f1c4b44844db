"""examples/slurm-prolog.sh against fake scontrol, sinfo and fleetcheck on PATH."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

PROLOG = Path(__file__).resolve().parents[2] / "examples" / "slurm-prolog.sh"

# Each fake records its argv (one JSON list per line) in $FAKE_STATE/<name>.log.
FAKE_SINFO = """\
import json, os, sys
state = os.environ["FAKE_STATE"]
open(os.path.join(state, "sinfo.log"), "a").write(json.dumps(sys.argv[1:]) + "\\n")
reason = open(os.path.join(state, "reason")).read()
# sinfo -N prints a node once per partition
print(reason or "none"); print(reason or "none")
"""
FAKE_SCONTROL = """\
import json, os, sys
state = os.environ["FAKE_STATE"]
open(os.path.join(state, "scontrol.log"), "a").write(json.dumps(sys.argv[1:]) + "\\n")
"""
FAKE_FLEETCHECK = """\
import json, os, sys
state = os.environ["FAKE_STATE"]
open(os.path.join(state, "fleetcheck.log"), "a").write(json.dumps(sys.argv[1:]) + "\\n")
sys.stdout.write(open(os.path.join(state, "probe.out")).read())
sys.exit(int(open(os.path.join(state, "probe.rc")).read()))
"""

FAILED_NODE = {
    "id": "gpu07", "status": "fail",
    "reason": 'Triton cpu-fallback: no C compiler ("CC" unset)\n\x1b[31m',
    "triton": {"verdict": "cpu-fallback", "backend": None, "cause": "no_c_compiler", "fix": ""},
    "checks": [{"id": "no_c_compiler", "status": "fail", "summary": "no cc", "fix": ""}],
}
HEALTHY_NODE = {"id": "gpu07", "status": "ok", "reason": "Triton gpu (cuda)",
                "triton": {"verdict": "gpu", "cause": None}, "checks": []}


def fake(bin_dir: Path, name: str, body: str) -> None:
    path = bin_dir / name
    path.write_text(f"#!{sys.executable} -S\n{body}", encoding="utf-8")
    path.chmod(0o755)


@pytest.fixture
def slurm(tmp_path: Path) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake(bin_dir, "sinfo", FAKE_SINFO)
    fake(bin_dir, "scontrol", FAKE_SCONTROL)
    fake(bin_dir, "fleetcheck", FAKE_FLEETCHECK)
    (tmp_path / "reason").write_text("")
    return tmp_path


def run_prolog(state: Path, probe: Any, rc: int, reason: str = "",
               **env: str) -> tuple[int, list[list[str]], str]:
    (state / "probe.out").write_text(json.dumps(probe) if not isinstance(probe, str) else probe)
    (state / "probe.rc").write_text(str(rc))
    (state / "reason").write_text(reason)
    environ = {
        "PATH": f"{state / 'bin'}:{os.environ['PATH']}", "FAKE_STATE": str(state),
        "SLURMD_NODENAME": "gpu07", "FLEETCHECK_SYSLOG": "0", "FLEETCHECK_PYTHON": sys.executable,
        **env,
    }
    done = subprocess.run([str(PROLOG)], env=environ, capture_output=True, text=True,
                          check=False, timeout=60)
    log = state / "scontrol.log"
    calls = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return done.returncode, calls, done.stderr


def test_failure_drains_with_the_cause_and_refuses_the_job(slurm: Path) -> None:
    code, calls, stderr = run_prolog(slurm, FAILED_NODE, 1)
    assert code == 1
    assert calls == [["update", "nodename=gpu07", "state=drain",
                      "reason=fleetcheck: no_c_compiler: Triton cpu-fallback: no C compiler "
                      "( CC unset) [31m"]]
    assert json.loads((slurm / "fleetcheck.log").read_text()) == [
        "probe", "--format", "json", "--playbook", "quick", "--timeout", "120"]
    assert json.loads((slurm / "sinfo.log").read_text()) == ["-h", "-N", "-n", "gpu07", "-o", "%E"]
    assert "draining: no_c_compiler" in stderr


def test_failure_keeps_someone_elses_drain(slurm: Path) -> None:
    code, calls, stderr = run_prolog(slurm, FAILED_NODE, 1, reason="bad DIMM [ops@2026-11-30]")
    assert (code, calls) == (1, [])
    assert "already drained by someone else, reason kept: bad DIMM [ops@2026-11-30]" in stderr


def test_failure_replaces_our_own_older_reason(slurm: Path) -> None:
    code, calls, _ = run_prolog(slurm, FAILED_NODE, 1, reason="fleetcheck: no_linker: no ld")
    assert code == 1
    assert calls[0][:3] == ["update", "nodename=gpu07", "state=drain"]


def test_unparsable_output_still_drains_with_a_generic_cause(slurm: Path) -> None:
    code, calls, _ = run_prolog(slurm, "Traceback (most recent call last):", 1)
    assert (code, calls) == (1, [["update", "nodename=gpu07", "state=drain",
                                  "reason=fleetcheck: probe failed"]])


def test_healthy_node_runs_the_job_and_resumes_only_our_drain(slurm: Path) -> None:
    code, calls, _ = run_prolog(slurm, HEALTHY_NODE, 0, reason="fleetcheck: no_c_compiler: x")
    assert (code, calls) == (0, [["update", "nodename=gpu07", "state=resume"]])


def test_healthy_node_leaves_someone_elses_drain(slurm: Path) -> None:
    code, calls, _ = run_prolog(slurm, HEALTHY_NODE, 0, reason="kernel upgrade")
    assert (code, calls) == (0, [])


def test_healthy_undrained_node_does_nothing(slurm: Path) -> None:
    assert run_prolog(slurm, HEALTHY_NODE, 0)[:2] == (0, [])


@pytest.mark.parametrize("rc", [3, 2, 127])
def test_unverified_probe_does_not_drain_by_default(slurm: Path, rc: int) -> None:
    code, calls, stderr = run_prolog(slurm, {}, rc)
    assert (code, calls) == (0, [])
    assert f"could not verify the node (probe exit {rc}); not draining, job allowed" in stderr


def test_unverified_probe_drains_when_asked(slurm: Path) -> None:
    code, calls, _ = run_prolog(slurm, {}, 3, FLEETCHECK_DRAIN_UNVERIFIED="1")
    assert (code, calls) == (1, [["update", "nodename=gpu07", "state=drain",
                                  "reason=fleetcheck: could not verify the node (probe exit 3)"]])


def test_settings_reach_the_probe_and_a_bad_timeout_falls_back(slurm: Path) -> None:
    run_prolog(slurm, HEALTHY_NODE, 0, FLEETCHECK_PLAYBOOK="pre-training",
               FLEETCHECK_TIMEOUT="1m; reboot")
    assert json.loads((slurm / "fleetcheck.log").read_text()) == [
        "probe", "--format", "json", "--playbook", "pre-training", "--timeout", "120"]
