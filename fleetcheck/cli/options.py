"""The options several commands share (their wording once), the argparse types, and
`UsageError`: a problem with what was asked, one line and exit code 2."""

from __future__ import annotations

import argparse
from typing import Any

from fleetcheck.errors import FleetcheckError

EPILOG = """\
exit codes (audit, gate, probe):
  0  every selected node passed (warnings allowed)
  1  at least one node failed (for example: Triton falls back to CPU)
  2  usage, inventory or playbook error: nothing was probed
  3  nothing failed, but some nodes could not be verified (unreachable, timed out, probe
     error, interrupted), or no node was verified at all
"""

#: `sub.add_parser(...)` settings of a command whose exit codes are the audit's table.
WITH_EXIT_CODES: dict[str, Any] = {"epilog": EPILOG,
                                   "formatter_class": argparse.RawDescriptionHelpFormatter}

#: `--playbook`'s help where the playbook says what counts as failing.
FAILING_PLAYBOOK = "what counts as failing (default: the built-in default playbook)"


class UsageError(FleetcheckError):
    """A problem with what the user asked for; printed as one line, exit code 2."""


def positive_seconds(text: str) -> float:
    """argparse type: a finite number of seconds above zero."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number of seconds above 0, got {text!r}")
    return value


def positive_count(text: str) -> int:
    """argparse type: an integer of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def suffix_words(formats: tuple[str, ...]) -> str:
    """The -o suffixes that pick one of `formats`, from the renderers' registry: `.json/.prom`."""
    from fleetcheck.render import suffixes

    return "/".join(suffixes(formats))


def add_output(parser: argparse.ArgumentParser) -> None:
    """--format and -o of a fleet report (audit, report, merge)."""
    from fleetcheck.render import FORMATS

    parser.add_argument(
        "--format", "-f", choices=FORMATS, default=None,
        help=f"output format (default: table; inferred from -o's extension "
        f"{suffix_words(FORMATS)} when given)",
    )
    parser.add_argument(
        "-o", "--output", metavar="FILE", default=None,
        help="write the report to FILE (atomically) instead of stdout; '-' is stdout",
    )


def add_selection(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--limit", "-l", action="append", default=[], metavar="PATTERN",
        help="only these nodes: HOST, HOST/VMID, node ranges (gpu[01-03,07], pve[1-3]/1[01-20]), "
        "globs (pve*, pve1/*), label:NAME (or @NAME), "
        "a GROUP of the inventory, !PATTERN to exclude, &PATTERN to intersect; "
        "comma-separated or repeated",
    )


def add_playbook(parser: argparse.ArgumentParser, what: str = FAILING_PLAYBOOK,
                 default: str | None = None) -> None:
    parser.add_argument("--playbook", "-p", metavar="FILE|NAME", default=default, help=what)


def add_deep(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--deep", action="store_true",
                        help="also JIT-compile and launch a Triton kernel on every GPU")


def add_timeout(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--timeout", type=positive_seconds, default=None, metavar="SECONDS",
                        help=what)


def add_no_progress(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-progress", action="store_true",
                        help="no progress bar (it is only drawn on a terminal anyway)")


def add_max_out(parser: argparse.ArgumentParser, what: str) -> None:
    """--max-out: the remediation bound (fleetcheck/outbound.py), for health and fix."""
    from fleetcheck.outbound import DEFAULT_OUT_BOUND

    default = DEFAULT_OUT_BOUND.replace("%", "%%")  # argparse formats help with %
    parser.add_argument("--max-out", metavar="SHARE|N", default=None,
                        help=what + f" (default: {default}, at least 1 node)")


def add_max_age(parser: argparse.ArgumentParser, what: str) -> None:
    """--max-age: the oldest node document or cached verdict that counts, for gate, health
    and merge (the default is fleetcheck/budget.py's)."""
    from fleetcheck.budget import DEFAULT_MAX_AGE_S

    parser.add_argument("--max-age", type=positive_seconds, default=None, metavar="SECONDS",
                        help=f"{what} (default: {DEFAULT_MAX_AGE_S:g})")


def add_history(parser: argparse.ArgumentParser, what: str) -> None:
    """--history, --keep, --on-change (checked together by `inputs.keeping`)."""
    from fleetcheck.report.history import DEFAULT_KEEP

    parser.add_argument("--history", metavar="DIR", help=what)
    parser.add_argument("--keep", type=positive_count, default=None, metavar="N",
                        help=f"with --history: runs to keep (default: {DEFAULT_KEEP})")
    parser.add_argument("--on-change", metavar="CMD",
                        help="with --history: run CMD (no shell) with the changes on stdin "
                        "when something changed")
