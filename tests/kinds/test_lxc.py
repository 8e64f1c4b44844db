"""The LXC container kind: `pct list`, with `sudo -n` for a login that is not root."""

from __future__ import annotations

from fleetcheck.kinds.lxc import pct_list_argv
from tests.inventory.sample import PVE1, PVE2


def test_pct_list_needs_sudo_for_non_root_logins() -> None:
    assert pct_list_argv(PVE1) == ["pct", "list"]
    assert pct_list_argv(PVE2) == ["sudo", "-n", "pct", "list"]
