"""The SSH client bench (bench/ssh_client_cpu.py) against a real OpenSSH sshd of its own: each
client it measures really connects, checks the host key, logs in and gets the command's reply,
and the table names every client it ran (the libssh2 ones where this interpreter has it, as
fleetcheck's dependencies give it on Linux)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fleetcheck.transport import libssh2

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.sshd


def test_each_client_answers_through_a_real_sshd(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / "ssh_client_cpu.py"), "--connections", "2",
         "--rounds", "1"],
        env=dict(os.environ, PYTHONPATH=str(REPO), HOME=str(tmp_path), TMPDIR=str(tmp_path)),
        capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = {line.split()[0]: line.split() for line in done.stdout.splitlines()[1:-1]}
    expected = ["asyncssh", "fc-asyncssh", "openssh"]
    if libssh2.library() is not None:
        expected = ["asyncssh", "fc-asyncssh", "fc-libssh2", "libssh2", "openssh"]
    assert sorted(rows) == expected, done.stdout
    assert rows["openssh"][3] == "1.00"  # the ratio's base
    assert all(float(row[1]) > 0 for row in rows.values())
