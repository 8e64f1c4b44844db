"""--limit patterns: which nodes an audit selects (host, host/vmid, globs, labels, groups, !, &)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from fleetcheck import kinds
from fleetcheck.inventory.discovery import host_nodes, needs_discovery, static_targets
from fleetcheck.inventory_data.errors import InventoryError
from fleetcheck.inventory_data.model import (
    HostSpec,
    Inventory,
)
from fleetcheck.inventory_data.patterns import (
    hosts_matching,
    is_vmid_pattern,
    label_of,
    may_select_inside,
    rpartition_outside_brackets,
    split_patterns,
)
from fleetcheck.inventory_data.ranges import (
    RangeError,
    expand_pattern,
    matches_name,
    partition_outside_brackets,
    split_outside_brackets,
)
from fleetcheck.kinds.proxmox import may_select_guests
from fleetcheck.text import did_you_mean

__all__ = [
    "check_limit",
    "host_may_match",
    "hosts_matching",
    "is_vmid_pattern",
    "matches_limit",
    "may_select_guests",
    "may_select_inside",
    "pattern_problem",
    "rpartition_outside_brackets",
    "split_patterns",
    "unmatched_limit_error",
    "unmatched_patterns",
]



def matches_limit(
    node_id: str,
    labels: Sequence[str],
    patterns: Sequence[str],
    groups: Mapping[str, Sequence[str]] | None = None,
) -> bool:
    """Whether the node `node_id` ("HOST" or "HOST/VMID") is selected by `patterns`.

    As in Ansible: the plain patterns are a union (everything when there are none), each
    `&pattern` must also match, and a `!pattern` match removes the node. Pass
    `groups=inventory.groups` so that group names resolve.
    """
    atoms = [a for a in split_patterns(patterns) if a]
    plain = [a for a in atoms if a[0] not in "!&"] or ["all"]
    groups = groups or {}
    if not any(_matches(node_id, labels, atom, groups) for atom in plain):
        return False
    for atom in atoms:
        if atom[0] == "&" and not _matches(node_id, labels, atom[1:], groups):
            return False
        if atom[0] == "!" and _matches(node_id, labels, atom[1:], groups):
            return False
    return True


def _matches(
    node_id: str,
    labels: Sequence[str],
    atom: str,
    groups: Mapping[str, Sequence[str]],
    seen: frozenset[str] = frozenset(),
) -> bool:
    host, _, vmid = node_id.partition("/")
    if atom in ("all", "*"):
        return True
    label = label_of(atom)
    if label is not None:
        return any(matches_name(value, label) for value in labels)
    host_glob, slash, vmid_glob = partition_outside_brackets(atom, "/")
    if slash:
        if not vmid or not matches_name(host, host_glob):
            return False
        # `pve1/101` also selects what runs in guest 101 (`pve1/101/docker:trainer`).
        return matches_name(vmid, vmid_glob) or any(
            matches_name(vmid[:cut], vmid_glob) for cut in range(len(vmid)) if vmid[cut] == "/")
    if atom in groups and atom not in seen:
        return any(
            _matches(node_id, labels, member, groups, seen | {atom}) for member in groups[atom]
        )
    # A host pattern selects the host and everything on it.
    return matches_name(host, atom)


def host_may_match(
    host: HostSpec, patterns: Sequence[str], groups: Mapping[str, Sequence[str]] | None = None
) -> bool:
    """False only when no node of `host` can be selected by the whole limit (`!`, `&` too).

    Spares connecting to the host at all, and keeps a host the limit excludes out of the
    report when it cannot be reached or its containers cannot be listed.
    """
    if not patterns:
        return True
    groups = groups or {}
    if not needs_discovery(host):
        # Its nodes are known without connecting.
        return any(matches_limit(node.id, node.labels, patterns, groups)
                   for node in host_nodes(host))
    if matches_limit(host.name, host.labels, patterns, groups):
        return True
    atoms = [atom for atom in split_patterns(patterns) if atom]
    plain = [atom for atom in atoms if atom[0] not in "!&"] or ["all"]
    if not any(_may_select(host, atom, groups) for atom in plain):
        return False
    for atom in atoms:
        if atom[0] == "&" and not _may_select(host, atom[1:], groups):
            return False
        if atom[0] == "!" and _selects_all_of(host, atom[1:], groups):
            return False
    return True


def _may_select(host: HostSpec, atom: str, groups: Mapping[str, Sequence[str]]) -> bool:
    """Whether `atom` may select some node of `host`, its containers not yet known."""
    return _host_atom(host, atom, groups, every=False)


def _selects_all_of(host: HostSpec, atom: str, groups: Mapping[str, Sequence[str]]) -> bool:
    """Whether `atom` selects every node `host` may have, its containers not yet known."""
    return _host_atom(host, atom, groups, every=True)


def _host_atom(
    host: HostSpec, atom: str, groups: Mapping[str, Sequence[str]], *, every: bool,
    seen: frozenset[str] = frozenset(),
) -> bool:
    """`atom` against a host whose containers are unknown: may it select some node of the
    host, or (`every`) does it select all of them?"""
    if atom in ("all", "*"):
        return True
    label = label_of(atom)
    if label is not None:
        # Containers carry their host's labels as well as their own, and Proxmox tags when
        # the API lists them: the tags may select some, never surely all.
        if not every and host.api is not None:
            return True
        return any(matches_name(value, label) for value in host.labels)
    if atom in groups and atom not in seen:
        return any(_host_atom(host, member, groups, every=every, seen=seen | {atom})
                   for member in groups[atom])
    host_glob, slash, vmid_glob = partition_outside_brackets(atom, "/")
    if not every:
        return matches_name(host.name, host_glob)
    if slash:
        return not host.probe_host and vmid_glob == "*" and matches_name(host.name, host_glob)
    return matches_name(host.name, atom)


def unmatched_limit_error(
    patterns: Sequence[str],
    nodes: Iterable[tuple[str, Sequence[str]]],
    groups: Mapping[str, Sequence[str]] | None,
    unlisted_hosts: Iterable[str] = (),
) -> str | None:
    """The error for --limit patterns that selected nothing once containers were discovered.

    A host in `unlisted_hosts` (its containers could not be listed) stands for its
    containers: a pattern under it is not a typo.
    """
    if not patterns:
        return None
    unlisted = set(unlisted_hosts)
    missing = [atom for atom in unmatched_patterns(patterns, nodes, groups)
               if not any(matches_name(host, split_outside_brackets(atom, "/")[0])
                          for host in unlisted)]
    if not missing:
        return None
    if any(atom[:1] in ("!", "&") for atom in split_patterns(patterns) if atom):
        return (f"--limit {', '.join(patterns)}: selects no node of {', '.join(missing)} "
                "(after discovery and the ! and & patterns)")
    return f"--limit {', '.join(missing)}: matched no node after discovery"


def check_limit(inventory: Inventory, patterns: Sequence[str]) -> list[str]:
    """Refuse patterns that can match nothing; returns the patterns split on commas.

    A `HOST/VMID` pattern for a host with `containers: all` (and a label only discovery can
    bring) is accepted here; whether it matched is known only after discovery, see
    `unmatched_patterns`.
    """
    atoms = split_patterns(patterns)
    for atom in atoms:
        problem = pattern_problem(inventory, atom, inventory.groups, allow_prefix=True)
        if problem:
            raise InventoryError(f"--limit {atom!r}: {problem}")
    return atoms


def unmatched_patterns(
    patterns: Sequence[str],
    nodes: Iterable[tuple[str, Sequence[str]]],
    groups: Mapping[str, Sequence[str]] | None = None,
) -> list[str]:
    """The plain (not `!`/`&`) patterns that matched none of `nodes` (id, labels).

    Called after discovery, it catches `--limit pve1/1011` (a typo) that would otherwise
    select nothing and let a gate pass.
    """
    known = list(nodes)
    groups = groups or {}
    return [
        atom
        for atom in split_patterns(patterns)
        if atom
        and atom[0] not in "!&"
        and not any(_matches(node_id, labels, atom, groups) for node_id, labels in known)
    ]


def pattern_problem(
    inventory: Inventory,
    pattern: str,
    groups: Mapping[str, Sequence[str]],
    allow_prefix: bool = False,
    seen: tuple[str, ...] = (),
) -> str | None:
    """Why `pattern` can match nothing in `inventory`, or None when it may match."""
    try:
        for piece in split_outside_brackets(pattern, "/"):
            expand_pattern(piece)
    except RangeError as exc:
        return str(exc)
    atom = pattern.strip()
    if atom[:1] in ("!", "&"):
        if not allow_prefix:
            return "groups hold plain patterns; use '!' and '&' in --limit"
        atom = atom[1:].strip()
    if not atom:
        return "empty pattern"
    if atom in ("all", "*"):
        return None
    label = label_of(atom)
    if label is not None:
        return _label_problem(inventory, label)
    if partition_outside_brackets(atom, "/")[1]:
        return _container_problem(inventory, atom)
    if atom in groups:
        if atom in seen:
            return "groups include each other: " + " -> ".join((*seen, atom))
        # A group selects something when any member does (some may be disabled hosts);
        # every member is still visited so that a cycle is always found.
        problems = []
        for member in groups[atom]:
            problem = pattern_problem(inventory, member, groups, seen=(*seen, atom))
            if problem is not None and problem.startswith("groups include each other"):
                return problem
            if problem is not None:
                problems.append(f"{member!r}: {problem}")
        if len(problems) < len(groups[atom]):
            return None
        return f"group {atom!r} selects nothing ({problems[0]})"
    if hosts_matching(inventory.hosts, atom):
        return None
    disabled = hosts_matching(inventory.disabled_hosts, atom)
    if disabled:
        names = ", ".join(h.name for h in disabled)
        return f"matches only hosts disabled in the inventory (enabled: false): {names}"
    candidates = [h.name for h in inventory.hosts] + list(groups)
    return f"no host or group matches{did_you_mean(atom, candidates)}"


def _label_problem(inventory: Inventory, label: str) -> str | None:
    if not label:
        return "empty label"
    known: set[str] = set()
    for host in inventory.hosts:
        known.update(host.labels)
        for node in static_targets(host):
            known.update(node.labels)
    if any(matches_name(value, label) for value in known):
        return None
    # A listing may bring labels of its own (Proxmox tags); only then is it known.
    if any(kind.listing_labels(host) for host in inventory.hosts for kind in kinds.all_kinds()):
        return None
    listed = ", ".join(sorted(known)) or "none"
    return f"no node has this label (labels in the inventory: {listed})"


def _container_problem(inventory: Inventory, atom: str) -> str | None:
    """`HOST/REST` against every family of node ids the kinds have (`IdShape`): None when
    one of them may name a node by it, else the first that recognised its shape says why,
    else the shapes there are."""
    host_glob, _, rest = partition_outside_brackets(atom, "/")
    hosts = hosts_matching(inventory.hosts, host_glob)
    problems: list[str] = []
    for shape in kinds.id_shapes():
        answer = shape.problem(hosts, rest)
        if isinstance(answer, kinds.NotMine):
            continue
        if not hosts:
            return pattern_problem(inventory, host_glob, {})
        if answer is None:
            return None
        problems.append(answer)
    if problems:
        return problems[0]
    words = [shape.words for shape in sorted(kinds.id_shapes(), key=lambda s: s.rank)]
    if len(words) > 2:
        words = [", ".join(words[:-1]) + ",", words[-1]]
    return "expected " + " or ".join(words)
