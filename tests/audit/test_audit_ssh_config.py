"""A fleet reached through an ssh_config alone (no SSH value in the inventory), real sshd.

The ssh_config has one `Host NAME` block per node, as sites keep them (HostName, Port, User,
IdentityFile, IdentitiesOnly, UserKnownHostsFile, StrictHostKeyChecking): every node is
probed with those values, each failure names the address, port, user and known_hosts file the
file gave, and each node's facts say how it was reached and what SSH negotiated.
"""

from __future__ import annotations

import asyncio
import subprocess

import pytest
import yaml

from fleetcheck.audit import run_audit
from fleetcheck.inventory import load_inventory
from fleetcheck.report.content import Report
from fleetcheck.transport import libssh2
from fleetcheck.transport.ssh_settings import key_exchanges
from tests.audit.support import GPU_OK, rows
from tests.fleet import Fleet
from tests.fleet.kit import SSHD

pytestmark = [pytest.mark.sshd, pytest.mark.timeout(180)]


def audit(fleet: Fleet) -> Report:
    return asyncio.run(run_audit(load_inventory(str(fleet.inventory))))


def server_kex(fleet: Fleet, name: str) -> list[str]:
    """The key exchanges the host's own sshd offers (`sshd -T`, its effective config)."""
    config = fleet.hosts[name].dir / "sshd" / "sshd_config"
    shown = subprocess.run([SSHD, "-T", "-f", str(config)], check=True, capture_output=True,
                           text=True).stdout
    line = next(line for line in shown.splitlines() if line.startswith("kexalgorithms "))
    return line.split(" ", 1)[1].split(",")


def test_a_fleet_in_an_ssh_config_alone_is_probed_whole(fleet: Fleet) -> None:
    names = [f"node{i:03d}" for i in range(1, 7)]
    for name in names:
        fleet.add_host(name, containers="listed")
        fleet.add_container(name, 101, "healthy")
    config = fleet.write_ssh_config()
    inventory = fleet.write_inventory(timeout=60, ssh_config=config)
    assert "known_hosts" not in inventory.read_text()
    assert "identity_file" not in inventory.read_text()

    report = audit(fleet)

    assert rows(report) == [(f"{name}/101", *GPU_OK) for name in names]
    # The first key exchange fleetcheck offers that the server has (RFC 4253 7.1), through
    # libssh2 (`ssh.client: auto`: this OpenSSH offers no post-quantum exchange asyncssh has).
    lib = libssh2.library()
    assert lib is not None
    offered = [alg for alg in key_exchanges() if alg in lib.supported[libssh2.METHOD_KEX]]
    kex = next(alg for alg in offered if alg in server_kex(fleet, "node001"))
    for node in report.nodes:
        assert node.facts["ssh"] == {
            "address": "127.0.0.1", "port": fleet.hosts[node.host].port, "user": "root",
            "known_hosts": str(fleet.known_hosts), "kex": kex, "client": "libssh2",
            "cipher": "aes128-gcm@openssh.com", "mac": "aes128-gcm@openssh.com"}
    assert all(fleet.accepted_logins(name) == 1 for name in names)


def test_failures_name_what_the_ssh_config_gave(fleet: Fleet) -> None:
    fleet.add_host("good", containers="listed")
    fleet.add_container("good", 101, "healthy")
    down = fleet.add_host("down", refuse=True)
    new = fleet.add_host("new", known="absent")
    config = fleet.write_ssh_config()
    # A block for a name the inventory does not list changes nothing.
    config.write_text(config.read_text() + "Host other\n    Port 1\n")
    fleet.write_inventory(timeout=60, ssh_config=config)

    assert rows(audit(fleet)) == [
        ("good/101", *GPU_OK),
        ("down", "unreachable", f"connection refused by down (127.0.0.1:{down.port})"),
        ("new", "unreachable",
         f"host key for new (127.0.0.1:{new.port}) is not in {fleet.known_hosts}"),
    ]


def test_the_inventory_overrides_only_what_it_names(fleet: Fleet) -> None:
    fleet.add_host("pve1", containers="listed")
    fleet.add_container("pve1", 101, "healthy")
    config = fleet.write_ssh_config()
    # The file says another user; the inventory's user wins, the rest stays the file's.
    config.write_text(config.read_text().replace("User root", "User nobody-here"))
    inventory = fleet.write_inventory(timeout=60, ssh_config=config)
    assert rows(audit(fleet))[0][1] == "unreachable"
    inventory.write_text(inventory.read_text().replace(
        "config_file:", "user: root\n    config_file:"))
    report = audit(fleet)
    assert rows(report) == [("pve1/101", *GPU_OK)]
    assert report.nodes[0].facts["ssh"]["port"] == fleet.hosts["pve1"].port


def test_proxy_jump_from_the_ssh_config_resolves_the_hop_there_too(fleet: Fleet) -> None:
    jump = fleet.add_host("bastion")
    fleet.add_host("inner", containers="listed")
    fleet.add_container("inner", 101, "healthy")
    config = fleet.write_ssh_config()
    # The hop is a name: its address, port and key come from its own Host block.
    config.write_text(config.read_text() + "Host inner\n    ProxyJump bastion\n")
    data = fleet.inventory_data(timeout=60, ssh_config=config)
    del data["hosts"]["bastion"]  # a hop only, not audited
    fleet.inventory = fleet.root / "inventory.yaml"
    fleet.inventory.write_text(yaml.safe_dump(data))

    report = audit(fleet)

    assert rows(report) == [("inner/101", *GPU_OK)]
    assert report.nodes[0].facts["ssh"]["proxy_jump"] == "bastion"
    assert (fleet.accepted_logins("bastion"), fleet.accepted_logins("inner")) == (1, 1)
    assert jump.port != fleet.hosts["inner"].port
