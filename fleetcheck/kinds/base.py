"""What every node kind provides: the interface a kind module implements.

A kind (the Proxmox host, an LXC container, a QEMU VM, a Docker/Podman container...) is one
module with one `NodeKind` object, named on one line of the registry (`kinds/__init__.py`).
The scheduler, the inventory's expansion, the fix plan and the renderers ask the kind; none
of them names a kind.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from fleetcheck.budget import BudgetFor
from fleetcheck.inventory.model import HostSpec, SkippedTarget, Target

if TYPE_CHECKING:
    from fleetcheck.model import NodeResult
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
    #: How `--limit` tells whether it may select a node only this kind's listing brings (else
    #: the listing is not run): "guests" (`HOST/VMID` under a host), "inside" (`PARENT/KIND:NAME`
    #: inside a node), or None: it cannot tell from the ids, and the listing runs.
    limit_shape: ClassVar[str | None] = None

    # -- inventory ------------------------------------------------------------------------

    @abc.abstractmethod
    def declared(self, parent: Target) -> str | Sequence[Any] | None:
        """What `parent`'s inventory entry declares of this kind: "all", the specs, or None."""

    def needs_listing(self, parent: Target) -> bool:
        """Whether this kind's nodes under `parent` are known only once a listing ran."""
        from fleetcheck.inventory.model import ALL_CONTAINERS

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

    def describe(self, target: Target) -> str | None:
        """What `fleetcheck inventory` says of the node beside its id, or None."""
        del target
        return None


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
