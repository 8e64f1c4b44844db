"""The README's install, verbatim, in a fresh copy, with the system's PEP 668 python3 first on PATH.

pip gets its wheels from the wheelhouse scripts/test.sh made in the set-up (.wheelhouse, by
`scripts/install.sh --download`: the newest releases pip resolves that day), through pip's own
PIP_NO_INDEX / PIP_FIND_LINKS settings, so the README's command runs as written and no test
reaches the network. In that fresh install every subcommand runs without a Python warning on
its stderr (a library's warning printed before fleetcheck's own words, or in their place),
and the same with the user's PYTHONWARNINGS=error.
"""

from __future__ import annotations

import argparse
import glob
import re
import shutil
import socket
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
WHEELHOUSE = REPO / ".wheelhouse"
SYSTEM_PYTHON = Path("/usr/bin/python3")
SYSTEM_PATH = "/usr/local/sbin:/usr/sbin:/sbin:/usr/bin:/bin"

pytestmark = pytest.mark.slow

#: A Python warning as Python prints it (`FILE:LINE: NAMEWarning: TEXT`), on any line.
PYTHON_WARNING = re.compile(r"^\S.*:\d+: \w*Warning: ", re.M)


def first_command_block() -> str:
    """The first ```sh block of the README's Quick start."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    quick_start = readme[readme.index("## Quick start"):]
    match = re.search(r"```sh\n(.*?)```", quick_start, re.S)
    assert match, "README: no ```sh block under Quick start"
    return match[1]


def need_system_python() -> Path:
    marker = glob.glob("/usr/lib/python3*/EXTERNALLY-MANAGED")
    if not (SYSTEM_PYTHON.exists() and marker):
        pytest.skip("needs a system python3 marked externally managed (PEP 668), as on "
                    "Debian 12, Proxmox VE 8 or Ubuntu 24.04")
    return SYSTEM_PYTHON


def need_wheelhouse() -> Path:
    if not any(WHEELHOUSE.glob("fleetcheck-*.whl")):
        pytest.skip("no wheelhouse: scripts/test.sh makes it (scripts/install.sh --download "
                    ".wheelhouse)")
    return WHEELHOUSE


@pytest.fixture
def system_python() -> Path:
    return need_system_python()


@pytest.fixture
def wheelhouse() -> Path:
    return need_wheelhouse()


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
    assert not PYTHON_WARNING.search(done.stderr), done.stderr
    # The audit's exit code: 0 ok, 1 a node failed, 3 unverified; never 2 (usage) or a crash.
    assert done.returncode in (0, 1, 3), done.stdout + done.stderr
    assert "this-machine" in done.stdout, done.stdout
    config = (clone / ".venv" / "pyvenv.cfg").read_text()
    assert re.search(r"^home = /usr/bin$", config, re.M), config
    assert (clone / ".venv" / "bin" / "fleetcheck").exists()


@dataclass(frozen=True)
class OfflineInstall:
    """`scripts/install.sh --wheelhouse` run in a fresh copy, by the system's python3."""

    clone: Path
    home: Path
    env: dict[str, str]
    done: subprocess.CompletedProcess[str]

    @property
    def fleetcheck(self) -> Path:
        return self.clone / ".venv" / "bin" / "fleetcheck"


@pytest.fixture(scope="module")
def offline_install(tmp_path_factory: pytest.TempPathFactory) -> OfflineInstall:
    """One install for the tests of this module that need one (a minute or more of pip)."""
    system_python, wheelhouse = need_system_python(), need_wheelhouse()
    root = tmp_path_factory.mktemp("offline")
    clone = fresh_copy(root / "clone")
    (root / "home").mkdir()
    # An index that cannot answer: any attempt to use it would fail the install.
    env = clean_env(root / "home", PIP_INDEX_URL="http://127.0.0.1:9/simple",
                    PYTHON=str(system_python))
    done = subprocess.run(["scripts/install.sh", "--wheelhouse", str(wheelhouse)], cwd=clone,
                          env=env, capture_output=True, text=True, timeout=540, check=False)
    return OfflineInstall(clone, root / "home", env, done)


def test_offline_install_from_a_wheelhouse_never_reaches_the_network(
        offline_install: OfflineInstall) -> None:
    done = offline_install.done
    assert done.returncode == 0, done.stdout + done.stderr
    version = subprocess.run([str(offline_install.fleetcheck), "--version"],
                             env=offline_install.env, capture_output=True, text=True,
                             timeout=60, check=False)
    assert version.stdout.startswith("fleetcheck "), version
    assert "fleetcheck installed: .venv/bin/fleetcheck" in done.stderr


@pytest.fixture
def refused_port() -> Iterator[int]:
    """A port of 127.0.0.1 that refuses connections (bound, never listening) while the test runs."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield int(sock.getsockname()[1])


#: An ed25519 public key for `host-setup --key` (any well-formed one; the key is not used).
AUDIT_KEY = ("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl "
             "fleetcheck-audit\n")


def every_subcommand(work: Path, port: int) -> list[tuple[list[str], set[int], str]]:
    """Each subcommand once, in an order where each finds what an earlier one wrote, with the
    exit codes it may give here and a text its output holds (that it got that far). Together
    they import every library fleetcheck uses: asyncssh (the audit's SSH hosts, refused),
    proxmoxer, requests and urllib3 (an API source, refused), ClusterShell (a node range),
    PyYAML, Jinja2 (the HTML report) and rich (the tables)."""
    (work / "docs").mkdir()
    (work / "audit.pub").write_text(AUDIT_KEY)
    (work / "ssh.yaml").write_text(
        "defaults:\n"
        f"  ssh: {{port: {port}, config_file: none, connect_timeout: 5}}\n"
        "hosts:\n"
        "  gpu[01-02]: {address: 127.0.0.1, probe_host: true}\n")
    (work / "api.yaml").write_text(
        "hosts: {}\n"
        "sources:\n"
        f"  - proxmox: {{url: 'https://127.0.0.1:{port}', user: fleet@pve, token_name: audit,\n"
        "               token_env: FLEETCHECK_TEST_TOKEN, verify_tls: false}\n")
    audit, docs = str(work / "audit.json"), str(work / "docs")
    verdicts = {0, 1, 3}  # pass, fail, unverified: this machine has no GPU, or may have one
    return [
        (["--help"], {0}, "usage: fleetcheck"),
        (["audit", "inventory.example.yaml", "--no-progress", "-o", audit], verdicts, ""),
        (["audit", str(work / "ssh.yaml"), "--no-progress"], {3},
         f"connection refused by gpu01 (127.0.0.1:{port})"),
        (["gate", "inventory.example.yaml"], verdicts, ""),
        (["probe", "-o", f"{docs}/node.json", "--cache", str(work / "cache.json")], verdicts,
         ""),
        (["health", "--cache", str(work / "cache.json")], verdicts, ""),
        (["inventory", "inventory.example.yaml"], {0}, "this-machine"),
        (["inventory", str(work / "api.yaml")], {2},
         f"Proxmox API https://127.0.0.1:{port}: cannot connect"),
        (["report", audit], {0}, "this-machine"),
        (["report", audit, "-o", str(work / "report.html")], {0}, ""),
        (["diff", audit, audit], {0}, "no changes"),
        (["merge", docs, "-o", str(work / "merged.json")], verdicts, ""),
        (["fix", audit], verdicts, "fleetcheck fix:"),
        (["host-setup", "--key", str(work / "audit.pub")], {0}, "gatekeeper"),
        (["schema", "audit"], {0}, "fleetcheck.audit/1"),
        (["completion", "bash"], {0}, "fleetcheck"),
        (["manpage"], {0}, ".TH"),
    ]


def subcommand_names() -> set[str]:
    """The subcommands the CLI has (its parser's)."""
    from fleetcheck.cli import build_parser

    actions = [action for action in build_parser()._actions
               if isinstance(action, argparse._SubParsersAction)]
    return {name for action in actions for name in action.choices}


def test_every_subcommand_is_among_those_run(tmp_path: Path) -> None:
    run = {argv[0] for argv, _, _ in every_subcommand(tmp_path, 9)}
    assert run - {"--help"} == subcommand_names()


def test_every_subcommand_prints_no_python_warning_with_the_newest_releases(
        offline_install: OfflineInstall, refused_port: int, tmp_path: Path) -> None:
    assert offline_install.done.returncode == 0, offline_install.done.stderr
    env = {**offline_install.env, "FLEETCHECK_TEST_TOKEN": "0123456789abcdef"}
    for argv, codes, says in every_subcommand(tmp_path, refused_port):
        done = subprocess.run([str(offline_install.fleetcheck), *argv],
                              cwd=offline_install.clone, env=env, capture_output=True,
                              text=True, timeout=180, check=False)
        shown = f"fleetcheck {' '.join(argv)}: exit {done.returncode}\n{done.stderr}"
        assert done.returncode in codes, shown
        assert says in done.stdout + done.stderr, f"{shown}\n{done.stdout}"
        assert not PYTHON_WARNING.search(done.stderr), shown
        assert "Traceback" not in done.stderr, shown
        # A user's PYTHONWARNINGS=error makes no library warning an exception either.
        strict = subprocess.run([str(offline_install.fleetcheck), *argv],
                                cwd=offline_install.clone,
                                env={**env, "PYTHONWARNINGS": "error"}, capture_output=True,
                                text=True, timeout=180, check=False)
        assert "Traceback" not in strict.stderr, f"PYTHONWARNINGS=error {shown}\n{strict.stderr}"
        assert strict.returncode == done.returncode, f"PYTHONWARNINGS=error\n{strict.stderr}"


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
