"""Asking the person at the terminal before anything is changed, and refusing to go on
without a terminal to ask on unless told yes beforehand."""

from __future__ import annotations

import sys

from fleetcheck.cli.options import UsageError


def check_can_ask(assume_yes: bool, asked: str) -> None:
    """Refuse `asked` (an option that changes nodes) when no one can be asked and --yes was
    not given, before anything is read or probed."""
    if not assume_yes and not sys.stdin.isatty():
        raise UsageError(f"{asked} without a terminal to confirm on needs --yes "
                         "(nothing was changed)")


def confirmed(question: str, *, assume_yes: bool = False) -> bool:
    """Yes when told so beforehand (--yes), else ask on the terminal: anything but y/yes
    is no."""
    if assume_yes:
        return True
    try:
        answer = input(question)
    except EOFError:
        return False
    return answer.strip().lower() in ("y", "yes")
