"""Faults on the loopback fleet (real sshd per host, the pct stand-in): the audit ends within its
deadline, every node is accounted for with the right status and reason, nothing is left running
on the hosts."""

from __future__ import annotations

import json
import os
import re
import signal
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.fleet import Fleet
from tests.reliability.support import (
    CliProcess,
    CliRun,
    cmdline,
    descendants,
    fill_filesystem,
    kill_pids,
    run_cli,
    wait_until,
)

pytestmark = [pytest.mark.sshd, pytest.mark.timeout(150)]
#: The remote `timeout -k` grace (fleetcheck.transport.interface.NodeBudget.kill_after) plus
#: slack for a busy machine; the waits it bounds end as soon as nothing is left, and the hung
#: probes sleep 600 s, far beyond any of them.
KILL_GRACE = 5 + 15


def audit(fleet: Fleet, tmp_path: Path, *, deadline: float, extra: tuple[str, ...] = (),
          background: bool = False) -> Any:
    """Run `fleetcheck audit` on the fleet's inventory, JSON report to tmp_path/report.json."""
    assert fleet.inventory is not None
    args = ["audit", str(fleet.inventory), "--format", "json", "-o",
            str(tmp_path / "report.json"), "--no-progress", *extra]
    if background:
        return CliProcess(args, cwd=tmp_path)
    return run_cli(args, deadline=deadline, cwd=tmp_path)


def nodes_of(tmp_path: Path, run: CliRun) -> dict[str, dict[str, Any]]:
    assert "Traceback" not in run.err, run.err
    report = json.loads((tmp_path / "report.json").read_text())
    return {node["id"]: node for node in report["nodes"]}


def hang_pids(fleet: Fleet) -> list[int]:
    return [int(line.split()[0]) for line in fleet.pgrep(f"hang-{fleet.mark}")]


def write_inventory(fleet: Fleet, edit: Any, timeout: float = 30) -> Path:
    """The fleet's inventory, changed by `edit(data)` (for hosts the kit does not make)."""
    data = fleet.inventory_data(timeout=timeout)
    edit(data)
    path = fleet.root / "inventory.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    fleet.inventory = path
    return path


def no_leftovers(fleet: Fleet, figures: Any, seconds: float) -> None:
    left = fleet.wait_no_leftovers(seconds)
    figures.processes(left)
    assert left == [], left


def test_host_killed_mid_audit(fleet: Fleet, tmp_path: Path, figures: Any) -> None:
    with figures.fault("host killed mid-audit"):
        doomed = fleet.add_host("pve1")
        fleet.add_container("pve1", 101, "hang")
        fleet.add_container("pve1", 102, "hang")
        fleet.add_host("pve2")
        fleet.add_container("pve2", 201, "crash")
        fleet.write_inventory(timeout=60)
        cli = audit(fleet, tmp_path, deadline=0, background=True)
        wait_until(lambda: len(hang_pids(fleet)) >= 2, 30, "both probes on pve1 to run")
        assert doomed.process is not None
        # The whole host goes: its sshd, every session and everything they started.
        kill_pids([doomed.process.pid, *descendants(doomed.process.pid)])
        # The node timeout is 60 s: ending well inside it means the loss was noticed.
        run = cli.finish(deadline=40)
        nodes = nodes_of(tmp_path, run)
        assert set(nodes) == {"pve1/101", "pve1/102", "pve2/201"}
        for node_id in ("pve1/101", "pve1/102"):
            assert nodes[node_id]["status"] in ("error", "unreachable"), nodes[node_id]
            assert re.search(r"lost|closed|reset", nodes[node_id]["reason"]), nodes[node_id]
        assert nodes["pve2/201"]["status"] == "error"
        assert "status 3" in nodes["pve2/201"]["reason"]
        assert run.returncode == 3
        no_leftovers(fleet, figures, 20)


def test_connection_dropped_mid_probe(fleet: Fleet, tmp_path: Path, figures: Any) -> None:
    with figures.fault("connection dropped mid-probe"):
        host = fleet.add_host("pve1", containers="listed")
        fleet.add_container("pve1", 101, "hang", timeout=8)
        fleet.add_container("pve1", 102, "crash")
        fleet.write_inventory(timeout=8)
        cli = audit(fleet, tmp_path, deadline=0, background=True)
        wait_until(lambda: hang_pids(fleet), 30, "the probe on pve1/101 to run")
        assert host.process is not None
        sessions = [pid for pid in descendants(host.process.pid)
                    if cmdline(pid).startswith("sshd: root@")]
        assert sessions, [cmdline(p) for p in descendants(host.process.pid)]
        kill_pids(sessions)  # the process serving the connection: the TCP stream ends
        run = cli.finish(deadline=8 + KILL_GRACE + 20)
        nodes = nodes_of(tmp_path, run)
        assert set(nodes) == {"pve1/101", "pve1/102"}
        assert nodes["pve1/101"]["status"] == "error", nodes["pve1/101"]
        assert re.search(r"lost|closed|reset", nodes["pve1/101"]["reason"])
        assert run.returncode == 3
        # The orphaned probe is bounded by the host-side `timeout -k` of the node timeout.
        no_leftovers(fleet, figures, 8 + KILL_GRACE)


def test_container_stopped_mid_probe(fleet: Fleet, tmp_path: Path, figures: Any) -> None:
    with figures.fault("container stopped mid-probe"):
        fleet.add_host("pve1")
        cdir = fleet.add_container("pve1", 101, "hang")
        fleet.add_container("pve1", 102, "crash")
        fleet.write_inventory(timeout=60)
        cli = audit(fleet, tmp_path, deadline=0, background=True)
        pids = wait_until(lambda: hang_pids(fleet), 30, "the probe on pve1/101 to run")
        config = json.loads((cdir / "config.json").read_text())
        config["status"] = "stopped"
        (cdir / "config.json").write_text(json.dumps(config))
        kill_pids(list(pids))  # what lxc does to a stopping container's processes
        run = cli.finish(deadline=40)
        nodes = nodes_of(tmp_path, run)
        assert set(nodes) == {"pve1/101", "pve1/102"}
        stopped = nodes["pve1/101"]
        assert stopped["status"] in ("error", "skipped"), stopped
        assert "None" not in stopped["reason"], stopped
        assert re.search(r"137|KILL|signal|killed|stopped|not running", stopped["reason"]), stopped
        assert nodes["pve1/102"]["status"] == "error"
        no_leftovers(fleet, figures, 20)


def test_probe_that_never_ends(fleet: Fleet, tmp_path: Path, figures: Any) -> None:
    with figures.fault("probe that never ends"):
        fleet.add_host("pve1", containers="listed")
        fleet.add_container("pve1", 101, "hang", timeout=4)
        fleet.add_container("pve1", 102, "crash")
        fleet.write_inventory(timeout=30)
        run = audit(fleet, tmp_path, deadline=4 + KILL_GRACE + 20)
        nodes = nodes_of(tmp_path, run)
        assert nodes["pve1/101"]["status"] == "error"
        assert nodes["pve1/101"]["reason"] == "probe timed out after 4 s"
        assert nodes["pve1/102"]["status"] == "error"
        assert run.returncode == 3
        no_leftovers(fleet, figures, KILL_GRACE)


def test_hosts_that_cannot_be_reached(fleet: Fleet, tmp_path: Path, silent_port: int,
                                      figures: Any) -> None:
    """A silent TCP listener, a name that does not resolve, a refused port, beside a good host."""
    with figures.fault("host accepts TCP but never speaks SSH"), \
            figures.fault("name that does not resolve"), \
            figures.fault("connection refused"):
        fleet.add_host("pve1")
        fleet.add_container("pve1", 101, "crash")
        fleet.add_host("gone", refuse=True)

        def edit(data: dict[str, Any]) -> None:
            data["defaults"]["ssh"]["connect_timeout"] = 3
            data["hosts"]["gone"]["containers"] = [101]
            data["hosts"]["mute"] = {"address": "127.0.0.1", "ssh": {"port": silent_port},
                                     "containers": "all"}
            data["hosts"]["ghost"] = {"address": "nonexistent.invalid", "containers": [101, 102],
                                      "probe_host": True}

        write_inventory(fleet, edit)
        run = audit(fleet, tmp_path, deadline=45)
        nodes = nodes_of(tmp_path, run)
        assert nodes["pve1/101"]["status"] == "error"
        assert nodes["mute"]["status"] == "unreachable"
        assert "timed out" in nodes["mute"]["reason"]
        assert {n for n in nodes if n.startswith("ghost")} == {"ghost", "ghost/101", "ghost/102"}
        for node_id in ("ghost", "ghost/101", "ghost/102"):
            assert nodes[node_id]["status"] == "unreachable"
            assert "resolve" in nodes[node_id]["reason"], nodes[node_id]
        assert nodes["gone/101"]["status"] == "unreachable"
        assert "refused" in nodes["gone/101"]["reason"]
        assert run.returncode == 3


@pytest.mark.timeout(240)
def test_two_hundred_containers_on_one_host(fleet: Fleet, tmp_path: Path, figures: Any) -> None:
    with figures.fault("200 containers on one host"):
        fleet.add_host("pve1")
        kinds = ["no-python", "garbage", "crash", "stopped"]
        expected: dict[str, tuple[str, str]] = {}
        for index in range(200):
            vmid = 1000 + index
            kind = "healthy" if index % 40 == 0 else kinds[index % len(kinds)]
            fleet.add_container("pve1", vmid, kind)
            expected[f"pve1/{vmid}"] = {
                "no-python": ("error", "not found"),
                "garbage": ("error", "not one JSON document"),
                "crash": ("error", "status 3"),
                "stopped": ("skipped", "stopped"),
                "healthy": ("", ""),
            }[kind]
        fleet.write_inventory(timeout=60)
        run = audit(fleet, tmp_path, deadline=150)
        nodes = nodes_of(tmp_path, run)
        assert set(nodes) == set(expected)
        for node_id, (status, reason) in expected.items():
            node = nodes[node_id]
            if status:
                assert node["status"] == status and reason in node["reason"], node
            else:
                assert node["status"] not in ("error", "unreachable"), node
        no_leftovers(fleet, figures, 20)


def test_probe_printing_100_megabytes(fleet: Fleet, tmp_path: Path, figures: Any) -> None:
    with figures.fault("probe printing 100 MB"):
        fleet.add_host("pve1")
        cdir = fleet.add_container("pve1", 101, "garbage")
        fleet.add_container("pve1", 102, "crash")
        flood = cdir / "bin" / "python3"
        flood.unlink()
        flood.write_text(f"#!{fleet.python}\nimport sys\nchunk = b'A' * (1 << 20)\n"
                         "for _ in range(100):\n    sys.stdout.buffer.write(chunk)\n")
        flood.chmod(0o755)
        fleet.write_inventory(timeout=60)
        run = audit(fleet, tmp_path, deadline=60)
        nodes = nodes_of(tmp_path, run)
        figures.tried("whole audit: node output", 1)
        assert nodes["pve1/101"]["status"] == "error"
        assert "output exceeded" in nodes["pve1/101"]["reason"]
        assert nodes["pve1/102"]["status"] == "error"
        # The audit kept at most its cap (8 MiB) of it: far from 100 MB.
        figures.measure("peak RSS of the audit while a node prints 100 MB",
                        f"{run.max_rss_kib // 1024} MiB")
        assert run.max_rss_kib < 200 * 1024, f"peak RSS {run.max_rss_kib} KiB"
        assert (tmp_path / "report.json").stat().st_size < 1 << 20
        no_leftovers(fleet, figures, 20)


HOSTILE_OUTPUTS: dict[str, bytes] = {
    "deep-nesting": b"[" * 300_000 + b"]" * 300_000,
    "invalid-utf8": b'{"schema": "fleetcheck.probe/1", "reason": "\xff\xfe"}',
    "wrong-schema": json.dumps({"schema": "other/9", "status": "ok"}).encode(),
    "ok-without-fields": json.dumps({"schema": "fleetcheck.probe/1", "status": "ok",
                                     "reason": "all good"}).encode(),
    "escapes-and-html": json.dumps({
        "schema": "fleetcheck.probe/1", "probe_version": "1", "duration_s": 0.5, "deep": False,
        "facts": {"hostname": "\x1b]0;owned\x07<script>alert(1)</script>",
                  "gpus": [{"name": "\x1b[2J<img src=x onerror=alert(1)>"}]},
        "checks": [{"id": "gpu_present\x1b[31m", "status": "fail",
                    "summary": "</td><h1>x</h1>\x9b2J", "fix": "rm -rf / \x1b[8m",
                    "evidence": {"<b>": "\x00\x07"}}],
        "triton": {"verdict": "cpu-fallback", "backend": "<i>", "cause": "no_c_compiler",
                   "fix": "\x1b[2J"},
        "status": "fail", "reason": "\x1b[31mred\x1b[0m <script>x</script>",
    }).encode(),
}


def test_hostile_probe_output_through_real_containers(
    fleet: Fleet, tmp_path: Path, figures: Any
) -> None:
    from fleetcheck.report.reportio import load_report
    from tests.reliability.render_checks import CHECKERS

    with figures.fault("hostile probe output"):
        fleet.add_host("pve1")
        for index, (name, payload) in enumerate(sorted(HOSTILE_OUTPUTS.items())):
            cdir = fleet.add_container("pve1", 101 + index, "garbage", name=f"ct-{name}")
            (cdir / "payload").write_bytes(payload)
            script = cdir / "bin" / "python3"
            script.unlink()
            script.write_text(f"#!{fleet.python}\nimport sys\n"
                              f"sys.stdout.buffer.write(open({str(cdir / 'payload')!r}, 'rb')"
                              ".read())\n")
            script.chmod(0o755)
            figures.tried("whole audit: node output")
        fleet.write_inventory(timeout=30)
        run = audit(fleet, tmp_path, deadline=60)
        nodes = nodes_of(tmp_path, run)
        by_name = {node["name"]: node for node in nodes.values()}
        assert set(by_name) == {f"ct-{name}" for name in HOSTILE_OUTPUTS}
        for name in ("deep-nesting", "invalid-utf8", "wrong-schema", "ok-without-fields"):
            assert by_name[f"ct-{name}"]["status"] == "error", by_name[f"ct-{name}"]
            assert "\n" not in by_name[f"ct-{name}"]["reason"]
        report = load_report(tmp_path / "report.json")
        for fmt, check in sorted(CHECKERS.items()):
            figures.tried(f"renderer {fmt}")
            check(report, "")


def test_disk_full_when_the_audit_writes_its_report(
    fleet: Fleet, tmp_path: Path, tiny_fs: Path, figures: Any
) -> None:
    with figures.fault("disk full when the report is written"):
        fleet.add_host("pve1")
        fleet.add_container("pve1", 101, "crash")
        fleet.write_inventory(timeout=30)
        target = tiny_fs / "report.json"
        old = '{"schema": "fleetcheck.audit/1", "nodes": []}\n'
        target.write_text(old)
        fill_filesystem(tiny_fs)
        assert fleet.inventory is not None
        run = run_cli(["audit", str(fleet.inventory), "-o", str(target), "--no-progress"],
                      deadline=60, cwd=tmp_path)
        damaged = None if target.read_text() == old else "old report changed"
        extra = sorted(set(os.listdir(tiny_fs)) - {"report.json", "filler"})
        damaged = damaged or (f"left {extra}" if extra else None)
        figures.report_write(damaged)
        assert damaged is None
        assert run.returncode == 2
        lines = run.err.strip().splitlines()
        assert len(lines) == 1 and "No space left on device" in lines[0], run.err
        no_leftovers(fleet, figures, 20)


def test_interrupted_audit_leaves_nothing_running(fleet: Fleet, tmp_path: Path,
                                                  figures: Any) -> None:
    """Ctrl-C (SIGINT) while probes run: a partial report, then the host-side bound ends them."""
    with figures.fault("audit interrupted (SIGINT)"):
        fleet.add_host("pve1", containers="listed")
        fleet.add_container("pve1", 101, "hang", timeout=6)
        fleet.add_container("pve1", 102, "crash")
        fleet.write_inventory(timeout=6)
        cli = audit(fleet, tmp_path, deadline=0, background=True)
        wait_until(lambda: hang_pids(fleet), 30, "the probe on pve1/101 to run")
        os.kill(cli.child.pid, signal.SIGINT)
        run = cli.finish(deadline=30)
        nodes = nodes_of(tmp_path, run)
        assert set(nodes) == {"pve1/101", "pve1/102"}
        assert nodes["pve1/101"]["status"] == "error"
        assert run.returncode == 3
        no_leftovers(fleet, figures, 6 + KILL_GRACE)


def test_one_node_printing_a_lone_surrogate(fleet: Fleet, tmp_path: Path, figures: Any) -> None:
    with figures.fault("node output with a lone surrogate"):
        fleet.add_host("pve1")
        cdir = fleet.add_container("pve1", 101, "garbage")
        fleet.add_container("pve1", 102, "crash")
        document = json.loads(HOSTILE_OUTPUTS["escapes-and-html"])
        document["reason"] = "bad \ud800 text"
        document["facts"]["hostname"] = "bad \udcff host"
        document["checks"][0]["summary"] = "bad \ud800 summary"
        (cdir / "payload").write_text(json.dumps(document))  # ASCII: "\ud800" as an escape
        script = cdir / "bin" / "python3"
        script.unlink()
        script.write_text(f"#!{fleet.python}\nimport sys\nsys.stdout.write(open("
                          f"{str(cdir / 'payload')!r}).read())\n")
        script.chmod(0o755)
        figures.tried("whole audit: node output")
        fleet.write_inventory(timeout=30)
        run = audit(fleet, tmp_path, deadline=60)
        nodes = nodes_of(tmp_path, run)
        assert set(nodes) == {"pve1/101", "pve1/102"}
