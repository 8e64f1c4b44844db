"""The command line's entry point: the `fleetcheck` parser with every command registered, and
the run of the command asked for.

Each command is one module of this package, holding its options (`add_parser`) and its run
(`run`): parse, call the one library function it stands for, render, exit. What several
commands share has one owner each: `options.py` (shared options, argparse types,
`UsageError`), `inputs.py` (the playbook, inventory, `--max-out` and history options read),
`output.py` (stdout, atomic files, a reader that left, -o's format), `exits.py` (every exit
code, the process's end), `confirm.py` (asking before changing anything), `runs.py` (what the
audit-shaped commands share). Stages are imported lazily, inside the commands' runs, so that
`--help` and `probe --script` stay fast.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any, NoReturn

from fleetcheck import __version__
from fleetcheck.cli import (
    audit,
    completion,
    diff,
    fix,
    gate,
    health,
    host_setup,
    inventory,
    manpage,
    merge,
    probe,
    report,
    schema,
)
from fleetcheck.cli.exits import EXIT_FLUSH_FAILED, EXIT_USAGE, exit_code, finish
from fleetcheck.cli.options import EPILOG, UsageError, positive_count, positive_seconds
from fleetcheck.cli.output import prepare_stdout

__all__ = ["COMMANDS", "EPILOG", "EXIT_FLUSH_FAILED", "UsageError", "build_parser", "finish",
           "main", "positive_count", "positive_seconds", "run"]

#: The commands, one module each, in the order `--help`, the completion scripts and the man
#: page list them; each has `NAME`, `add_parser(subparsers)` and `run(args) -> exit code`.
COMMANDS: dict[str, ModuleType] = {command.NAME: command for command in (
    audit, gate, probe, health, inventory, report, fix, merge, diff, host_setup, schema,
    completion, manpage,
)}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The `fleetcheck` parser: the top level, and each registered command's own parser.

    With `command` (a registered name) only that command's parser is added: what a run of it
    parses is the same, and the other commands' options are not built (their help texts import
    the renderers' registry, the history's, the gatekeeper's and the node health's defaults:
    a fifth of the gate's start, bench/results.md).
    """
    parser = argparse.ArgumentParser(
        prog="fleetcheck",
        description="Audit GPU nodes (Proxmox VE hosts, their LXC containers and QEMU VMs, and "
        "Docker/Podman containers inside any of them) and "
        "tell, per node, whether Triton really runs on the GPU or silently falls back to CPU, "
        "and why.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"fleetcheck {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module in COMMANDS.items():
        if command is None or name == command:
            module.add_parser(sub)
    return parser


def _command_named(argv: Sequence[str]) -> str | None:
    """The command `argv` runs when its first word names one (`fleetcheck gate ...`), else
    None: the top level's options, its help or a mistyped command need every parser."""
    return argv[0] if argv and argv[0] in COMMANDS else None


def main(argv: Sequence[str] | None = None, *, parts: Any = None) -> int:
    """The `fleetcheck` command; `parts` (an `audit.AuditParts`) lets a bench swap the
    audit's transports, probe payload or node budget without patching modules."""
    prepare_stdout()
    words = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(_command_named(words))
    args = parser.parse_args(words)
    args.parts = parts
    if not args.command:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    return exit_code(COMMANDS[args.command].run, args)


def run() -> NoReturn:
    """The `fleetcheck` command as installed (and `python -m fleetcheck`): main, then finish.

    An exception main lets through (a bug) still ends the ordinary way, with its traceback.
    """
    finish(main())
