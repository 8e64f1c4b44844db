"""Which listings a --limit needs: none for what the inventory already names."""

from __future__ import annotations

import pytest

from fleetcheck.inventory import HostSpec, may_select_guests, may_select_inside, parse_inventory

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


@pytest.mark.parametrize(("parent", "runtime", "limit", "listing"), [
    ("pve1", "podman", ["pve1/podman:web"], True),
    ("pve1", "podman", ["pve1/103/docker:web"], False),
    ("pve1/103", "docker", ["pve1/103/docker:web"], True),
    ("pve1/103", "docker", ["pve1/103"], True),
    ("pve1/103", "docker", ["pve1/103/*"], True),
    ("pve1/103", "docker", ["pve1/104/docker:web"], False),
    ("pve1/103", "docker", ["pve1/103/podman:web"], False),
    ("pve1/103", "docker", ["pve1/301"], False),
    ("pve1/103", "docker", ["pve1"], True),
    ("pve1/103", "docker", ["pve2"], False),
    ("pve1/103", "docker", ["@training"], True),
])
def test_a_runtime_listing_only_when_the_limit_may_select_inside(
        parent: str, runtime: str, limit: list[str], listing: bool) -> None:
    assert may_select_inside(parent, runtime, limit) is listing
