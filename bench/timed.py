"""A transport factory that notes when each node's command ran: the gate-latency bench's clock.

It wraps any `TransportFactory` (fleetcheck's own by default) and hands the audit the same
transports, each inside a wrapper that records (node id, start, end) on the monotonic clock
around every command run in a held session: the node's probe time as the audit sees it, from
the moment it holds its slots to the exit status; and (node id, time) when the audit first asks
for a node's session, before its host's connection is open (`asked`): what passes before that
is the CLI's own start (imports, inventory, ssh_config), what passes after it the connection.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator

from fleetcheck.failures import Refusal
from fleetcheck.inventory_data.model import HostSpec, Target
from fleetcheck.transport.factory import TransportFactory
from fleetcheck.transport.interface import CommandResult, RunCommand, Transport

Times = list[tuple[str, float, float]]
Asked = list[tuple[str, float]]


class _Timed(Transport):
    def __init__(self, inner: Transport, node_id: str, times: Times, asked: Asked) -> None:
        self.inner = inner
        self.node_id = node_id
        self.times = times
        self.asked = asked

    async def run(
        self, argv: list[str], *, input: bytes | None = None, timeout: float
    ) -> CommandResult:
        async with self.session() as run:
            return await run(argv, input=input, timeout=timeout)

    @contextlib.asynccontextmanager
    async def session(self) -> AsyncIterator[RunCommand]:
        self.asked.append((self.node_id, time.monotonic()))
        async with self.inner.session() as run:

            async def timed(
                argv: list[str], *, input: bytes | None = None, timeout: float
            ) -> CommandResult:
                started = time.monotonic()
                try:
                    return await run(argv, input=input, timeout=timeout)
                finally:
                    self.times.append((self.node_id, started, time.monotonic()))

            yield timed

    def explain_failure(self, result: CommandResult) -> Refusal | None:
        return self.inner.explain_failure(result)

    def packs_probe(self) -> bool:
        return self.inner.packs_probe()

    async def close(self) -> None:
        await self.inner.close()


class TimedTransports(TransportFactory):
    """`inner`'s transports, each node's commands timed into `times`."""

    def __init__(self, inner: TransportFactory | None = None) -> None:
        super().__init__()
        self.inner = inner or TransportFactory()
        self.times: Times = []
        self.asked: Asked = []

    def for_host(self, host: HostSpec) -> Transport:
        return self.inner.for_host(host)

    def for_target(self, target: Target, host_transport: Transport) -> Transport:
        return _Timed(self.inner.for_target(target, host_transport), target.id, self.times,
                      self.asked)
