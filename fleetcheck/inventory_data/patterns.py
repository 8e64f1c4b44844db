"""The words of `--limit` patterns, below the limit's own rules (`limit.py`) and the node kinds'
id shapes (`kinds/`), which both read them: splitting, labels, the plain atoms, and whether a
limit may select a node only a listing brings.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from fleetcheck.inventory_data.model import HostSpec
from fleetcheck.inventory_data.ranges import (
    matches_name,
    partition_outside_brackets,
    split_outside_brackets,
)

_VMID_PATTERN = re.compile(r"^[0-9*?\[\]!,/-]+$")
_LABEL_PREFIXES = ("label:", "@")


def split_patterns(patterns: Sequence[str]) -> list[str]:
    """["pve1,pve2", "!pve3"] -> ["pve1", "pve2", "!pve3"] (each --limit may hold a list).

    A comma inside a range (`gpu[01-03,07]`) belongs to the range.
    """
    return [atom.strip() for pattern in patterns
            for atom in split_outside_brackets(pattern, ",")]


def plain_atoms(patterns: Sequence[str]) -> list[str]:
    atoms = [atom for atom in split_patterns(patterns) if atom]
    return [atom for atom in atoms if atom[0] not in "!&"] or ["all"]


def selects_anything(atom: str, groups: Mapping[str, Sequence[str]]) -> bool:
    """`all`, a label or a group: a pattern that may select any node, before discovery."""
    return atom in ("all", "*") or label_of(atom) is not None or atom in groups


def may_select_inside(
    parent_id: str, runtime: str, patterns: Sequence[str],
    groups: Mapping[str, Sequence[str]] | None = None,
) -> bool:
    """Whether the limit may select a `runtime` container inside the node `parent_id` (HOST or
    HOST/VMID), whose names only that node's `RUNTIME ps` brings."""
    if not patterns:
        return True
    groups = groups or {}
    host, _, inner = parent_id.partition("/")
    known = inner.split("/") if inner else []
    for atom in plain_atoms(patterns):
        if selects_anything(atom, groups):
            return True
        host_glob, slash, rest = partition_outside_brackets(atom, "/")
        if not matches_name(host, host_glob):
            continue
        if not slash:
            return True
        segments = split_outside_brackets(rest, "/")
        # The parent itself or a node around it: a pattern selects what runs inside.
        if len(segments) <= len(known) and all(
                matches_name(value, glob) for value, glob in zip(known, segments, strict=False)):
            return True
        # A node inside it: the parent's segments, then one for the runtime's container.
        if len(segments) == len(known) + 1 and all(
                matches_name(value, glob) for value, glob in zip(known, segments, strict=False)):
            last = segments[-1]
            if last.startswith(f"{runtime}:") or any(c in last for c in "*?["):
                return True
    return False


def label_of(atom: str) -> str | None:
    for prefix in _LABEL_PREFIXES:
        if atom.startswith(prefix):
            return atom[len(prefix) :]
    return None


def rpartition_outside_brackets(text: str, separator: str) -> tuple[str, str, str]:
    parts = split_outside_brackets(text, separator)
    if len(parts) == 1:
        return "", "", text
    return separator.join(parts[:-1]), separator, parts[-1]


def hosts_matching(hosts: Iterable[HostSpec], glob: str) -> list[HostSpec]:
    return [h for h in hosts if matches_name(h.name, glob)]


def is_vmid_pattern(text: str) -> bool:
    """Whether `text` can be a VMID or a glob of VMIDs (`1*`, `10[0-4]`)."""
    return bool(text) and _VMID_PATTERN.match(text) is not None
