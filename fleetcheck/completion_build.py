"""Generating shell completion (bash, zsh) and the man page from the command line's own parser.

shtab writes the completion scripts and argparse-manpage the man page, both from
`cli.build_parser()`, so a new subcommand or option is in both as soon as it is in the parser.
They are generated when fleetcheck is built, not when it runs:
`python -m fleetcheck.completion_build` writes them into the package
(`fleetcheck/data/completion/`, `fleetcheck/data/man/`), a test pins them to a fresh generation
(`--check`), and `fleetcheck completion bash|zsh` and `fleetcheck manpage` print the shipped
files (`completion.py`). So neither library is needed where fleetcheck is installed (an
air-gapped admin host included), and pressing TAB runs no Python at all: argcomplete's way
starts the program on every TAB.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from fleetcheck.completion import COMPLETION_DIR, MAN_DIR, MAN_PAGE, SHELLS, subparsers
from fleetcheck.generated import stale_files, write_or_check

#: What the man page's NAME line says after "fleetcheck -".
SUMMARY = "audit GPU nodes for a Triton that silently falls back to CPU"
#: The width the man page's usage lines are wrapped at, whatever terminal builds it.
WIDTH = "80"
PACKAGE = Path(__file__).resolve().parent

#: Metavars of arguments that name files, and of those that name folders: completed as such.
_FILE_WORDS = ("FILE", "INVENTORY", "INPUT", "PATH", "RESULTS", "OLD", "NEW")
_FOLDER_WORDS = ("DIR",)


@contextmanager
def _columns(width: str) -> Iterator[None]:
    """argparse wraps help at the terminal's width: a fixed one, so the page is the same
    wherever it is built."""
    before = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = width
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = before


def _annotated(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The parser with shtab's hints: an argument that names a file completes file names, one
    that names a folder folder names (read off its metavar or name)."""
    import shtab

    for command in (parser, *subparsers(parser).values()):
        for action in command._actions:
            words = str(action.metavar or action.dest or "").upper()
            if action.choices or isinstance(action, argparse._SubParsersAction):
                continue
            if any(word in words for word in _FOLDER_WORDS):
                action.complete = shtab.DIRECTORY  # type: ignore[attr-defined]
            elif any(word in words for word in _FILE_WORDS):
                action.complete = shtab.FILE  # type: ignore[attr-defined]
    return parser


def generate() -> dict[str, str]:
    """Every shipped file's text, by its path under the package, from the parser as it is."""
    import shtab
    from argparse_manpage.manpage import Manpage

    from fleetcheck import __version__
    from fleetcheck.cli import build_parser

    files = {f"{COMPLETION_DIR}/{name}": shtab.complete(_annotated(build_parser()), shell=shell)
             for shell, name in SHELLS.items()}
    with _columns(WIDTH):
        page = Manpage(build_parser())
        page.description = SUMMARY
        page.date = ""  # a date would make every build differ; the version dates it
        page.source = f"fleetcheck {__version__}"
        page.manual = "fleetcheck manual"
        files[f"{MAN_DIR}/{MAN_PAGE}"] = str(page)
    return files


def stale() -> list[Path]:
    """The shipped files that differ from a fresh generation."""
    return stale_files(_shipped_files())


def _shipped_files() -> dict[Path, str]:
    return {PACKAGE / name: text for name, text in generate().items()}


def main(argv: list[str]) -> int:
    """`python -m fleetcheck.completion_build [--check]`: write the files, or name the stale."""
    if argv and argv != ["--check"]:
        return write_or_check(argv, {}, "fleetcheck.completion_build")
    return write_or_check(argv, _shipped_files(), "fleetcheck.completion_build")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
