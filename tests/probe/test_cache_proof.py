"""The gpu proof goes through the workload's real Triton cache: its entries, as its user.

The node's Triton builds its driver module and launchers with the newest release's own
runtime/build.py and runtime/cache.py (tests/probe/workload_state.py); the workload's own start
(TRUTH: get_current_target(), an earlier kernel's launcher, a new one) is run beside the probe.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.probe.workload_state import (
    IS_ROOT,
    checks,
    snapshot,
    workload_base,  # noqa: F401  (a fixture)
    workload_node,
)


def test_root_owned_entries_left_by_a_sudo_run_fail_the_node_naming_root(
        workload_base: Path) -> None:  # noqa: F811
    if not IS_ROOT:
        pytest.skip("entries owned by another user need root to make")
    state = workload_node(workload_base)
    state.cache.mkdir(parents=True)
    state.give(state.node.home / ".triton")
    # The job run once as root (sudo -E) with umask 077: root-only entry dirs in the cache.
    assert state.as_root("--warm-only") == (True, "OK")
    entries = sorted(state.cache.iterdir())
    assert len(entries) == 2 and all(e.stat().st_uid == 0 for e in entries)
    before = snapshot(state.node.home, state.tmp)
    doc = state.probe()
    assert snapshot(state.node.home, state.tmp) == before
    ok, said = state.truth()
    assert not ok and "Permission denied" in said and str(state.cache) in said
    assert doc["triton"]["verdict"] == "cpu-fallback"
    assert doc["triton"]["cause"] == "cache_entry_foreign_owner"
    check = checks(doc)["cache_entry_foreign_owner"]
    assert check["status"] == "fail"
    assert "is root's (mode 0o700)" in check["summary"]
    assert "sudo rm -rf" in check["fix"] and str(entries[0]) in check["fix"]
    assert doc["triton"]["fix"].startswith("Triton cache entries owned by another user: ")


def test_a_warm_cache_is_read_in_place_and_left_as_it_was(workload_base: Path) -> None:  # noqa: F811
    state = workload_node(workload_base)
    state.cache.mkdir(parents=True)
    state.give(state.node.home / ".triton")
    assert state.truth("--warm-only", prefix=()) == (True, "OK")
    before = snapshot(state.node.home, state.tmp)
    doc = state.probe()
    assert snapshot(state.node.home, state.tmp) == before
    assert doc["triton"]["verdict"] == "gpu"
    own = checks(doc)["triton_own_path"]
    assert own["status"] == "pass"
    # The key Triton asked for is the entry the workload's own run wrote.
    keys = checks(doc)["cache_entry_corrupt"]["evidence"]["keys"]
    assert keys and all((state.cache / key).is_dir() for key in keys)
    # The own build loaded the entries: whether Triton builds at all here (its next kernel's
    # launcher) is told by the release's own build of the driver module's skeleton in the
    # probe's fresh cache, not by compiling the whole module again.
    target = checks(doc)["triton_target"]
    assert (target["status"], target["evidence"]["cache"]) == ("pass", "skeleton")
    assert target["summary"].startswith("get_current_target() = cuda:90 through the workload's "
                                        "cache; Triton's own build of its driver module's "
                                        "skeleton")
    # ...and that build, not a test compile of the probe's, proved the toolchain.
    assert checks(doc)["no_linker"]["evidence"]["by"] == "triton"


def test_a_cold_cache_leaves_nothing_behind(workload_base: Path) -> None:  # noqa: F811
    state = workload_node(workload_base)
    before = snapshot(state.node.home, state.tmp)
    doc = state.probe()
    assert snapshot(state.node.home, state.tmp) == before
    assert not (state.node.home / ".triton").exists()
    assert doc["triton"]["verdict"] == "gpu"
    assert state.truth() == (True, "OK")
    # The own build compiled the driver module and found no entry: it is the fresh-cache
    # proof, and the probe did not build the module a second time.
    target = checks(doc)["triton_target"]
    assert (target["status"], target["evidence"]["cache"]) == ("pass", "own")
    assert target["summary"] == ("get_current_target() = cuda:90, built from nothing (no entry "
                                 "of it in the workload's cache)")
    assert target["evidence"]["cache_dir"] == str(state.cache)


def test_a_cache_manager_of_the_workloads_own_keeps_the_fresh_cache_build(
        workload_base: Path) -> None:  # noqa: F811
    # TRITON_CACHE_MANAGER names the class Triton's get_cache_manager() uses: its entries may
    # be anywhere (a remote store), so a build in the probe's subdirectory proves nothing about
    # hits, and the fresh cache is still tried (the driver module's skeleton, the workload's
    # own start having succeeded).
    state = workload_node(workload_base, env={
        "TRITON_CACHE_MANAGER": "triton.runtime.cache:FileCacheManager"})
    doc = state.probe()
    assert doc["triton"]["verdict"] == "gpu"
    target = checks(doc)["triton_target"]
    assert (target["status"], target["evidence"]["cache"]) == ("pass", "skeleton")
    assert checks(doc)["triton_own_path"]["evidence"]["probe_cache"].startswith(
        str(state.cache / ".fleetcheck-probe-"))


def test_a_hung_read_of_the_workloads_entry_is_one_record(workload_base: Path) -> None:  # noqa: F811
    # The cached driver module a read of which never returns (a hung network mount; here a
    # FIFO no one writes): the own build, which runs first, stops there, and the fresh-cache
    # attempt after it is not tried: the one record is the own path's.
    state = workload_node(workload_base)
    assert state.warm() == (True, "OK")
    module = next(state.cache.glob("*/cuda_utils*.so"))
    module.unlink()
    os.mkfifo(module)
    state.give(module)
    # A deadline that a busy machine still reaches the own build within (it then waits there).
    doc = state.probe(deadline=10)
    by_id = checks(doc)
    assert by_id["triton_own_path"]["status"] == "error"
    assert by_id["triton_own_path"]["summary"] == (
        "timed out before the workload's own get_current_target() finished (deadline 10.0 s)")
    assert (by_id["triton_target"]["status"], by_id["triton_target"]["summary"]) == (
        "skip", "not tried: the workload's own get_current_target(), which runs first, did "
        "not finish")
    assert (doc["triton"]["verdict"], doc["triton"]["cause"]) == ("unknown", "triton_own_path")
    assert doc["duration_s"] < 60


def test_a_corrupt_module_this_triton_rebuilds_is_gpu_and_stays_untouched(
        workload_base: Path) -> None:  # noqa: F811
    state = workload_node(workload_base)
    assert state.warm() == (True, "OK")
    for module in state.cache.glob("*/cuda_utils*.so"):
        module.write_bytes(module.read_bytes()[:100])  # an interrupted copy
    before = snapshot(state.node.home, state.tmp)
    doc = state.probe()
    assert snapshot(state.node.home, state.tmp) == before
    assert doc["triton"]["verdict"] == "gpu"
    assert state.truth() == (True, "OK")
    # The own build found the entry (and rebuilt it beside it): not a build from nothing, so
    # the toolchain is proven in the probe's fresh cache (the driver module's skeleton).
    assert checks(doc)["triton_target"]["evidence"]["cache"] == "skeleton"


def test_a_fresh_cache_build_that_never_finishes_keeps_the_own_builds_answer(
        workload_base: Path) -> None:  # noqa: F811
    # The own build loads the warm entries; then the compiler of the fresh cache's build kills
    # the workload's interpreter (as the OOM killer would; a hang ends the same way at the
    # deadline): that attempt never reports, and the own build's pass stays.
    state = workload_node(workload_base)
    assert state.warm() == (True, "OK")
    gcc = state.node.bindir / "gcc"
    gcc.unlink()
    gcc.write_text('#!/bin/sh\ncase "$*" in *cuda_utils*) kill -KILL "$PPID";; esac\nexit 1\n')
    gcc.chmod(0o755)
    doc = state.probe()
    by_id = checks(doc)
    assert by_id["triton_own_path"]["status"] == "pass"
    assert (by_id["triton_target"]["status"], by_id["triton_target"]["summary"]) == (
        "error", "get_current_target() did not report (workload interpreter exited with rc -9)")


def test_a_triton_whose_cache_manager_is_bound_at_import_is_proven_in_place(
        workload_base: Path) -> None:  # noqa: F811
    # Triton 2.1-3.3: get_cache_manager() returns the module's __cache_cls, bound to
    # FileCacheManager at import (runtime/cache.py of those releases, as written there). The
    # proof goes through it as well: nothing is written into the real cache, the keys are seen.
    state = workload_node(workload_base)
    cache_py = state.node.site / "triton/runtime/cache.py"
    text = cache_py.read_text()
    new = text.replace(
        "def get_cache_manager(key) -> CacheManager:\n"
        "    cls = knobs.cache.manager_class or FileCacheManager\n"
        "    return cls(_base32(key))\n", OLD_GET_CACHE_MANAGER)
    assert new != text
    cache_py.write_text(new)
    before = snapshot(state.node.home, state.tmp)
    doc = state.probe()
    assert snapshot(state.node.home, state.tmp) == before
    assert doc["triton"]["verdict"] == "gpu"
    assert checks(doc)["cache_entry_corrupt"]["evidence"]["keys"]
    assert checks(doc)["triton_target"]["evidence"]["cache"] == "own"
    assert state.truth() == (True, "OK")


#: get_cache_manager() of Triton 2.1-3.3's runtime/cache.py (the key base32-encoded as this
#: release's build.py expects).
OLD_GET_CACHE_MANAGER = """__cache_cls = FileCacheManager
__cache_cls_nme = "DEFAULT"


def get_cache_manager(key) -> CacheManager:
    import os

    user_cache_manager = os.environ.get("TRITON_CACHE_MANAGER", None)
    global __cache_cls
    global __cache_cls_nme

    if user_cache_manager is not None and user_cache_manager != __cache_cls_nme:
        import importlib

        module_path, clz_nme = user_cache_manager.split(":")
        module = importlib.import_module(module_path)
        __cache_cls = getattr(module, clz_nme)
        __cache_cls_nme = user_cache_manager

    return __cache_cls(_base32(key))
"""


@pytest.mark.parametrize("damage", ["file", "dangling-link", "mode-000"])
def test_an_entry_triton_cannot_use_or_replace_fails_the_node(
        workload_base: Path, damage: str) -> None:  # noqa: F811
    state = workload_node(workload_base)
    assert state.warm() == (True, "OK")
    entry = next(e for e in state.cache.iterdir() if any(e.glob("cuda_utils*")))
    if damage == "mode-000":
        entry.chmod(0)
    else:
        for child in entry.iterdir():
            child.unlink()
        entry.rmdir()
        if damage == "file":
            entry.write_text("")
        else:
            entry.symlink_to(state.base / "scratch-not-mounted" / "entry")
        state.give(entry)
    before = snapshot(state.node.home, state.tmp)
    doc = state.probe()
    assert snapshot(state.node.home, state.tmp) == before
    ok, said = state.truth()
    assert not ok, said
    cause = {"file": "cache_entry_corrupt", "dangling-link": "cache_entry_corrupt",
             "mode-000": "cache_entry_unreadable"}[damage]
    assert (doc["triton"]["verdict"], doc["triton"]["cause"]) == ("cpu-fallback", cause)
    assert str(entry) in checks(doc)[cause]["summary"]
    assert checks(doc)[cause]["fix"]
