"""budget.py: one rule for a node's timeout (plain, deep, given), and the probe's own default
deadline equal to the budget's."""

from __future__ import annotations

import asyncio

import pytest

from fleetcheck.audit import probe_target, with_node_timeouts
from fleetcheck.budget import (
    DEFAULT_DEEP_NODE_TIMEOUT,
    DEFAULT_NODE_TIMEOUT,
    NodeBudget,
    connect_wait,
    node_timeout,
)
from fleetcheck.inventory import parse_inventory
from fleetcheck.inventory.graph import static_targets
from fleetcheck.inventory_data.model import HostSpec, Target
from fleetcheck.probe.parts.main import parse_args
from fleetcheck.transport.interface import CommandResult, Transport


def test_node_timeout_given_wins_else_the_plain_or_deep_default() -> None:
    assert node_timeout(None, deep=False) == DEFAULT_NODE_TIMEOUT
    assert node_timeout(None, deep=True) == DEFAULT_DEEP_NODE_TIMEOUT
    assert node_timeout(42.0, deep=True) == 42.0


@pytest.mark.parametrize("deep", [False, True])
def test_the_probes_own_default_deadline_is_the_budgets(deep: bool) -> None:
    # The probe imports nothing from fleetcheck: its default is written in the part, and
    # this pins it to what the budget gives a node without a timeout.
    _, deadline, _ = parse_args(["--deep"] if deep else [])
    assert deadline == NodeBudget(node_timeout(None, deep=deep)).probe_deadline


def test_connect_wait_is_above_the_connect_timeout() -> None:
    assert connect_wait(10.0) > 10.0


class Recording(Transport):
    """Records what the scheduler asks of a transport; the command prints nothing."""

    def __init__(self) -> None:
        self.calls: list[tuple[list[str], float]] = []

    async def run(self, argv: list[str], *, input: bytes | None = None,
                  timeout: float) -> CommandResult:
        self.calls.append((argv, timeout))
        return CommandResult(1, b"", b"nothing here")


INVENTORY = """\
hosts:
  plain: {transport: local, containers: [100, {vmid: 101, timeout: 30}]}
  slow: {transport: local, timeout: 90}
"""


@pytest.mark.parametrize(("deep", "timeouts"), [
    (False, {"plain": 60.0, "plain/100": 60.0, "plain/101": 30.0, "slow": 90.0}),
    (True, {"plain": 180.0, "plain/100": 180.0, "plain/101": 30.0, "slow": 90.0}),
])
def test_audit_deep_follows_the_same_rule_as_probe_deep(deep: bool,
                                                         timeouts: dict[str, float]) -> None:
    # A host that names no timeout gets the budget's default, plain or deep (as `probe
    # --deep` does); a timeout the inventory names, the host's or a guest's, is kept.
    inventory = with_node_timeouts(parse_inventory(INVENTORY, "inv.yaml"), deep=deep)
    targets = [t for host in inventory.hosts for t in static_targets(host)]
    assert {t.id: t.timeout for t in targets} == timeouts


@pytest.mark.parametrize(("timeout", "deadline"), [(60.0, "55"), (180.0, "175"), (90.0, "85")])
def test_the_probe_is_given_the_budgets_deadline(timeout: float, deadline: str) -> None:
    host = HostSpec(name="n1", address=None, transport="local", timeout=timeout)
    target = Target(host=host, vmid=None, name="n1", python="python3", env={}, labels=(),
                    timeout=timeout)
    transport = Recording()
    asyncio.run(probe_target(target, transport, deep=True))
    [(argv, asked)] = transport.calls
    assert (asked, argv[argv.index("--deadline") + 1]) == (timeout, deadline)
