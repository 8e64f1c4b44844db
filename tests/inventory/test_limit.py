"""--limit: Ansible-like selection over node ids and labels, and patterns that match nothing."""

from __future__ import annotations

import pytest

from fleetcheck.inventory import (
    InventoryError,
    check_limit,
    matches_limit,
    parse_inventory,
    unmatched_patterns,
)

INVENTORY = parse_inventory(
    """\
hosts:
  pve1:
    address: 10.1.2.6
    probe_host: true
    labels: [gpu]
    containers: [101, {vmid: 102, labels: [training]}]
  pve2:
    address: 10.1.2.7
    containers: all
  gw:
    address: 10.1.2.1
    probe_host: true
  pve3:
    enabled: false
    address: 10.1.2.8
    containers: all
groups:
  trainers: [pve1/102, pve2]
  everything: [trainers, gw]
""",
    "inv.yaml",
)

#: (node id, labels) of every node in INVENTORY once pve2's containers are discovered.
NODES = [
    ("pve1", ("gpu",)),
    ("pve1/101", ("gpu",)),
    ("pve1/102", ("gpu", "training")),
    ("pve2/201", ("cpu",)),
    ("pve2/202", ()),
    ("gw", ()),
]


def selected(*patterns: str) -> list[str]:
    return [
        node
        for node, labels in NODES
        if matches_limit(node, labels, list(patterns), groups=INVENTORY.groups)
    ]


@pytest.mark.parametrize(
    ("patterns", "expected"),
    [
        ((), ["pve1", "pve1/101", "pve1/102", "pve2/201", "pve2/202", "gw"]),
        (("pve1",), ["pve1", "pve1/101", "pve1/102"]),
        (("pve1/101",), ["pve1/101"]),
        (("pve1/*",), ["pve1/101", "pve1/102"]),
        (("pve*",), ["pve1", "pve1/101", "pve1/102", "pve2/201", "pve2/202"]),
        (("*/20?",), ["pve2/201", "pve2/202"]),
        (("label:gpu",), ["pve1", "pve1/101", "pve1/102"]),
        (("@training",), ["pve1/102"]),
        (("label:*",), ["pve1", "pve1/101", "pve1/102", "pve2/201"]),
        (("!pve1",), ["pve2/201", "pve2/202", "gw"]),
        (("pve1,gw",), ["pve1", "pve1/101", "pve1/102", "gw"]),
        (("pve1", "gw"), ["pve1", "pve1/101", "pve1/102", "gw"]),
        (("pve*,!label:training",), ["pve1", "pve1/101", "pve2/201", "pve2/202"]),
        (("pve*,&label:gpu",), ["pve1", "pve1/101", "pve1/102"]),
        (("&label:gpu,!pve1/101",), ["pve1", "pve1/102"]),
        (("trainers",), ["pve1/102", "pve2/201", "pve2/202"]),
        (("everything,!pve2",), ["pve1/102", "gw"]),
        (("all",), ["pve1", "pve1/101", "pve1/102", "pve2/201", "pve2/202", "gw"]),
        ((" pve1/101 , gw ",), ["pve1/101", "gw"]),
        (("PVE1",), []),
    ],
    ids=lambda value: ",".join(value) if isinstance(value, tuple) else None,
)
def test_selection(patterns: tuple[str, ...], expected: list[str]) -> None:
    assert selected(*patterns) == expected


def test_a_group_name_without_groups_is_only_a_host_pattern() -> None:
    assert matches_limit("pve1/102", (), ["trainers"]) is False
    assert matches_limit("trainers/5", (), ["trainers"]) is True


def test_check_limit_returns_the_split_patterns() -> None:
    assert check_limit(INVENTORY, ["pve1/101,!gw", "label:gpu"]) == [
        "pve1/101",
        "!gw",
        "label:gpu",
    ]


@pytest.mark.parametrize(
    "pattern",
    ["pve2/999", "pve2/*", "pve*/1*", "all", "*", "&pve1", "!gw", "everything", "@gpu"],
)
def test_patterns_that_may_match_are_accepted(pattern: str) -> None:
    assert check_limit(INVENTORY, [pattern]) == [pattern]


@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        ("pve9", "--limit 'pve9': no host or group matches (did you mean 'pve2'?)"),
        ("zzz", "--limit 'zzz': no host or group matches"),
        (
            "pve3",
            "--limit 'pve3': matches only hosts disabled in the inventory (enabled: false): pve3",
        ),
        (
            "pve1/103",
            "--limit 'pve1/103': no such container in the inventory "
            "(containers: pve1/101, pve1/102)",
        ),
        ("gw/100", "--limit 'gw/100': no such container in the inventory (containers: none)"),
        (
            "pve1/abc",
            "--limit 'pve1/abc': expected HOST/VMID with a numeric VMID or a glob such as pve1/1*,"
            " PARENT/RUNTIME:NAME, or CLUSTER/NAMESPACE/POD",
        ),
        (
            "pve1/docker:x",
            "--limit 'pve1/docker:x': no such Docker/Podman container in the inventory "
            "(listed: none)",
        ),
        ("pve9/101", "--limit 'pve9/101': no host or group matches (did you mean 'pve2'?)"),
        (
            "label:cpu",
            "--limit 'label:cpu': no node has this label (labels in the inventory: gpu, training)",
        ),
        ("", "--limit '': empty pattern"),
        ("pve1,,gw", "--limit '': empty pattern"),
        ("!", "--limit '!': empty pattern"),
        ("@", "--limit '@': empty label"),
    ],
)
def test_patterns_that_match_nothing_are_refused(pattern: str, message: str) -> None:
    with pytest.raises(InventoryError) as info:
        check_limit(INVENTORY, [pattern])
    assert str(info.value) == message


def test_a_label_only_api_discovery_can_bring_is_accepted() -> None:
    inventory = parse_inventory(
        "hosts:\n  pve1:\n    address: x\n    containers: all\n"
        "    api: {url: 'https://x:8006', user: a@pve, token_name: t, token_env: T}\n",
        "inv.yaml",
    )
    assert check_limit(inventory, ["label:prod"]) == ["label:prod"]


def test_a_vms_tags_through_the_api_may_bring_a_label_too() -> None:
    inventory = parse_inventory(
        "hosts:\n  pve1:\n    transport: api\n    vms: all\n"
        "    api: {url: 'https://x:8006', user: a@pve, token_name: t, token_env: T}\n",
        "inv.yaml",
    )
    assert check_limit(inventory, ["label:prod"]) == ["label:prod"]


def test_labels_of_every_declared_node_are_known() -> None:
    inventory = parse_inventory(
        "hosts:\n  pve1:\n    address: x\n    vms: [{vmid: 300, labels: [vm-only]}]\n"
        "    oci: {runtime: docker, containers: [{name: a, labels: [oci-only]}]}\n",
        "inv.yaml",
    )
    assert check_limit(inventory, ["label:vm-only", "label:oci-only"]) == [
        "label:vm-only", "label:oci-only"]
    with pytest.raises(InventoryError) as info:
        check_limit(inventory, ["label:cpu"])
    assert str(info.value) == ("--limit 'label:cpu': no node has this label (labels in the "
                               "inventory: oci-only, vm-only)")


def test_a_group_naming_a_disabled_host_still_selects_its_enabled_members() -> None:
    inventory = parse_inventory(
        "hosts:\n  a: {address: x, probe_host: true}\n"
        "  b: {address: y, probe_host: true, enabled: false}\n"
        "groups:\n  g: [a, b]\n  only-b: [b]\n",
        "inv.yaml",
    )
    assert check_limit(inventory, ["g"]) == ["g"]
    with pytest.raises(InventoryError) as info:
        check_limit(inventory, ["only-b"])
    assert str(info.value) == (
        "--limit 'only-b': group 'only-b' selects nothing ('b': matches only hosts disabled "
        "in the inventory (enabled: false): b)"
    )


def test_unmatched_patterns_after_discovery_catch_a_typo() -> None:
    patterns = ["pve2/2011", "pve1", "!gw", "trainers"]
    assert unmatched_patterns(patterns, NODES, INVENTORY.groups) == ["pve2/2011"]
    assert unmatched_patterns(["pve2/201"], NODES) == []


def test_oci_and_vm_ids_match_and_a_guest_pattern_selects_what_runs_in_it() -> None:
    from fleetcheck.inventory import matches_limit

    def picks(pattern: str) -> list[str]:
        ids = ["pve1", "pve1/101", "pve1/101/docker:trainer", "pve1/docker:infer",
               "pve1/300", "pve1/300/podman:a"]
        return [node for node in ids if matches_limit(node, (), [pattern])]

    assert picks("pve1/101") == ["pve1/101", "pve1/101/docker:trainer"]
    assert picks("pve1/*/docker:*") == ["pve1/101/docker:trainer"]
    assert picks("*/docker:infer") == ["pve1/docker:infer"]
    assert picks("pve1/300/*") == ["pve1/300/podman:a"]
    assert picks("!pve1/101") == ["pve1", "pve1/docker:infer", "pve1/300", "pve1/300/podman:a"]


def test_oci_patterns_are_checked_against_the_listed_containers() -> None:
    from fleetcheck.inventory import check_limit, parse_inventory

    inventory = parse_inventory(
        "hosts:\n  pve1:\n    address: h\n    oci: {runtime: docker, containers: [infer]}\n"
        "    vms: [{vmid: 300, oci: {runtime: podman, containers: all}}]\n", "inv.yaml")
    assert check_limit(inventory, ["pve1/docker:inf*", "pve1/300/podman:anything"])
    with pytest.raises(InventoryError) as info:
        check_limit(inventory, ["pve1/docker:trainer"])
    assert str(info.value) == ("--limit 'pve1/docker:trainer': no such Docker/Podman container "
                               "in the inventory (listed: pve1/docker:infer)")
