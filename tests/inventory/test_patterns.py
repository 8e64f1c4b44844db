"""Which runtime listings a --limit needs: none unless the limit may select inside the parent."""

from __future__ import annotations

import pytest

from fleetcheck.inventory_data.patterns import may_select_inside


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
