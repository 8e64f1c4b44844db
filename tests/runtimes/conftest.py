"""The real-runtime fleet, started once per test run (session scope) and torn down by PID.

Skipped, naming the failed check, only where this machine cannot run it: not root, a missing
program (scripts/test.sh installs them on Debian), no guest kernel, no private mount namespace.
A runtime that is there but fails to start is an error, with its log.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.runtimes.fleet import RealFleet, Unavailable, processes

#: The scenario's probed nodes whose processes are compared before and after its audit.
PROBED_PROCESSES: dict[str, Any] = {"lxc": [101, 103, 104], "docker": ["web"],
                                    "podman": ["pweb"], "vm": 301}

ROOT = Path(__file__).resolve().parents[2]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests marked kills_the_vm run last: the session's one VM is shared."""
    items.sort(key=lambda item: item.get_closest_marker("kills_the_vm") is not None)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "kills_the_vm: ends the real fleet's shared VM")


@dataclass
class Scenario:
    """The fleet and one audit of all of it (the report's nodes by id)."""

    fleet: RealFleet
    inventory: Path
    nodes: dict[str, dict[str, Any]]
    code: int
    stderr: str
    #: What ran in the probed nodes before the audit (tests/runtimes/fleet.py `processes`).
    before: dict[str, set[str]]


def audit(inventory: Path, *args: str, timeout: float = 240) -> tuple[int, dict[str, Any], str]:
    done = subprocess.run([sys.executable, "-m", "fleetcheck", "audit", str(inventory),
                           "--format", "json", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout)
    try:
        report = json.loads(done.stdout)
    except json.JSONDecodeError:
        report = {"nodes": [], "raw": done.stdout[-2000:]}
    return done.returncode, report, done.stderr


def build(fleet: RealFleet) -> None:
    """The scenario the tests audit (see test_real_fleet.py's module text)."""
    fleet.start()
    fleet.boot_vm(301)                # boots while the rest is made (the longest part)
    fleet.boot_vm(302, boot=False)    # running, its agent never answers
    fleet.boot_vm(304, boot=False)    # running, no agent in its config
    fleet.lxc(101)
    fleet.lxc(102, running=False)
    fleet.lxc(103, docker_socket=True)
    fleet.lxc(104, podman=True)
    fleet.docker_run("web")
    fleet.docker_run("gone", "exited")
    fleet.docker_run("frozen", "paused")
    fleet.podman_run("pweb")
    fleet.podman_run("pgone", "exited")
    fleet.podman_run("pfrozen", "paused")
    fleet.podman_run("inner", inside=104)
    fleet.podman_run("inner-gone", "exited", inside=104)
    pve1 = fleet.add_host("pve1")
    pve2 = fleet.add_host("pve2")
    for vmid, agent in ((301, 1), (302, 1), (303, 1), (304, None)):
        fleet.vm_config(pve1, vmid, agent=agent)
    pve1.entry = {
        "containers": [101, 102, 109,
                       {"vmid": 103, "oci": {"runtime": "docker",
                                             "containers": ["web", "gone", "frozen", "ghost"]}},
                       {"vmid": 104, "oci": {"runtime": "podman", "containers": "all"}}],
        "oci": {"runtime": "docker", "containers": "all"},
        "vms": "all",
    }
    pve2.entry = {"containers": "all", "oci": {"runtime": "podman", "containers": "all"}}
    fleet.wait_agent(301)


@pytest.fixture(scope="session")
def real_fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealFleet]:
    fleet = RealFleet(tmp_path_factory.mktemp("realfleet"))
    try:
        try:
            build(fleet)
        except Unavailable as exc:
            pytest.skip(f"real-runtime fleet: {exc}")
        except Exception as exc:
            raise RuntimeError(f"{exc}\n{fleet.dump()}") from exc
        yield fleet
    finally:
        fleet.close()


@pytest.fixture(scope="session")
def scenario(real_fleet: RealFleet) -> Scenario:
    inventory = real_fleet.inventory(real_fleet.root / "inventory.yaml", timeout=90)
    before = processes(real_fleet, **PROBED_PROCESSES, host=real_fleet.hosts["pve1"])
    code, report, stderr = audit(inventory)
    (real_fleet.root / "report.json").write_text(json.dumps(report, indent=1))
    nodes = {node["id"]: node for node in report.get("nodes", [])}
    return Scenario(real_fleet, inventory, nodes, code, stderr, before)
