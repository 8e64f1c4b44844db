"""What the two Proxmox guest kinds (LXC containers, QEMU VMs) share: declared on a host
under `containers:` / `vms:`, listed from the Proxmox API, else `pvesh` over the host's
transport, else the kind's own `pct list` / `qm list`, and expanded from that listing.

`pvesh get /nodes/NODE/lxc|qemu --output-format json` gives names, tags and templates without
an API token (it runs as the login, which pct already needs to be root). Any pvesh failure
(no pvesh, another node name, sudo refusing) falls back to the kind's own listing, whose
failures its transport module words.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from fleetcheck.budget import LISTING_TIMEOUT
from fleetcheck.inventory_data.errors import DiscoveryError, InventoryError
from fleetcheck.inventory_data.listings import parse_pvesh_json
from fleetcheck.inventory_data.model import (
    ALL_CONTAINERS,
    VMID_MAX,
    VMID_MIN,
    ContainerSpec,
    DiscoveredContainer,
    HostSpec,
    SkippedTarget,
    Target,
)
from fleetcheck.inventory_data.patterns import is_vmid_pattern, plain_atoms, selects_anything
from fleetcheck.inventory_data.pveapi import discover_guests_via_api
from fleetcheck.inventory_data.ranges import matches_name, partition_outside_brackets
from fleetcheck.kinds.base import (
    NOT_MINE,
    Discovery,
    IdShape,
    NodeKind,
    Nodes,
    NotMine,
    inherited,
    merge_labels,
)
from fleetcheck.kinds.oci import oci_schema_keys, read_oci
from fleetcheck.transport.pct import pve_list_argv, pve_list_failure, sudo_prefix

if TYPE_CHECKING:
    from fleetcheck.inventory_data.reader import InventoryReader
    from fleetcheck.report.content import NodeResult
    from fleetcheck.transport.interface import Transport


def pvesh_argv(host: HostSpec, kind: str) -> list[str]:
    """NODE is `api.node` when set, else the host's name."""
    node = (host.api.node if host.api is not None else None) or host.name
    return [*sudo_prefix(host.sudo), "pvesh", "get", f"/nodes/{node}/{kind}",
            "--output-format", "json"]


async def pvesh_list(
    host: HostSpec, transport: Transport, kind: str, timeout: float, default_name: str
) -> list[DiscoveredContainer] | None:
    """The `kind` guests ("lxc" or "qemu") pvesh lists on `host`, or None when it cannot.

    Output that is JSON but not a list of guests raises DiscoveryError (pvesh answered, and
    not what it should): that is not a case for the fallback to hide.
    """
    argv = pvesh_argv(host, kind)
    result = await transport.run(argv, timeout=timeout)
    if result.returncode != 0 or result.timed_out or result.truncated or result.signal:
        return None
    listing = "pvesh " + " ".join(argv[-4:-2])
    return parse_pvesh_json(result.stdout.decode("utf-8", "replace"), listing, default_name)


async def pve_list(host: HostSpec, transport: Transport, tool: str, timeout: float) -> str:
    """What `TOOL list` (pct, qm) prints on `host`; DiscoveryError saying why when it fails."""
    result = await transport.run(pve_list_argv(tool, sudo=host.sudo), timeout=timeout)
    if result.returncode != 0 or result.timed_out:
        # The host's own refusal (its gatekeeper) first.
        refused = transport.explain_failure(result) or pve_list_failure(result, host.name, tool)
        raise DiscoveryError(refused.reason, host=host.name, cause=refused.cause)
    return result.stdout.decode("utf-8", "replace")


def vmid_problem(hosts: Sequence[HostSpec], vmid_glob: str) -> str | None:
    """Why `HOST/VMID` (globs allowed) can name no Proxmox guest of the inventory."""
    listed: list[str] = []
    for host in hosts:
        if ALL_CONTAINERS in (host.containers, host.vms):
            return None  # known after `pct list` / the API
        for container in (*host.containers, *host.vms):
            if isinstance(container, str):
                continue
            if matches_name(str(container.vmid), vmid_glob):
                return None
            listed.append(f"{host.name}/{container.vmid}")
    return f"no such container in the inventory (containers: {', '.join(listed) or 'none'})"


def may_select_guests(
    host: HostSpec, patterns: Sequence[str], groups: Mapping[str, Sequence[str]] | None = None
) -> bool:
    """Whether the limit may select a guest of `host` (or what runs in one) that only its
    guest listing (pvesh, `pct list`, `qm list`, the API) can bring: `--limit pve1/docker:web`
    or `--limit pve1/103/docker:web` with 103 listed in the inventory needs none.

    Only the plain patterns can ask for a node (`!` and `&` only take some away).
    """
    if not patterns:
        return True
    groups = groups or {}
    listed = {guest.vmid for guest in (*host.containers, *host.vms)
              if isinstance(guest, ContainerSpec)}
    for atom in plain_atoms(patterns):
        if selects_anything(atom, groups):
            return True
        host_glob, slash, rest = partition_outside_brackets(atom, "/")
        if not matches_name(host.name, host_glob):
            continue
        if not slash:
            return True  # the host and everything on it
        first = partition_outside_brackets(rest, "/")[0]
        if ":" in first:
            continue  # a node inside the host itself (`RUNTIME:NAME`), not a guest
        if first.isdigit() and int(first) in listed:
            continue  # known without listing (VMIDs are unique across containers and VMs)
        return True
    return False


class GuestIds(IdShape):
    """`HOST/VMID`: the Proxmox guests (LXC containers and VMs share the VMIDs)."""

    words = "HOST/VMID with a numeric VMID or a glob such as pve1/1*"
    rank = 0

    def problem(self, hosts: Sequence[HostSpec], rest: str) -> str | NotMine | None:
        if not is_vmid_pattern(rest):
            return NOT_MINE
        return vmid_problem(hosts, rest)

    def may_select(self, kind: NodeKind, parent: Target, patterns: Sequence[str],
                   groups: Mapping[str, Sequence[str]]) -> bool:
        return may_select_guests(parent.host, patterns, groups)


GUEST_IDS = GuestIds()


#: The host gatekeeper's `pvesh get /nodes/NODE/lxc|qemu --output-format json` (`pvesh_argv`),
#: the listing either kind tries first.
PVESH_GET: dict[str, list[Any]] = {
    "pvesh get": ["pvesh", "get", ("WORD", "NODEPATH"), "--output-format", "json"],
}

#: The keys of one guest under `containers:` / `vms:` (given as a mapping, not a VMID alone).
GUEST_KEYS = ("vmid", "name", "python", "env", "labels", "timeout", "oci")


class ProxmoxGuestKind(NodeKind):
    """A guest of a Proxmox host: `HOST/VMID`, declared under the host's `key`."""

    runs_in = ("host",)
    depth = 1
    listing_fails_parent = True
    id_shape = GUEST_IDS
    gatekeeper_words: ClassVar[Mapping[str, str]] = {
        # pve-vmid: 100 .. 999999999.
        "VMID": r"[1-9][0-9]{2,8}",
        # A PVE node name (pve-node): a hostname label.
        "NODEPATH": r"/nodes/[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?/(lxc|qemu)",
    }

    def __init__(self, name: str, *, key: str, noun: str, default_name: str, tool: str,
                 parse_listing: Callable[[str], list[DiscoveredContainer]]) -> None:
        self.name = name
        #: The host's inventory key that declares these guests.
        self.key = key
        self.inventory_key = key
        #: How a skipped one is called: "container stopped", "VM stopped".
        self.noun = noun
        #: PVE's own name for a guest without one (pve-container, QemuServer vmstatus).
        self.default_name = default_name
        #: The kind's own tool, whose `TOOL list` answers when pvesh cannot (pct, qm).
        self.tool = tool
        #: The guests in what `TOOL list` printed (its parser in `inventory_data/listings.py`).
        self.parse_listing = parse_listing

    def schema_keys(self) -> tuple[str, ...]:
        return (*(f"[].{key}" for key in GUEST_KEYS),
                *(f"[].oci{sub}" for sub in oci_schema_keys()))

    def read_declaration(self, reader: InventoryReader, value: Any, path: tuple[Any, ...],
                         transport: str) -> str | tuple[ContainerSpec, ...]:
        """`KEY: all`, or a list of VMIDs and {vmid, name, python, env, labels, timeout,
        oci} (the guest's Docker/Podman containers, read as a host's `oci:` is)."""
        del transport
        if value is None:
            return ()
        if value == ALL_CONTAINERS:
            return ALL_CONTAINERS
        if not isinstance(value, list):
            raise reader.fail(path, f"must be 'all' or a list of VMIDs, got {reader.shown(value)}")
        return reader.unique(value, path, lambda item, at: self._read_guest(reader, item, at),
                             lambda spec: f"VMID {spec.vmid}")

    @staticmethod
    def _read_guest(reader: InventoryReader, raw: Any, path: tuple[Any, ...]) -> ContainerSpec:
        if not isinstance(raw, dict):
            return ContainerSpec(vmid=reader.integer(raw, path, VMID_MIN, VMID_MAX))
        raw = reader.mapping(raw, path, GUEST_KEYS)
        if "vmid" not in raw:
            raise reader.fail((*path, "vmid"), "missing")
        return ContainerSpec(
            vmid=reader.integer(raw["vmid"], (*path, "vmid"), VMID_MIN, VMID_MAX),
            python=reader.optional(raw, path, "python", reader.python, None),
            env=reader.optional(raw, path, "env", reader.env, {}),
            labels=reader.optional(raw, path, "labels", reader.labels, ()),
            name=reader.optional(raw, path, "name", reader.string, None),
            timeout=reader.optional(raw, path, "timeout", reader.seconds, None),
            oci=reader.optional(raw, path, "oci",
                                lambda value, at: read_oci(reader, value, at), None),
        )

    def check_host(self, reader: InventoryReader, path: tuple[Any, ...],
                   declared: Mapping[str, Any]) -> None:
        """VMIDs are unique in a cluster: a guest of this kind listed under an earlier
        Proxmox guest key of the host (`containers:` before `vms:`) is refused."""
        own = declared.get(self.key)
        if not isinstance(own, tuple):
            return
        for key, other in declared.items():
            if key == self.key:
                return
            if not isinstance(other, tuple):
                continue
            taken = {spec.vmid for spec in other if isinstance(spec, ContainerSpec)}
            for index, guest in enumerate(own):
                if guest.vmid in taken:
                    raise reader.fail((*path, self.key, index),
                                      f"VMID {guest.vmid} is also listed under {key}")

    def declared(self, parent: Target) -> str | Sequence[Any] | None:
        specs: str | tuple[ContainerSpec, ...] = getattr(parent.host, self.key)
        return specs or None

    def listing_labels(self, host: HostSpec) -> bool:
        """The API lists Proxmox tags, which become the guests' labels."""
        return getattr(host, self.key) == ALL_CONTAINERS and host.api is not None

    def graph_rows(self, host: HostSpec, known: Sequence[Target]) -> list[str]:
        if getattr(host, self.key) != ALL_CONTAINERS:
            return []
        return [f"{host.name}/*  {self.listed_words(host)}"]

    def listed_words(self, host: HostSpec) -> str:
        """How `fleetcheck inventory` words `KEY: all` ("all VMs: discovered at audit time
        via pvesh or qm list")."""
        via = "the Proxmox API" if host.api is not None else f"pvesh or {self.tool} list"
        return f"all {self.noun}s: discovered at audit time via {via}"

    async def tool_list(self, host: HostSpec, transport: Transport) -> list[DiscoveredContainer]:
        """The guests `TOOL list` shows on `host`; DiscoveryError saying why when it fails."""
        return self.parse_listing(
            await pve_list(host, transport, self.tool, LISTING_TIMEOUT))

    async def discover(
        self, parent: Target, transport: Transport, context: Discovery
    ) -> Sequence[Any]:
        host = parent.host
        if host.api is not None:
            # One API exchange lists the host's containers and VMs alike.
            async def fetch() -> dict[str, list[DiscoveredContainer]]:
                containers, vms = await discover_guests_via_api(host)
                return {"lxc": containers, "qemu": vms}

            return (await context.once(("proxmox-api", host.name), fetch))[self.name]
        listed = await pvesh_list(host, transport, self.name, LISTING_TIMEOUT, self.default_name)
        if listed is None:
            listed = await self.tool_list(host, transport)
        return listed

    def expand(self, parent: Target, listing: Sequence[Any] | None) -> Nodes:
        """Running guests are nodes, templates and stopped ones skipped nodes, and a listing
        line discovery could not read an error node; listed guests take names and Proxmox
        tags from the listing when there is one."""
        host = parent.host
        specs = self.declared(parent)
        nodes: Nodes = []
        if specs == ALL_CONTAINERS:
            if listing is None:
                raise InventoryError(
                    f"{host.origin or host.name}: {self.key}: all needs discovery before targets"
                )
            readable = sorted((g for g in listing if g.vmid is not None),
                              key=lambda g: g.vmid or 0)
            for index, found in enumerate([*readable, *(g for g in listing if g.vmid is None)]):
                labels = merge_labels(host.labels, found.tags)
                if found.problem:
                    nodes.append(self._unreadable(host, found, index))
                    continue
                assert found.vmid is not None
                reason = self._skip_reason(found)
                if reason:
                    nodes.append(SkippedTarget(host, found.vmid, found.name, reason, labels,
                                               kind=self.name))
                else:
                    nodes.append(self._guest(host, ContainerSpec(vmid=found.vmid), found))
            return nodes
        by_vmid = {g.vmid: g for g in listing or () if g.vmid is not None and not g.problem}
        for spec in specs or ():
            if isinstance(spec, ContainerSpec):
                nodes.append(self._guest(host, spec, by_vmid.get(spec.vmid)))
        return nodes

    def _unreadable(self, host: HostSpec, found: DiscoveredContainer, index: int
                    ) -> SkippedTarget:
        """One error node for a listing line discovery could not read (its VMID if readable)."""
        reason = f"discovery could not read {found.where}: {found.problem}"
        fixed = None if found.vmid is not None else f"{host.name}/unreadable-{index + 1}"
        return SkippedTarget(host, found.vmid, found.name or (fixed or ""), reason, host.labels,
                             kind=self.name, status="error", fixed_id=fixed)

    def _skip_reason(self, found: DiscoveredContainer) -> str:
        if found.template:
            return "template"
        if found.status != "running":
            # A lock (backup, migrate...) on a running container does not stop `pct exec`,
            # so only the status decides; the lock is kept in the reason for stopped ones.
            lock = f", locked: {found.lock}" if found.lock else ""
            return f"{self.noun} {found.status}{lock}"
        return ""

    def _guest(self, host: HostSpec, spec: ContainerSpec, found: DiscoveredContainer | None
               ) -> Target:
        """Python, env, labels and timeout inherit defaults -> host -> guest."""
        name = spec.name or (found.name if found else None) or f"{host.name}/{spec.vmid}"
        return Target(host=host, vmid=spec.vmid, name=name, kind=self.name, oci=spec.oci,
                      **inherited(host, spec, labels=found.tags if found else ()))

    def inside(self, target: Target) -> str:
        return f"in {self.noun}"

    def place(self, node: NodeResult) -> str | None:
        return None if node.vmid is None else f"{self.noun} {node.vmid}"
