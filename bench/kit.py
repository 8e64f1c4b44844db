"""Adapter: the tests' loopback fleet kit (tests/fleet) -> the BenchFleet the contenders use.

Containers are listed in the inventory (not `containers: all`), because Ansible and the ssh
loop are given the same static list: nobody pays for discovery.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.fleet import BenchFleet, BenchHost


def build_bench_fleet(hosts: int, per_host: int, root: Path, *, timeout: float,
                      **defaults: Any) -> BenchFleet:
    """`hosts` sshd with `per_host` healthy containers each (VMIDs 101...), inventory written;
    `defaults` extends the inventory's `defaults:` (e.g. concurrency, ssh.max_sessions)."""
    from tests.fleet import Fleet  # the kit: tests/fleet/kit.py

    fleet = Fleet(root)
    try:
        for index in range(hosts):
            name = f"pve{index + 1}"
            fleet.add_host(name, containers="listed")
            for vmid in range(101, 101 + per_host):
                fleet.add_container(name, vmid, "healthy")
        inventory = fleet.write_inventory(timeout=timeout, **defaults)
    except BaseException:
        fleet.close()
        raise
    first = next(iter(fleet.hosts.values()))
    return BenchFleet(
        hosts=tuple(BenchHost(h.name, h.port, tuple(sorted(h.vmids)))
                    for h in fleet.hosts.values()),
        user="root",
        identity_file=str(fleet.client_key),
        known_hosts=str(fleet.known_hosts),
        inventory_path=str(inventory),
        pct_command=(str(first.dir / "bin" / "pct"),),
        pct_commands={h.name: (str(h.dir / "bin" / "pct"),) for h in fleet.hosts.values()},
        env={"PATH": f"{first.dir / 'bin'}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin"
                     ":/sbin:/bin", "FLEETCHECK_FLEET_MARK": fleet.mark},
        server_pids=lambda: {h.process.pid for h in fleet.hosts.values() if h.process},
        closer=fleet.close,
    )
