"""run_audit over the loopback fleet: every kind of node ends as data, in inventory order."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from fleetcheck.audit import AuditRun
from fleetcheck.inventory import InventoryError, load_inventory
from fleetcheck.report.content import Report
from tests.audit.support import GPU_OK, audit, audit_until_deadline, rows
from tests.fleet import Fleet

#: A watchdog for a hang, not a time limit: thirty full probes are ~30 s of CPU, and a 2-core
#: machine shared at a load of 10 gives this test a fifth of it.
pytestmark = [pytest.mark.sshd, pytest.mark.timeout(300)]


def test_every_kind_of_node_ends_as_data(fleet: Fleet) -> None:
    fleet.add_host("pve1")
    for vmid, kind in [(101, "healthy"), (103, "stopped"), (104, "no-python"),
                       (105, "garbage"), (106, "crash")]:
        fleet.add_container("pve1", vmid, kind)
    down = fleet.add_host("down", refuse=True)
    fleet.write_inventory(timeout=30)

    report = audit(fleet)

    healthy = report.nodes[0]
    assert (healthy.id, healthy.vmid, healthy.name, healthy.host) == (
        "pve1/101", 101, "ct101-healthy", "pve1")
    assert (healthy.status, healthy.reason) == GPU_OK
    assert (healthy.facts["gpu_count"], healthy.triton.verdict) == (1, "gpu")
    assert rows(report)[1:] == [
        ("pve1/103", "skipped", "container stopped"),
        ("pve1/104", "error", "python3 not found in container"),
        ("pve1/105", "error", "probe output is not one JSON document: Expecting value "
                              "(output begins 'Welcome to container shell!')"),
        ("pve1/106", "error", "probe exited with status 3: MemoryError"),
        ("down", "unreachable", f"connection refused by down (127.0.0.1:{down.port})"),
    ]
    assert report.inventory == str(fleet.inventory)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", report.started_at)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", report.finished_at)
    assert report.interrupted is False
    assert fleet.accepted_logins("pve1") == 1


def test_gpu_container_without_compiler_falls_back_to_cpu(fleet: Fleet) -> None:
    fleet.add_host("pve1")
    fleet.add_container("pve1", 101, "healthy")
    fleet.add_container("pve1", 102, "no-compiler")
    fleet.write_inventory(timeout=30)

    report = audit(fleet)

    healthy, broken = report.nodes
    assert (healthy.status, healthy.triton.verdict) == ("ok", "gpu")
    assert (broken.status, broken.triton.verdict, broken.triton.cause) == (
        "fail", "cpu-fallback", "no_c_compiler")
    assert broken.reason == (
        "Triton cpu-fallback: no C compiler: CC unset, no gcc or clang on PATH")
    assert broken.check("no_c_compiler").status == "fail"  # type: ignore[union-attr]


def test_listed_containers_stopped_unknown_and_probe_host(fleet: Fleet) -> None:
    fleet.add_host("pve1", containers="listed", probe_host=True)
    fleet.add_container("pve1", 101, "healthy")
    fleet.add_container("pve1", 102, "stopped")
    data = fleet.inventory_data(timeout=30)
    data["hosts"]["pve1"]["containers"].append({"vmid": 777})
    import yaml

    Path(fleet.root / "inventory.yaml").write_text(yaml.safe_dump(data))
    fleet.inventory = fleet.root / "inventory.yaml"

    report = audit(fleet)

    assert [node.id for node in report.nodes] == ["pve1", "pve1/101", "pve1/102", "pve1/777"]
    # The host itself: the test machine's python3, no GPU there.
    assert rows(report)[0] == ("pve1", "warn", "no NVIDIA GPU on this node")
    assert rows(report)[1:] == [
        ("pve1/101", *GPU_OK),
        ("pve1/102", "skipped", "container stopped"),
        ("pve1/777", "error", "container 777 does not exist on pve1"),
    ]


def test_sudo_without_password_rule_is_a_clear_error(fleet: Fleet) -> None:
    fleet.add_host("pve1", sudo=True, sudo_password=True)
    fleet.add_container("pve1", 101, "healthy")
    fleet.add_host("pve2", containers="listed", sudo=True, sudo_password=True)
    fleet.add_container("pve2", 101, "healthy")
    fleet.write_inventory(timeout=30)

    text = ("sudo on {} asks for a password (sudo -n): allow the login to run pct without "
            "a password (NOPASSWD)")
    assert rows(audit(fleet)) == [
        ("pve1", "error", "container discovery failed: " + text.format("pve1")),
        ("pve2/101", "error", text.format("pve2")),
    ]


def test_node_env_and_an_interpreter_path_with_an_equals_sign(fleet: Fleet) -> None:
    fleet.add_host("pve1", containers="listed")
    cdir = fleet.add_container("pve1", 101, "healthy")
    odd = cdir / "opt" / "py=3.12" / "bin"
    odd.mkdir(parents=True)
    (odd / "python3").symlink_to((cdir / "bin" / "python3").resolve())
    data = fleet.inventory_data(timeout=30)
    data["hosts"]["pve1"]["containers"] = [
        {"vmid": 101, "python": str(odd / "python3"), "env": {"NOTE": "a b; $(false)"}}]
    import yaml

    fleet.inventory = fleet.root / "inventory.yaml"
    fleet.inventory.write_text(yaml.safe_dump(data))

    assert rows(audit(fleet)) == [("pve1/101", *GPU_OK)]


def test_hanging_probe_is_bounded_and_killed_on_the_host(fleet: Fleet) -> None:
    fleet.add_host("pve1", containers="listed")
    fleet.add_container("pve1", 101, "hang", timeout=2)
    fleet.add_container("pve1", 102, "healthy")
    fleet.write_inventory(timeout=30)

    report = audit(fleet)

    assert rows(report)[0] == ("pve1/101", "error", "probe timed out after 2 s")
    assert rows(report)[1] == ("pve1/102", *GPU_OK)
    assert fleet.pgrep(re.escape(f"hang-{fleet.mark}")) == []


def test_host_key_problems_make_the_host_unreachable(fleet: Fleet) -> None:
    evil = fleet.add_host("evil", known="wrong")
    fleet.add_container("evil", 101)
    new = fleet.add_host("new", known="absent")
    fleet.add_container("new", 101)
    fleet.write_inventory(timeout=30)

    assert rows(audit(fleet)) == [
        ("evil", "unreachable",
         f"host key for evil (127.0.0.1:{evil.port}) does not match known_hosts "
         f"{fleet.known_hosts} — possible man-in-the-middle"),
        ("new", "unreachable",
         f"host key for new (127.0.0.1:{new.port}) is not in {fleet.known_hosts}"),
    ]


def test_thirty_containers_on_one_host_use_one_connection(fleet: Fleet) -> None:
    fleet.add_host("pve1")
    for vmid in range(101, 131):
        fleet.add_container("pve1", vmid, "healthy")
    fleet.write_inventory(timeout=60)

    report = audit(fleet)

    assert [node.id for node in report.nodes] == [f"pve1/{v}" for v in range(101, 131)]
    assert {(node.status, node.reason) for node in report.nodes} == {GPU_OK}
    assert fleet.accepted_logins("pve1") == 1
    assert "open failed" not in fleet.hosts["pve1"].log.read_text()


def test_audit_deadline_returns_every_node_and_stops_the_probes(fleet: Fleet) -> None:
    fleet.add_host("pve1", containers="listed")
    fleet.add_container("pve1", 101, "healthy")
    for vmid in (102, 103):
        fleet.add_container("pve1", vmid, "hang", timeout=60)
    fleet.add_host("pve2")
    fleet.add_container("pve2", 101, "healthy")
    fleet.write_inventory(timeout=60)

    # The deadline passes once the healthy probes are done, however long a busy machine made
    # them take (the audit's clock is moved on past it); the hung probes end it either way.
    report = audit_until_deadline(fleet, {"pve1/101", "pve2/101"})

    assert report.interrupted is True
    assert [node.id for node in report.nodes] == ["pve1/101", "pve1/102", "pve1/103", "pve2/101"]
    assert rows(report)[1:3] == [
        ("pve1/102", "error", "interrupted before the probe finished"),
        ("pve1/103", "error", "interrupted before the probe finished"),
    ]
    assert rows(report)[0] == ("pve1/101", *GPU_OK)
    assert rows(report)[3] == ("pve2/101", *GPU_OK)
    # The hung probes were stopped on the host when the audit ended, not 60 s later.
    assert fleet.wait_no_leftovers(20) == []


def test_cancelled_audit_returns_the_partial_report(fleet: Fleet) -> None:
    fleet.add_host("pve1", containers="listed")
    fleet.add_container("pve1", 101, "hang", timeout=60)
    fleet.write_inventory(timeout=60)
    run = AuditRun(load_inventory(str(fleet.inventory)))

    async def main() -> Report:
        task = asyncio.ensure_future(run.run())
        for _ in range(200):  # bounded: until the probe is running
            if "pve1/101" in run._pending:
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.5)
        task.cancel()
        return await task

    report = asyncio.run(main())
    assert report.interrupted is True
    assert rows(report) == [("pve1/101", "error", "interrupted before the probe finished")]
    assert rows(run.partial_report()) == rows(report)
    assert fleet.wait_no_leftovers(20) == []


def test_limit_selects_nodes(fleet: Fleet) -> None:
    fleet.add_host("pve1")
    fleet.add_container("pve1", 101, "healthy")
    fleet.add_container("pve1", 102, "stopped")
    fleet.add_host("pve2")
    fleet.add_container("pve2", 101, "healthy")
    fleet.write_inventory(timeout=30)

    fleet.add_host("pve3")
    fleet.add_container("pve3", 101, "healthy")
    fleet.write_inventory(timeout=30)

    report = audit(fleet, limit=["pve1/102,pve2"])

    assert rows(report) == [("pve1/102", "skipped", "container stopped"), ("pve2/101", *GPU_OK)]
    # No node of pve3 can be selected: it is not even connected to.
    assert fleet.accepted_logins("pve3") == 0


def test_malformed_inventory_is_an_inventory_error(tmp_path: Path) -> None:
    path = tmp_path / "inventory.yaml"
    path.write_text("hosts:\n  pve1:\n    address: 10.0.0.1\n    containers: [abc]\n")
    with pytest.raises(InventoryError) as caught:
        load_inventory(str(path))
    assert str(caught.value).startswith(f"{path}:4: ")
