"""The stage scripts: real .py files that ruff and mypy check, sent to the workload's interpreter.

A script file is a docstring and imports for the checkers only (the names it gets from the
scripts sent before it), then the line SCRIPT_MARK; what follows that line, from its newline on,
is the script exactly as it is sent. `stage_script(name)` reads that text; the build puts it
into the shipped probe as a literal in place of the call (fleetcheck/probe/build.py).
"""

from __future__ import annotations

from pathlib import Path

SCRIPT_MARK = "# ---- sent as is: everything below this line is the script ----"


def script_text(source: str, name: str) -> str:
    """The script part of a stage script file's text (what follows SCRIPT_MARK)."""
    head, mark, text = source.partition(SCRIPT_MARK)
    if not mark:
        raise ValueError(f"{name}.py: no line {SCRIPT_MARK!r}")
    if not head.endswith("\n") or not text.startswith("\n"):
        raise ValueError(f"{name}.py: {SCRIPT_MARK!r} must be a line of its own")
    return text


def stage_script(name: str) -> str:
    """The text of scripts/NAME.py as it is sent (the sources' stand-in for the built literal)."""
    path = Path(__file__).with_name(f"{name}.py")
    return script_text(path.read_text(encoding="utf-8"), name)
