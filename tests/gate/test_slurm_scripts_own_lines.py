"""The Slurm examples take fleetcheck's own line, never a Python warning printed before it.

A library's warning (`FILE:LINE: NAMEWarning: TEXT` and its source line, as Python prints
it) once became a held job's `Comment=` in place of the gate's reason. Here a fake fleetcheck
prints such warnings, in Python's own format, before its lines; scontrol is a fake that records
its argv. tests/integrations/test_slurm_fleet.py runs the scripts in a real slurmctld.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

FAKE_SCONTROL = """\
import json, os, sys
with open(os.path.join(os.environ["FAKE_STATE"], "scontrol.log"), "a") as log:
    log.write(json.dumps(sys.argv[1:]) + "\\n")
"""
# Writes $FAKE_STATE/out.txt to stdout, err.txt to stderr, exits with rc.
FAKE_FLEETCHECK = """\
import os, sys
state = os.environ["FAKE_STATE"]
sys.stdout.write(open(os.path.join(state, "out.txt")).read())
sys.stderr.write(open(os.path.join(state, "err.txt")).read())
sys.exit(int(open(os.path.join(state, "rc")).read()))
"""


class CryptographyDeprecationWarning(UserWarning):
    """Named as cryptography's is: the warning's class name is what Python prints."""


def library_warnings() -> str:
    """Two warnings as Python prints them to stderr, each with its source line."""
    text = ""
    for lineno, line in ((32, "PyCAPrivateKey = Union[dsa.DSAPrivateKey, rsa.RSAPrivateKey,"),
                         (38, "def __init__(self, pyca_key: PyCAKey,")):
        text += warnings.formatwarning(
            "DSA is deprecated and support will be removed in a future release. "
            "Use a more modern signature algorithm.", CryptographyDeprecationWarning,
            "/opt/venv/lib/python3.11/site-packages/asyncssh/crypto/misc.py", lineno, line)
    return text


def fake(bin_dir: Path, name: str, body: str) -> None:
    path = bin_dir / name
    path.write_text(f"#!{sys.executable} -S\n{body}", encoding="utf-8")
    path.chmod(0o755)


@pytest.fixture
def state(tmp_path: Path) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake(bin_dir, "scontrol", FAKE_SCONTROL)
    fake(bin_dir, "fleetcheck", FAKE_FLEETCHECK)
    return tmp_path


def run_script(state: Path, script: str, rc: int, stderr: str, stdout: str = "",
               **env: str) -> subprocess.CompletedProcess[str]:
    (state / "out.txt").write_text(stdout)
    (state / "err.txt").write_text(stderr)
    (state / "rc").write_text(str(rc))
    environ = {"PATH": f"{state / 'bin'}:{os.environ['PATH']}", "FAKE_STATE": str(state),
               "SLURM_JOB_ID": "42", "SLURM_JOB_NODELIST": "gpu[01-04]",
               "SLURMD_NODENAME": "gpu03", "FLEETCHECK_SYSLOG": "0", "LC_ALL": "C", **env}
    return subprocess.run([str(EXAMPLES / script)], env=environ, capture_output=True,
                          text=True, check=False, timeout=60)


def scontrol_calls(state: Path) -> list[list[str]]:
    log = state / "scontrol.log"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


GATE_LINE = "gpu03: fail: Triton cpu-fallback: no C compiler (fix: apt-get install gcc)"


def test_the_held_jobs_comment_is_the_gates_line_not_a_warning(state: Path) -> None:
    stderr = (library_warnings() + "fleetcheck: warning: sources[0]: host x left out\n"
              + GATE_LINE + "\n" + library_warnings())
    done = run_script(state, "slurm-prologslurmctld.sh", 1, stderr)
    assert done.returncode == 1, done.stderr
    assert scontrol_calls(state) == [
        ["update", "JobId=42", f"Comment=fleetcheck: {GATE_LINE}"],
        ["update", "JobId=42", "Priority=0"],
    ]
    assert "Warning" not in done.stderr, done.stderr


def test_an_unverified_gates_logged_detail_is_its_own_line(state: Path) -> None:
    stderr = library_warnings() + "gpu03: unreachable: ssh: connection refused\n"
    done = run_script(state, "slurm-prologslurmctld.sh", 3, stderr)
    assert done.returncode == 0, done.stderr
    assert ("could not verify the nodes (gate exit 3): gpu03: unreachable: ssh: connection "
            "refused; job allowed") in done.stderr
    assert "Warning" not in done.stderr
    assert scontrol_calls(state) == []


def test_the_prologs_logged_cause_is_fleetchecks_not_a_warning(state: Path) -> None:
    table = ("NODE  STATUS  TRITON\ngpu03  FAIL  CPU-FALLBACK\n\nCauses and fixes\n"
             "  Triton cpu-fallback: no C compiler: CC unset\n  fix: apt-get install gcc\n")
    # The warning's text names the cause's words (FAIL, fix:): it is still not taken.
    noisy = library_warnings().replace("Use a more", "FAIL fix: use a more")
    done = run_script(state, "slurm-prolog.sh", 1, noisy, stdout=table)
    assert done.returncode == 1
    logged = [line for line in done.stderr.splitlines() if "blocking the job" in line]
    assert len(logged) == 1, done.stderr
    assert "no C compiler" in logged[0]
    assert "Warning" not in logged[0] and "dsa." not in logged[0], logged[0]
