"""The stage scripts: real .py files that ruff and mypy check, sent to the workload's interpreter.

A script file is a docstring and imports for the checkers only (the names it gets from the
scripts sent before it), then the line SCRIPT_MARK; what follows that line, from its newline on,
is the script as it is sent, less its comments and docstrings (they are for readers: the
shipped probe must fit the QEMU guest agent's 64 KiB input compressed). `stage_script(name)`
reads that text; the build puts it into the shipped probe as a literal in place of the call
(fleetcheck/probe/build.py).
"""

from __future__ import annotations

import ast
import io
import tokenize
from pathlib import Path

SCRIPT_MARK = "# ---- sent as is: everything below this line is the script ----"


def script_text(source: str, name: str) -> str:
    """The script part of a stage script file's text (what follows SCRIPT_MARK)."""
    head, mark, text = source.partition(SCRIPT_MARK)
    if not mark:
        raise ValueError(f"{name}.py: no line {SCRIPT_MARK!r}")
    if not head.endswith("\n") or not text.startswith("\n"):
        raise ValueError(f"{name}.py: {SCRIPT_MARK!r} must be a line of its own")
    return _for_sending(text)


def _for_sending(text: str) -> str:
    """`text` without its comments and the docstrings of its functions and classes (one that
    is a body's only statement stays): the same code, fewer bytes."""
    drop, cut = set(), {}
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.COMMENT:
            if tok.line[:tok.start[1]].strip():
                cut[tok.start[0]] = tok.start[1]  # a comment after code: the code stays
            else:
                drop.add(tok.start[0])
    for node in ast.walk(ast.parse(text)):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        first = node.body[0]
        if (len(node.body) > 1 and isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str)):
            drop.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    lines = text.splitlines(keepends=True)
    return "".join(line[:cut[number]].rstrip() + "\n" if number in cut else line
                   for number, line in enumerate(lines, 1) if number not in drop)


def stage_script(name: str) -> str:
    """The text of scripts/NAME.py as it is sent (the sources' stand-in for the built literal)."""
    path = Path(__file__).with_name(f"{name}.py")
    return script_text(path.read_text(encoding="utf-8"), name)
