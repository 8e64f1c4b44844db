"""The Docker and Podman container kinds: `PARENT/RUNTIME:NAME` under any host, LXC container
or VM with an `oci:`, reached with `RUNTIME exec -i` around the parent's transport
(`transport/oci.py`, which words the runtime's refusals), listed with `RUNTIME ps` inside
the parent."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from fleetcheck.budget import LISTING_TIMEOUT
from fleetcheck.inventory_data.errors import DiscoveryError
from fleetcheck.inventory_data.listings import parse_oci_ps
from fleetcheck.inventory_data.model import (
    ALL_CONTAINERS,
    ContainerSpec,
    DiscoveredOci,
    HostSpec,
    OciContainerSpec,
    OciSpec,
    SkippedTarget,
    Target,
)
from fleetcheck.inventory_data.patterns import (
    may_select_inside,
    rpartition_outside_brackets,
)
from fleetcheck.inventory_data.ranges import matches_name
from fleetcheck.kinds.base import NOT_MINE, GatekeeperWrapper, IdShape, NodeKind, inherited
from fleetcheck.text import clip, last_line
from fleetcheck.transport.oci import OciTransport, oci_exec_failure, oci_list_argv

if TYPE_CHECKING:
    from fleetcheck.budget import BudgetFor
    from fleetcheck.inventory_data.reader import InventoryReader
    from fleetcheck.kinds.base import Discovery, Nodes, NotMine
    from fleetcheck.report.content import Check, NodeResult
    from fleetcheck.transport.interface import Transport


#: The runtimes an `oci:` may name, each one a kind of this module (`DOCKER`, `PODMAN`).
OCI_RUNTIMES = ("docker", "podman")
#: The keys of an `oci:` (on a host, an LXC container or a VM) and of one container in it.
OCI_KEYS = ("runtime", "containers")
OCI_CONTAINER_KEYS = ("name", "python", "env", "user", "labels", "timeout")
#: A Docker/Podman container name (moby's `[a-zA-Z0-9][a-zA-Z0-9_.-]+`) or an id prefix.
OCI_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
#: `docker exec --user`: name or uid, optionally `:group` or `:gid`.
OCI_USER_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*(:[A-Za-z0-9_][A-Za-z0-9_.-]*)?$")


def oci_schema_keys() -> tuple[str, ...]:
    """The key paths below an `oci:` (".runtime", ".containers[].name"...)."""
    return (*(f".{key}" for key in OCI_KEYS),
            *(f".containers[].{key}" for key in OCI_CONTAINER_KEYS))


def read_oci(reader: InventoryReader, value: Any, path: tuple[Any, ...]) -> OciSpec:
    """`oci: {runtime: docker|podman, containers: all | [NAME | {name, ...}]}`, on a host or
    on one of its guests (the guest kinds read theirs through this)."""
    raw = reader.mapping(value, path, OCI_KEYS)
    if "runtime" not in raw:
        raise reader.fail((*path, "runtime"), "missing (docker or podman)")
    runtime = reader.choice(raw["runtime"], (*path, "runtime"), OCI_RUNTIMES)
    listed = raw.get("containers", ALL_CONTAINERS)
    cpath = (*path, "containers")
    if listed == ALL_CONTAINERS:
        return OciSpec(runtime=runtime, containers=ALL_CONTAINERS)
    if not isinstance(listed, list) or not listed:
        raise reader.fail(cpath, "must be 'all' or a list of container names, got "
                                 f"{reader.shown(listed)}")
    specs = reader.unique(listed, cpath, lambda item, at: _oci_container(reader, item, at),
                          lambda spec: f"container {spec.name!r}")
    return OciSpec(runtime=runtime, containers=tuple(specs))


def _oci_container(reader: InventoryReader, raw: Any, path: tuple[Any, ...]
                   ) -> OciContainerSpec:
    if not isinstance(raw, dict):
        return OciContainerSpec(name=_oci_name(reader, raw, path))
    raw = reader.mapping(raw, path, OCI_CONTAINER_KEYS)
    if "name" not in raw:
        raise reader.fail((*path, "name"), "missing")
    user = None
    if "user" in raw:
        user = reader.string(raw["user"], (*path, "user"))
        if not OCI_USER_RE.match(user):
            raise reader.fail((*path, "user"), "must be NAME, UID, NAME:GROUP or UID:GID, "
                                               f"got {reader.shown(clip(user, 80))}")
    return OciContainerSpec(
        name=_oci_name(reader, raw["name"], (*path, "name")),
        python=reader.optional(raw, path, "python", reader.python, None),
        env=reader.optional(raw, path, "env", reader.env, {}),
        user=user,
        labels=reader.optional(raw, path, "labels", reader.labels, ()),
        timeout=reader.optional(raw, path, "timeout", reader.seconds, None),
    )


def _oci_name(reader: InventoryReader, value: Any, path: tuple[Any, ...]) -> str:
    text = reader.string(value, path)
    if not OCI_NAME_RE.match(text):
        # Also keeps a name from reading as an option of `docker exec`.
        raise reader.fail(path, "must be a container name (letters, digits, '_', '.', '-', "
                                f"not '-' first), got {reader.shown(clip(text, 80))}")
    return text


class OciListingError(DiscoveryError):
    """`RUNTIME ps` gave no list; `status` is "skipped" when the parent itself is stopped."""

    def __init__(self, message: str, status: str = "error") -> None:
        super().__init__(message)
        self.status = status


async def oci_list(
    runtime: str, parent: Transport, where: str, timeout: float, *, sudo: bool = False
) -> list[DiscoveredOci]:
    """`RUNTIME ps` inside the node `parent` reaches; OciListingError saying why it failed."""
    argv = [*(["sudo", "-n"] if sudo else []), *oci_list_argv(runtime)]
    result = await parent.run(argv, timeout=timeout)
    code = result.returncode
    if code == 0 and not (result.timed_out or result.signal or result.truncated):
        return parse_oci_ps(result.stdout.decode("utf-8", "replace"), runtime)
    # The parent's refusals (the host's gatekeeper, pct, qm) come before the runtime's.
    refused = parent.explain_failure(result) or oci_exec_failure(result, runtime, "", where)
    if result.timed_out:
        status, detail = "error", "timed out"
    elif refused is not None:
        status, detail = refused
    elif code == 127:
        status, detail = "error", f"{runtime} not found"
    else:
        message = last_line(result.stderr) or "no message"
        status, detail = "error", f"failed ({code}): {message}"
    raise OciListingError(f"`{runtime} ps` on {where}: {detail}", status)


def inside_problem(hosts: Sequence[HostSpec], rest: str) -> str | None:
    """Why `HOST/[VMID/]RUNTIME:NAME` (globs allowed) can match no Docker/Podman container."""
    guest_glob, slash, oci_glob = rpartition_outside_brackets(rest, "/")
    known: list[str] = []
    for host in hosts:
        parents = [(host.name, host.oci)] + [
            (f"{host.name}/{guest.vmid}", guest.oci)
            for guest in (*host.containers, *host.vms) if isinstance(guest, ContainerSpec)]
        for parent, oci in parents:
            if oci is None:
                continue
            if slash and not matches_name(parent.partition("/")[2], guest_glob):
                continue
            if not slash and parent != host.name:
                continue
            if oci.containers == ALL_CONTAINERS:
                return None  # known after `docker ps`
            for spec in oci.containers:
                name = f"{oci.runtime}:{spec.name}" if isinstance(spec, OciContainerSpec) else ""
                if matches_name(name, oci_glob):
                    return None
                known.append(f"{parent}/{name}")
    return ("no such Docker/Podman container in the inventory (listed: "
            f"{', '.join(known) or 'none'})")


class InsideIds(IdShape):
    """`PARENT/RUNTIME:NAME`: a node inside a host or a guest, named by its kind and name."""

    words = "PARENT/RUNTIME:NAME"
    rank = 1

    def problem(self, hosts: Sequence[HostSpec], rest: str) -> str | NotMine | None:
        last = rpartition_outside_brackets(rest, "/")[2]
        if last.partition(":")[0] not in OCI_RUNTIMES:
            return NOT_MINE  # not a Docker/Podman container: another kind's `KIND:NAME`
        return inside_problem(hosts, rest)

    def may_select(self, kind: NodeKind, parent: Target, patterns: Sequence[str],
                   groups: Mapping[str, Sequence[str]]) -> bool:
        return may_select_inside(parent.id, kind.name, patterns, groups)


INSIDE_IDS = InsideIds()

#: `docker` or `podman`, in the host gatekeeper's grammar.
_EITHER_RUNTIME = ("one", [["docker"], ["podman"]])


class OciKind(NodeKind):
    """The containers of one runtime (`docker` or `podman`) inside a host or a guest."""

    runs_in = ("host", "lxc", "qemu")
    depth = 2
    listing_fails_parent = False
    id_shape = INSIDE_IDS
    inventory_key = "oci"
    # The host gatekeeper's grammar, one for both runtimes (their shapes are called "oci").
    gatekeeper_words: ClassVar[Mapping[str, str]] = {
        # A container name or id ([a-zA-Z0-9][a-zA-Z0-9_.-]+ in moby's names.go).
        "OCINAME": r"[a-zA-Z0-9][a-zA-Z0-9_.-]{0,254}",
        # --user: name or uid, optional :group or :gid.
        "OCIUSER": r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,31}(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,31})?",
    }
    # `RUNTIME exec -i [--user U] [--env NAME=VALUE]... NAME` (`oci_exec_argv`: the node's
    # environment as --env options, so the probe runs without `env`).
    gatekeeper_wrapper = GatekeeperWrapper(
        "oci", [_EITHER_RUNTIME, "exec", "-i",
                ("opt", ["--user", ("WORD", "OCIUSER")]),
                ("rep", ["--env", ("WORD", "ASSIGN")]),
                ("WORD", "OCINAME")], probe="probe_argv")
    gatekeeper_commands: ClassVar[Mapping[str, list[Any]]] = {
        # `oci_list_argv`: docker ps -a --format '{{json .}}' | podman ps -a --format json.
        "oci list": [("one", [["docker", "ps", "-a", "--format", "{{json .}}"],
                              ["podman", "ps", "-a", "--format", "json"]])],
        # `RUNTIME inspect --format {{.State.Status}} NAME`: the one field asked after an exec
        # killed without a word (`OciTransport`); never the whole document, which holds the
        # container's environment.
        "oci status": [_EITHER_RUNTIME, "inspect", "--format", "{{.State.Status}}",
                       ("WORD", "OCINAME")],
    }

    def __init__(self, runtime: str) -> None:
        self.runtime = runtime
        self.name = runtime

    def schema_keys(self) -> tuple[str, ...]:
        return oci_schema_keys()

    def read_declaration(self, reader: InventoryReader, value: Any, path: tuple[Any, ...],
                         transport: str) -> OciSpec:
        del transport
        return read_oci(reader, value, path)

    def graph_rows(self, host: HostSpec, known: Sequence[Target]) -> list[str]:
        """`PARENT/RUNTIME:*` for each known node whose `oci:` lists all its containers."""
        parents = [(t.id, t.oci) for t in known if t.oci is not None and t.runtime is None]
        if not host.probe_host and host.oci is not None:
            parents.append((host.name, host.oci))
        return [f"{where}/{self.runtime}:*  all running: discovered at audit time via "
                f"`{self.runtime} ps`" for where, oci in parents
                if oci is not None and oci.runtime == self.runtime
                and oci.containers == ALL_CONTAINERS]

    def declared(self, parent: Target) -> str | Sequence[Any] | None:
        oci = parent.oci
        if oci is None or oci.runtime != self.runtime or parent.runtime is not None:
            return None
        return oci.containers

    async def discover(
        self, parent: Target, transport: Transport, context: Discovery
    ) -> Sequence[Any]:
        del context
        # sudo only for the host's own login: inside pct exec or a VM it runs as root.
        return await oci_list(self.runtime, transport, parent.id, LISTING_TIMEOUT,
                              sudo=parent.host.sudo and parent.vmid is None)

    def listing_failed(self, parent: Target, exc: Exception) -> Nodes:
        """`PARENT/RUNTIME:*`, saying why (skipped when the parent itself is stopped)."""
        runtime = self.runtime
        status = str(getattr(exc, "status", "") or getattr(exc, "kind", "error"))
        return [SkippedTarget(parent.host, parent.vmid, f"{runtime}:*",
                              f"container discovery failed: {exc}", parent.labels,
                              kind=runtime, runtime=runtime, container="*", status=status)]

    def expand(self, parent: Target, listing: Sequence[Any] | None) -> Nodes:
        """Listed containers need no listing. For `containers: all`, nothing until `listing`
        (the parent's `RUNTIME ps`) is given: running containers become targets, paused or
        otherwise not running ones skipped nodes, unreadable lines error nodes."""
        declared = self.declared(parent)
        if declared is None:
            return []
        runtime = self.runtime
        specs: list[OciContainerSpec] = []
        nodes: Nodes = []
        if declared == ALL_CONTAINERS:
            for index, found in enumerate(listing or ()):
                if found.problem:
                    name = f"unreadable-{index + 1}"
                    nodes.append(SkippedTarget(
                        parent.host, parent.vmid, name,
                        f"discovery could not read {found.where}: {found.problem}",
                        parent.labels, kind=runtime, runtime=runtime, container=name,
                        status="error"))
                elif found.state != "running":
                    nodes.append(SkippedTarget(parent.host, parent.vmid, found.name,
                                               f"container {found.state}", parent.labels,
                                               kind=runtime, runtime=runtime,
                                               container=found.name))
                else:
                    specs.append(OciContainerSpec(name=found.name))
        else:
            specs = [spec for spec in declared if isinstance(spec, OciContainerSpec)]
        for spec in specs:
            nodes.append(Target(
                host=parent.host, vmid=parent.vmid, name=spec.name, container=spec.name,
                guest_kind=parent.node_kind, user=spec.user, kind=runtime, runtime=runtime,
                # An image is its own filesystem: the guest's interpreter and environment do
                # not apply inside it, the host's (and the defaults') do.
                **inherited(parent, spec, python=parent.host.python, env=parent.host.env)))
        return nodes

    def transport(self, target: Target, outer: Transport, budget: BudgetFor) -> Transport:
        del budget  # `RUNTIME exec` has no wait of its own: the parent's bounds it
        assert target.runtime is not None and target.container is not None
        # sudo only for the host's own login: inside pct exec or a VM it runs as root.
        return OciTransport(outer, target.runtime, target.container, user=target.user,
                            sudo=target.host.sudo and target.vmid is None,
                            parent_name=target.parent or target.host.name)

    @property
    def where_name(self) -> str:  # type: ignore[override]
        return self.runtime

    def gpu_passthrough(self, node: NodeResult, check: Check, vendor: str
                        ) -> tuple[str, ...] | None:
        """The runtime's own options (a running container cannot gain devices), not the LXC
        config of a container it may run in."""
        if vendor == "amd":
            return None
        parent = getattr(node, "parent", None) or node.host
        name = node.name
        cdi = "nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml"
        if self.runtime == "docker":
            return (f"# on {parent}: recreate container {name} with the GPUs (a running "
                    "container cannot gain devices)",
                    f"docker run --gpus all ... (NVIDIA Container Toolkit), or with CDI: {cdi}, "
                    "then docker run --device nvidia.com/gpu=all ...",
                    "# an lxc.mount.entry line in the LXC config around dockerd does not reach "
                    "it")
        return (f"# on {parent}: recreate container {name} with the GPUs through CDI",
                f"{cdi}", f"{self.runtime} run --device nvidia.com/gpu=all ...")

    def inside(self, target: Target) -> str:
        return "in container"

    def where_it_runs(self, node: NodeResult) -> str:
        parent = getattr(node, "parent", None) or node.host
        return f"inside {self.runtime} container {node.name} on {parent}, through " \
               f"`{self.runtime} exec`"

    def describe(self, target: Target) -> str | None:
        return f"({self.runtime} container in {target.parent})"

    def place(self, node: NodeResult) -> str | None:
        return f"{self.runtime} container in {node.parent or ''}"


DOCKER = OciKind("docker")
PODMAN = OciKind("podman")
