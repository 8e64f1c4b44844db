"""Owns shortening text for one-line reasons and error messages (the one text clipper), and
the one "did you mean" of every error message.

The uploaded probe keeps its own copy (`probe/parts/base.py`, built into `probe/probe.py`): it
runs on nodes with the standard library only and imports nothing from fleetcheck.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

#: The mark a shortened text ends with, unless a caller's pinned wording uses another.
ELLIPSIS = "…"


def clip(text: str, limit: int, *, mark: str = ELLIPSIS) -> str:
    """`text`, or its head ending in `mark` so that the whole is at most `limit` characters."""
    return text if len(text) <= limit else text[: limit - len(mark)] + mark


def last_line(data: bytes, limit: int = 200) -> str:
    """The last non-blank line of a command's output (where tools print their error), clipped."""
    lines = [line.strip() for line in data.decode("utf-8", "replace").splitlines()]
    lines = [line for line in lines if line]
    return clip(lines[-1] if lines else "", limit, mark="...")


def closest(word: object, choices: Iterable[str], *, ignore_case: bool = False) -> str | None:
    """The choice `word` was most likely meant to be (difflib's ratio of 0.6 or more), else
    None: "did you mean ...?" in the caller's own wording."""
    import difflib  # only a mistake needs it, not every start

    options = list(choices)
    if not ignore_case:
        found = difflib.get_close_matches(str(word), options, n=1, cutoff=0.6)
        return found[0] if found else None
    by_lower = {choice.lower(): choice for choice in options}
    found = difflib.get_close_matches(str(word).lower(), list(by_lower), n=1, cutoff=0.6)
    return by_lower[found[0]] if found else None


def did_you_mean(word: object, choices: Iterable[str], *, ignore_case: bool = False,
                 shown: Callable[[str], str] = repr) -> str:
    """" (did you mean 'X'?)" for the choice `word` was most likely meant to be, else "":
    the one wording of every error message's suggestion (`shown` writes the choice)."""
    close = closest(word, choices, ignore_case=ignore_case)
    return f" (did you mean {shown(close)}?)" if close else ""
