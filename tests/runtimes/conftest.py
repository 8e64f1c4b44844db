"""The real-runtime fleet, made once per test run and torn down by PID once this package's
last test has run (package scope: an idle TCG VM and the runtimes' daemons would otherwise
take CPU from the rest of the suite until it ends).

When collection has selected only tests of this package, a thread starts making it as
collection ends (the VM's boot first, the containers beside it) and the `real_fleet` fixture
waits for it. In a run with other tests (the whole suite) it is made when the fixture is first
asked for: made beside them, its processes would share their process group (a test's own
Ctrl-C reached the namespace's holder) and the process trees they measure. Under pytest-xdist
too it is made when the fixture is first asked for, by the one worker that runs every test of
this package (the own-process group of tests/conftest.py). There is one VM boot per run: VM
301's, shared by every test.

Skipped, naming the failed check, only where this machine cannot run it: not root, a missing
program (scripts/test.sh installs them on Debian), no guest kernel, no private mount namespace.
A runtime that is there but fails to start is an error, with its log.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.runtimes.fleet import RealFleet, Unavailable, processes

#: The fifty containers across the runtimes that the scenario's one audit also has, at once,
#: found by its `all` listings: LXC through pve2's `pct list`, Docker through pve1's `docker
#: ps -a`, Podman through pve2's `podman ps -a` (test_real_reliability.py reads them).
FIFTY: dict[str, Any] = {"lxc": list(range(110, 130)),
                         "docker": [f"d{n:02}" for n in range(15)],
                         "podman": [f"p{n:02}" for n in range(15)]}
#: The scenario's probed nodes whose processes are compared before and after its audit.
PROBED_PROCESSES: dict[str, Any] = {"lxc": [101, 103, 104, 105, *FIFTY["lxc"]],
                                    "docker": ["web", *FIFTY["docker"]],
                                    "podman": ["pweb", *FIFTY["podman"]], "vm": 301}

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


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
    #: The whole report (started_at, finished_at...).
    report: dict[str, Any]
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


def build(fleet: RealFleet) -> dict[str, set[str]]:
    """The scenario the tests audit (see test_real_fleet.py's module text), and what runs in
    its probed containers before the audit (the VM's too, once its agent answers)."""
    fleet.start()
    fleet.boot_vm(301)                # the one guest that boots: first, the longest part
    fleet.boot_vm(302, boot=False)    # running, its agent never answers
    fleet.boot_vm(304, boot=False)    # running, no agent in its config
    fleet.start_dockerd()
    # The containers, a few at a time (each runtime's daemon or tool does its part).
    with ThreadPoolExecutor(max_workers=4) as pool:
        jobs = [pool.submit(fleet.lxc, 101), pool.submit(fleet.lxc, 102, running=False),
                pool.submit(fleet.lxc, 103, docker_socket=True)]
        lxc104 = pool.submit(fleet.lxc, 104, podman=True)
        jobs += [pool.submit(fleet.docker_run, "web"),
                 pool.submit(fleet.docker_run, "gone", "exited"),
                 pool.submit(fleet.docker_run, "frozen", "paused"),
                 pool.submit(fleet.podman_run, "pweb"),
                 pool.submit(fleet.podman_run, "pgone", "exited"),
                 pool.submit(fleet.podman_run, "pfrozen", "paused")]
        jobs += [pool.submit(fleet.lxc, vmid) for vmid in FIFTY["lxc"]]
        jobs += [pool.submit(fleet.docker_run, name) for name in FIFTY["docker"]]
        jobs += [pool.submit(fleet.podman_run, name) for name in FIFTY["podman"]]

        def inside_104(name: str, state: str) -> None:
            lxc104.result()
            fleet.podman_run(name, state, inside=104)

        def docker_in_105() -> None:
            fleet.lxc(105, docker=True)
            fleet.inner_dockerd(105)
            fleet.docker_run("iweb", inside=105)
            fleet.docker_run("igone", "exited", inside=105)

        jobs += [pool.submit(docker_in_105)]
        jobs += [lxc104, pool.submit(inside_104, "inner", "running"),
                 pool.submit(inside_104, "inner-gone", "exited")]
        for job in jobs:
            job.result()
    pve1 = fleet.add_host("pve1")
    pve2 = fleet.add_host("pve2")
    for vmid, agent in ((301, 1), (302, 1), (303, 1), (304, None)):
        fleet.vm_config(pve1, vmid, agent=agent)
    pve1.entry = {
        "containers": [101, 102, 109,
                       {"vmid": 103, "oci": {"runtime": "docker",
                                             "containers": ["web", "gone", "frozen", "ghost"]}},
                       {"vmid": 104, "oci": {"runtime": "podman", "containers": "all"}},
                       {"vmid": 105, "oci": {"runtime": "docker", "containers": "all"}}],
        "oci": {"runtime": "docker", "containers": "all"},
        "vms": "all",
    }
    pve2.entry = {"containers": "all", "oci": {"runtime": "podman", "containers": "all"}}
    # While the guest boots: what runs in the containers before the audit.
    containers = {key: value for key, value in PROBED_PROCESSES.items() if key != "vm"}
    before = processes(fleet, **containers)
    fleet.wait_agent(301)
    before.update(processes(fleet, vm=PROBED_PROCESSES["vm"], host=pve1))
    return before


class _Early:
    """The fleet being made in a thread since collection ended (`pytest_collection_finish`)."""

    fleet: RealFleet | None = None
    thread: threading.Thread | None = None
    before: dict[str, set[str]] | None = None
    error: BaseException | None = None

    @classmethod
    def start(cls, fleet: RealFleet) -> None:
        cls.fleet = fleet

        def make() -> None:
            try:
                cls.before = build(fleet)
            except BaseException as exc:  # handed to the fixture, raised there
                cls.error = exc

        cls.thread = threading.Thread(target=make, name="real-fleet", daemon=True)
        cls.thread.start()

    @classmethod
    def finish(cls) -> None:
        """Stop a fleet still being made and tear it down (the run ends without using it)."""
        if cls.fleet is None:
            return
        cls.fleet.cancel.set()
        if cls.thread is not None:
            cls.thread.join(300)
        cls.fleet.close()
        cls.fleet = None


def pytest_collection_finish(session: pytest.Session) -> None:
    config = session.config
    if config.option.collectonly or os.environ.get("PYTEST_XDIST_WORKER"):
        return
    # Only when these are the run's only tests: made beside other tests, its processes share
    # their process group (a test's own Ctrl-C reaches them) and their measured process trees.
    if not session.items or not all(
            Path(str(item.path)).is_relative_to(HERE) for item in session.items):
        return
    factory: pytest.TempPathFactory = config._tmp_path_factory  # type: ignore[attr-defined]
    _Early.start(RealFleet(factory.mktemp("realfleet")))


def pytest_sessionfinish(session: pytest.Session) -> None:
    _Early.finish()


@pytest.fixture(scope="package")
def real_fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealFleet]:
    fleet = _Early.fleet
    try:
        if fleet is not None and _Early.thread is not None:
            _Early.thread.join()
            error, before = _Early.error, _Early.before
        else:
            fleet = RealFleet(tmp_path_factory.mktemp("realfleet"))
            error, before = None, None
            try:
                before = build(fleet)
            except BaseException as exc:
                error = exc
        if isinstance(error, Unavailable):
            pytest.skip(f"real-runtime fleet: {error}")
        if error is not None:
            raise RuntimeError(f"{error}\n{fleet.dump()}") from error
        assert before is not None
        fleet.before = before
        yield fleet
    finally:
        if fleet is not None:
            fleet.close()
        _Early.fleet = None


@pytest.fixture(scope="package")
def scenario(real_fleet: RealFleet) -> Scenario:
    inventory = real_fleet.inventory(real_fleet.root / "inventory.yaml", timeout=240)
    before = real_fleet.before
    code, report, stderr = audit(inventory, timeout=600)
    (real_fleet.root / "report.json").write_text(json.dumps(report, indent=1))
    nodes = {node["id"]: node for node in report.get("nodes", [])}
    return Scenario(real_fleet, inventory, nodes, report, code, stderr, before)
