"""The walk over the workload's cache entries (scripts/workload.py, audit_entries), run as sent."""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
from pathlib import Path

import pytest

from fleetcheck.probe.parts.core.stages import HELPER_PRELUDE
from fleetcheck.probe.parts.scripts import stage_script


@pytest.fixture(scope="module")
def script() -> dict:
    space: dict = {"__name__": "fleetcheck_test"}
    exec(HELPER_PRELUDE + stage_script("workload"), space)
    return space


def key(n: int) -> str:
    return base64.b32encode(hashlib.sha256(str(n).encode()).digest()).decode().rstrip("=")


def module(entry: Path, data: bytes) -> Path:
    entry.mkdir(parents=True, exist_ok=True)
    path = entry / "cuda_utils.cpython-311-x86_64-linux-gnu.so"
    path.write_bytes(data)
    return path


ELF = Path(shutil.which("true") or "/bin/true").read_bytes()


def test_a_corrupt_module_is_a_problem_only_where_triton_does_not_rebuild_it(
        tmp_path: Path, script: dict) -> None:
    module(tmp_path / key(1), ELF[:300])
    module(tmp_path / key(2), b"<html>502</html>\n")
    module(tmp_path / key(3), ELF)
    rebuilt = script["audit_entries"](str(tmp_path), True)
    assert (rebuilt["count"], rebuilt["problems"]) == (3, [])
    raised = script["audit_entries"](str(tmp_path), False)
    whys = sorted((Path(p["entry"]).name, p["kind"], p["why"].split(";")[0])
                  for p in raised["problems"])
    assert whys == sorted([(key(1), "corrupt", "file too short (300 bytes, its headers end at "
                            + str(_headers_end(ELF)) + ")"),
                           (key(2), "corrupt", "not an ELF file (17 bytes)")])


def _headers_end(data: bytes) -> int:
    import struct
    phoff, shoff = struct.unpack("<QQ", data[32:48])
    phsize, phnum, shsize, shnum = struct.unpack("<HHHH", data[54:62])
    return max(phoff + phsize * phnum, shoff + shsize * shnum)


def test_types_and_links_where_triton_keeps_an_entry(tmp_path: Path, script: dict) -> None:
    (tmp_path / key(1)).write_text("")                       # a file where a dir is kept
    (tmp_path / key(2)).symlink_to(tmp_path / "not-mounted")  # a dangling link
    (tmp_path / key(3)).symlink_to(key(3))                   # a loop
    module(tmp_path / key(4), ELF).unlink()
    (tmp_path / key(4) / "cuda_utils.cpython-311-x86_64-linux-gnu.so").mkdir()  # a dir for a file
    (tmp_path / "notes.txt").write_text("")                  # not a key: Triton never opens it
    out = script["audit_entries"](str(tmp_path), True)
    found = {Path(p["entry"]).name: p["why"] for p in out["problems"]}
    assert found == {key(1): "a file where Triton keeps an entry dir",
                     key(2): f"a link to {tmp_path / 'not-mounted'}, which does not exist",
                     key(3): f"a link loop ({key(3)})",
                     key(4): "a dir where Triton keeps a file"}
    assert {p["kind"] for p in out["problems"]} == {"corrupt"}


def test_an_entry_it_cannot_enter_is_unreadable_or_another_users(tmp_path: Path,
                                                                   script: dict) -> None:
    if os.geteuid() == 0:
        pytest.skip("root enters every dir")
    entry = tmp_path / key(1)
    module(entry, ELF)
    entry.chmod(0)
    try:
        out = script["audit_entries"](str(tmp_path), True)
    finally:
        entry.chmod(0o755)
    assert [(p["kind"], p["why"]) for p in out["problems"]] == [
        ("unreadable", "cannot be entered (mode 0o0)")]


def test_a_cache_too_large_for_the_time_is_read_that_far(tmp_path: Path, script: dict) -> None:
    for n in range(5):
        module(tmp_path / key(n), ELF)
    out = script["audit_entries"](str(tmp_path), True, budget=-1)
    assert (out["count"], out["unread"]) == (0, 5)
    assert script["audit_entries"](str(tmp_path), True)["count"] == 5


def test_a_half_written_entry_is_a_problem_only_where_it_cannot_be_written(
        tmp_path: Path, script: dict) -> None:
    if os.geteuid() == 0:
        pytest.skip("root writes every dir")
    entry = tmp_path / key(1)
    (entry / ("tmp.pid_4242_" + "0" * 32)).mkdir(parents=True)
    (entry / "lock").write_text("")
    assert script["audit_entries"](str(tmp_path), True)["problems"] == []
    entry.chmod(0o555)
    try:
        found = script["audit_entries"](str(tmp_path), True)["problems"]
    finally:
        entry.chmod(0o755)
    assert [(p["kind"], p["why"]) for p in found] == [
        ("unreadable", "half-written (lock, tmp.pid_4242_" + "0" * 32 + ") and not writable")]


def test_a_proof_killed_midway_leaves_no_tmp_dir_in_the_real_entries(tmp_path: Path) -> None:
    from fleetcheck.probe.parts.facts.cache import remove_throwaway
    name = ".fleetcheck-probe-42-abcd"
    cache = tmp_path / "cache"
    made_by_proof = cache / key(1)       # the proof made it for its key: empty once swept
    (made_by_proof / f"tmp.pid_42_{name}").mkdir(parents=True)
    real = cache / key(2)                # a real entry the proof was writing beside
    module(real, ELF)
    (real / f"tmp.pid_42_{name}" / "cuda_utils.so").parent.mkdir()
    (real / f"tmp.pid_42_{name}" / "cuda_utils.so").write_bytes(ELF)
    other = cache / key(3) / "tmp.pid_7_5f0c"  # another process's put: not ours
    other.mkdir(parents=True)
    remove_throwaway(name, str(cache), {}, [])
    assert sorted(p.relative_to(cache).as_posix() for p in cache.rglob("*")) == sorted([
        key(2), f"{key(2)}/cuda_utils.cpython-311-x86_64-linux-gnu.so", key(3),
        f"{key(3)}/tmp.pid_7_5f0c"])
