"""`fleetcheck fix` on the loopback fleet: real sshd, the pct stand-in, an apt-get stand-in.

The apt-get stand-in really installs (links gcc into the node's PATH), so the after-probe
sees what the fix did; it prints apt's texts for success, a missing package, a held dpkg
lock and no network, and logs every call, so a dry run can be checked to have run nothing.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from fleetcheck.cli import main
from fleetcheck.observer import NullObserver
from fleetcheck.render import progress
from fleetcheck.report.content import NodeResult
from fleetcheck.report.history import run_files
from fleetcheck.report.reportio import load_report
from tests.fleet import Fleet

pytestmark = [pytest.mark.sshd, pytest.mark.slow]

#: Several nodes repaired in one run: past the default bound of 10% (fleetcheck/outbound.py).
ALL_AT_ONCE = ("--no-progress", "--max-out", "100%")

INSTALL = ["env", "LC_ALL=C", "DEBIAN_FRONTEND=noninteractive", "apt-get", "install", "-y",
           "--no-install-recommends", "--no-upgrade", "gcc", "libc6-dev"]


def _fleet(fleet: Fleet, **packages: Any) -> Path:
    fleet.add_host("pve1")
    fleet.add_container("pve1", 100, "healthy")
    cdir = fleet.add_container("pve1", 101, "no-compiler", packages=packages)
    fleet.write_inventory(timeout=60)
    return cdir


def _tree(root: Path) -> dict[str, tuple[int, float]]:
    """Every path under `root` with its size and mtime: what a dry run must leave alone.

    A directory's own mtime is left out: the probe builds in a throw-away subdirectory of the
    workload's Triton cache (creating ~/.triton/cache as Triton would) and removes it again.
    """
    found = {}
    for path in sorted(root.rglob("*")):
        info = path.lstat()
        found[str(path.relative_to(root))] = (info.st_size, 0.0 if path.is_dir() and not
                                              path.is_symlink() else info.st_mtime)
    return found


def _apt_calls(cdir: Path) -> list[list[str]]:
    log = cdir / "apt-get.log"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def _record(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def _ctrl_c() -> None:
    """What a terminal's Ctrl-C does: SIGINT to this process (handled in its main thread)."""
    os.kill(os.getpid(), signal.SIGINT)


@contextlib.contextmanager
def ctrl_c_when(condition: Callable[[], bool], bound_s: float = 120) -> Iterator[None]:
    """Press Ctrl-C once `condition` holds (polled beside the command, at most `bound_s`:
    past it nothing is pressed, and the test fails on an apply that was not interrupted)."""
    done = threading.Event()
    # Held while pressing: once the command has returned, nothing is pressed any more.
    pressing = threading.Lock()

    def watch() -> None:
        deadline = time.monotonic() + bound_s
        while time.monotonic() < deadline:
            with pressing:
                if done.is_set():
                    return
                if condition():
                    _ctrl_c()
                    return
            done.wait(0.05)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        yield
    finally:
        with pressing:
            done.set()
        watcher.join()


class CtrlCWhenFinished(NullObserver):
    """An audit observer that presses Ctrl-C once every node in `nodes` has finished."""

    def __init__(self, nodes: set[str]) -> None:
        self.waiting = set(nodes)
        self.pressed = False

    def node_finished(self, node: NodeResult) -> None:
        self.waiting.discard(node.id)
        if not self.waiting and not self.pressed:
            self.pressed = True
            _ctrl_c()


def test_dry_run_prints_the_plan_and_changes_nothing(fleet: Fleet, capsys: Any,
                                                     tmp_path: Path) -> None:
    cdir = _fleet(fleet)
    before = _tree(fleet.root / "hosts")
    record = tmp_path / "plan.json"
    code = main(["fix", str(fleet.inventory), "--no-progress", "-o", str(record)])
    out = capsys.readouterr().out
    assert code == 1  # the audit's code for the state as it is: a node fails
    assert "pve1/101  fail  Triton cpu-fallback: no C compiler" in out
    assert "runs inside LXC container 101 on pve1, as root, through `pct exec 101`" in out
    assert f"$ {' '.join(INSTALL)}" in out
    assert "pve1/100" not in out.split("not touched")[0]
    assert "not touched (no failing cause): 1 node(s)" in out
    assert _apt_calls(cdir) == []
    after = _tree(fleet.root / "hosts")
    # The probes' own traces (sshd's log) aside, not one file changed.
    changed = {k for k in set(before) | set(after) if before.get(k) != after.get(k)}
    assert {k for k in changed if "/sshd/" not in f"/{k}"} == set()
    data = _record(record)
    assert data["applied"] is False
    assert data["nodes"][0]["steps"][1]["argv"] == INSTALL
    assert data["nodes"][0]["outcome"] == "dry run"


def test_apply_turns_a_no_compiler_node_into_gpu(fleet: Fleet, capsys: Any,
                                                 tmp_path: Path) -> None:
    cdir = _fleet(fleet)
    record = tmp_path / "fix.json"
    history = tmp_path / "runs"
    code = main(["fix", str(fleet.inventory), "--limit", "pve1/101", "--apply", "--yes",
                 "--no-progress", "-o", str(record), "--history", str(history)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert _apt_calls(cdir) == [["update"], INSTALL[4:]]
    table = out.split("\n\n")[-1]
    assert table.splitlines()[0].split() == ["node", "before", "ran", "after", "outcome"]
    assert table.splitlines()[1].split() == ["pve1/101", "fail", "(no_c_compiler)", "2/2",
                                             "ok", "(gpu)", "fixed"]
    assert (cdir / "node" / "bin" / "gcc").is_symlink()
    data = _record(record)
    node = data["nodes"][0]
    assert (data["applied"], data["interrupted"], node["outcome"]) == (True, False, "fixed")
    assert [run["argv"] for run in node["ran"]] == [[*INSTALL[:3], "apt-get", "update"],
                                                    INSTALL]
    assert "Setting up gcc (4:12.2.0-3) ..." in node["ran"][1]["stdout"]
    assert node["after"]["status"] == "ok" and node["after"]["verdict"] == "gpu"
    # The history sees the after-probe like any audit.
    (saved,) = run_files(history)
    assert [(n.id, n.status) for n in load_report(saved).nodes] == [("pve1/101", "ok")]


@pytest.mark.parametrize(("packages", "error"), [
    ({"repo": {"libc6-dev": {"version": "2.36-9+deb12u10"}}},
     "E: Unable to locate package gcc"),
    ({"root": False}, "E: Unable to acquire the dpkg frontend lock "
                      "(/var/lib/dpkg/lock-frontend), are you root?"),
    ({"network": False}, "E: Unable to fetch some archives, maybe run apt-get update or try "
                         "with --fix-missing?"),
])
def test_a_fix_that_fails_leaves_the_node_failing_with_apts_error(
        fleet: Fleet, capsys: Any, tmp_path: Path, packages: dict[str, Any], error: str) -> None:
    cdir = _fleet(fleet, **packages)
    record = tmp_path / "fix.json"
    code = main(["fix", str(fleet.inventory), "--limit", "pve1/101", "--apply", "--yes",
                 "--no-progress", "-o", str(record)])
    out = capsys.readouterr().out
    assert code == 1
    assert "fix failed" in out
    assert f"exit status 100: {error}" in out
    node = _record(record)["nodes"][0]
    assert node["outcome"] == "fix failed"
    assert node["ran"][-1]["returncode"] == 100 and error in node["ran"][-1]["stderr"]
    assert node["after"]["status"] == "fail" and node["after"]["cause"] == "no_c_compiler"
    assert not (cdir / "node" / "bin" / "gcc").exists()


def test_a_held_dpkg_lock_fails_once_with_apts_text(fleet: Fleet, capsys: Any,
                                                    tmp_path: Path) -> None:
    cdir = _fleet(fleet)
    lock = cdir / "var" / "lib" / "dpkg" / "lock-frontend"
    lock.parent.mkdir(parents=True)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, os, sys, time\n"
         f"fd = os.open({str(lock)!r}, os.O_RDWR | os.O_CREAT)\n"
         "fcntl.lockf(fd, fcntl.LOCK_EX); print('held', flush=True); time.sleep(120)"],
        stdout=subprocess.PIPE)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"held\n"
        code = main(["fix", str(fleet.inventory), "--limit", "pve1/101", "--apply", "--yes",
                     "--no-progress", "-o", str(tmp_path / "fix.json")])
    finally:
        holder.kill()
        holder.wait()
    out = capsys.readouterr().out
    assert code == 1
    held = ("E: Unable to acquire the dpkg frontend lock (/var/lib/dpkg/lock-frontend), "
            "is another process using it?")
    assert held in out
    stderr = _record(tmp_path / "fix.json")["nodes"][0]["ran"][-1]["stderr"]
    assert (f"E: Could not get lock /var/lib/dpkg/lock-frontend. It is held by process "
            f"{holder.pid} (python") in stderr
    assert [call[0] for call in _apt_calls(cdir)] == ["update", "install"]  # no retry loop


@pytest.mark.own_process  # Ctrl-C on this process
def test_an_interrupted_apply_still_writes_a_complete_record(fleet: Fleet, capsys: Any,
                                                             tmp_path: Path) -> None:
    cdir = _fleet(fleet, delay=60)
    record = tmp_path / "fix.json"
    # Ctrl-C once apt-get install is running (it then waits 60 s before installing anything).
    with ctrl_c_when(lambda: INSTALL[4:] in _apt_calls(cdir)):
        code = main(["fix", str(fleet.inventory), "--limit", "pve1/101", "--apply", "--yes",
                     "--no-progress", "-o", str(record)])
    out = capsys.readouterr().out
    assert code == 3  # interrupted: nothing verified
    data = _record(record)
    node = data["nodes"][0]
    assert (data["interrupted"], node["outcome"]) == (True, "interrupted")
    assert node["ran"][0]["ok"] is True
    assert node["ran"][1]["argv"] == INSTALL
    assert node["ran"][1]["error"] == "interrupted while running"
    assert node["after"] is None
    assert "interrupted" in out
    assert not (cdir / "node" / "bin" / "gcc").exists()
    assert [p for p in os.listdir(tmp_path) if p.startswith(".fix.json")] == []


def test_the_deadline_ends_an_apply_and_its_record_is_complete(fleet: Fleet, capsys: Any,
                                                               tmp_path: Path) -> None:
    # From saved results (no first probe to race the deadline): apt-get install waits 60 s,
    # so a 3 s --timeout ends the apply in a command, whichever one a busy machine reached.
    cdir = _fleet(fleet, delay=60)
    results, record = tmp_path / "audit.json", tmp_path / "fix.json"
    assert main(["audit", str(fleet.inventory), "--limit", "pve1/101", "-o", str(results),
                 "--no-progress"]) == 1
    code = main(["fix", str(results), "--apply", "--yes", "--no-progress", "--timeout", "3",
                 "-o", str(record)])
    capsys.readouterr()
    assert code == 3  # interrupted: nothing verified
    data = _record(record)
    node = data["nodes"][0]
    assert (data["interrupted"], node["outcome"], node["after"]) == (True, "interrupted", None)
    assert all(run["ok"] for run in node["ran"][:-1])
    assert node["ran"] == [] or node["ran"][-1]["error"] == "interrupted while running"
    assert not (cdir / "node" / "bin" / "gcc").exists()


def test_two_kinds_of_fix_on_one_host_share_one_connection_per_phase(
        fleet: Fleet, capsys: Any, tmp_path: Path) -> None:
    cdir = _fleet(fleet)
    fleet.add_container("pve1", 102, "healthy",
                        node={"triton": "3.5.0", "libcuda_unversioned": False})
    fleet.write_inventory(timeout=60)
    code = main(["fix", str(fleet.inventory), "--apply", "--yes", *ALL_AT_ONCE])
    out = capsys.readouterr().out
    assert code == 0, out
    libdir = fleet.root / "hosts" / "pve1" / "containers" / "102" / "node" / "lib"
    assert f"$ ln -s -- libcuda.so.1 {libdir}/libcuda.so" in out
    rows = [line.split() for line in out.split("\n\n")[-1].splitlines()[1:]]
    assert [(row[0], row[-1]) for row in rows] == [("pve1/101", "fixed"), ("pve1/102", "fixed")]
    assert os.readlink(libdir / "libcuda.so") == "libcuda.so.1"
    assert _apt_calls(cdir)[-1] == INSTALL[4:]
    # The first probe and the repair with its after-probe: one login each.
    assert fleet.accepted_logins("pve1") == 2


def test_fix_from_saved_results_reaches_nodes_through_their_inventory(
        fleet: Fleet, capsys: Any, tmp_path: Path) -> None:
    cdir = _fleet(fleet)
    results = tmp_path / "audit.json"
    assert main(["audit", str(fleet.inventory), "-o", str(results), "--no-progress"]) == 1
    capsys.readouterr()
    assert main(["fix", str(results), "--limit", "pve1/100"]) == 0
    assert "0 failing node(s)" in capsys.readouterr().out
    assert main(["fix", str(results), "--apply", "--yes", *ALL_AT_ONCE]) == 0
    table = capsys.readouterr().out.split("\n\n")[-1]
    assert table.splitlines()[1].split() == ["pve1/101", "fail", "(no_c_compiler)", "2/2",
                                             "ok", "(gpu)", "fixed"]
    assert _apt_calls(cdir)[-1] == INSTALL[4:]


def test_interactive_no_changes_nothing(fleet: Fleet, capsys: Any,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    cdir = _fleet(fleet)
    monkeypatch.setattr(sys.stdin, "isatty", lambda: True)
    asked = []
    monkeypatch.setattr("builtins.input", lambda question: asked.append(question) or "n")
    assert main(["fix", str(fleet.inventory), "--apply", "--no-progress"]) == 1
    assert asked == ["Run these 2 command(s) as root on 1 node(s)? [y/N] "]
    assert "nothing was changed" in capsys.readouterr().err
    assert _apt_calls(cdir) == []


@pytest.mark.own_process  # Ctrl-C on this process
def test_nothing_is_applied_after_an_interrupted_first_probe(
        fleet: Fleet, capsys: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    cdir = _fleet(fleet)
    fleet.add_container("pve1", 102, "hang")
    fleet.write_inventory(timeout=60)
    # Ctrl-C once 100 and 101 are probed, while 102 hangs: the first probe's picture is partial.
    # The progress bar's place (an observer, as on a terminal) tells when they are done.
    ctrl_c = CtrlCWhenFinished({"pve1/100", "pve1/101"})
    monkeypatch.setattr(progress, "progress_observer",
                        lambda *args, **kwargs: contextlib.nullcontext(ctrl_c))
    code = main(["fix", str(fleet.inventory), "--apply", "--yes", *ALL_AT_ONCE])
    captured = capsys.readouterr()
    assert ctrl_c.pressed
    assert code == 1  # pve1/101 was seen failing before the interruption
    assert "the first probe was interrupted: nothing is applied" in captured.err
    assert "apt-get install" in captured.out  # the plan is still shown
    assert _apt_calls(cdir) == []


@pytest.mark.parametrize(("containers", "outcome"), [("all", "not reached"),
                                                    ("listed", "fix failed")])
def test_a_host_gone_since_the_audit_is_an_outcome_not_a_crash(
        fleet: Fleet, capsys: Any, tmp_path: Path, containers: str, outcome: str) -> None:
    fleet.add_host("pve1", containers=containers)
    fleet.add_container("pve1", 101, "no-compiler", packages={})
    fleet.write_inventory(timeout=60)
    results = tmp_path / "audit.json"
    assert main(["audit", str(fleet.inventory), "-o", str(results), "--no-progress"]) == 1
    process = fleet.hosts["pve1"].process
    assert process is not None
    process.terminate()
    process.wait(10)
    record = tmp_path / "fix.json"
    code = main(["fix", str(results), "--apply", "--yes", *ALL_AT_ONCE, "-o", str(record)])
    out = capsys.readouterr().out
    node = _record(record)["nodes"][0]
    assert node["outcome"] == outcome
    assert outcome in out
    assert node["after"]["status"] == "unreachable"
    assert "connection refused" in node["after"]["reason"].lower()
    if containers == "all":
        # The host could not list its containers: nothing ran; the last state known stands.
        assert node["ran"] == [] and code == 1
    else:
        # The node was known without the host: its first command could not be run.
        assert node["ran"][0]["error"].startswith("unreachable: ") and code == 3


ROCKY = ('NAME="Rocky Linux"\nVERSION="9.5 (Blue Onyx)"\nID="rocky"\nID_LIKE="rhel centos '
         'fedora"\nVERSION_ID="9.5"\nPLATFORM_ID="platform:el9"\n')


@pytest.mark.parametrize(("packages", "code", "outcome", "text"), [
    ({}, 0, "fixed", "Complete!"),
    ({"repo": {}}, 1, "fix failed", "Error: Unable to find a match: gcc glibc-devel"),
    ({"network": False}, 1, "fix failed", "Error: Failed to download metadata for repo "
                                          "'baseos'"),
])
def test_a_rocky_node_is_fixed_with_dnf(fleet: Fleet, capsys: Any, tmp_path: Path,
                                        packages: dict[str, Any], code: int, outcome: str,
                                        text: str) -> None:
    fleet.add_host("pve1")
    cdir = fleet.add_container("pve1", 101, "no-compiler", node={"os_release": ROCKY},
                               packages={"manager": "dnf", **packages})
    fleet.write_inventory(timeout=60)
    record = tmp_path / "fix.json"
    assert main(["fix", str(fleet.inventory), "--apply", "--yes", *ALL_AT_ONCE,
                 "-o", str(record)]) == code
    assert "$ env LC_ALL=C dnf install -y --setopt=install_weak_deps=False gcc glibc-devel" \
        in capsys.readouterr().out
    node = _record(record)["nodes"][0]
    assert node["outcome"] == outcome
    (run,) = node["ran"]
    assert text in run["stdout"] + run["stderr"]
    assert (cdir / "dnf.log").read_text().splitlines() == [json.dumps(
        ["install", "-y", "--setopt=install_weak_deps=False", "gcc", "glibc-devel"])]


def test_an_audit_key_restricted_by_the_gatekeeper_cannot_repair(
        fleet: Fleet, capsys: Any, tmp_path: Path) -> None:
    from tests.gatekeeper.support import install_gatekeeper, keygen

    key = keygen(tmp_path / "audit_ed25519")
    cdir = _fleet(fleet)
    install_gatekeeper(fleet.hosts["pve1"], key.with_suffix(".pub"))
    inventory = tmp_path / "restricted.yaml"
    fleet.write_inventory(inventory, timeout=60, ssh={"identity_file": str(key)})
    record = tmp_path / "fix.json"
    code = main(["fix", str(inventory), "--apply", "--yes", *ALL_AT_ONCE, "-o", str(record)])
    out = capsys.readouterr().out
    assert code == 1
    node = _record(record)["nodes"][0]
    assert node["outcome"] == "fix failed"
    (refused,) = node["ran"]
    assert refused["returncode"] == 77
    assert refused["stderr"].startswith("fleetcheck-gatekeeper: refused: ")
    assert "exit status 77: fleetcheck-gatekeeper: refused: " in out
    assert _apt_calls(cdir) == []


def test_a_node_with_a_second_cause_is_still_failing_with_the_new_one(
        fleet: Fleet, capsys: Any, tmp_path: Path) -> None:
    fleet.add_host("pve1")
    fleet.add_container("pve1", 101, "no-compiler", node={"cache": "unwritable"}, packages={})
    fleet.write_inventory(timeout=60)
    record = tmp_path / "fix.json"
    code = main(["fix", str(fleet.inventory), "--apply", "--yes", *ALL_AT_ONCE,
                 "-o", str(record)])
    out = capsys.readouterr().out
    assert code == 1
    assert "cache_dir_unwritable: Triton cache" in out  # printed for a person, never run
    table = out.split("\n\n")[-1].splitlines()
    assert table[1].split() == ["pve1/101", "fail", "(no_c_compiler)", "2/2", "fail",
                                "(cache_dir_unwritable)", "still", "failing"]
    assert "cannot be created" in table[2]
    node = _record(record)["nodes"][0]
    assert (node["outcome"], node["after"]["cause"]) == ("still failing",
                                                         "cache_dir_unwritable")


def test_the_default_bound_refuses_to_repair_most_of_the_fleet_at_once(
        fleet: Fleet, capsys: Any) -> None:
    cdir = _fleet(fleet)
    fleet.add_container("pve1", 102, "healthy",
                        node={"triton": "3.5.0", "libcuda_unversioned": False})
    fleet.write_inventory(timeout=60)
    code = main(["fix", str(fleet.inventory), "--apply", "--yes", "--no-progress"])
    err = capsys.readouterr().err
    assert code == 1
    assert err.splitlines()[-1] == (
        "fleetcheck: fix: not repairing 2 of 3 nodes at once (--max-out 10%: at most 1 of 3); "
        "nothing was changed: narrow the selection with --limit, or raise --max-out")
    assert _apt_calls(cdir) == []
    libdir = fleet.root / "hosts" / "pve1" / "containers" / "102" / "node" / "lib"
    assert not (libdir / "libcuda.so").exists()
