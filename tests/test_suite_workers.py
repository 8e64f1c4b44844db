"""The suite on pytest-xdist workers (tests/conftest.py): its groups, its figures."""

from __future__ import annotations

from types import SimpleNamespace

from tests.conftest import XDIST_GROUPS, pytest_xdist_make_scheduler, xdist_group
from tests.reliability.conftest import Figures, merged_figures


class _Worker:
    """What pytest-xdist's scheduler uses of a worker: its id, the tests it was sent."""

    def __init__(self, name: str) -> None:
        self.gateway = SimpleNamespace(id=name)
        self.sent: list[int] = []
        self.shutting_down = False

    def send_runtest_some(self, indices: list[int]) -> None:
        self.sent.extend(indices)

    def shutdown(self) -> None:
        self.shutting_down = True


def test_a_group_runs_on_one_worker_in_collection_order() -> None:
    """The scheduler the suite runs with (`pytest_xdist_make_scheduler`), driven as
    pytest-xdist's controller drives it: the own-process group goes whole to one worker, in
    collection order; the other tests to whichever worker has room."""
    collection = [
        "tests/audit/test_a.py::test_one", "tests/audit/test_a.py::test_two",
        "tests/bench/test_nodes_fleet.py::test_subreaper",
        "tests/fix/test_fix_fleet.py::test_an_interrupted_apply_still_writes_a_record",
        "tests/fix/test_fix_fleet.py::test_dry_run", "tests/probe/test_p.py::test_p[1]",
        "tests/probe/test_p.py::test_p[2]", "tests/runtimes/test_real_fleet.py::test_audit",
        "tests/runtimes/test_real_reliability.py::test_kills_the_vm",
        "tests/transport/test_t.py::test_t",
    ]
    config = SimpleNamespace(getvalue=lambda name: {"tx": ["popen", "popen"],
                                                    "dist": "loadgroup"}[name],
                             option=SimpleNamespace(loadscopereorder=True))
    scheduler = pytest_xdist_make_scheduler(config, None)  # type: ignore[arg-type]
    workers = [_Worker("gw0"), _Worker("gw1")]
    for worker in workers:
        scheduler.add_node(worker)
        scheduler.add_node_collection(worker, collection)
    scheduler.schedule()
    finished = dict.fromkeys(workers, 0)
    for _ in range(len(collection)):  # each worker finishes a test it holds, gets more
        for worker in workers:
            if finished[worker] < len(worker.sent):
                scheduler.mark_test_complete(worker, worker.sent[finished[worker]])
                finished[worker] += 1
    assert scheduler.tests_finished
    group = [collection.index(nodeid) for nodeid in collection
             if xdist_group(nodeid) == "own-process"]
    holders = [worker for worker in workers if set(group) & set(worker.sent)]
    assert len(holders) == 1
    assert [i for i in holders[0].sent if i in group] == group
    assert sorted(workers[0].sent + workers[1].sent) == list(range(len(collection)))
    assert all(worker.sent for worker in workers)


def test_the_groups_by_node_id() -> None:
    assert xdist_group("tests/runtimes/test_real_fleet.py::test_x[pve1/301]") == "own-process"
    assert xdist_group("tests/fix/test_fix_fleet.py::"
                       "test_an_interrupted_apply_still_writes_a_complete_record") == "own-process"
    assert xdist_group("tests/fix/test_fix_fleet.py::test_dry_run_prints_the_plan") is None
    assert xdist_group("tests/integrations/test_slurm.py::test_a") == "slurm"
    assert xdist_group("tests/integrations/test_slurm_fleet.py::test_a") == "slurm"
    assert xdist_group("tests/test_outbound.py::test_allowed[10%-4-1]") is None
    prefixes = [prefix for group in XDIST_GROUPS.values() for prefix in group]
    assert len(prefixes) == len(set(prefixes))


def test_the_workers_figures_add_up_to_the_runs() -> None:
    """Each worker's reliability figures reach the controller as JSON; merged, they print as
    one process's figures of the same tests would."""
    first, second, whole = Figures(), Figures(), Figures()
    for figures, test in ((first, "a"), (whole, "a")):
        figures.current = test
        with figures.fault("host killed"):
            figures.tried("inventory loader", 3)
        figures.injection("$(id)", ran=False)
        figures.processes(["123 sleep"])
    for figures, test in ((second, "b"), (whole, "b")):
        figures.current = test
        figures.tried("inventory loader", 2)
        figures.secrets_scanned([], artefacts=4)
        figures.measure("peak RSS", "95 MiB")
        figures.processes(["456 python3"])
    second.xfailed.add("b")
    whole.xfailed.add("b")
    merged = merged_figures([first.state(), second.state()])
    assert merged.lines() == whole.lines()
    assert "leftover node processes: 1 (sweeps: 2; 1 more in known bugs (xfail))" in merged.lines()
