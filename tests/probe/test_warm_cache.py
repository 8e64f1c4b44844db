"""The warm-cache retry reads the user's Triton cache and never writes to or deletes from it.

The workload's own path (checks/workload.py) builds in a throw-away subdirectory of that cache,
removed afterwards: every entry is left as it was; only the cache dir's own mtime moves.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from tests.nodeenv import STUB_KEY, make_node, run_probe


def _snapshot(cache: Path) -> dict[str, tuple[int, str]]:
    """Every entry under the cache: its mtime and, for a file, a digest of its bytes."""
    entries = {}
    for path in [cache, *sorted(cache.rglob("*"))]:
        stat = path.lstat()
        digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "dir"
        entries[str(path.relative_to(cache))] = (stat.st_mtime_ns, digest)
    return entries


@pytest.mark.parametrize("explicit", [False, True], ids=["home-cache", "TRITON_CACHE_DIR"])
def test_masking_is_found_and_the_user_cache_is_left_as_it_was(tmp_path: Path,
                                                               explicit: bool) -> None:
    cache = tmp_path / "node" / "home" / ".triton" / "cache"
    other_job = cache / "another-jobs-key" / "kernel.cubin"
    env = {"TRITON_CACHE_DIR": str(cache)} if explicit else None
    node = make_node(tmp_path / "node", compiler=False, warm_cache=True,
                     concurrent_write=other_job, env=env)
    before = _snapshot(cache)
    assert f"{STUB_KEY}/cuda_utils.so" in before

    rc, doc, stderr = run_probe(node)

    assert (rc, doc["status"], doc["triton"]["verdict"], doc["triton"]["cause"], stderr) == (
        0, "warn", "gpu", "stale_cache_masks_compiler", "")
    stale = next(c for c in doc["checks"] if c["id"] == "stale_cache_masks_compiler")
    assert stale["evidence"]["cache_dir"] == str(cache)
    # The stub was loaded from the user's cache (the other job's write proves the hit), and
    # the file that job wrote meanwhile is still there; nothing else changed.
    after = _snapshot(cache)
    assert other_job.read_text() == "written by another job\n"
    # (The cache dir's own mtime moved with that job's new entry.)
    assert {k: v for k, v in after.items() if k != "." and not k.startswith("another-jobs")} == {
        k: v for k, v in before.items() if k != "."}
    assert sorted(after) == sorted([*before, "another-jobs-key", "another-jobs-key/kernel.cubin"])


def test_a_cache_entry_being_written_is_not_followed(tmp_path: Path) -> None:
    cache = tmp_path / "node" / "home" / ".triton" / "cache"
    node = make_node(tmp_path / "node", compiler=False, warm_cache=True)
    partial = cache / "key-in-progress" / "tmp.pid_42_0" / "kernel.json"
    partial.parent.mkdir(parents=True)
    partial.write_text("{}")
    (cache / "stray-file").write_text("not a key dir\n")
    before = _snapshot(cache)

    rc, doc, _ = run_probe(node)

    assert (rc, doc["triton"]["cause"]) == (0, "stale_cache_masks_compiler")
    after = _snapshot(cache)
    # Every entry as it was; the dir's own mtime moved with the throw-away subdirectory.
    assert {k: v for k, v in after.items() if k != "."} == {
        k: v for k, v in before.items() if k != "."}


def test_an_unwritable_cache_is_found_without_writing_to_it(tmp_path: Path) -> None:
    cache = tmp_path / "node" / "home" / ".triton" / "cache"
    node = make_node(tmp_path / "node", warm_cache=True)
    cache.chmod(0o555)
    try:
        before = _snapshot(cache)
        rc, doc, _ = run_probe(node)
        after = _snapshot(cache)
    finally:
        cache.chmod(0o755)
    check = next(c for c in doc["checks"] if c["id"] == "cache_dir_unwritable")
    if os.geteuid() == 0:  # root writes anyway, as Triton would
        assert check["status"] == "pass"
    else:
        assert (rc, check["status"], check["summary"]) == (1, "fail", (
            f"Triton cache {cache} not writable: PermissionError: [Errno 13] Permission denied: "
            f"'{cache}'"))
    assert {k: v for k, v in after.items() if k != "."} == {
        k: v for k, v in before.items() if k != "."}
