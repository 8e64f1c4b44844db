#!/usr/bin/env python3
"""Fetch the real library wheels the probe's tests install (once; a cache under .test-wheels/).

One release per distinct layout of flash-linear-attention's device detection (where
`get_available_device()` lives and what `fla.utils` imports); the pure-Python frameworks whose
own detection the probe runs (unsloth-zoo's vendored FLA, Liger-Kernel, xformers' Python
package); and the newest Triton, of which only the Python files, `driver.c`, its headers and the
dist-info are kept (`.test-wheels/triton-3.9.0/`): the probe's backend-discovery tests import
them, and the toolchain tests compile `driver.c` as Triton does. The tests unpack the wheels
over the suite's stub torch/triton; they never download anything themselves. Exit 1 with one
line per wheel that could not be fetched.
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
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
    ("unsloth-zoo", "2026.10.9", "its vendored FLA: unsloth_zoo/_vendored/fla/utils/_device.py"),
    ("liger-kernel", "0.8.5", "liger_kernel/utils.py infer_device(): torch.cuda only"),
)

#: (distribution, version, wheel name glob, what is kept): binary wheels, of which the tests
#: need the Python side only; it is extracted once and the wheel deleted.
EXTRACTED: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("triton", "3.9.0", (".py", ".c", ".h", "entry_points.txt", "METADATA", "RECORD")),
    ("xformers", "0.0.35", ("xformers/__init__.py", "xformers/_cpp_lib.py", "METADATA")),
)


def wheel_name(dist: str, version: str) -> str:
    return f"{dist.replace('-', '_')}-{version}-py3-none-any.whl"


def download(spec: str, into: Path) -> str | None:
    """pip download one wheel; None, or the line saying why not."""
    done = subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check",
         "--no-deps", "--only-binary=:all:", spec, "-d", str(into)],
        capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines()
        return lines[-1] if lines else "not downloaded"
    return None


def extract(dist: str, version: str, keep: tuple[str, ...]) -> str | None:
    target = CACHE / f"{dist}-{version}"
    if (target / ".complete").is_file():
        return None
    scratch = CACHE / f".download-{dist}"
    scratch.mkdir(exist_ok=True)
    problem = download(f"{dist}=={version}", scratch)
    if problem:
        return problem
    wheels = sorted(scratch.glob(f"{dist.replace('-', '_')}-{version}-*.whl"))
    if not wheels:
        return "no wheel downloaded"
    with zipfile.ZipFile(wheels[0]) as archive:
        for name in archive.namelist():
            if name.endswith(keep) and ".." not in name.split("/"):
                archive.extract(name, target)
    for wheel in wheels:
        wheel.unlink()
    scratch.rmdir()
    (target / ".complete").write_text(wheels[0].name + "\n")
    return None


def main() -> int:
    CACHE.mkdir(exist_ok=True)
    failed = []
    for dist, version, _ in WHEELS:
        if (CACHE / wheel_name(dist, version)).is_file():
            continue
        problem = download(f"{dist}=={version}", CACHE)
        if problem or not (CACHE / wheel_name(dist, version)).is_file():
            failed.append(f"{dist}=={version}: {problem or 'not downloaded'}")
    for dist, version, keep in EXTRACTED:
        problem = extract(dist, version, keep)
        if problem:
            failed.append(f"{dist}=={version}: {problem}")
    for line in failed:
        print(f"fetch_test_wheels: {line}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
