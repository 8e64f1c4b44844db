"""The bench's bare-metal fleet and its pdsh/clush contenders, against the real tools."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from bench import contenders, measure
from bench.contenders import expand_nodeset, split_clush, split_prefixed
from bench.measure import Pin, cpus_text, parse_cpus, run_measured
from bench.nodes import nodeset

# It measures this process's tree and the orphans it adopts, makes it a child subreaper and
# presses Ctrl-C on it (tests/conftest.py: on one worker, before the real fleet).
pytestmark = pytest.mark.own_process


def test_nodeset_folds_and_expands_back() -> None:
    names = ["node0001", "node0002", "node0003", "node0007", "node0010", "node0011"]
    folded = nodeset(names)
    assert folded == "node[0001-0003,0007,0010-0011]"
    assert expand_nodeset(folded) == names
    assert expand_nodeset("node0042") == ["node0042"]
    with pytest.raises(ValueError):
        expand_nodeset("node[1-2],other[3]")


def test_split_prefixed_gathers_interleaved_lines() -> None:
    text = "node0001: {\"a\":\nnode0002: {}\nnode0001: 1}\n"
    assert split_prefixed(text) == {"node0001": '{"a":\n1}', "node0002": "{}"}


def test_split_clush_gives_each_node_of_a_gathered_block_its_text() -> None:
    text = ("---------------\nnode[0001-0002] (2)\n---------------\nsame\n"
            "---------------\nnode0003\n---------------\nother\n")
    assert split_clush(text) == {"node0001": "same\n", "node0002": "same\n",
                                 "node0003": "other\n"}
    with pytest.raises(ValueError):
        split_clush("---------------\nnode[0001-0002] (3)\n---------------\nx\n")


def test_cpu_lists_and_the_pin_split() -> None:
    assert parse_cpus("0-1,4") == {0, 1, 4}
    assert cpus_text({0, 1, 4, 5, 6}) == "0-1,4-6"
    with pytest.raises(ValueError, match="overlap"):
        Pin.parse("0-1:1")
    with pytest.raises(ValueError, match="AUDITOR_CPUS:FLEET_CPUS"):
        Pin.parse("0-1")
    with pytest.raises(ValueError, match="not a CPU list"):
        Pin.parse("a:1")
    assert Pin.parse("").describe().startswith("shared")


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two cores to split")
def test_run_measured_puts_auditor_and_fleet_on_their_cores() -> None:
    first, second = sorted(os.sched_getaffinity(0))[:2]
    show = [sys.executable, "-c", "import os; print(sorted(os.sched_getaffinity(0)))"]
    measure.set_pin(Pin.parse(f"{first}:{second}"))
    try:
        auditor = run_measured(show).stdout.decode().strip()
        fleet = run_measured(show, role="fleet").stdout.decode().strip()
        with measure.fleet_cores():
            inside = sorted(os.sched_getaffinity(0))
    finally:
        measure.set_pin(Pin())
    assert (auditor, fleet, inside) == (f"[{first}]", f"[{second}]", [second])
    assert len(os.sched_getaffinity(0)) >= 2  # given back after the block


@pytest.mark.skipif(not (shutil.which("pdsh") and shutil.which("clush")),
                    reason="pdsh and clush come with bench/setup.sh and scripts/test.sh")
def test_every_contender_probes_every_node_of_a_real_fleet(tmp_path: Path) -> None:
    from bench import run

    measure.become_subreaper()
    fleet = run.build_fleet(3, tmp_path, "nodes")
    try:
        config = Path(fleet.ssh_config).read_text()
        assert config.count("Host node") == 3 and "UserKnownHostsFile" in config
        probe = run.trivial_probe(fleet, run.real_probe(tmp_path), tmp_path)
        ctx = contenders.Context(fleet, probe, tmp_path, 120)
        for name in ("floor", "fleetcheck", "pdsh", "pdsh-64-matched", "clush",
                     "clush-matched"):
            outcome = contenders.CONTENDERS[name](ctx)
            assert (name, outcome.ok, outcome.total) == (name, 3, 3), \
                outcome.measurement.stderr.decode(errors="replace")[-2000:]
        # A node whose reply is not the probe's JSON is not counted: break one node's python3.
        python = Path(shutil.which("python3", path=fleet.node_envs["node0002"]["PATH"]) or "")
        assert python.is_symlink() and "images" in str(python)
        python.unlink()
        python.write_text("#!/bin/sh\necho 'not json'\n")
        python.chmod(0o755)
        for name in ("pdsh", "clush"):
            assert contenders.CONTENDERS[name](ctx).ok == 2, name
    finally:
        fleet.close()


def test_an_interrupted_measurement_stops_its_command(tmp_path: Path) -> None:
    """A step cut short (timeout -s INT) must not leave its contender loading the next one."""
    import signal
    import threading
    import time

    marker = tmp_path / "pid"

    def interrupt_once_started() -> None:
        for _ in range(6000):  # bounded: 60 s
            if marker.exists() and marker.read_text().strip():
                break
            time.sleep(0.01)
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=interrupt_once_started, daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        run_measured(["sh", "-c", f"echo $$ > {marker}; exec sleep 600"])
    pid = int(marker.read_text())
    for _ in range(1000):  # bounded: 10 s for the killed sleep to be reaped
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return
        if state == "Z":
            return
        time.sleep(0.01)
    raise AssertionError(f"pid {pid} still running after the interrupt")


def test_rows_from_a_cut_runs_log_keep_each_run() -> None:
    from bench.report import rows_from_log

    log = (
        "[   77.7s]    100 real    floor            run 1/3:    4.37 s wall,  55.27 s cpu, "
        "load 24.7,   33.3 MB, ok 100/100\n"
        "[   82.8s]    100 real    fleetcheck       run 1/3:    5.07 s wall,   1.12 s cpu, "
        "load 24.7,   57.3 MB, ok 100/100\n"
        "[   94.6s]    100 real    floor            run 2/3:    3.85 s wall,  48.92 s cpu, "
        "load 25.4,   33.3 MB, ok 99/100\n"
        "[    1.1s]    100 trivial floor            run 1/3:    0.33 s wall,   2.22 s cpu, "
        "load  0.1,   17.0 MB, ok 100/100\n")
    rows = {(row.probe, row.contender): row
            for row in rows_from_log(log, shape="nodes", cores="c", skip=[(100, "trivial")])}
    assert set(rows) == {("real", "floor"), ("real", "fleetcheck")}
    floor = rows["real", "floor"]
    assert (floor.runs, floor.wall_min_s, floor.wall_max_s, floor.ok, floor.loads) == (
        2, 3.85, 4.37, 99, (24.7, 25.4))
    assert floor.wall_s == (3.85 + 4.37) / 2 and rows["real", "fleetcheck"].cpu_s == 1.12
