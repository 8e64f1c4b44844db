"""The probe on a node writes nothing outside its own temporary directory and removes that."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import fleetcheck.probe as probe_package
from reliability.support import cmdline, descendants, kill_pids, wait_until

PROBE = Path(probe_package.__file__).with_name("probe.py")
# Places a careless program writes to even when TMPDIR and HOME point elsewhere.
SHARED_TEMP = [Path(p) for p in ("/tmp", "/var/tmp", "/dev/shm") if os.path.isdir(p)]


def _tree(root: Path) -> dict[str, tuple[int, int]]:
    """Every path under `root` with its size and mtime (ns)."""
    out: dict[str, tuple[int, int]] = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(folder) / name
            try:
                info = path.lstat()
            except FileNotFoundError:
                continue
            out[str(path.relative_to(root))] = (info.st_size, info.st_mtime_ns)
    return out


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


@pytest.mark.timeout(120)
@pytest.mark.parametrize("deep", [False, True], ids=["quick", "deep"])
def test_probe_leaves_tmpdir_home_and_cwd_as_it_found_them(
    deep: bool, tmp_path: Path, figures: Any
) -> None:
    dirs = _node_dirs(tmp_path)
    before = {name: _tree(path) for name, path in dirs.items()}
    shared_before = {str(p): _names(p) for p in SHARED_TEMP}
    argv = [sys.executable, "-", "--deadline", "40", *(["--deep"] if deep else [])]
    done = subprocess.run(argv, input=PROBE.read_bytes(), capture_output=True, timeout=90,
                          cwd=dirs["cwd"], env=_probe_env(dirs))
    after = {name: _tree(path) for name, path in dirs.items()}
    leftovers = [f"{name}/{path}" for name in dirs for path in
                 sorted(set(after[name]) ^ set(before[name]))]
    leftovers += [f"{name}/{path} (changed)" for name in dirs for path in before[name]
                  if path in after[name] and after[name][path] != before[name][path]
                  and path not in ("",)]
    for folder in SHARED_TEMP:
        new = _names(folder) - shared_before[str(folder)]
        leftovers += [f"{folder}/{name}" for name in sorted(new) if "fleetcheck" in name
                      or name.startswith(("tmp", "triton", "torch"))]
    figures.probe_run(leftovers)
    assert done.stdout.strip().startswith(b"{"), done.stderr[-500:]
    assert leftovers == []


def _workload_that_hangs(folder: Path) -> Path:
    script = folder / "python-that-hangs"
    script.write_text("#!/bin/sh\nexec sleep 300\n")
    script.chmod(0o755)
    return script


@pytest.mark.xfail(
    strict=True,
    reason="BUG: fleetcheck/probe/probe.py:main: no SIGTERM handler: on TERM (what the host's "
    "`timeout -k` sends at the node timeout, and what a container shutdown sends) the probe "
    "dies without its finally: fleetcheck-probe-* stays in TMPDIR, and the helpers Spawned "
    "started (start_new_session=True, so outside timeout's process group) keep running",
)
@pytest.mark.timeout(60)
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
        wait_until(lambda: any("sleep 300" in cmdline(p) for p in descendants(probe.pid)), 30,
                   "the probe to start the workload interpreter")
        children = descendants(probe.pid)
        probe.send_signal(signal.SIGTERM)
        probe.wait(20)
        deadline = time.monotonic() + 5
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
