"""`fleetcheck completion`: the shell completion script of bash or zsh, as shipped (generated
from this parser when fleetcheck is built: `fleetcheck/completion_build.py`)."""

from __future__ import annotations

import argparse
from typing import Any

from fleetcheck.cli.exits import EXIT_PASS
from fleetcheck.cli.output import emit

NAME = "completion"


def add_parser(sub: Any) -> argparse.ArgumentParser:
    from fleetcheck.completion import SHELLS

    parser: argparse.ArgumentParser = sub.add_parser(
        NAME, help="print the shell completion script for bash or zsh",
        description="Print the completion script of SHELL, e.g. "
        "fleetcheck completion bash > /usr/share/bash-completion/completions/fleetcheck, or "
        "fleetcheck completion zsh > /usr/local/share/zsh/site-functions/_fleetcheck "
        "(scripts/install.sh does both as root).",
    )
    parser.add_argument("shell", choices=tuple(SHELLS), metavar="SHELL",
                        help=" or ".join(SHELLS))
    return parser


def run(args: argparse.Namespace) -> int:
    from fleetcheck.completion import shipped

    emit(shipped(args.shell))
    return EXIT_PASS
