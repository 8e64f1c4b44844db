"""Device nodes the workload user may not open: the probe run as an unprivileged user (EACCES)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.nodeenv import make_amd_node, make_node

PROBE = Path(__file__).resolve().parents[2] / "fleetcheck" / "probe" / "probe.py"
SYSTEM_PYTHON = "/usr/bin/python3"
NOBODY = 65534


@pytest.fixture
def shared_root() -> Iterator[Path]:
    """A folder an unprivileged user can traverse (pytest's tmp_path is private to root)."""
    if os.geteuid() != 0 or not shutil.which("setpriv") or not os.access(SYSTEM_PYTHON, os.X_OK):
        pytest.skip("needs root, setpriv (util-linux) and /usr/bin/python3")
    root = Path(tempfile.mkdtemp(prefix="fleetcheck-devmodes-", dir="/tmp"))
    root.chmod(0o755)
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_a_node_the_user_may_not_open_is_eacces_not_missing(shared_root: Path) -> None:
    modes = {"nvidiactl": 0o666, "nvidia-uvm": 0o666, "nvidia-uvm-tools": 0o666,
             "nvidia0": 0o600}  # root's, as an unprivileged container shows a host node
    node = make_node(shared_root / "node", container="lxc",
                     dev_modes=modes)
    tmpdir = shared_root / "tmp"
    tmpdir.mkdir(mode=0o1777)
    tmpdir.chmod(0o1777)
    env = {**node.env, "TMPDIR": str(tmpdir), "HOME": str(tmpdir)}
    done = subprocess.run(
        [str(shutil.which("setpriv")), f"--reuid={NOBODY}", f"--regid={NOBODY}",
         "--clear-groups", SYSTEM_PYTHON, "-"],
        input=PROBE.read_bytes(), env=env, capture_output=True, timeout=120,
        cwd=str(tmpdir))
    doc = json.loads(done.stdout)
    check = {c["id"]: c for c in doc["checks"]}["dev_nodes_missing"]
    assert check["status"] == "fail"
    assert check["summary"] == "/dev/nvidia0 not permitted by its file mode (EACCES)"
    assert check["evidence"]["open"]["nvidia0"] == "EACCES"
    assert check["evidence"]["open"]["nvidiactl"] == "ok"
    assert doc["triton"]["verdict"] == "cpu-fallback"
    assert doc["triton"]["cause"] == "dev_nodes_missing"
    assert os.listdir(tmpdir) == []


def test_an_amd_kfd_node_the_user_may_not_open_names_its_group(shared_root: Path) -> None:
    """/dev/kfd of mode 0600 (root's): the user is not in its group (render on a real node)."""
    node = make_amd_node(shared_root / "node", mode="kfd-eacces", container="lxc")
    tmpdir = shared_root / "tmp"
    tmpdir.mkdir(mode=0o1777)
    tmpdir.chmod(0o1777)
    env = {**node.env, "TMPDIR": str(tmpdir), "HOME": str(tmpdir)}
    done = subprocess.run(
        [str(shutil.which("setpriv")), f"--reuid={NOBODY}", f"--regid={NOBODY}",
         "--clear-groups", SYSTEM_PYTHON, "-"],
        input=PROBE.read_bytes(), env=env, capture_output=True, timeout=120,
        cwd=str(tmpdir))
    doc = json.loads(done.stdout)
    check = {c["id"]: c for c in doc["checks"]}["dev_nodes_missing"]
    assert check["status"] == "fail"
    assert check["summary"] == "/dev/kfd not permitted by its file mode (EACCES; group root)"
    assert check["evidence"]["open"] == {"kfd": "EACCES", "dri/renderD128": "ok"}
    assert check["fix"].startswith("add the workload user to the node's groups: usermod -aG "
                                   "render,video <user>")
    assert (doc["triton"]["verdict"], doc["triton"]["cause"]) == ("cpu-fallback",
                                                                  "dev_nodes_missing")
    assert os.listdir(tmpdir) == []
