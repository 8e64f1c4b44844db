"""The README's install, verbatim, in a fresh copy, with the system's PEP 668 python3 first on PATH.

pip gets its wheels from the wheelhouse scripts/test.sh made in the set-up (.wheelhouse, by
`scripts/install.sh --download`), through pip's own PIP_NO_INDEX / PIP_FIND_LINKS settings, so
the README's command runs as written and no test reaches the network.
"""

from __future__ import annotations

import glob
import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
WHEELHOUSE = REPO / ".wheelhouse"
SYSTEM_PYTHON = Path("/usr/bin/python3")
SYSTEM_PATH = "/usr/local/sbin:/usr/sbin:/sbin:/usr/bin:/bin"

pytestmark = pytest.mark.slow


def first_command_block() -> str:
    """The first ```sh block of the README's Quick start."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    quick_start = readme[readme.index("## Quick start"):]
    match = re.search(r"```sh\n(.*?)```", quick_start, re.S)
    assert match, "README: no ```sh block under Quick start"
    return match[1]


@pytest.fixture
def system_python() -> Path:
    marker = glob.glob("/usr/lib/python3*/EXTERNALLY-MANAGED")
    if not (SYSTEM_PYTHON.exists() and marker):
        pytest.skip("needs a system python3 marked externally managed (PEP 668), as on "
                    "Debian 12, Proxmox VE 8 or Ubuntu 24.04")
    return SYSTEM_PYTHON


@pytest.fixture
def wheelhouse() -> Path:
    if not any(WHEELHOUSE.glob("fleetcheck-*.whl")):
        pytest.skip("no wheelhouse: scripts/test.sh makes it (scripts/install.sh --download "
                    ".wheelhouse)")
    return WHEELHOUSE


def fresh_copy(dest: Path) -> Path:
    """The checkout's files as a clone has them: tracked and new, never what git ignores."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others",
                             "--exclude-standard"], cwd=REPO, capture_output=True,
                            check=True, timeout=60).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = REPO / name
        if not source.is_file():
            continue  # deleted in the work tree
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)
    return dest


def clean_env(home: Path, **extra: str) -> dict[str, str]:
    """A login-like environment: the system's PATH, no venv, no pyenv, no user site."""
    return {"PATH": SYSTEM_PATH, "HOME": str(home), "LANG": "C.UTF-8",
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
            # The completion and the man page an install puts in system folders, as root:
            # under the test's own root instead.
            "DESTDIR": str(home / "destdir"), **extra}


def test_the_system_python_refuses_a_plain_pip_install(system_python: Path,
                                                       tmp_path: Path) -> None:
    """Why the README cannot say `python3 -m pip install .`: PEP 668 (or no pip at all)."""
    done = subprocess.run([str(system_python), "-m", "pip", "install", "--no-index", "."],
                          cwd=REPO, env=clean_env(tmp_path), capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode != 0
    assert "externally-managed-environment" in done.stderr or "No module named pip" in done.stderr


def test_readme_first_block_installs_and_audits_with_the_pep668_python(
        system_python: Path, wheelhouse: Path, tmp_path: Path) -> None:
    clone = fresh_copy(tmp_path / "clone")
    block = first_command_block()
    assert "--break-system-packages" not in block
    env = clean_env(tmp_path / "home", PIP_NO_INDEX="1", PIP_FIND_LINKS=str(wheelhouse))
    (tmp_path / "home").mkdir()
    done = subprocess.run(["bash", "-c", block], cwd=clone, env=env, capture_output=True,
                          text=True, timeout=540, check=False)
    assert "Traceback" not in done.stderr, done.stderr
    # The audit's exit code: 0 ok, 1 a node failed, 3 unverified; never 2 (usage) or a crash.
    assert done.returncode in (0, 1, 3), done.stdout + done.stderr
    assert "this-machine" in done.stdout, done.stdout
    config = (clone / ".venv" / "pyvenv.cfg").read_text()
    assert re.search(r"^home = /usr/bin$", config, re.M), config
    assert (clone / ".venv" / "bin" / "fleetcheck").exists()


def test_offline_install_from_a_wheelhouse_never_reaches_the_network(
        system_python: Path, wheelhouse: Path, tmp_path: Path) -> None:
    clone = fresh_copy(tmp_path / "clone")
    (tmp_path / "home").mkdir()
    # An index that cannot answer: any attempt to use it would fail the install.
    env = clean_env(tmp_path / "home", PIP_INDEX_URL="http://127.0.0.1:9/simple",
                    PYTHON=str(system_python))
    done = subprocess.run(["scripts/install.sh", "--wheelhouse", str(wheelhouse)], cwd=clone,
                          env=env, capture_output=True, text=True, timeout=540, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    version = subprocess.run([str(clone / ".venv" / "bin" / "fleetcheck"), "--version"],
                             env=env, capture_output=True, text=True, timeout=60, check=False)
    assert version.stdout.startswith("fleetcheck "), version
    assert "fleetcheck installed: .venv/bin/fleetcheck" in done.stderr


def test_install_script_refuses_bad_input_in_one_line(tmp_path: Path) -> None:
    script = REPO / "scripts" / "install.sh"
    env = clean_env(tmp_path, PYTHON=str(tmp_path / "no-python"))
    done = subprocess.run([str(script)], env=env, capture_output=True, text=True, timeout=60,
                          check=False)
    assert (done.returncode, done.stderr.count("\n")) == (2, 1), done.stderr
    assert "no-python not found" in done.stderr
    missing = subprocess.run([str(script), "--wheelhouse", str(tmp_path / "nowhere")],
                             env={**env, "PYTHON": "python3", "VENV": str(tmp_path / "venv")},
                             capture_output=True, text=True, timeout=120, check=False)
    assert missing.returncode == 2
    assert "nowhere: no such folder" in missing.stderr
    assert not (tmp_path / "venv").exists()  # refused before anything was made
