"""Fleet sources end to end: a node range of bare-metal GPU servers over real OpenSSH."""

from __future__ import annotations

import asyncio

import pytest
import yaml

from fleetcheck.audit import run_audit
from fleetcheck.inventory import check_limit, load_inventory
from tests.audit.support import GPU_OK, rows
from tests.fleet import Fleet
from tests.nodeenv import make_node

pytestmark = [pytest.mark.sshd, pytest.mark.timeout(180)]


def test_a_sixteen_node_range_of_gpu_servers_is_sixteen_nodes(fleet: Fleet) -> None:
    # One real sshd plays the sixteen servers: ssh_config maps every gpuNN to it, as a site's
    # ssh_config maps its names to addresses. Eight servers have a compiler, eight lack one.
    server = fleet.add_host("servers", containers="listed")
    healthy = make_node(fleet.root / "node-ok", compiler=True)
    broken = make_node(fleet.root / "node-nocc", compiler=False)
    ssh_config = fleet.root / "ssh_config"
    ssh_config.write_text(f"Host gpu*\n  HostName 127.0.0.1\n  Port {server.port}\n")
    data = {
        "defaults": {
            "probe_host": True,
            "concurrency": 8,
            "timeout": 60,
            "ssh": {"user": "root", "identity_file": str(fleet.client_key),
                    "known_hosts": str(fleet.known_hosts), "config_file": str(ssh_config)},
        },
        "hosts": {
            "gpu[01-08]": {"python": healthy.python, "env": healthy.env, "labels": ["rack-a"]},
            "gpu[09-16]": {"python": broken.python, "env": broken.env, "labels": ["rack-b"]},
        },
    }
    path = fleet.root / "inventory.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    inventory = load_inventory(str(path))

    report = asyncio.run(run_audit(inventory))

    names = [f"gpu{n:02d}" for n in range(1, 17)]
    assert [(n.id, n.kind, n.parent, n.host) for n in report.nodes] == [
        (name, "host", None, name) for name in names]
    assert rows(report)[:8] == [(name, *GPU_OK) for name in names[:8]]
    assert rows(report)[8:] == [
        (name, "fail", "Triton cpu-fallback: no C compiler: CC unset, no gcc or clang on PATH")
        for name in names[8:]]
    assert {n.facts["gpu_count"] for n in report.nodes} == {1}

    limit = ["gpu[01-03,07],gpu1[5-6]"]
    check_limit(inventory, limit)
    limited = asyncio.run(run_audit(inventory, limit=limit))
    assert [n.id for n in limited.nodes] == ["gpu01", "gpu02", "gpu03", "gpu07", "gpu15",
                                             "gpu16"]
    assert fleet.accepted_logins("servers") == 16 + 6
