"""What the audit reports when the limit excludes a failing host, a stage raises, or a probe that
judged its node exits 1 with pct-like text on stderr (real sshd fleet, local transport)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import yaml

from fleetcheck.audit import run_audit
from fleetcheck.inventory_data.model import (
    ALL_CONTAINERS,
    ApiOptions,
    ContainerSpec,
    HostSpec,
    Inventory,
)
from tests.audit.support import GPU_OK, audit, rows
from tests.fleet import Fleet
from tests.nodeenv import make_node

pytestmark = [pytest.mark.sshd, pytest.mark.timeout(120)]


def test_excluded_and_not_intersected_hosts_are_not_reported_when_down(fleet: Fleet) -> None:
    for name in ("pve1", "pve2"):
        fleet.add_host(name)
        fleet.add_container(name, 101, "healthy")
    fleet.add_host("pve3", refuse=True)
    fleet.write_inventory(timeout=30)

    # pve3 is down, but the limit removes it: it must not make the audit "unverified".
    assert rows(audit(fleet, limit=["pve*,!pve3"])) == [
        ("pve1/101", *GPU_OK), ("pve2/101", *GPU_OK)]
    assert rows(audit(fleet, limit=["&pve1"])) == [("pve1/101", *GPU_OK)]
    # `!` through a group, and `&` with a label no node of pve2 or pve3 can carry.
    data = yaml.safe_load(fleet.inventory.read_text())  # type: ignore[union-attr]
    data["groups"] = {"broken": ["pve3"]}
    data["hosts"]["pve1"]["labels"] = ["rack1"]
    fleet.inventory.write_text(yaml.safe_dump(data))  # type: ignore[union-attr]
    assert rows(audit(fleet, limit=["!broken"])) == [("pve1/101", *GPU_OK), ("pve2/101", *GPU_OK)]
    assert rows(audit(fleet, limit=["&@rack1", "!pve2"])) == [("pve1/101", *GPU_OK)]
    # pve2 was connected to only when the limit could select something on it.
    assert fleet.accepted_logins("pve2") == 2
    # Still reported when the limit can select something on it.
    assert [row[:2] for row in rows(audit(fleet, limit=["pve3,!pve3/101"]))] == [
        ("pve3", "unreachable")]


def test_an_unexpected_exception_in_discovery_is_the_hosts_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLEETCHECK_TEST_TOKEN", "secret-token-value")
    node = make_node(tmp_path / "node")
    # A port out of range: urlsplit raises ValueError, which no discovery stage expects (the
    # inventory loader may refuse such a URL; a bug elsewhere could raise the same way).
    api = ApiOptions(url="https://127.0.0.1:99999", user="root@pam", token_name="audit",
                     token_env="FLEETCHECK_TEST_TOKEN")
    broken = HostSpec(name="pve1", address=None, transport="local", containers=ALL_CONTAINERS,
                      api=api)
    here = HostSpec(name="here", address=None, transport="local", probe_host=True,
                    python=node.python, env=node.env, timeout=30)

    report = asyncio.run(run_audit(Inventory(path="inline", hosts=(broken, here))))

    assert rows(report) == [
        ("pve1", "error", "container discovery failed: ValueError: Port out of range 0-65535"),
        ("here", *GPU_OK),
    ]
    assert report.interrupted is False


def test_an_unexpected_exception_in_one_probe_leaves_its_siblings_alone(tmp_path: Path) -> None:
    node = make_node(tmp_path / "node")
    # A NUL in an argument: the inventory refuses it, so only a bug could bring one this far.
    host = HostSpec(name="here", address=None, transport="local", probe_host=True,
                    python=node.python, env=node.env, timeout=30,
                    containers=(ContainerSpec(vmid=101, env={"BAD": "a\0b"}),))
    report = asyncio.run(run_audit(Inventory(path="inline", hosts=(host,))))

    assert rows(report) == [
        ("here", *GPU_OK),
        ("here/101", "error", "probe failed: ValueError: embedded null byte"),
    ]
    assert report.interrupted is False


def test_a_probe_document_wins_over_pct_texts_on_stderr(fleet: Fleet) -> None:
    fleet.add_host("pve1", containers="listed")
    # Python prints the bad PYTHONWARNINGS value on stderr: a pct-like "does not exist".
    noise = "Configuration file 'nodes/pve1/lxc/102.conf' does not exist"
    fleet.add_container("pve1", 102, "no-compiler", env={"PYTHONWARNINGS": noise})
    fleet.write_inventory(timeout=30)

    (node,) = audit(fleet).nodes

    assert (node.status, node.triton.verdict, node.triton.cause) == (
        "fail", "cpu-fallback", "no_c_compiler")
