"""The registry of node kinds: one line per kind (`KINDS`, the table in `kindtable.py`), its
module imported when first asked for.

Adding a kind is one module (a `NodeKind`, see `kinds/base.py`) and one line in `KINDS`.
The order of the lines is the order in which a parent's children are expanded and listed.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from fleetcheck.budget import BudgetFor, NodeBudget
from fleetcheck.inventory_data.model import HostSpec, SkippedTarget, Target
from fleetcheck.kinds.base import NOT_MINE, Discovery, IdShape, NodeKind, NotMine, host_target
from fleetcheck.kindtable import GUEST_BEFORE_KINDS, KINDS, ROOT_KIND, default_kind

if TYPE_CHECKING:
    from fleetcheck.report.content import NodeResult
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


#: Some of the host gatekeeper's grammar: word classes (name -> regular expression) and shapes
#: (name -> items, in `fleetcheck/data/gatekeeper.py`'s notation).
Grammar = tuple[Mapping[str, str], Mapping[str, list[Any]]]


def gatekeeper_chains() -> Grammar:
    """The host gatekeeper's grammar of the registry's kinds, composed along `runs_in`: every
    kind's `gatekeeper_words`; its `gatekeeper_commands` in each node of a kind it runs in, and
    the probe through its `gatekeeper_wrapper`, each after the wrappers of the nodes above it
    from the host down (`[sudo -n]`, then `pct exec VMID --keep-env 0 --` in an LXC
    container...) and named after them ("pct exec oci probe"). `fleetcheck host-setup` writes
    it into the script it installs."""
    words: dict[str, str] = {}
    shapes: dict[str, list[Any]] = {}
    for each in all_kinds():
        for name, pattern in each.gatekeeper_words.items():
            _add(words, name, pattern, "word class")
        for parent in filter(None, map(find, each.runs_in)):
            for names, items in _run_inside(parent):
                for name, command in each.gatekeeper_commands.items():
                    _add(shapes, _shape_name(*names, name), [*items, *command], "shape")
        probe = each.gatekeeper_wrapper and each.gatekeeper_wrapper.probe
        if probe:
            for names, items in _run_inside(each):
                _add(shapes, _shape_name(*names, "probe"), [*items, ("ref", probe)], "shape")
    return words, shapes


def _run_inside(node_kind: NodeKind) -> list[tuple[tuple[str, ...], list[Any]]]:
    """(names, items) that come before a command run inside a node of `node_kind`: one per
    chain of kinds from the host down to it, none where a kind of the chain wraps nothing."""
    wrapper = node_kind.gatekeeper_wrapper
    if wrapper is None:
        return []
    outer = [chain for parent in filter(None, map(find, node_kind.runs_in))
             for chain in _run_inside(parent)] if node_kind.runs_in else [((), [])]
    return [((*names, wrapper.name), [*items, *wrapper.items]) for names, items in outer]


def _shape_name(*names: str) -> str:
    return " ".join(name for name in names if name)


def _add(table: dict[str, Any], name: str, value: Any, what: str) -> None:
    """`table[name] = value`, once: the two OCI runtimes share theirs, other kinds may not."""
    if table.setdefault(name, value) != value:
        raise ValueError(f"two node kinds give the gatekeeper's {what} {name!r} differently")


def gatekeeper_grammar() -> Grammar:
    """The word classes and whole shapes the registry's kinds write out themselves
    (`gatekeeper_words`, `gatekeeper_shapes`), which `fleetcheck host-setup` adds to the
    composed chains (`gatekeeper_chains`) in the script it installs."""
    return joined_grammar(*((each.gatekeeper_words, each.gatekeeper_shapes)
                            for each in all_kinds()))


def joined_grammar(*grammars: Grammar) -> Grammar:
    """The grammars as one; a word class or shape named in two of them must be the same in
    both (ValueError), so that no kind's part of the grammar widens another's."""
    words: dict[str, str] = {}
    shapes: dict[str, list[Any]] = {}
    for some_words, some_shapes in grammars:
        for name, pattern in some_words.items():
            _add(words, name, pattern, "word class")
        for name, items in some_shapes.items():
            _add(shapes, name, items, "shape")
    return words, shapes


def root() -> NodeKind:
    """The kind every tree of nodes starts from (the host): the table's first line, the one
    that runs in no other."""
    return kind(ROOT_KIND)


def runs_on_root(name: str) -> bool:
    """Whether nodes of kind `name` run on the root itself and nowhere else (a Proxmox guest,
    a pod): their host is their parent. False for a kind this version does not know."""
    found = find(name)
    return found is not None and found.runs_in == (root().name,)


def place(node: NodeResult) -> str | None:
    """Where `node` sits below its host, in its kind's words (`NodeKind.place`); a kind this
    version does not know is read as `default_kind` reads a node without one."""
    return (find(node.kind) or kind(default_kind(node.vmid))).place(node)


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
    "GUEST_BEFORE_KINDS",
    "KINDS",
    "NODE_KINDS",
    "NOT_MINE",
    "Discovery",
    "Grammar",
    "IdShape",
    "Listings",
    "NodeKind",
    "NotMine",
    "all_kinds",
    "chain",
    "children_kinds",
    "default_kind",
    "depth",
    "expand",
    "find",
    "gatekeeper_chains",
    "gatekeeper_grammar",
    "host_target",
    "id_shapes",
    "joined_grammar",
    "kind",
    "needs_listing",
    "open_transport",
    "place",
    "root",
    "runs_on_root",
]
