"""The audit: inventory targets -> concurrent probing over the transports -> one Report."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import socket
import time
from collections.abc import AsyncIterator, Callable, Sequence
from datetime import datetime, timezone
from fnmatch import fnmatchcase
from typing import Any

from fleetcheck.gatekeeper import refusal_reason  # gatekeeper (#14)
from fleetcheck.inventory import (
    ALL_CONTAINERS,
    DiscoveredContainer,
    DiscoveryError,
    HostSpec,
    Inventory,
    InventoryError,
    SkippedTarget,
    Target,
    matches_limit,
    targets_for_host,
)
from fleetcheck.inventory.discovery import needs_discovery, oci_targets
from fleetcheck.inventory.limit import split_patterns
from fleetcheck.model import NodeResult, Report
from fleetcheck.observer import AuditObserver, NullObserver
from fleetcheck.probe import probe_argv, probe_source
from fleetcheck.probe.results import ProbeOutputError, parse_probe_output
from fleetcheck.transport.interface import CommandResult, Transport, TransportError
from fleetcheck.transport.kinds import (
    api_host_transport,
    list_guests,
    list_oci,
    target_transport,
)
from fleetcheck.transport.local import LocalTransport
from fleetcheck.transport.pct import NO_CONFIG, NOT_RUNNING, pct_refusal
from fleetcheck.transport.ssh import (
    DEFAULT_CONNECT_ATTEMPTS,
    KILL_AFTER,
    OUTPUT_CAP,
    SshTransport,
)
from fleetcheck.verdict import DEFAULT_POLICY, Policy, evaluate_node

INTERRUPTED = "interrupted before the probe finished"
INTERRUPTED_DISCOVERY = "interrupted before its containers were discovered"
#: Seconds the probe keeps for itself below the node timeout, so it reports before it is killed.
PROBE_MARGIN = 5.0
#: How long `pct list` may take on a host.
DISCOVERY_TIMEOUT = 30.0
#: Seconds beyond the node timeout and the remote kill: bounds a stalled SSH channel open.
CHANNEL_SLACK = 10.0


def utc_now() -> str:
    """ISO 8601 UTC with a Z, to the second (the audit JSON's timestamps)."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def probe_deadline(timeout: float) -> float:
    """The probe's own deadline: short of the node timeout, never below half of it."""
    return round(max(timeout - PROBE_MARGIN, timeout / 2), 1)


@functools.cache
def _probe_input() -> bytes:
    # Encoded once per process: hundreds of nodes share the same bytes.
    return probe_source().encode()


def _node(target: Target | SkippedTarget, status: str, reason: str, **extra: Any) -> NodeResult:
    return NodeResult(id=target.id, host=target.host.name, vmid=target.vmid, name=target.name,
                      status=status, reason=reason, labels=target.labels, kind=target.kind,
                      parent=target.parent, **extra)


def _host_node(host: HostSpec, status: str, reason: str) -> NodeResult:
    return NodeResult(id=host.name, host=host.name, vmid=None, name=host.name, status=status,
                      reason=reason, labels=host.labels)


def _clip(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _last_line(data: bytes) -> str:
    lines = [line.strip() for line in data.decode("utf-8", "replace").splitlines()]
    lines = [line for line in lines if line]
    return _clip(lines[-1] if lines else "")


def _one_line(exc: BaseException) -> str:
    """`Type: message` on one line, for an exception no stage expected (no traceback)."""
    lines = str(exc).strip().splitlines()
    return _clip(f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__)


def _timed_out(target: Target, duration_s: float) -> NodeResult:
    return _node(target, "error", f"probe timed out after {target.timeout:g} s",
                 duration_s=duration_s)


def _pct_failure(target: Target, stderr: str) -> tuple[str, str] | None:
    """(status, reason) when pct or sudo, not the probe, refused to run (their stderr texts)."""
    if target.vmid is None or target.kind != "lxc":
        return None  # the host's own probe runs without pct or sudo
    refused = pct_refusal(stderr, target.host.name)
    if refused is not None:
        return "error", refused
    if NOT_RUNNING in stderr and f"'{target.vmid}'" in stderr:
        return "skipped", "container stopped"
    if NO_CONFIG in stderr and "Configuration file" in stderr:
        return "error", f"container {target.vmid} does not exist on {target.host.name}"
    return None


def _without_document(
    target: Target, transport: Transport | None, result: CommandResult,
    problem: ProbeOutputError,
) -> tuple[str, str]:
    """(status, reason) for a command that printed no probe document: who refused, or why."""
    where = {"host": f"on {target.host.name}", "qemu": "in VM"}.get(target.kind, "in container")
    stderr = result.stderr.decode("utf-8", "replace")
    code = result.returncode
    if code != 0:
        # gatekeeper (#14): the host's forced command refused it; to be relocated after #11.
        gatekept = refusal_reason(stderr, code)
        if gatekept is not None:
            return "error", gatekept
        explain = getattr(transport, "explain_failure", None)
        refused = (explain(result) if explain is not None else None) or _pct_failure(
            target, stderr)
        if refused is not None:
            return refused
        if code == 127:
            for tool in ("sudo", "pct"):
                if f"env: '{tool}'" in stderr:
                    return "error", f"{tool} not found on {target.host.name}"
            return "error", f"{target.python} not found {where}"
        if code == 126:
            return "error", f"{target.python} cannot be run {where}"
        if not result.stdout.strip():
            detail = _last_line(result.stderr) or "no output"
            return "error", f"probe exited with status {code}: {detail}"
    head = result.stdout.lstrip()[:60].decode("utf-8", "replace").splitlines()
    begins = f" (output begins {head[0]!r})" if head else ""
    return "error", f"{problem}{begins}"


def node_from_result(
    target: Target, result: CommandResult, policy: Policy, duration_s: float,
    transport: Transport | None = None,
) -> NodeResult:
    """Sort one command result into a node: the probe's verdict, or why there is none.

    The probe's document comes first: a probe that judged its node (and exited 1 for "fail")
    keeps its verdict whatever else its stderr holds. pct's and sudo's error texts are read
    only when there is no document.
    """
    timing = {"duration_s": duration_s}
    if result.truncated:
        return _node(target, "error", f"output exceeded {OUTPUT_CAP} bytes", **timing)
    if result.timed_out:
        return _timed_out(target, duration_s)
    if result.signal is not None:
        detail = _last_line(result.stderr)
        reason = f"probe killed by signal {result.signal}" + (f": {detail}" if detail else "")
        return _node(target, "error", reason, **timing)
    try:
        output = parse_probe_output(result.stdout)
    except ProbeOutputError as exc:
        status, reason = _without_document(target, transport, result, exc)
        return _node(target, status, reason, **timing)
    status, reason = evaluate_node(output.checks, output.triton, policy, facts=output.facts)
    return _node(target, status, reason, triton=output.triton, checks=tuple(output.checks),
                 facts=output.facts, **timing)


async def probe_target(
    target: Target,
    transport: Transport,
    *,
    deep: bool = False,
    policy: Policy = DEFAULT_POLICY,
    admit: Callable[[], contextlib.AbstractAsyncContextManager[object]] | None = None,
) -> NodeResult:
    """Run the probe on one node over `transport` and judge it; never raises for a bad node.

    The node's clock (its timeout and `duration_s`) starts once it holds a session on its host
    and then `admit()` (the audit's fleet-wide slot): waiting for either is queueing, which
    only the audit's own deadline bounds.
    """
    argv = probe_argv(target.python, deep=deep, deadline=probe_deadline(target.timeout))
    if target.env:
        # pct (and sshd) replace the environment; `env` sets the node's on the far side.
        if "=" in argv[0]:
            # env would take "/opt/py=3.12/bin/python3" for one more assignment.
            argv = ["/bin/sh", "-c", 'exec "$0" "$@"', *argv]
        argv = ["env", *(f"{key}={value}" for key, value in sorted(target.env.items())), *argv]
    # Bounds what the transport's own timeouts cannot: a stalled channel open.
    bound = target.timeout + KILL_AFTER + CHANNEL_SLACK
    started = time.monotonic()
    try:
        async with transport.session() as run, (admit or contextlib.nullcontext)():
            started = time.monotonic()
            result = await asyncio.wait_for(
                run(argv, input=_probe_input(), timeout=target.timeout), bound
            )
    except TransportError as exc:
        return _node(target, exc.kind, str(exc), duration_s=time.monotonic() - started)
    except asyncio.TimeoutError:
        return _timed_out(target, time.monotonic() - started)
    return node_from_result(target, result, policy, time.monotonic() - started, transport)


def _discovery_failure(host: HostSpec, result: CommandResult) -> str:
    # gatekeeper (#14): the host's forced command refused it; to be relocated after #11.
    gatekept = refusal_reason(result.stderr.decode("utf-8", "replace"), result.returncode)
    if gatekept is not None:
        return gatekept
    refused = pct_refusal(result.stderr.decode("utf-8", "replace"), host.name)
    if refused is not None:
        return refused
    if result.returncode == 127:
        return f"pct not found on {host.name}: is it a Proxmox VE host?"
    if result.timed_out:
        return f"`pct list` on {host.name} timed out"
    return f"`pct list` on {host.name} failed ({result.returncode}): {_last_line(result.stderr)}"


def raise_open_files_limit() -> None:
    """Lift the soft limit on open files to the hard one: one socket per host adds up."""
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if hard == resource.RLIM_INFINITY or hard > soft:
            wanted = 1 << 20 if hard == resource.RLIM_INFINITY else hard
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    except (ImportError, ValueError, OSError):
        pass  # not on this platform, or not allowed: the default limit still works


class AuditRun:
    """One audit in progress; `partial_report()` may be called at any time (e.g. on Ctrl-C)."""

    def __init__(
        self,
        inventory: Inventory,
        *,
        limit: Sequence[str] | None = None,
        deep: bool = False,
        policy: Policy = DEFAULT_POLICY,
        observer: AuditObserver | None = None,
        audit_timeout: float | None = None,
        connect_attempts: int = DEFAULT_CONNECT_ATTEMPTS,
    ) -> None:
        self.inventory = inventory
        self.limit = list(limit or [])
        self.deep = deep or policy.deep
        self.policy = policy
        self.observer: AuditObserver = observer or NullObserver()
        self.audit_timeout = audit_timeout if audit_timeout is not None else (
            inventory.audit_timeout)
        self.connect_attempts = connect_attempts
        self.started_at = utc_now()
        self.interrupted = False
        self._host_order = {host.name: index for index, host in enumerate(inventory.hosts)}
        self._done: dict[str, NodeResult] = {}
        self._pending: dict[str, NodeResult] = {}
        self._total = 0
        self._transports: list[Transport] = []
        self._closing: list[asyncio.Future[None]] = []

    def partial_report(self) -> Report:
        """Every node known so far; those still running count as interrupted errors."""
        nodes = list(self._done.values()) + [
            node for node_id, node in self._pending.items() if node_id not in self._done
        ]
        nodes.sort(key=lambda node: (self._host_order.get(node.host, len(self._host_order)),
                                     -1 if node.vmid is None else node.vmid,
                                     node.id != node.parent and node.kind in ("docker", "podman"),
                                     node.id))
        return Report(started_at=self.started_at, finished_at=utc_now(), nodes=tuple(nodes),
                      inventory=self.inventory.path, interrupted=self.interrupted)

    async def run(self) -> Report:
        """Audit every selected node; returns the (possibly partial) report, never raises."""
        raise_open_files_limit()
        self._connects = asyncio.Semaphore(max(1, self.connect_attempts))
        self._slots = asyncio.Semaphore(max(1, self.inventory.concurrency))
        tasks = [asyncio.ensure_future(self._audit_host(host)) for host in self.inventory.hosts]
        try:
            if tasks:
                _, unfinished = await asyncio.wait(tasks, timeout=self.audit_timeout)
                if unfinished:
                    self.interrupted = True
        except asyncio.CancelledError:
            # Ctrl-C or a caller's cancel: stop probing and hand back what was gathered.
            self.interrupted = True
        finally:
            await self._stop(tasks)
        return self.partial_report()

    async def _stop(self, tasks: Sequence[asyncio.Future[None]]) -> None:
        for task in tasks:
            task.cancel()
        with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
            await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 10)
        closing = [*self._closing, *(transport.close() for transport in self._transports)]
        with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
            await asyncio.wait_for(asyncio.gather(*closing, return_exceptions=True), 10)

    def _finish(self, node: NodeResult) -> None:
        self._done[node.id] = node
        self._pending.pop(node.id, None)
        self.observer.node_finished(node)

    def _finish_host(self, node: NodeResult) -> None:
        """A host whose containers are unknown stands for them as one node."""
        self._total += 1
        self.observer.targets_resolved(self._total)
        self._finish(node)

    def _selected(self, node: Target | SkippedTarget) -> bool:
        if not self.limit:
            return True
        return matches_limit(node.id, node.labels, self.limit, self.inventory.groups)

    def _host_transport(self, host: HostSpec) -> Transport:
        transport: Transport
        if host.transport == "local":
            transport = LocalTransport()
        elif host.transport == "api":
            transport = api_host_transport(host)
        else:
            transport = SshTransport(host, connect_limiter=self._connects)
        self._transports.append(transport)
        return transport

    def _host_may_match(self, host: HostSpec) -> bool:
        """False only when no node of `host` can be selected by the whole limit (`!`, `&` too).

        Spares connecting to the host at all, and keeps a host the limit excludes out of the
        report when it cannot be reached or its containers cannot be listed.
        """
        if not self.limit:
            return True
        if not needs_discovery(host):
            # Its nodes are known without connecting.
            return any(self._selected(node) for node in targets_for_host(host, None))
        if matches_limit(host.name, host.labels, self.limit, self.inventory.groups):
            return True
        atoms = [atom for atom in split_patterns(self.limit) if atom]
        plain = [atom for atom in atoms if atom[0] not in "!&"] or ["all"]
        if not any(self._may_select(host, atom) for atom in plain):
            return False
        for atom in atoms:
            if atom[0] == "&" and not self._may_select(host, atom[1:]):
                return False
            if atom[0] == "!" and self._selects_all_of(host, atom[1:]):
                return False
        return True

    def _may_select(self, host: HostSpec, atom: str, seen: frozenset[str] = frozenset()) -> bool:
        """Whether `atom` may select some node of `host`, its containers not yet known."""
        groups = self.inventory.groups
        if atom in ("all", "*"):
            return True
        for prefix in ("@", "label:"):
            if atom.startswith(prefix):
                # Containers carry their host's labels, and Proxmox tags when the API lists them.
                glob = atom[len(prefix):]
                return host.api is not None or any(fnmatchcase(x, glob) for x in host.labels)
        if atom in groups and atom not in seen:
            return any(self._may_select(host, member, seen | {atom}) for member in groups[atom])
        return fnmatchcase(host.name, atom.split("/", 1)[0])

    def _selects_all_of(
        self, host: HostSpec, atom: str, seen: frozenset[str] = frozenset()
    ) -> bool:
        """Whether `atom` selects every node `host` may have, its containers not yet known."""
        groups = self.inventory.groups
        if atom in ("all", "*"):
            return True
        for prefix in ("@", "label:"):
            if atom.startswith(prefix):
                # Containers carry their host's labels as well as their own.
                return any(fnmatchcase(label, atom[len(prefix):]) for label in host.labels)
        if atom in groups and atom not in seen:
            return any(self._selects_all_of(host, member, seen | {atom})
                       for member in groups[atom])
        host_glob, slash, vmid_glob = atom.partition("/")
        if slash:
            return not host.probe_host and vmid_glob == "*" and fnmatchcase(host.name, host_glob)
        return fnmatchcase(host.name, atom)

    async def _audit_host(self, host: HostSpec) -> None:
        if not self._host_may_match(host):
            return
        transport = self._host_transport(host)
        try:
            await self._audit_selected_host(host, transport)
        except Exception as exc:  # noqa: BLE001 - a bug or an unexpected input: data, not a crash
            # Still pending only while its containers are being discovered.
            stage = "container discovery" if host.name in self._pending else "audit"
            self._finish_host(_host_node(host, "error", f"{stage} failed: {_one_line(exc)}"))
        finally:
            # Done with this host, however it ended: give its socket back now rather than when
            # the whole fleet is done (one descriptor per host adds up on large fleets). Closed
            # beside the host's task, so a slow close never counts against the audit's deadline.
            self._closing.append(asyncio.ensure_future(transport.close()))

    async def _audit_selected_host(self, host: HostSpec, transport: Transport) -> None:
        discovered: list[DiscoveredContainer] | None = None
        vms: list[DiscoveredContainer] | None = None
        if ALL_CONTAINERS in (host.containers, host.vms):
            self._pending[host.name] = _host_node(host, "error", INTERRUPTED_DISCOVERY)
            try:
                discovered, vms = await list_guests(host, transport)
            except TransportError as exc:
                self._finish_host(_host_node(host, exc.kind, str(exc)))
                return
            except (DiscoveryError, InventoryError) as exc:
                reason = f"container discovery failed: {exc}"
                self._finish_host(_host_node(host, "error", reason))
                return
            self._pending.pop(host.name, None)
        nodes = targets_for_host(host, discovered, vms)
        nodes += await self._discover_oci(host, nodes, transport)
        nodes = [node for node in nodes if self._selected(node)]
        targets = [node for node in nodes if isinstance(node, Target)]
        for target in targets:
            self._pending[target.id] = _node(target, "error", INTERRUPTED)
        self._total += len(nodes)
        self.observer.targets_resolved(self._total)
        for skipped in nodes:
            if isinstance(skipped, SkippedTarget):
                self._finish(_node(skipped, skipped.status, skipped.reason))
        # _probe records its own failures; return_exceptions keeps one from ending the others.
        await asyncio.gather(*(self._probe(target, transport) for target in targets),
                             return_exceptions=True)

    async def _discover_oci(
        self, host: HostSpec, nodes: list[Target | SkippedTarget], transport: Transport
    ) -> list[Target | SkippedTarget]:
        """The Docker/Podman containers of every node with `oci: {containers: all}`."""
        parents = [node for node in nodes if isinstance(node, Target) and node.oci is not None
                   and node.runtime is None and node.oci.containers == ALL_CONTAINERS]
        if host.oci is not None and host.oci.containers == ALL_CONTAINERS and not host.probe_host:
            parents.append(Target(host=host, vmid=None, name=host.name, python=host.python,
                                  env=dict(host.env), labels=host.labels, timeout=host.timeout,
                                  oci=host.oci))

        async def one(parent: Target) -> list[Target | SkippedTarget]:
            assert parent.oci is not None
            runtime = parent.oci.runtime
            try:
                return oci_targets(parent, await list_oci(parent, transport))
            except (DiscoveryError, TransportError) as exc:
                status = str(getattr(exc, "status", "") or getattr(exc, "kind", "error"))
                return [SkippedTarget(parent.host, parent.vmid, f"{runtime}:*",
                                      f"container discovery failed: {exc}", parent.labels,
                                      kind=runtime, runtime=runtime, container="*",
                                      status=status)]

        found = await asyncio.gather(*(one(parent) for parent in parents))
        return [node for group in found for node in group]

    async def _probe(self, target: Target, host_transport: Transport) -> None:
        transport = target_transport(target, host_transport)

        @contextlib.asynccontextmanager
        async def fleet_slot() -> AsyncIterator[None]:
            # Taken after the host's session slot: a saturated host holds at most its own
            # max_sessions of the fleet's slots, never all of them.
            async with self._slots:
                self.observer.node_started(target.id)
                yield

        try:
            node = await probe_target(target, transport, deep=self.deep, policy=self.policy,
                                      admit=fleet_slot)
        except Exception as exc:  # noqa: BLE001 - one node's surprise must not end the others
            node = _node(target, "error", f"probe failed: {_one_line(exc)}")
        self._finish(node)


async def run_audit(
    inventory: Inventory,
    *,
    limit: list[str] | None = None,
    deep: bool = False,
    policy: Policy = DEFAULT_POLICY,
    observer: AuditObserver | None = None,
    audit_timeout: float | None = None,
) -> Report:
    """Audit the inventory; unreachable or broken nodes are results, not exceptions.

    When `audit_timeout` (or the inventory's) passes, or the task is cancelled (Ctrl-C under
    asyncio.run), the report is returned with `interrupted=True` and the unfinished nodes as
    errors. For KeyboardInterrupt outside asyncio's handling, use `AuditRun.partial_report()`.
    """
    run = AuditRun(inventory, limit=limit, deep=deep, policy=policy, observer=observer,
                   audit_timeout=audit_timeout)
    return await run.run()


def local_node_result(
    *,
    python: str | None = None,
    deep: bool = False,
    timeout: float = 60,
    env: dict[str, str] | None = None,
    policy: Policy = DEFAULT_POLICY,
) -> NodeResult:
    """Probe the machine fleetcheck runs on (`fleetcheck probe`); the node id is its hostname."""
    name = socket.gethostname()
    host = HostSpec(name=name, address=None, transport="local", timeout=timeout)
    target = Target(host=host, vmid=None, name=name, python=python or "python3",
                    env=dict(env or {}), labels=(), timeout=timeout)
    return asyncio.run(probe_target(target, LocalTransport(), deep=deep, policy=policy))
