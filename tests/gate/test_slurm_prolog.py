"""examples/slurm-prolog.sh against a fake fleetcheck, with sinfo and scontrol on PATH as traps.

A Prolog must call no Slurm command (slurm.conf(5), Prolog): the fakes record any call, and every
test asserts there was none. tests/integrations/test_slurm.py runs the script in a real slurmd.
"""

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
               **env: str) -> tuple[int, str]:
    (state / "probe.out").write_text(json.dumps(probe) if not isinstance(probe, str) else probe)
    (state / "probe.rc").write_text(str(rc))
    (state / "reason").write_text(reason)
    environ = {
        "PATH": f"{state / 'bin'}:{os.environ['PATH']}", "FAKE_STATE": str(state),
        "SLURMD_NODENAME": "gpu07", "SLURM_JOB_ID": "42", "FLEETCHECK_SYSLOG": "0",
        **env,
    }
    done = subprocess.run([str(PROLOG)], env=environ, capture_output=True, text=True,
                          check=False, timeout=60)
    for command in ("scontrol", "sinfo"):
        assert not (state / f"{command}.log").exists(), f"the Prolog called {command}"
    return done.returncode, done.stderr


def probe_argv(state: Path) -> list[str]:
    return json.loads((state / "fleetcheck.log").read_text())



def test_failure_blocks_the_job_and_logs_the_cause(slurm: Path) -> None:
    table = ("NODE  STATUS  TRITON\ngpu07  FAIL  CPU-FALLBACK\n\nCauses and fixes\n"
             "  Triton cpu-fallback: no C compiler: CC unset\n  fix: apt-get install gcc\n")
    code, stderr = run_prolog(slurm, table, 1)
    assert code == 1
    assert probe_argv(slurm) == ["probe", "--playbook", "quick", "--timeout", "30"]
    assert "fleetcheck-prolog: gpu07: job 42: probe failed; blocking the job" in stderr
    assert "no C compiler" in stderr


def test_healthy_node_runs_the_job(slurm: Path) -> None:
    assert run_prolog(slurm, "ok\n", 0) == (0, "")


@pytest.mark.parametrize("rc", [3, 2, 127, 124])
def test_unverified_probe_lets_the_job_run_by_default(slurm: Path, rc: int) -> None:
    code, stderr = run_prolog(slurm, "", rc)
    assert code == 0
    assert f"could not verify the node (probe exit {rc}); job allowed" in stderr


def test_unverified_probe_blocks_when_asked(slurm: Path) -> None:
    code, stderr = run_prolog(slurm, "", 3, FLEETCHECK_BLOCK_UNVERIFIED="1")
    assert code == 1
    assert "blocking the job" in stderr


def test_settings_reach_the_probe_and_a_bad_timeout_falls_back(slurm: Path) -> None:
    run_prolog(slurm, "", 0, FLEETCHECK_PLAYBOOK="pre-training",
               FLEETCHECK_TIMEOUT="1m; reboot", FLEETCHECK_CACHE="/var/lib/fleetcheck/node.json")
    assert probe_argv(slurm) == ["probe", "--playbook", "pre-training", "--timeout", "30",
                                 "--cache", "/var/lib/fleetcheck/node.json"]
