"""The stage scripts: real .py files that ruff and mypy check, sent to the workload's interpreter.

A script file is a docstring and imports for the checkers only (the names it gets from the
scripts sent before it), then the line SCRIPT_MARK; what follows that line, from its newline on,
is the script as it is sent (less its comment-only lines and docstrings: `shipped`).
`stage_script(name)` reads that text; the build puts it
into the shipped probe as a literal in place of the call (fleetcheck/probe/build.py).
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
    return shipped(text)


def without_comment_lines(body: str) -> str:
    """`body` without its lines that hold only a comment (comments inside strings stay)."""
    alone = {tok.start[0] for tok in tokenize.generate_tokens(io.StringIO(body).readline)
             if tok.type == tokenize.COMMENT and not tok.line[:tok.start[1]].strip()}
    return "".join(line for number, line in enumerate(body.splitlines(keepends=True), 1)
                   if number not in alone)


def without_docstrings(body: str) -> str:
    """`body` without the docstrings of its functions and classes (each on lines of its own;
    one that is the whole body stays): the shipped probe must fit the guest agent's input."""
    tree = ast.parse(body)
    spans = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and len(
                node.body) > 1:
            first = node.body[0]
            if (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
                    and isinstance(first.value.value, str) and first.end_lineno is not None
                    and first.end_lineno < node.body[1].lineno):
                spans.append((first.lineno, first.end_lineno))
    lines = body.splitlines(keepends=True)
    for start, end in sorted(spans, reverse=True):
        del lines[start - 1:end]
    return "".join(lines)


def shipped(text: str) -> str:
    """Python source as the probe ships it: without comment-only lines and docstrings."""
    return without_docstrings(without_comment_lines(text))


def stage_script(name: str) -> str:
    """The text of scripts/NAME.py as it is sent (the sources' stand-in for the built literal)."""
    path = Path(__file__).with_name(f"{name}.py")
    return script_text(path.read_text(encoding="utf-8"), name)
