"""Node ranges: ClusterShell's grammar in inventory keys, addresses, --limit and groups."""

from __future__ import annotations

import pytest

from fleetcheck.inventory import InventoryError, check_limit, matches_limit, parse_inventory
from fleetcheck.inventory.limit import split_patterns
from fleetcheck.inventory_data.ranges import (
    RangeError,
    expand_nodes,
    expand_pattern,
    fold_nodes,
    has_range,
    matches_name,
    split_outside_brackets,
)

SIXTEEN = [f"gpu{n:02d}" for n in range(1, 17)]


def test_expand_and_fold_are_clustershells_node_sets() -> None:
    assert expand_nodes("gpu[01-03,07]") == ["gpu01", "gpu02", "gpu03", "gpu07"]
    assert expand_nodes("n[1-9/4],m1") == ["m1", "n1", "n5", "n9"]
    assert expand_nodes("rack[1-2]-gpu[1-2]") == [
        "rack1-gpu1", "rack1-gpu2", "rack2-gpu1", "rack2-gpu2"]
    assert fold_nodes(["gpu03", "gpu01", "gpu02", "gpu07", "cpu1"]) == "cpu1,gpu[01-03,07]"
    assert fold_nodes(SIXTEEN) == "gpu[01-16]"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("gpu[3-1]", "'gpu[3-1]': bad range: \"invalid values in range : \"3-1\"\""),
        ("gpu[", "'gpu[': missing bracket: \"gpu[\""),
        ("n[1-200000]", "'n[1-200000]': 200000 names, more than 100000"),
    ],
)
def test_a_bad_node_set_is_one_line(text: str, message: str) -> None:
    with pytest.raises(RangeError) as info:
        expand_nodes(text)
    assert str(info.value) == message


def test_only_digit_brackets_are_ranges_other_brackets_stay_classes() -> None:
    assert has_range("gpu[01-16]") and has_range("pve[1-3]/1[01-20]")
    assert not has_range("pve[a-c]") and not has_range("pve[!0-9]") and not has_range("pve*")
    assert expand_pattern("gpu[01-02]*") == ["gpu01*", "gpu02*"]
    assert expand_pattern("pve[a-c][1-2]") == ["pve[a-c]1", "pve[a-c]2"]
    # A one-digit class and a range mean the same set ...
    assert [n for n in ("pve1", "pve2", "pve3", "pve4") if matches_name(n, "pve[1-3]")] == [
        "pve1", "pve2", "pve3"]
    # ... a character class of letters keeps its fnmatch meaning ...
    assert [n for n in ("pvea", "pveb", "pve1") if matches_name(n, "pve[a-b]")] == ["pvea", "pveb"]
    assert [n for n in ("pvea", "pve1") if matches_name(n, "pve[!0-9]")] == ["pvea"]
    # ... and `[12]`, once "1 or 2", is now the number 12 (the documented change).
    assert [n for n in ("pve1", "pve2", "pve12") if matches_name(n, "pve[12]")] == ["pve12"]
    assert matches_name("gpu007", "gpu[001-016]") and not matches_name("gpu7", "gpu[001-016]")


def test_commas_and_slashes_inside_a_range_belong_to_it() -> None:
    assert split_outside_brackets("gpu[01-03,07],!gpu02", ",") == ["gpu[01-03,07]", "!gpu02"]
    assert split_outside_brackets("n[1-9/2]/10[1-3]", "/") == ["n[1-9/2]", "10[1-3]"]
    assert split_patterns(["gpu[01-03,07],cpu1", "!gpu02"]) == [
        "gpu[01-03,07]", "cpu1", "!gpu02"]


RANGE_INVENTORY = """\
defaults:
  probe_host: true
hosts:
  gpu[01-16]:
    labels: [a100]
  pve[1-3]:
    probe_host: false
    address: 10.1.2.[6-8]
    containers: all
groups:
  first-rack: ['gpu[01-08]']
"""


def test_a_range_key_is_one_host_per_name_with_the_same_settings() -> None:
    inventory = parse_inventory(RANGE_INVENTORY, "inv.yaml")
    names = [host.name for host in inventory.hosts]
    assert names == [*SIXTEEN, "pve1", "pve2", "pve3"]
    gpus = inventory.hosts[:16]
    # The name is the address (DNS or an ssh_config Host), as ssh and Ansible take it.
    assert [host.address for host in gpus] == SIXTEEN
    assert {(h.probe_host, h.labels, h.containers) for h in gpus} == {(True, ("a100",), ())}
    assert [(h.address, h.probe_host, h.containers) for h in inventory.hosts[16:]] == [
        ("10.1.2.6", False, "all"), ("10.1.2.7", False, "all"), ("10.1.2.8", False, "all")]
    assert all(h.origin == "inv.yaml:4" for h in gpus)
    assert inventory.groups == {"first-rack": ("gpu[01-08]",)}


def selected(inventory_text: str, *patterns: str) -> list[str]:
    inventory = parse_inventory(inventory_text, "inv.yaml")
    check_limit(inventory, list(patterns))
    nodes = [(h.name, h.labels) for h in inventory.hosts if h.probe_host]
    nodes += [(f"pve{n}/{vmid}", ()) for n in (1, 2, 3) for vmid in (101, 110, 120, 121)]
    return [node for node, labels in nodes
            if matches_limit(node, labels, list(patterns), inventory.groups)]


@pytest.mark.parametrize(
    ("patterns", "expected"),
    [
        (("gpu[01-03,07]",), ["gpu01", "gpu02", "gpu03", "gpu07"]),
        (("gpu[01-16],!gpu[02-16]",), ["gpu01"]),
        (("gpu[01-04]", "&gpu[03-09]"), ["gpu03", "gpu04"]),
        (("first-rack,!gpu0[2-8]",), ["gpu01"]),
        (("pve[1-3]/1[01-20]",), ["pve1/101", "pve1/110", "pve1/120",
                                  "pve2/101", "pve2/110", "pve2/120",
                                  "pve3/101", "pve3/110", "pve3/120"]),
        (("pve[2-3]/12?",), ["pve2/120", "pve2/121", "pve3/120", "pve3/121"]),
        (("gpu1[5-6],label:a100,&gpu1*",), [f"gpu{n}" for n in range(10, 17)]),
    ],
    ids=lambda value: ",".join(value) if isinstance(value, tuple) else None,
)
def test_limit_takes_ranges_with_fleetchecks_own_syntax_around_them(
    patterns: tuple[str, ...], expected: list[str]
) -> None:
    assert selected(RANGE_INVENTORY, *patterns) == expected


@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        ("gpu[17-20]", "--limit 'gpu[17-20]': no host or group matches"),
        ("gpu[3-1]", "--limit 'gpu[3-1]': range [3-1]: invalid values in range : \"3-1\""),
        ("pve[1-3]/1[01-0]", "--limit 'pve[1-3]/1[01-0]': range [01-0]: padding length mismatch"),
    ],
)
def test_a_range_limit_that_selects_nothing_or_does_not_parse_is_refused(
    pattern: str, message: str
) -> None:
    inventory = parse_inventory(RANGE_INVENTORY, "inv.yaml")
    with pytest.raises(InventoryError) as info:
        check_limit(inventory, [pattern])
    assert str(info.value).startswith(message)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("hosts:\n  gpu[3-1]: {probe_host: true}\n",
         "inv.yaml:2: hosts.gpu[3-1]: bad node range: 'gpu[3-1]': bad range: \"invalid values "
         "in range : \"3-1\"\""),
        ("hosts:\n  gpu[1-3]:\n    probe_host: true\n    address: 10.0.0.[1-2]\n",
         "inv.yaml:4: hosts.gpu[1-3].address: a range of 2 addresses for 3 hosts (they pair "
         "up in order)"),
        ("hosts:\n  gpu[1-3]: {probe_host: true}\n  gpu2: {probe_host: true}\n",
         "inv.yaml:3: hosts.gpu2: duplicate host 'gpu2' (also in gpu[1-3] at line 2)"),
        ("hosts:\n  gpu[1-2]: {probe_host: true, ssh: {port: x}}\n",
         "inv.yaml:2: hosts.gpu[1-2].ssh.port: must be an integer, got 'x'"),
        ("hosts:\n  gpu[1-2]:\n",
         "inv.yaml:2: hosts.gpu[1-2]: nothing to probe: set containers, vms, oci or "
         "probe_host: true (or defaults.probe_host: true)"),
    ],
)
def test_range_key_mistakes_name_the_key_as_written(text: str, message: str) -> None:
    with pytest.raises(InventoryError) as info:
        parse_inventory(text, "inv.yaml")
    assert str(info.value) == message


def test_plain_servers_are_a_short_inventory() -> None:
    inventory = parse_inventory("defaults: {probe_host: true}\nhosts:\n  gpu[01-16]:\n",
                                "inv.yaml")
    assert [(h.name, h.address, h.probe_host) for h in inventory.hosts] == [
        (name, name, True) for name in SIXTEEN]
