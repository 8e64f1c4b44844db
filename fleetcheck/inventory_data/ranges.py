"""Node ranges (`gpu[01-16]`, `pve[1-3]/1[01-20]`): ClusterShell's grammar, in one place.

A range is written as Slurm, ClusterShell, pdsh and NHC write it: `gpu[01-03,07]` is gpu01,
gpu02, gpu03 and gpu07 (zero padding kept), `n[1-9/2]` steps by 2, `rack[1-2]-gpu[1-4]` is
the product. ClusterShell's NodeSet and RangeSet parse it, so fleetcheck does not write the
grammar again. The public functions are `expand_nodes` and `fold_nodes` (a node set and its
names, both ways), `split_outside_brackets` (fleetcheck's `,` and `/` around ranges) and
`name_matcher` (a --limit pattern: ranges and `*`/`?` globs on one name).

In a pattern, a `[...]` holding only digits, `-`, `,` and `/` is a range; any other `[...]`
(`[a-c]`, `[!0-9]`) keeps its fnmatch meaning, a character class. A one-digit class such as
`[1-3]` means the same set either way; `[12]` did mean 1 or 2 and now means 12.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Callable, Iterable
from fnmatch import translate

# ClusterShell is imported by the functions that parse a range, when one is used: otherwise
# every audit and gate would pay its import (about a tenth of the inventory package's).

#: The most names one range may stand for: a typo such as `gpu[1-1000000]` is refused, not
#: turned into a million hosts.
MAX_NAMES = 100_000
#: What a range bracket holds: `01-03,07`, `1-9/2`.
_RANGE_BODY = re.compile(r"^[0-9]+(?:-[0-9]+(?:/[0-9]+)?)?(?:,[0-9]+(?:-[0-9]+(?:/[0-9]+)?)?)*$")
_BRACKET = re.compile(r"\[([^\[\]]*)\]")
_GLOB_CHARS = frozenset("*?[")


class RangeError(ValueError):
    """A node range that does not parse or is too large; the message is one line."""


def has_range(text: str) -> bool:
    """Whether `text` holds a range bracket (`gpu[01-16]`), not only names or globs."""
    return any(_RANGE_BODY.match(body) for body in _BRACKET.findall(text))


def expand_nodes(text: str) -> list[str]:
    """The names of the node set `text`, in ClusterShell's order: `gpu[01-02],cpu1` ->
    [cpu1, gpu01, gpu02]. Raises RangeError (one line) when it does not parse.

    The whole ClusterShell node-set syntax is read (`,` union; `!`, `&`, `^` between sets);
    group names (`@rack1`) are not resolved.
    """
    from ClusterShell.NodeSet import RESOLVER_NOGROUP, NodeSet, NodeSetException
    from ClusterShell.RangeSet import RangeSetException

    try:
        nodes = NodeSet(text, resolver=RESOLVER_NOGROUP)
        if len(nodes) > MAX_NAMES:
            raise RangeError(f"{text!r}: {len(nodes)} names, more than {MAX_NAMES}")
        return list(nodes)
    except (NodeSetException, RangeSetException) as exc:
        raise RangeError(f"{text!r}: {_clustershell_message(exc)}") from None


def fold_nodes(names: Iterable[str]) -> str:
    """The names folded into one node set: [gpu01, gpu02, gpu03, gpu07] -> 'gpu[01-03,07]'."""
    from ClusterShell.NodeSet import RESOLVER_NOGROUP, NodeSet, NodeSetException
    from ClusterShell.RangeSet import RangeSetException

    try:
        return str(NodeSet.fromlist(list(names), resolver=RESOLVER_NOGROUP))
    except (NodeSetException, RangeSetException) as exc:
        raise RangeError(_clustershell_message(exc)) from None


def split_outside_brackets(text: str, separator: str, maxsplit: int = -1) -> list[str]:
    """`text` split at `separator` where it is not inside `[...]`: 'gpu[1,2],cpu' -> two."""
    parts: list[str] = []
    depth = 0
    start = 0
    for index, char in enumerate(text):
        if char == "[":
            depth += 1
        elif char == "]" and depth:
            depth -= 1
        elif char == separator and not depth and (maxsplit < 0 or len(parts) < maxsplit):
            parts.append(text[start:index])
            start = index + 1
    parts.append(text[start:])
    return parts


def partition_outside_brackets(text: str, separator: str) -> tuple[str, str, str]:
    """As `str.partition`, at the first `separator` outside `[...]`."""
    parts = split_outside_brackets(text, separator, maxsplit=1)
    if len(parts) == 1:
        return text, "", ""
    return parts[0], separator, parts[1]


def expand_pattern(pattern: str) -> list[str]:
    """The globs a pattern stands for once its range brackets are expanded, in order:
    'gpu[01-02]*' -> ['gpu01*', 'gpu02*']; a class such as `[a-c]` is kept as it is."""
    pieces: list[list[str]] = []
    position = 0
    count = 1
    for match in _BRACKET.finditer(pattern):
        body = match.group(1)
        if not _RANGE_BODY.match(body):
            continue
        from ClusterShell.RangeSet import RangeSet, RangeSetException

        try:
            values = list(RangeSet(body))
        except RangeSetException as exc:
            raise RangeError(f"range [{body}]: {_clustershell_message(exc)}") from None
        count *= len(values)
        if count > MAX_NAMES:
            raise RangeError(f"range [{body}]: more than {MAX_NAMES} names in all")
        pieces.append([pattern[position:match.start()]])
        pieces.append(values)
        position = match.end()
    pieces.append([pattern[position:]])
    return ["".join(parts) for parts in itertools.product(*pieces)]


@functools.lru_cache(maxsize=4096)
def name_matcher(pattern: str) -> Callable[[str], bool]:
    """A test of one name against a pattern of ranges and globs (case-sensitive).

    Without `*`, `?` or a class left after the ranges are expanded, it is a set lookup, so a
    `gpu[0001-2000]` limit costs nothing per node. Raises RangeError for a bad range.
    """
    names = expand_pattern(pattern)
    if not any(_GLOB_CHARS & set(name) for name in names):
        return frozenset(names).__contains__
    compiled = re.compile("|".join(f"(?:{translate(name)})" for name in names))
    return lambda name: compiled.match(name) is not None


def matches_name(name: str, pattern: str) -> bool:
    """Whether `name` is selected by `pattern` (ranges and globs); see `name_matcher`."""
    return name_matcher(pattern)(name)


def _clustershell_message(exc: Exception) -> str:
    # ClusterShell's texts read `bad range: "invalid values in range : "3-1""`: keep them
    # whole but on one line.
    return " ".join(str(exc).split()) or type(exc).__name__
