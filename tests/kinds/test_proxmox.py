"""Which guest listings a --limit needs: none for the guests the inventory already names."""

from __future__ import annotations

import pytest

from fleetcheck.inventory import HostSpec, parse_inventory
from fleetcheck.kinds.proxmox import may_select_guests

INVENTORY = """
hosts:
  pve1:
    address: 10.0.0.1
    containers: [101, {vmid: 103, oci: {runtime: docker, containers: all}}]
    vms: all
    oci: {runtime: podman, containers: all}
  pve2:
    address: 10.0.0.2
    containers: all
"""


@pytest.fixture(scope="module")
def hosts() -> dict[str, HostSpec]:
    return {host.name: host for host in parse_inventory(INVENTORY, "inv.yaml").hosts}


@pytest.mark.parametrize(("limit", "guests"), [
    (["pve1"], True), (["all"], True), (["@gpu"], True), (["pve1/4*"], True),
    (["pve1/301"], True), (["pve1/podman:web"], False), (["pve1/103/docker:web"], False),
    (["pve1/101"], False), (["pve2/101"], False), (["pve1/101", "pve1/7"], True),
    (["pve1/101", "!pve1/7"], False), ([], True),
])
def test_a_guest_listing_only_when_the_limit_may_need_one(
        hosts: dict[str, HostSpec], limit: list[str], guests: bool) -> None:
    assert may_select_guests(hosts["pve1"], limit) is guests
