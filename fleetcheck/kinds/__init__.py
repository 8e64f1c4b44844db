"""The registry of node kinds: one line per kind (`KINDS`, the table in `kindtable.py`), its
module imported when first asked for.

Adding a kind is one module (a `NodeKind`, see `kinds/base.py`) and one line in `KINDS`.
The order of the lines is the order in which a parent's children are expanded and listed.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from fleetcheck.budget import BudgetFor, NodeBudget
from fleetcheck.inventory.model import HostSpec, SkippedTarget, Target
from fleetcheck.kinds.base import NOT_MINE, Discovery, IdShape, NodeKind, NotMine, host_target
from fleetcheck.kindtable import KINDS

if TYPE_CHECKING:
    from fleetcheck.transport.interface import Transport

#: Every kind a node may have (the JSON contract's `kind`).
NODE_KINDS = tuple(KINDS)

#: A kind's listing under a parent, when known: `listings(parent, kind)`.
Listings = Callable[[Target, NodeKind], Sequence[Any] | None]

_loaded: dict[str, NodeKind] = {}


def find(name: str | None) -> NodeKind | None:
    """The kind called `name`, or None (a kind another version of fleetcheck wrote)."""
    if name is None or name not in KINDS:
        return None
    if name not in _loaded:
        module, _, attribute = KINDS[name].partition(":")
        _loaded[name] = getattr(importlib.import_module(module), attribute)
    return _loaded[name]


def kind(name: str) -> NodeKind:
    """The kind called `name`; KeyError for a name no registry line has."""
    found = find(name)
    if found is None:
        raise KeyError(f"no node kind {name!r}")
    return found


def all_kinds() -> tuple[NodeKind, ...]:
    return tuple(kind(name) for name in KINDS)


def children_kinds(parent: Target) -> tuple[NodeKind, ...]:
    """The kinds that can run in `parent`, in registry order."""
    return tuple(k for k in all_kinds() if parent.kind in k.runs_in)


def chain(target: Target) -> tuple[NodeKind, ...]:
    """The kinds from the host down to `target`: host, lxc, docker for a Docker container in
    an LXC container (`guest_kind` is the kind of the node a container runs in)."""
    names = ["host", target.guest_kind or "host", target.kind]
    return tuple(kind(name) for name in dict.fromkeys(names))


def open_transport(target: Target, host_transport: Transport,
                   budget: BudgetFor = NodeBudget) -> Transport:
    """The transport that runs commands on `target`: each kind of its chain wrapping the
    transport of the one above, from the host's; `budget` is the audit's."""
    transport = host_transport
    for step in chain(target):
        transport = step.transport(target, transport, budget)
    return transport


def id_shapes() -> tuple[IdShape, ...]:
    """The families of node ids `--limit` knows, once each, in registry order."""
    shapes: dict[int, IdShape] = {}
    for each in all_kinds():
        if each.id_shape is not None:
            shapes.setdefault(id(each.id_shape), each.id_shape)
    return tuple(shapes.values())


def gatekeeper_grammar() -> tuple[dict[str, str], dict[str, list[Any]]]:
    """What the registry's kinds add to the host gatekeeper's grammar (`gatekeeper_words`,
    `gatekeeper_shapes`), for `fleetcheck host-setup` to write into the script it installs."""
    words: dict[str, str] = {}
    shapes: dict[str, list[Any]] = {}
    for each in all_kinds():
        words.update(each.gatekeeper_words)
        shapes.update(each.gatekeeper_shapes)
    return words, shapes


def depth(name: str) -> int:
    """How deep a node of kind `name` sits below its host (an unknown kind as a guest)."""
    found = find(name)
    return 1 if found is None else found.depth


def expand(parent: Target, listings: Listings | None = None) -> list[Target | SkippedTarget]:
    """Every node under `parent`, recursively, each followed by its own.

    Without a kind's listing only its declared nodes are known; "all" then raises or
    gives nothing yet, as the kind decides.
    """
    nodes: list[Target | SkippedTarget] = []
    for child_kind in children_kinds(parent):
        if child_kind.declared(parent) is None:
            continue
        listing = listings(parent, child_kind) if listings is not None else None
        for child in child_kind.expand(parent, listing):
            nodes.append(child)
            if isinstance(child, Target):
                nodes += expand(child, listings)
    return nodes


def needs_listing(host: HostSpec) -> bool:
    """Whether some of `host`'s nodes are known only once a listing runs on it."""

    def wants(parent: Target) -> bool:
        for child_kind in children_kinds(parent):
            if child_kind.declared(parent) is None:
                continue
            if child_kind.needs_listing(parent):
                return True
            if any(isinstance(child, Target) and wants(child)
                   for child in child_kind.expand(parent, None)):
                return True
        return False

    return wants(host_target(host))


__all__ = [
    "KINDS",
    "NODE_KINDS",
    "NOT_MINE",
    "Discovery",
    "IdShape",
    "Listings",
    "NodeKind",
    "NotMine",
    "all_kinds",
    "chain",
    "children_kinds",
    "depth",
    "expand",
    "find",
    "gatekeeper_grammar",
    "host_target",
    "id_shapes",
    "kind",
    "needs_listing",
    "open_transport",
]
