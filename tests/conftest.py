"""Shared fixtures: the loopback fleet (real sshd per host, `pct` stand-in, containers)."""

from __future__ import annotations

import json
import os
import shutil
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

from tests.fleet import Fleet


def pytest_configure(config: pytest.Config) -> None:
    # A run started as a background job of a non-interactive shell inherits SIGINT ignored, and
    # Python then installs no KeyboardInterrupt handler: the tests that press Ctrl-C (os.kill
    # of their own process, as a terminal would) would wait for an interrupt that never comes.
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.hookimpl(trylast=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    # The pytest-xdist workers of one run share the fake nodes' builds (tests/nodeenv.py
    # share_builds: the stub libraries, Triton's backends, the releases' trees; made by the
    # first worker that needs one, not by each), in the run's own base folder (each worker's
    # is a folder of it).
    if os.environ.get("PYTEST_XDIST_WORKER"):
        from tests.nodeenv import share_builds

        factory: pytest.TempPathFactory = session.config._tmp_path_factory  # type: ignore[attr-defined]
        share_builds(factory.getbasetemp().parent / "builds")


#: pytest-xdist's groups: the tests whose node id starts with one of a group's prefixes run on
#: one worker, in collection order (`--dist loadgroup` in pyproject.toml, the scheduler below);
#: every other test goes to whichever worker is free.
#: - own-process: the tests that share one process's state. The real-runtime fleet is made once
#:   per run (session scope) by the worker that first asks for it, and its namespace holder,
#:   daemons and VM are that worker's children; a Ctrl-C a test presses on its own process, or a
#:   measurement of its process tree and of the orphans it adopts, must not meet them (tests
#:   marked `own_process`). In one worker they run as in a run without workers: tests/bench and
#:   tests/fix first, then tests/runtimes.
#: - a module whose module-scoped fixture is a costly real thing (a Slurm cluster, a Chromium)
#:   runs in a group, so it is made once per run. The two Slurm modules share one group: their
#:   tests mostly wait on slurmctld and slurmd (38 s of CPU in 121 s), and as two groups they
#:   held, with the own-process group, three of the four workers for the run's first 50 s
#:   while the machine's second core idled; as one, two workers run the CPU-bound tests
#:   throughout (docs/testing.md). Each module's cluster is torn down before the next is made.
#: - offline-install: the two tests of tests/integrations/test_install.py that read its
#:   module-scoped `offline_install` (a fresh venv, pip from the wheelhouse: 11 s of CPU). Spread
#:   over two workers, each made its own; in one group it is made once per run.
XDIST_GROUPS = {
    "own-process": ("tests/bench/test_bench_helpers.py::", "tests/bench/test_nodes_fleet.py::",
                    "tests/fix/test_fix_fleet.py::test_an_interrupted_apply_",
                    "tests/fix/test_fix_fleet.py::test_nothing_is_applied_after_an_interrupted_",
                    "tests/runtimes/"),
    "slurm": ("tests/integrations/test_slurm.py::", "tests/integrations/test_slurm_fleet.py::"),
    "browser": ("tests/render/test_browser.py::",),
    "offline-install": (
        "tests/integrations/test_install.py::test_offline_install_from_a_wheelhouse_",
        "tests/integrations/test_install.py::test_every_subcommand_prints_no_python_warning_"),
}
#: The fixtures that make a test need what `scripts/test.sh --quick` leaves out (the markers;
#: a fixture's own fixtures count: tests/runtimes' `scenario` asks for `real_fleet`).
FIXTURE_MARKERS = {"fleet": "sshd", "real_fleet": "runtimes"}
#: Costly module-scoped fixtures and the group that must hold every test asking for one: spread
#: over workers, each worker would make its own.
FIXTURE_GROUPS = {"offline_install": "offline-install"}
#: Where tests run fleetcheck or the probe as child processes (the CLI; the probe on fake
#: nodes): marked `subprocess` (a folder ends in "/"), but for the modules of IN_PROCESS.
SUBPROCESS = ("tests/test_cli.py", "tests/probe/")
IN_PROCESS = ("tests/probe/parts/", "tests/probe/test_build.py", "tests/probe/test_results.py",
              "tests/probe/test_framework_reports.py")


def xdist_group(nodeid: str) -> str | None:
    """The pytest-xdist group of a test (XDIST_GROUPS), None for a test of no group."""
    for group, prefixes in XDIST_GROUPS.items():
        if nodeid.startswith(prefixes):
            return group
    return None


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadgroup` by XDIST_GROUPS: a group is one unit of work, any other test its own.

    pytest-xdist's own loadgroup reads `xdist_group` marks through a suffix it writes into the
    node ids on the workers, which pytest 9.2 no longer takes (pytest-xdist issue 1386: the
    tests are then spread as if unmarked). The controller sees only node ids, so the groups
    are named by them.
    """
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class GroupsByNodeId(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return xdist_group(nodeid) or nodeid

    return GroupsByNodeId(config, log)


#: The reliability figures of each pytest-xdist worker (tests/reliability/conftest.py), which
#: the controller prints once for the whole run.
_WORKER_FIGURES: list[dict[str, Any]] = []


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    from tests.reliability.conftest import FIGURES_KEY

    state = getattr(node, "workeroutput", {}).get(FIGURES_KEY)
    if state:
        _WORKER_FIGURES.append(json.loads(state))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _WORKER_FIGURES:
        return  # a run without workers: tests/reliability/conftest.py printed its own
    from tests.reliability.conftest import merged_figures, print_figures

    print_figures(terminalreporter, merged_figures(_WORKER_FIGURES))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    root = Path(str(config.rootpath))
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        for fixture, marker in FIXTURE_MARKERS.items():
            if fixture in names and item.get_closest_marker(marker) is None:
                item.add_marker(marker)
        path = Path(str(item.path)).as_posix().removeprefix(f"{root.as_posix()}/")
        if path.startswith(SUBPROCESS) and not path.startswith(IN_PROCESS):
            item.add_marker("subprocess")
        for fixture, group in FIXTURE_GROUPS.items():
            if fixture in names and xdist_group(item.nodeid) != group:
                raise pytest.UsageError(
                    f"{item.nodeid} asks for {fixture}, but XDIST_GROUPS[{group!r}] "
                    "(tests/conftest.py) does not hold it: its worker would make its own")
        shares_the_process = (item.get_closest_marker("runtimes") is not None
                              or item.get_closest_marker("own_process") is not None)
        if shares_the_process and xdist_group(item.nodeid) != "own-process":
            raise pytest.UsageError(
                f"{item.nodeid} signals or measures its own process or uses the real fleet, "
                "but XDIST_GROUPS['own-process'] (tests/conftest.py) does not hold it: with "
                "several workers it would run beside the fleet's processes")


# Property tests explore a fixed sequence of examples: a CI run never fails on a draw that the
# run before it did not make (fresh failures are found by running with --hypothesis-seed).
settings.register_profile("fleetcheck", derandomize=True, deadline=None, database=None)
settings.load_profile("fleetcheck")

SSHD_MISSING = not (os.path.exists("/usr/sbin/sshd") and shutil.which("ssh-keygen"))


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[Fleet]:
    """A fresh, empty fleet under tmp_path; add hosts and containers, then write_inventory().

    At teardown every sshd is stopped, and the test fails if any probe process outlived it.
    """
    if SSHD_MISSING:
        pytest.skip("needs OpenSSH sshd and ssh-keygen (apt-get install openssh-server)")
    kit = Fleet(tmp_path / "fleet")
    try:
        yield kit
    finally:
        leftovers = kit.close()
    assert leftovers == [], f"processes left running on the test hosts: {leftovers}"
