"""The kinds' table: its first line is the root, and a node given without a kind is the
table's answer wherever it is built (the inventory's targets, a report's nodes)."""

from __future__ import annotations

from fleetcheck import kinds, kindtable
from fleetcheck.inventory_data.model import HostSpec, SkippedTarget, Target
from fleetcheck.report.content import NodeResult


def test_the_first_line_is_the_one_kind_that_runs_in_no_other() -> None:
    assert [each.name for each in kinds.all_kinds() if not each.runs_in] == [
        kindtable.ROOT_KIND]
    assert kinds.root().name == next(iter(kindtable.KINDS))


def test_a_vmid_without_a_kind_is_a_guest_of_the_root() -> None:
    assert kinds.runs_on_root(kindtable.GUEST_BEFORE_KINDS)


def test_a_node_without_a_kind_is_the_tables_answer_wherever_it_is_built() -> None:
    host = HostSpec(name="pve1", address="192.0.2.1")
    built = [Target(host, None, "pve1", "python3", {}, (), 60.0),
             Target(host, 101, "ct", "python3", {}, (), 60.0),
             SkippedTarget(host, 102, "off", "container stopped")]
    read = [NodeResult(id="pve1", host="pve1", vmid=None, name="pve1", status="ok", reason=""),
            NodeResult(id="pve1/101", host="pve1", vmid=101, name="ct", status="ok",
                       reason="")]
    expected = [kindtable.default_kind(None), kindtable.default_kind(101)]
    assert expected == ["host", "lxc"]
    assert [node.kind for node in built] == [*expected, expected[1]]
    assert [node.kind for node in read] == expected
