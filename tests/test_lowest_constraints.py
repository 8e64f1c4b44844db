"""scripts/lowest_constraints.py: each dependency of pyproject.toml pinned to its lower bound."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "lowest_constraints.py"

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    from pip._vendor import tomli as tomllib


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True,
                          timeout=60, check=False)


def test_every_dependency_of_the_project_is_pinned_to_its_bound() -> None:
    done = run(str(REPO / "pyproject.toml"))
    assert done.returncode == 0, done.stderr
    project: dict[str, Any] = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    pins = [line for line in done.stdout.splitlines() if not line.startswith("#")]
    assert len(pins) == len(project["dependencies"])
    for requirement, pin in zip(project["dependencies"], pins, strict=True):
        name, version = pin.split("==")
        assert requirement.replace(" ", "").startswith(f"{name}>={version}"), (requirement, pin)


@pytest.mark.parametrize(("dependencies", "pins"), [
    (["asyncssh>=2.15", "ClusterShell >= 1.9.0"], ["asyncssh==2.15", "ClusterShell==1.9.0"]),
    (["rich[jupyter]>=13.0,<15", "tomli~=2.0; python_version < '3.11'"],
     ["rich==13.0", "tomli==2.0"]),
])
def test_a_lower_bound_becomes_a_pin(tmp_path: Path, dependencies: list[str],
                                     pins: list[str]) -> None:
    listed = ", ".join(f'"{dependency}"' for dependency in dependencies)
    (tmp_path / "pyproject.toml").write_text(f"[project]\ndependencies = [{listed}]\n")
    done = run(str(tmp_path / "pyproject.toml"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[1:] == pins


@pytest.mark.parametrize("dependency", ["requests", "requests<3", "requests==2.28"])
def test_a_dependency_without_a_lower_bound_is_refused(tmp_path: Path, dependency: str) -> None:
    (tmp_path / "pyproject.toml").write_text(f'[project]\ndependencies = ["{dependency}"]\n')
    done = run(str(tmp_path / "pyproject.toml"))
    assert (done.returncode, done.stdout) == (2, "")
    assert f"'{dependency}': no lower bound (>= or ~=) to test" in done.stderr
