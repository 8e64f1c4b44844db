"""The audit scheduler: inventory targets -> concurrent probing -> one Report.

It is given its parts (`AuditRun(inventory, transports=..., probe=..., budget=...)`): a
transport factory (`transport/factory.py` chooses each node's transport), the probe payload
and a node budget (`transport/interface.py` derives every deadline from a node's timeout).
Node selection is `inventory/limit.py`'s, a transport's refusal wording its own module's, and
the verdict `judgement/policy.py`'s; this module only queues, times and sorts results.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import re
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, ParamSpec

from fleetcheck import failures, kinds
from fleetcheck.budget import STOP_WAIT, node_timeout
from fleetcheck.inventory import (
    DiscoveryError,
    HostSpec,
    Inventory,
    InventoryError,
    SkippedTarget,
    Target,
    host_may_match,
    matches_limit,
)
from fleetcheck.inventory.discovery import needs_discovery
from fleetcheck.judgement.policy import DEFAULT_POLICY, Policy
from fleetcheck.observer import AuditObserver, NullObserver
from fleetcheck.probe import probe_argv, probe_source
from fleetcheck.probe.results import ProbeOutputError, judge_probe_output, parse_probe_output
from fleetcheck.report.content import NodeResult, Report, TritonVerdict
from fleetcheck.text import clip, last_line
from fleetcheck.timestamps import utc_now
from fleetcheck.transport.factory import TransportFactory
from fleetcheck.transport.interface import (
    OUTPUT_CAP,
    BudgetFor,
    CommandResult,
    NodeBudget,
    Transport,
    TransportError,
)
from fleetcheck.transport.packing import packed_launch

INTERRUPTED = "interrupted before the probe finished"
INTERRUPTED_DISCOVERY = "interrupted before its containers were discovered"
#: Runs on a node through its transport before its probe (`fleetcheck fix --apply`'s repair).
BeforeProbe = Callable[[Target, Transport], Awaitable[None]]


@functools.cache
def shipped_probe() -> bytes:
    """The shipped probe's payload, encoded once per process: hundreds of nodes share it."""
    return probe_source().encode()


def _failed(cause: str | None) -> dict[str, Any]:
    """A node's fields for a failure outside the probe: its id in `triton.cause`."""
    return {"triton": TritonVerdict(cause=cause)} if cause else {}


def _node(target: Target | SkippedTarget, status: str, reason: str, **extra: Any) -> NodeResult:
    return NodeResult(id=target.id, host=target.host.name, vmid=target.vmid, name=target.name,
                      status=status, reason=reason, labels=target.labels, kind=target.kind,
                      parent=target.parent, **extra)


def _host_node(host: HostSpec, status: str, reason: str, cause: str | None = None
               ) -> NodeResult:
    return NodeResult(id=host.name, host=host.name, vmid=None, name=host.name, status=status,
                      reason=reason, labels=host.labels, **_failed(cause))


def _short(text: str) -> str:
    return clip(text, 200, mark="...")


def _one_line(exc: BaseException) -> str:
    """`Type: message` on one line, for an exception no stage expected (no traceback)."""
    lines = str(exc).strip().splitlines()
    return _short(f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__)


def _timed_out(target: Target, duration_s: float) -> NodeResult:
    return _node(target, "error", f"probe timed out after {target.timeout:g} s",
                 duration_s=duration_s, **_failed(failures.TIMED_OUT))


#: What an interpreter too old for the probe says last, in its own words (CPython's): before
#: 3.7 (Python 2 too) compiling the probe's `from __future__ import annotations`; Python 2
#: reading the bootstrap's `sys.stdin.buffer`, or the probe's UTF-8 source as `python -`.
_TOO_OLD = re.compile(r"SyntaxError: future feature annotations is not defined$"
                      r"|AttributeError: 'file' object has no attribute 'buffer'$"
                      r"|SyntaxError: Non-ASCII character .* but no encoding declared")


def _without_document(
    target: Target, transport: Transport, result: CommandResult, problem: ProbeOutputError
) -> tuple[str, str, str | None]:
    """(status, reason, cause id or None) for a command that printed no probe document: who
    refused (the refusal's id), or why."""
    where = kinds.kind(target.kind).inside(target)
    code = result.returncode
    if code != 0:
        # The transport's own tool (pct, sudo, the host's gatekeeper...) may have refused
        # before the probe ran.
        refused = transport.explain_failure(result)
        if refused is not None:
            return refused.status, refused.reason, refused.cause
        if code == 127:
            return "error", f"{target.python} not found {where}", failures.INTERPRETER_MISSING
        if code == 126:
            return ("error", f"{target.python} cannot be run {where}",
                    failures.INTERPRETER_MISSING)
        if not result.stdout.strip():
            said = last_line(result.stderr)
            if _TOO_OLD.match(said):
                return ("error", f"{target.python} {where} is too old for the probe (it needs "
                        f"Python 3.8 or newer): {said}", failures.INTERPRETER_TOO_OLD)
            return "error", f"probe exited with status {code}: {said or 'no output'}", None
    head = result.stdout.lstrip()[:60].decode("utf-8", "replace").splitlines()
    begins = f" (output begins {head[0]!r})" if head else ""
    return "error", f"{problem}{begins}", None


def node_from_result(
    target: Target, transport: Transport, result: CommandResult, policy: Policy,
    duration_s: float,
) -> NodeResult:
    """Sort one command result into a node: the probe's verdict, or why there is none.

    The probe's document comes first: a probe that judged its node (and exited 1 for "fail")
    keeps its verdict whatever else its stderr holds. The transport's refusals (pct's and
    sudo's error texts) are read only when there is no document.
    """
    timing = {"duration_s": duration_s}
    if result.truncated:
        return _node(target, "error", f"output exceeded {OUTPUT_CAP} bytes", **timing)
    if result.timed_out:
        return _timed_out(target, duration_s)
    if result.signal is not None:
        detail = last_line(result.stderr)
        reason = f"probe killed by signal {result.signal}" + (f": {detail}" if detail else "")
        return _node(target, "error", reason, **timing)
    try:
        output = parse_probe_output(result.stdout)
    except ProbeOutputError as exc:
        status, reason, cause = _without_document(target, transport, result, exc)
        return _node(target, status, reason, **timing, **_failed(cause))
    judged = judge_probe_output(output, policy)
    # How the node was reached is the transport's to say, never the node's (it could lie).
    facts = {**judged.facts, **transport.connection_facts()}
    return _node(target, judged.status, judged.reason, triton=judged.triton,
                 checks=judged.checks, facts=facts, **timing)


async def probe_target(
    target: Target,
    transport: Transport,
    *,
    deep: bool = False,
    policy: Policy = DEFAULT_POLICY,
    admit: Callable[[], contextlib.AbstractAsyncContextManager[object]] | None = None,
    probe: bytes | None = None,
    budget: BudgetFor = NodeBudget,
) -> NodeResult:
    """Run the probe on one node over `transport` and judge it; never raises for a bad node.

    The node's clock (its timeout and `duration_s`) starts once it holds a session on its host
    and then `admit()` (the audit's fleet-wide slot): waiting for either is queueing, which
    only the audit's own deadline bounds.
    """
    limits = budget(target.timeout)
    payload = shipped_probe() if probe is None else probe
    argv = probe_argv(target.python, deep=deep, deadline=limits.probe_deadline)
    if transport.packs_probe():
        # A quarter of the bytes on every node's channel; compressed once for all the nodes.
        argv, payload = packed_launch(argv, payload)
    if target.env:
        # pct (and sshd) replace the environment; `env` sets the node's on the far side.
        if "=" in argv[0]:
            # env would take "/opt/py=3.12/bin/python3" for one more assignment.
            argv = ["/bin/sh", "-c", 'exec "$0" "$@"', *argv]
        argv = ["env", *(f"{key}={value}" for key, value in sorted(target.env.items())), *argv]
    started = time.monotonic()
    try:
        async with transport.session() as run, (admit or contextlib.nullcontext)():
            started = time.monotonic()
            result = await asyncio.wait_for(
                # Bounds what the transport's own timeouts cannot: a stalled channel open.
                run(argv, input=payload, timeout=limits.timeout), limits.outer_bound
            )
    except TransportError as exc:
        return _node(target, exc.kind, str(exc), duration_s=time.monotonic() - started,
                     **_failed(exc.cause))
    except asyncio.TimeoutError:
        return _timed_out(target, time.monotonic() - started)
    return node_from_result(target, transport, result, policy, time.monotonic() - started)


def with_node_timeouts(inventory: Inventory, *, deep: bool) -> Inventory:
    """`inventory` with the budget's default timeout (`budget.node_timeout`: plain or deep)
    on every host that names none, so that `audit --deep` and `probe --deep` follow one
    rule; a guest's own timeout still wins over its host's."""
    default = node_timeout(None, deep=deep)
    if all(host.timeout_given or host.timeout == default for host in inventory.hosts):
        return inventory
    return dataclasses.replace(inventory, hosts=tuple(
        host if host.timeout_given else dataclasses.replace(host, timeout=default)
        for host in inventory.hosts))


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


@dataclass(frozen=True)
class AuditParts:
    """What the scheduler is given besides the inventory; a bench or a test swaps any of them."""

    transports: TransportFactory | None = None
    #: The probe payload fed to each node's Python; None: the shipped probe.
    probe: bytes | None = None
    budget: BudgetFor = NodeBudget


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
        connect_attempts: int | None = None,
        transports: TransportFactory | None = None,
        probe: bytes | None = None,
        budget: BudgetFor = NodeBudget,
        before_probe: BeforeProbe | None = None,
    ) -> None:
        self.deep = deep or policy.deep
        self.inventory = with_node_timeouts(inventory, deep=self.deep)
        self.before_probe = before_probe
        self.limit = list(limit or [])
        self.policy = policy
        self.observer: AuditObserver = observer or NullObserver()
        self.audit_timeout = audit_timeout if audit_timeout is not None else (
            inventory.audit_timeout)
        if transports is None:
            # The factory hands the audit's budget to every transport it makes; a factory
            # given (a bench's) brings its own.
            transports = (TransportFactory(budget=budget) if connect_attempts is None
                          else TransportFactory(connect_attempts=connect_attempts,
                                                budget=budget))
        self.transports = transports
        self.probe = probe
        self.budget = budget
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
        # Host order, then the guest a node is or runs in, the guest before its containers.
        nodes.sort(key=lambda node: (self._host_order.get(node.host, len(self._host_order)),
                                     -1 if node.vmid is None else node.vmid,
                                     kinds.depth(node.kind), node.id))
        return Report(started_at=self.started_at, finished_at=utc_now(), nodes=tuple(nodes),
                      inventory=self.inventory.path, interrupted=self.interrupted)

    async def run(self) -> Report:
        """Audit every selected node; returns the (possibly partial) report, never raises."""
        raise_open_files_limit()
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
            await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), STOP_WAIT)
        closing = [*self._closing, *(transport.close() for transport in self._transports)]
        with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
            await asyncio.wait_for(asyncio.gather(*closing, return_exceptions=True), STOP_WAIT)

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
        transport = self.transports.for_host(host)
        self._transports.append(transport)
        return transport

    async def _audit_host(self, host: HostSpec) -> None:
        if not host_may_match(host, self.limit, self.inventory.groups):
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
        root = kinds.host_target(host)
        if needs_discovery(host):
            self._pending[host.name] = _host_node(host, "error", INTERRUPTED_DISCOVERY,
                                                  failures.DISCOVERY_INTERRUPTED)
        try:
            nodes = await self._nodes_under(root, transport, kinds.Discovery())
        except TransportError as exc:
            self._finish_host(_host_node(host, exc.kind, str(exc), exc.cause))
            return
        except (DiscoveryError, InventoryError) as exc:
            reason = f"container discovery failed: {exc}"
            self._finish_host(_host_node(host, "error", reason, getattr(exc, "cause", None)))
            return
        self._pending.pop(host.name, None)
        if host.probe_host:
            nodes.insert(0, root)
        nodes = [node for node in nodes if self._selected(node)]
        targets = [node for node in nodes if isinstance(node, Target)]
        for target in targets:
            self._pending[target.id] = _node(target, "error", INTERRUPTED,
                                             **_failed(failures.INTERRUPTED))
        self._total += len(nodes)
        self.observer.targets_resolved(self._total)
        for skipped in nodes:
            if isinstance(skipped, SkippedTarget):
                self._finish(_node(skipped, skipped.status, skipped.reason))
        # _probe records its own failures; return_exceptions keeps one from ending the others.
        await asyncio.gather(*(self._probe(target, transport) for target in targets),
                             return_exceptions=True)

    def _lists(self, kind: kinds.NodeKind, parent: Target) -> bool:
        """Whether `kind`'s listing under `parent` runs: it is needed, and the limit may
        select a node only it can bring (`--limit pve1/103/docker:web`, 103 named in the
        inventory, lists nothing)."""
        if not kind.needs_listing(parent):
            return False
        if not self.limit:
            return True
        if kind.id_shape is not None:
            return kind.id_shape.may_select(kind, parent, self.limit, self.inventory.groups)
        return True  # a kind whose ids the limit cannot foresee: list

    async def _nodes_under(
        self, parent: Target, host_transport: Transport, context: kinds.Discovery
    ) -> list[Target | SkippedTarget]:
        """Every node under `parent`, each followed by its own: each kind lists its nodes
        where the parent declares "all", and the guests found are discovered in turn.

        The listings whose failure is the parent's (a Proxmox host's guests) run first, one
        kind after the other, and raise; the others (Docker/Podman inside any node) run
        concurrently with the deeper levels, and one that fails is one node saying why.
        """
        transport = kinds.open_transport(parent, host_transport, self.budget)
        declared = [k for k in kinds.children_kinds(parent) if k.declared(parent) is not None]
        listings: dict[str, Sequence[object]] = {}
        for kind in declared:
            if kind.listing_fails_parent and self._lists(kind, parent):
                listings[kind.name] = await kind.discover(parent, transport, context)

        async def nodes_of(kind: kinds.NodeKind) -> list[Target | SkippedTarget]:
            listing = listings.get(kind.name)
            if listing is None and self._lists(kind, parent):
                try:
                    listing = await kind.discover(parent, transport, context)
                except (DiscoveryError, TransportError) as exc:
                    return kind.listing_failed(parent, exc)
            elif listing is None and kind.needs_listing(parent):
                listing = []  # the limit selects nothing only this listing could bring
            children = kind.expand(parent, listing)
            deeper = iter(await asyncio.gather(
                *(self._nodes_under(child, host_transport, context)
                  for child in children if isinstance(child, Target))))
            nodes: list[Target | SkippedTarget] = []
            for child in children:
                nodes += [child, *(next(deeper) if isinstance(child, Target) else ())]
            return nodes

        groups = await asyncio.gather(*(nodes_of(kind) for kind in declared))
        return [node for group in groups for node in group]

    async def _probe(self, target: Target, host_transport: Transport) -> None:
        transport = self.transports.for_target(target, host_transport)

        @contextlib.asynccontextmanager
        async def fleet_slot() -> AsyncIterator[None]:
            # Taken after the host's session slot: a saturated host holds at most its own
            # max_sessions of the fleet's slots, never all of them.
            async with self._slots:
                self.observer.node_started(target.id)
                yield

        try:
            if self.before_probe is not None:
                # Under a fleet slot too: the repair counts against the same concurrency.
                async with self._slots:
                    await self.before_probe(target, transport)
            node = await probe_target(target, transport, deep=self.deep, policy=self.policy,
                                      admit=fleet_slot, probe=self.probe, budget=self.budget)
        except Exception as exc:  # noqa: BLE001 - one node's surprise must not end the others
            node = _node(target, "error", f"probe failed: {_one_line(exc)}")
        self._finish(node)


#: `AuditRun`'s arguments, which `run_audit` takes as they are.
_RunOptions = ParamSpec("_RunOptions")


def _run_with(make: Callable[_RunOptions, AuditRun]
              ) -> Callable[_RunOptions, Coroutine[Any, Any, Report]]:
    """`run_audit`, taking `make`'s own arguments: typed (mypy) and shown (`help()`) as
    `AuditRun`'s, without writing them out a second time."""

    @functools.wraps(make, assigned=("__module__",))
    async def run_audit(*args: _RunOptions.args, **kwargs: _RunOptions.kwargs) -> Report:
        """Audit the inventory (the arguments: `AuditRun`'s); unreachable or broken nodes are
        results, not exceptions.

        When `audit_timeout` (or the inventory's) passes, or the task is cancelled (Ctrl-C
        under asyncio.run), the report is returned with `interrupted=True` and the unfinished
        nodes as errors. For KeyboardInterrupt outside asyncio's handling, use
        `AuditRun.partial_report()`.
        """
        return await make(*args, **kwargs).run()

    return run_audit


run_audit = _run_with(AuditRun)


def local_node_result(
    *,
    python: str | None = None,
    deep: bool = False,
    timeout: float | None = None,
    env: dict[str, str] | None = None,
    policy: Policy = DEFAULT_POLICY,
    transports: TransportFactory | None = None,
    probe: bytes | None = None,
) -> NodeResult:
    """Probe the machine fleetcheck runs on (`fleetcheck probe`); the node id is its hostname.
    `timeout` None: the budget's default for a plain or a deep probe."""
    name = socket.gethostname()
    timeout = node_timeout(timeout, deep=deep)
    host = HostSpec(name=name, address=None, transport="local", timeout=timeout)
    target = Target(host=host, vmid=None, name=name, python=python or "python3",
                    env=dict(env or {}), labels=(), timeout=timeout)
    transport = (transports or TransportFactory()).for_host(host)
    return asyncio.run(probe_target(target, transport, deep=deep, policy=policy, probe=probe))
