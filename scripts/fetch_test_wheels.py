#!/usr/bin/env python3
"""Fetch the real library wheels the probe's tests install (once; a cache under .test-wheels/).

One release per distinct layout of flash-linear-attention's device detection (where
`get_available_device()` lives and what `fla.utils` imports). The tests unpack them over the
suite's stub torch/triton; they never download anything themselves. Exit 1 with one line per
wheel that could not be fetched.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / ".test-wheels"

#: (distribution, version, why this one): every wheel is pure Python (py3-none-any).
WHEELS: tuple[tuple[str, str, str], ...] = (
    ("flash-linear-attention", "0.1", "fla/utils.py, catches BaseException"),
    ("flash-linear-attention", "0.3.0", "fla/utils.py, `from fla import __version__` inside"),
    ("flash-linear-attention", "0.4.2", "split into fla-core; fla/utils.py"),
    ("fla-core", "0.4.2", "fla/utils.py in fla-core"),
    ("fla-core", "0.5.0", "fla/utils.py, catches Exception"),
    ("flash-linear-attention", "0.5.2", "split; detection in fla/utils/_device.py"),
    ("fla-core", "0.5.2", "fla/utils/_device.py; _decorators does `from .. import __version__`"),
    ("flash-linear-attention", "0.6.0", "the current release"),
    ("fla-core", "0.6.0", "fla/utils/hardware.py; decorators does `from fla import __version__`"),
)


def wheel_name(dist: str, version: str) -> str:
    return f"{dist.replace('-', '_')}-{version}-py3-none-any.whl"


def main() -> int:
    CACHE.mkdir(exist_ok=True)
    failed = []
    for dist, version, _ in WHEELS:
        if (CACHE / wheel_name(dist, version)).is_file():
            continue
        done = subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check",
             "--no-deps", "--only-binary=:all:", f"{dist}=={version}", "-d", str(CACHE)],
            capture_output=True, text=True, timeout=300)
        if done.returncode != 0 or not (CACHE / wheel_name(dist, version)).is_file():
            lines = (done.stderr or done.stdout).strip().splitlines()
            failed.append(f"{dist}=={version}: {lines[-1] if lines else 'not downloaded'}")
    for line in failed:
        print(f"fetch_test_wheels: {line}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
