"""The expansion of a host into targets and skipped nodes, before or after discovery."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetcheck.inventory import (
    DiscoveredContainer,
    InventoryError,
    SkippedTarget,
    Target,
    parse_pct_list,
    targets_for_host,
)
from tests.inventory.sample import HERE, PVE1, PVE2


def test_all_containers_from_discovery(fixtures_dir: Path) -> None:
    discovered = parse_pct_list((fixtures_dir / "pct_list.txt").read_text())
    nodes = targets_for_host(PVE1, discovered)
    env = {"LANG": "C.UTF-8", "CUDA_HOME": "/usr/local/cuda"}
    assert nodes == [
        Target(PVE1, None, "pve1", "/usr/bin/python3", env, ("fleet", "gpu"), 60.0),
        Target(PVE1, 101, "gpu-worker-1", "/usr/bin/python3", env, ("fleet", "gpu"), 60.0),
        Target(PVE1, 102, "gpu-worker-2", "/usr/bin/python3", env, ("fleet", "gpu"), 60.0),
        SkippedTarget(
            PVE1, 103, "ci-runner", "container stopped, locked: backup", ("fleet", "gpu")
        ),
        SkippedTarget(PVE1, 9000, "debian-13-tmpl", "container stopped", ("fleet", "gpu")),
    ]
    assert [n.id for n in nodes] == ["pve1", "pve1/101", "pve1/102", "pve1/103", "pve1/9000"]


def test_api_discovery_results_skip_templates_and_add_tags_as_labels() -> None:
    discovered = [
        DiscoveredContainer(9000, "stopped", "tmpl", template=True),
        DiscoveredContainer(101, "running", "gpu-worker-1", lock="backup", tags=("gpu", "prod")),
        DiscoveredContainer(104, "unknown", "offline-ct"),
    ]
    nodes = targets_for_host(PVE1, discovered)
    assert [(n.id, type(n).__name__, n.labels) for n in nodes] == [
        ("pve1", "Target", ("fleet", "gpu")),
        ("pve1/101", "Target", ("fleet", "gpu", "prod")),
        ("pve1/104", "SkippedTarget", ("fleet", "gpu")),
        ("pve1/9000", "SkippedTarget", ("fleet", "gpu")),
    ]
    assert [n.reason for n in nodes if isinstance(n, SkippedTarget)] == [
        "container unknown",
        "template",
    ]


def test_a_host_with_containers_all_needs_discovery() -> None:
    with pytest.raises(InventoryError) as info:
        targets_for_host(PVE1, None)
    assert str(info.value) == "inv.yaml:6: containers: all needs discovery before targets"


def test_listed_containers_inherit_defaults_then_host_then_container() -> None:
    nodes = targets_for_host(PVE2, None)
    assert nodes == [
        Target(PVE2, 200, "pve2/200", "python3", {"LANG": "C.UTF-8"}, ("fleet",), 90.0),
        Target(
            PVE2,
            201,
            "trainer",
            "/root/venv/bin/python3",
            {"LANG": "en_US.UTF-8", "CC": "gcc-12"},
            ("fleet", "training", "gpu"),
            120.0,
        ),
    ]


def test_listed_containers_take_names_and_tags_from_discovery_but_are_never_skipped() -> None:
    discovered = [
        DiscoveredContainer(200, "stopped", "db", tags=("prod",)),
        DiscoveredContainer(201, "running", "gpu-box"),
        DiscoveredContainer(202, "running", "not-listed"),
    ]
    nodes = targets_for_host(PVE2, discovered)
    assert [(n.id, n.name, n.labels, type(n).__name__) for n in nodes] == [
        ("pve2/200", "db", ("fleet", "prod"), "Target"),
        ("pve2/201", "trainer", ("fleet", "training", "gpu"), "Target"),
    ]


def test_the_local_machine_is_one_target() -> None:
    assert targets_for_host(HERE, None) == [
        Target(HERE, None, "here", "python3", {"LANG": "C.UTF-8"}, ("fleet",), 60.0)
    ]
