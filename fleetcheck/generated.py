"""Files fleetcheck generates from its own code and ships (the JSON Schemas, the completion
scripts and man page): writing them, or naming those that differ from a fresh generation."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path


def stale_files(files: Mapping[Path, str]) -> list[Path]:
    """The paths whose file is missing or holds other text than `files` gives it."""
    return [path for path, text in files.items()
            if not path.is_file() or path.read_text(encoding="utf-8") != text]


def write_or_check(argv: list[str], files: Mapping[Path, str], command: str) -> int:
    """`python -m COMMAND [--check]`: write `files`, or with --check name the stale ones on
    stderr (exit 1); anything else is a usage error (exit 2)."""
    if argv == ["--check"]:
        found = stale_files(files)
        for path in found:
            print(f"{path}: stale; run python -m {command}", file=sys.stderr)
        return 1 if found else 0
    if argv:
        print(f"usage: python -m {command} [--check]", file=sys.stderr)
        return 2
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return 0
