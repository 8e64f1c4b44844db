"""What every node kind provides: the interface a kind module implements.

A kind (the Proxmox host, an LXC container, a QEMU VM, a Docker/Podman container...) is one
module with one `NodeKind` object, named on one line of the registry (`kinds/__init__.py`).
The scheduler, the inventory's expansion, the fix plan and the renderers ask the kind; none
of them names a kind.
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from fleetcheck.budget import BudgetFor
from fleetcheck.inventory_data.model import HostSpec, SkippedTarget, Target

if TYPE_CHECKING:
    from fleetcheck.inventory_data.reader import InventoryReader
    from fleetcheck.report.content import Check, NodeResult
    from fleetcheck.transport.interface import Transport

#: What a kind's `expand` returns: nodes to probe, and nodes known but not probed.
Nodes = list[Target | SkippedTarget]


class Discovery:
    """What the listings of one host share while it is discovered (one API exchange for its
    containers and its VMs alike)."""

    def __init__(self) -> None:
        self._answers: dict[Any, Any] = {}

    async def once(self, key: Any, fetch: Any) -> Any:
        """`await fetch()` the first time `key` is asked for on this host, then its answer."""
        if key not in self._answers:
            self._answers[key] = await fetch()
        return self._answers[key]


class NodeKind(abc.ABC):
    """One kind of node: where it is declared, how it is listed and expanded, how commands
    reach it, and its wording."""

    #: The `kind` of its nodes (the JSON contract's `kind`).
    name: str
    #: The kinds of node it runs in; () for the host, the root of every tree.
    runs_in: ClassVar[tuple[str, ...]] = ()
    #: How deep it sits below its host (0 the host): orders a guest before its containers.
    depth: ClassVar[int] = 1
    #: True when a failed listing of these nodes is the failure of the whole parent (a
    #: Proxmox host whose guests cannot be listed); False when the listing's failure is one
    #: node of its own beside the parent (`PARENT/RUNTIME:*`).
    listing_fails_parent: ClassVar[bool] = False
    #: Its node ids in `--limit` (`kinds/base.py`'s `IdShape`): whether a pattern can name one
    #: of its nodes before they are listed, and whether the limit may select one only its
    #: listing brings (else the listing is not run). None: it cannot tell from the ids, and
    #: the listing always runs.
    id_shape: ClassVar[IdShape | None] = None

    # -- inventory ------------------------------------------------------------------------

    #: The key of a host's inventory entry that declares these nodes (None: declared by
    #: another kind's key, as Docker and Podman share `oci:`, or by `hosts:` itself).
    inventory_key: str | None = None
    #: Whether reaching its nodes needs a shell on the host: a `transport: api` host (only
    #: the API's guest agent) refuses its key.
    needs_shell: ClassVar[bool] = True

    def schema_keys(self) -> tuple[str, ...]:
        """The key paths below `hosts.*.KEY` it accepts ("[].vmid", ".context"), for
        `inventory/load.py`'s `schema_keys()` (the keys `inventory.example.yaml` must show)."""
        return ()

    #: An entry declaring its key without an `address` runs its tool on this machine
    #: (`transport: local`) and probes no host by default (a Kubernetes cluster: kubectl).
    local_by_default: ClassVar[bool] = False

    @property
    def reads_declaration(self) -> bool:
        """Whether the loader hands this kind its `inventory_key` (it has `read_declaration`)."""
        return type(self).read_declaration is not NodeKind.read_declaration

    def read_declaration(self, reader: InventoryReader, value: Any, path: tuple[Any, ...],
                         transport: str) -> Any:
        """Its `inventory_key`'s value read and checked with the loader's typed reader
        (`inventory_data/reader.py`: `reader.mapping`, `reader.string`, `reader.local_path`,
        `reader.unique`, `reader.shown`, `reader.fail(path, problem)`...); `transport` is the
        host's ("local": paths are this machine's). The result is what `HostSpec.declaration` finds:
        the HostSpec field of that name where HostSpec has one, else
        `host.declarations[inventory_key]`."""
        raise NotImplementedError(f"{self.name}: no inventory key of its own")

    def check_host(self, reader: InventoryReader, path: tuple[Any, ...],
                   declared: Mapping[str, Any]) -> None:
        """What it checks across one host's declarations once each kind has read its own
        (`declared`: key -> value, in the order of `host_keys()`); `path` is the host's."""
        del reader, path, declared

    def graph_rows(self, host: HostSpec, known: Sequence[Target]) -> list[str]:
        """What `fleetcheck inventory` says of this kind's nodes under `host` that only a
        listing brings ("pve1/*  all VMs: discovered at audit time via ..."); `known` are
        the host's nodes known without connecting."""
        del host, known
        return []

    def inventory_json(self, host: HostSpec) -> dict[str, Any]:
        """Its declaration in `fleetcheck inventory --json`'s host object (its key: value)."""
        key = self.inventory_key
        return {} if key is None else {key: jsonable(host.declaration(key))}

    @abc.abstractmethod
    def declared(self, parent: Target) -> str | Sequence[Any] | None:
        """What `parent`'s inventory entry declares of this kind: "all", the specs, or None."""

    def listing_labels(self, host: HostSpec) -> bool:
        """Whether listing this kind's nodes on `host` may give them labels the inventory
        does not hold (Proxmox tags through the API): a `--limit` label is then known only
        once the listing ran."""
        del host
        return False

    def needs_listing(self, parent: Target) -> bool:
        """Whether this kind's nodes under `parent` are known only once a listing ran."""
        from fleetcheck.inventory_data.model import ALL_CONTAINERS

        return self.declared(parent) == ALL_CONTAINERS

    @abc.abstractmethod
    def expand(self, parent: Target, listing: Sequence[Any] | None) -> Nodes:
        """This kind's nodes under `parent` (not deeper): the declared ones, or from `listing`
        (what `discover` returned) when the parent declares "all"."""

    # -- discovery ------------------------------------------------------------------------

    async def discover(
        self, parent: Target, transport: Transport, context: Discovery
    ) -> Sequence[Any]:
        """The listing of this kind's nodes under `parent`, run through `transport` (the
        parent's). Raises DiscoveryError saying why, or TransportError."""
        raise NotImplementedError(f"{self.name} nodes cannot be listed")

    def listing_failed(self, parent: Target, exc: Exception) -> Nodes:
        """The node(s) standing for a listing that failed (see `listing_fails_parent`)."""
        raise NotImplementedError

    # -- commands -------------------------------------------------------------------------

    @abc.abstractmethod
    def transport(self, target: Target, outer: Transport, budget: BudgetFor) -> Transport:
        """The transport into the node `target` is or runs in, around `outer` (the transport
        of the node it runs in); a transport with deadlines of its own takes them from
        `budget` (the audit's)."""

    # -- wording --------------------------------------------------------------------------

    @abc.abstractmethod
    def inside(self, target: Target) -> str:
        """ "in VM", "in container", "on HOST": where a probe interpreter was looked for."""

    @abc.abstractmethod
    def where_it_runs(self, node: NodeResult) -> str:
        """Where and as whom `fleetcheck fix` runs a node's steps (its transport, in words)."""

    # -- the host's gatekeeper ------------------------------------------------------------
    # What a restricted audit key must let its tool run, in the notation of the grammar of
    # `fleetcheck/data/gatekeeper.py` (words, ("WORD", CLASS), ("opt", [...]), ("rep", [...]),
    # ("one", [[...], ...]), ("ref", "probe" | "probe_argv" | "sudo")). `kinds.gatekeeper_chains`
    # composes the kinds' parts along `runs_in`, and `fleetcheck host-setup` writes the result
    # into the script it installs: a kind that runs in `lxc` gets its `pct exec` chain from lxc.

    #: Its word classes (name -> regular expression a word must match in full).
    gatekeeper_words: ClassVar[Mapping[str, str]] = {}
    #: How its tool runs a command inside one of its nodes (None: no command runs inside them
    #: through a host's gatekeeper).
    gatekeeper_wrapper: ClassVar[GatekeeperWrapper | None] = None
    #: Its own commands (its listing, the question asked after a silent kill), by the name the
    #: gatekeeper logs, each run in a node of a kind it runs in (through that node's wrappers).
    gatekeeper_commands: ClassVar[Mapping[str, list[Any]]] = {}
    #: Whole shapes (name -> items, run under the audit's `timeout` wrapper) for a kind whose
    #: commands compose with no other kind's: `kinds.gatekeeper_grammar` gathers them, and
    #: `fleetcheck host-setup` adds them to the composed chains.
    gatekeeper_shapes: ClassVar[Mapping[str, list[Any]]] = {}

    #: The word the probe's facts.where uses for a node of this kind ("lxc", "docker",
    #: "kubernetes"), when the probe can tell it is inside one; None for a host or a VM.
    where_name: ClassVar[str | None] = None

    def gpu_passthrough(self, node: NodeResult, check: Check, vendor: str
                        ) -> tuple[str, ...] | None:
        """The lines that give a node of this kind the host's GPUs (`vendor`: "nvidia",
        "amd"; `check`: the failing cause, whose evidence they may quote), for `fleetcheck
        fix` to print when the node sees none; None where that is not this kind's to say (a
        host, a VM, or a vendor it has no lines for)."""
        del node, check, vendor
        return None

    def describe(self, target: Target) -> str | None:
        """What `fleetcheck inventory` says of the node beside its id, or None."""
        del target
        return None

    def place(self, node: NodeResult) -> str | None:
        """Where a node of this kind sits, beside its host in the HTML report's detail
        ("container 101", "docker container in pve1/101"); None where the host says it all."""
        del node
        return None


@dataclasses.dataclass(frozen=True)
class GatekeeperWrapper:
    """How a kind's tool runs a command inside one of its nodes, in the host gatekeeper's
    grammar: `pct exec VMID --keep-env 0 --` before the command."""

    #: What the shapes of the commands run through it are called, before the command's own
    #: name ("pct exec": "pct exec probe", "pct exec oci list"); "" for none.
    name: str
    #: The words before the command.
    items: Sequence[Any]
    #: The probe run through it: the script's fragment `probe` (`[env NAME=VALUE...] PYTHON -
    #: ARGS`), `probe_argv` (no `env`: the wrapper sets the environment with options of its
    #: own), or None (no probe runs through it alone: the host's own probe is the script's).
    probe: str | None = "probe"


class IdShape(abc.ABC):
    """How one family of node ids reads in `--limit` (`HOST/VMID`, `PARENT/RUNTIME:NAME`,
    `CLUSTER/NAMESPACE/POD`): the kinds of one family share one shape object."""

    #: How the shape is written in "expected ..." when a pattern has none of the shapes.
    words: ClassVar[str]
    #: Where `words` comes in that line (smallest first).
    rank: ClassVar[int] = 0

    @abc.abstractmethod
    def problem(self, hosts: Sequence[HostSpec], rest: str) -> str | NotMine | None:
        """Why `HOST/REST` can name none of this shape's nodes on `hosts` (the inventory's
        hosts the pattern's HOST matches; none: `--limit` says that); None when it may name
        one; NOT_MINE when `rest` is not written in this shape."""

    @abc.abstractmethod
    def may_select(self, kind: NodeKind, parent: Target, patterns: Sequence[str],
                   groups: Mapping[str, Sequence[str]]) -> bool:
        """Whether the limit may select a node of `kind` under `parent` that only its listing
        brings."""


class NotMine:
    """`IdShape.problem`'s answer for a pattern written in another shape."""

    def __repr__(self) -> str:
        return "NOT_MINE"


NOT_MINE = NotMine()


def jsonable(value: Any) -> Any:
    """A declaration (dataclasses, tuples, mappings) as JSON-ready data."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, list | tuple):
        return [jsonable(item) for item in value]
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    return value


def host_target(host: HostSpec) -> Target:
    """The host as a node: the root of its tree (probed only with `probe_host`)."""
    return Target(host=host, vmid=None, name=host.name, python=host.python,
                  env=dict(host.env), labels=host.labels, timeout=host.timeout,
                  kind="host", oci=host.oci)


def inherited(parent: Target | HostSpec, spec: Any, *, env: Mapping[str, str] | None = None,
              labels: Sequence[str] = (), python: str | None = None) -> dict[str, Any]:
    """A child node's python, env, labels and timeout: the spec's own over what it inherits
    (`parent`'s timeout; `python`, `env` and `labels` as given, else `parent`'s)."""
    return {
        "python": spec.python or python or parent.python,
        "env": merge_env(parent.env if env is None else env, spec.env),
        "labels": merge_labels(parent.labels, spec.labels, labels),
        "timeout": spec.timeout if spec.timeout is not None else parent.timeout,
    }


def merge_labels(*groups: Sequence[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(label for group in groups for label in group))


def merge_env(*layers: Mapping[str, str]) -> dict[str, str]:
    merged: dict[str, str] = {}
    for layer in layers:
        merged.update(layer)
    return merged
