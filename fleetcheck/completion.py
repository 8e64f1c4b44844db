"""Shell completion (bash, zsh) and the man page as shipped: where they are and reading them.

They are generated from the command line's own parser when fleetcheck is built
(`python -m fleetcheck.completion_build`, which says why shtab and argparse-manpage), and a
test pins them to a fresh generation; `fleetcheck completion bash|zsh` and `fleetcheck manpage`
print them from here.
"""

from __future__ import annotations

import argparse
import pkgutil

#: The shells, and the file each one's script is shipped as (its completion dir's naming).
SHELLS = {"bash": "fleetcheck", "zsh": "_fleetcheck"}
MAN_PAGE = "fleetcheck.1"
COMPLETION_DIR = "data/completion"
MAN_DIR = "data/man"


def shipped(shell: str | None = None) -> str:
    """The shipped completion script of `shell`, or (None) the man page."""
    where = f"{MAN_DIR}/{MAN_PAGE}" if shell is None else f"{COMPLETION_DIR}/{SHELLS[shell]}"
    data = pkgutil.get_data(__package__ or "fleetcheck", where)
    if data is None:  # a loader that cannot read package data
        raise FileNotFoundError(where)
    return data.decode("utf-8")


def subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The subcommands of `parser`, by name, in the order they were added."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}
