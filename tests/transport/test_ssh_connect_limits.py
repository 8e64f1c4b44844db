"""How fleetcheck starts its SSH connections: how many at once, and to whom.

- At most PER_SERVER_CONNECT_ATTEMPTS (8) handshakes to one SSH server at once (sshd's
  MaxStartups drops connections beyond 10), at most DEFAULT_CONNECT_ATTEMPTS fleet-wide: many
  hosts come up in one wave (the gate's start), one server is never flooded (the real-sshd
  side of this is `test_many_connections_at_once_stay_under_max_startups`).
"""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from fleetcheck.inventory_data.model import HostSpec, SshOptions
from fleetcheck.transport.ssh import (
    DEFAULT_CONNECT_ATTEMPTS,
    PER_SERVER_CONNECT_ATTEMPTS,
    ConnectLimiter,
    SshTransport,
)

pytestmark = pytest.mark.timeout(60)


async def _peaks(limiter: ConnectLimiter, servers: list[str]) -> tuple[Counter[str], int]:
    """Hold one slot per entry of `servers` (a few loop turns each): peak in flight per server
    and overall."""
    now: Counter[str] = Counter()
    peak: Counter[str] = Counter()
    total = {"now": 0, "peak": 0}

    async def attempt(server: str) -> None:
        async with limiter.slot((server,)):
            now[server] += 1
            total["now"] += 1
            peak[server] = max(peak[server], now[server])
            total["peak"] = max(total["peak"], total["now"])
            await asyncio.sleep(0.01)
            now[server] -= 1
            total["now"] -= 1

    await asyncio.wait_for(asyncio.gather(*(attempt(s) for s in servers)), 20)
    return peak, total["peak"]


def test_one_server_gets_at_most_its_own_bound() -> None:
    peak, overall = asyncio.run(_peaks(ConnectLimiter(), ["pve1"] * 30))
    assert peak["pve1"] == PER_SERVER_CONNECT_ATTEMPTS == overall


def test_many_servers_come_up_in_one_wave() -> None:
    servers = [f"pve{i}" for i in range(20) for _ in range(2)]
    peak, overall = asyncio.run(_peaks(ConnectLimiter(), servers))
    assert set(peak.values()) == {2}
    assert overall == 40 <= DEFAULT_CONNECT_ATTEMPTS


def test_the_fleet_wide_bound_holds_across_servers() -> None:
    servers = [f"pve{i}" for i in range(10) for _ in range(5)]
    peak, overall = asyncio.run(_peaks(ConnectLimiter(fleet_wide=12), servers))
    assert overall == 12
    assert max(peak.values()) <= 5


def test_the_per_server_bound_never_exceeds_the_fleet_wide_one() -> None:
    limiter = ConnectLimiter(fleet_wide=3)
    assert (limiter.fleet_wide, limiter.per_server) == (3, 3)
    peak, overall = asyncio.run(_peaks(limiter, ["pve1"] * 6))
    assert peak["pve1"] == overall == 3


def _host(name: str, address: str, **ssh: object) -> SshTransport:
    return SshTransport(HostSpec(name=name, address=address, ssh=SshOptions(**ssh)))  # type: ignore[arg-type]


def test_the_server_counted_is_the_sshd_the_attempt_logs_in_to() -> None:
    assert _host("a", "10.0.0.1").server_key() == ("direct", "10.0.0.1", 22)
    assert _host("a", "10.0.0.1", port=2222).server_key() == ("direct", "10.0.0.1", 2222)
    assert (_host("a", "10.0.0.1").server_key()
            != _host("b", "10.0.0.2").server_key())
    # Behind one bastion, every attempt logs in to the bastion first: one bound for them all.
    behind = {_host(f"n{i}", f"10.0.1.{i}", proxy_jump="ops@bastion:2200,inner").server_key()
              for i in range(5)}
    assert behind == {("jump", "ops@bastion:2200")}
