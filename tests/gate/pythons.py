"""A second Python interpreter on this machine, for real version differences between nodes."""

from __future__ import annotations

import platform
import shutil
import subprocess
from pathlib import Path

import pytest


def other_python() -> str:
    """An interpreter whose version differs from ours; skips the test when there is none."""
    ours = platform.python_version()
    for candidate in ("/usr/bin/python3", shutil.which("python3"), "/usr/local/bin/python3"):
        if not candidate or not Path(candidate).exists():
            continue
        version = subprocess.run(
            [candidate, "-c", "import platform; print(platform.python_version())"],
            capture_output=True, text=True, check=False,
        ).stdout.strip()
        if version and version != ours:
            return candidate
    pytest.skip("needs a second Python version on this machine")


def python_version(interpreter: str) -> str:
    return subprocess.run(
        [interpreter, "-c", "import platform; print(platform.python_version())"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()
