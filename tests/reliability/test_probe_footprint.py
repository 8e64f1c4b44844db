"""The probe on a node writes nothing outside its own temporary directory and removes that."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import fleetcheck.probe as probe_package
from tests.reliability.support import cmdline, descendants, kill_pids, wait_until

PROBE = Path(probe_package.__file__).with_name("probe.py")
def _names(folder: Path) -> set[str]:
    try:
        return set(os.listdir(folder))
    except OSError:
        return set()


def _node_dirs(tmp_path: Path) -> dict[str, Path]:
    dirs = {name: tmp_path / name for name in ("tmpdir", "home", "cwd")}
    for path in dirs.values():
        path.mkdir()
    (dirs["home"] / ".bashrc").write_text("# untouched\n")
    (dirs["cwd"] / "data.txt").write_text("untouched\n")
    return dirs


def _probe_env(dirs: dict[str, Path]) -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "TMPDIR": str(dirs["tmpdir"]),
            "HOME": str(dirs["home"]), "LANG": "C.UTF-8"}


# Run as the node would, but in a private mount namespace whose /tmp, /var/tmp and /dev/shm
# are fresh tmpfs: whatever the probe leaves in them is its own, even while other programs on
# this machine use the real ones. TMPDIR, HOME and the cwd live inside that /tmp.
_NAMESPACED = r"""
set -e
for dir in /tmp /var/tmp /dev/shm; do mount -t tmpfs -o size=64m fleetcheck-probe "$dir"; done
mkdir /tmp/node-tmpdir /tmp/node-home /tmp/node-cwd /tmp/node-state
echo '# untouched' > /tmp/node-home/.bashrc
echo untouched > /tmp/node-cwd/data.txt
listing() {
  find /tmp /var/tmp /dev/shm -mindepth 1 ! -path '/tmp/node-state*' \
    \( \( -type d -printf '%p/\n' \) -o -printf '%p %s %T@\n' \) | sort
}
listing > /tmp/node-state/before
cd /tmp/node-cwd
TMPDIR=/tmp/node-tmpdir HOME=/tmp/node-home "$@" > /tmp/node-state/out || true
listing > /tmp/node-state/after
head -c 1 /tmp/node-state/out
echo
diff /tmp/node-state/before /tmp/node-state/after | grep '^[<>]' || true
"""


def _can_unshare() -> bool:
    if os.geteuid() != 0 or not shutil.which("unshare"):
        return False
    done = subprocess.run(["unshare", "--mount", "--propagation", "private", "true"],
                          capture_output=True)
    return done.returncode == 0


@pytest.mark.timeout(120)
@pytest.mark.parametrize("deep", [False, True], ids=["quick", "deep"])
def test_probe_leaves_temp_dirs_home_and_cwd_as_it_found_them(
    deep: bool, figures: Any
) -> None:
    if not _can_unshare():
        pytest.skip("needs root and unshare for a private /tmp")
    # The real interpreter, not a venv's link to it: a venv under /tmp vanishes under the
    # namespace's fresh /tmp (the probe needs nothing but the standard library).
    python = os.path.realpath(sys.executable)
    if python.startswith(("/tmp/", "/var/tmp/", "/dev/shm/")):
        pytest.skip(f"the interpreter {python} lives in a folder the namespace replaces")
    probe = [python, "-", "--deadline", "40", *(["--deep"] if deep else [])]
    done = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", _NAMESPACED, "sh",
         *probe],
        input=PROBE.read_bytes(), capture_output=True, timeout=90,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"})
    assert done.returncode == 0, done.stderr[-2000:]
    first, _, changes = done.stdout.decode().partition("\n")
    leftovers = [line for line in changes.splitlines() if line.strip()]
    figures.probe_run(leftovers)
    assert first == "{", (first, done.stderr[-1000:])
    assert leftovers == []


def _workload_that_hangs(folder: Path) -> Path:
    script = folder / "python-that-hangs"
    script.write_text("#!/bin/sh\nexec sleep 300\n")
    script.chmod(0o755)
    return script


@pytest.mark.timeout(150)
def test_probe_cleans_up_when_terminated(tmp_path: Path, figures: Any) -> None:
    dirs = _node_dirs(tmp_path)
    workload = _workload_that_hangs(dirs["cwd"])
    argv = [sys.executable, "-", "--deadline", "40", "--python", str(workload)]
    probe = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, cwd=dirs["cwd"], env=_probe_env(dirs))
    children: list[int] = []
    try:
        assert probe.stdin is not None
        probe.stdin.write(PROBE.read_bytes())
        probe.stdin.close()
        # Terminate it while its helper (the workload interpreter) is running.
        # Budgets, not timings: each wait ends as soon as its condition holds.
        wait_until(lambda: any("sleep 300" in cmdline(p) for p in descendants(probe.pid)), 60,
                   "the probe to start the workload interpreter")
        children = descendants(probe.pid)
        probe.send_signal(signal.SIGTERM)
        probe.wait(20)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and any(cmdline(p) for p in children):
            time.sleep(0.05)
        alive = [f"{p} {cmdline(p)}" for p in children if cmdline(p)]
        leftovers = [f"tmpdir/{name}" for name in sorted(_names(dirs["tmpdir"]))] + alive
        figures.probe_run(leftovers)
        figures.processes(alive)
        assert leftovers == []
    finally:
        kill_pids([probe.pid, *children])
        probe.wait(5)
