"""Golden files: compare a renderer's exact output, or rewrite it with FLEETCHECK_REGEN_GOLDEN=1."""

from __future__ import annotations

import os
from pathlib import Path

GOLDEN_DIR = Path(__file__).parent / "golden"


def assert_golden(name: str, actual: str) -> None:
    path = GOLDEN_DIR / name
    if os.environ.get("FLEETCHECK_REGEN_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(actual.encode("utf-8"))
        return
    assert path.exists(), f"{path} missing: run with FLEETCHECK_REGEN_GOLDEN=1 to create it"
    expected = path.read_bytes().decode("utf-8")
    assert actual == expected, f"output differs from {path} (FLEETCHECK_REGEN_GOLDEN=1 rewrites)"
