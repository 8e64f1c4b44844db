"""Failures read for their errno and object: the path walked as the user, the limits read."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from fleetcheck.probe.parts.evaluation.diagnose import diagnoses
from fleetcheck.probe.parts.evaluation.objects import explain, parse_oserror, read_limits, walk
from tests.nodeenv import make_node, private_mount_prefix, run_probe

GIB16 = 16 << 30
AS_16G = {"AS": {"soft": GIB16, "hard": None, "shell": "ulimit -v"}}


def causes(found: list[tuple[str, Any]]) -> list[str]:
    return [cause for cause, *_ in found]


def test_an_oserror_text_gives_its_errno_and_both_paths() -> None:
    text = ("PermissionError: [Errno 13] Permission denied: "
            "'/x/.triton/cache/ab/cuda_utils.so'")
    assert parse_oserror(text) == {"errno": "EACCES", "strerror": "Permission denied",
                                   "filename": "/x/.triton/cache/ab/cuda_utils.so",
                                   "filename2": None}
    moved = parse_oserror("OSError: [Errno 18] Invalid cross-device link: '/a/x' -> '/b/y'")
    assert moved is not None and (moved["errno"], moved["filename2"]) == ("EXDEV", "/b/y")
    # A tool's text carries the strerror only: the errno is read from it, the path beside it.
    bare = parse_oserror("fatal error: error writing to /tmp/ccAb12.s: No space left on device")
    assert bare is not None and (bare["errno"], bare["filename"]) == ("ENOSPC",
                                                                    "/tmp/ccAb12.s")
    assert parse_oserror("RuntimeError: something new broke") is None


def test_a_dangling_triton_link_names_the_link_and_its_missing_target(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / ".triton").symlink_to(tmp_path / "scratch" / "user" / ".triton")
    text = f"FileExistsError: [Errno 17] File exists: '{home / '.triton'}'"
    found = explain("EEXIST", str(home / ".triton"), text, "", {})
    assert causes(found) == ["path_dangling_link"]
    values = found[0][1]
    assert values["component"] == str(home / ".triton")
    assert values["target"] == str(tmp_path / "scratch" / "user" / ".triton")


def test_a_file_where_a_dir_is_expected_is_named(tmp_path: Path) -> None:
    (tmp_path / "cache").write_text("not a dir")
    path = tmp_path / "cache" / "ab" / "x.so"
    found = explain("ENOTDIR", str(path), "", "", {})
    assert causes(found)[0] == "path_not_a_dir"
    assert found[0][1]["component"] == str(tmp_path / "cache")


def test_a_link_loop_is_named(tmp_path: Path) -> None:
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    _, finding = walk(str(tmp_path / "a" / "x"))
    assert finding is not None and finding["kind"] == "loop"
    assert causes(explain("ELOOP", str(tmp_path / "a" / "x"), "", "", {}))[0] == "path_link_loop"


def test_failed_to_map_segment_under_an_address_space_limit_names_the_limit(
        tmp_path: Path) -> None:
    library = tmp_path / "cache" / "ab" / "cuda_utils.so"
    library.parent.mkdir(parents=True)
    library.write_bytes(b"\x7fELF")
    text = f"ImportError: {library}: failed to map segment from shared object"
    # The cache's mount allows exec: never noexec, whatever the text suggests.
    mountinfo = f"30 1 0:30 / {tmp_path} rw,relatime - tmpfs tmpfs rw\n"
    found = explain(None, None, text, mountinfo, AS_16G, "cache")
    assert causes(found) == ["address_space_limit", "loader_map_failed"]
    assert found[0][1]["limit"] == "AS (ulimit -v)"
    assert found[0][1]["value"] == "16 GiB (16777216 KiB)"
    noexec = f"30 1 0:30 / {tmp_path} rw,noexec,relatime - tmpfs tmpfs rw\n"
    assert causes(explain(None, None, text, noexec, {}, "cache")) == [
        "cache_dir_noexec", "path_noexec", "loader_map_failed"]


def test_resource_errnos_name_the_limit_that_is_set() -> None:
    limits = {"NOFILE": {"soft": 64, "hard": 64, "shell": "ulimit -n"},
              "pids.max": {"soft": 20, "path": "/sys/fs/cgroup/job/pids.max"}}
    files = explain("EMFILE", None, "OSError: [Errno 24] Too many open files", "", limits)
    assert causes(files)[0] == "open_files_limit" and files[0][1]["value"] == "64"
    forks = explain("EAGAIN", None, "BlockingIOError: [Errno 11] Resource temporarily "
                    "unavailable", "", limits)
    assert causes(forks)[0] == "process_limit"
    assert forks[0][1]["limit"] == "/sys/fs/cgroup/job/pids.max"
    # No limit set: the generic cause, never an invented limit.
    assert causes(explain("ENOMEM", None, "", "", {})) == ["process_limits"]


def test_the_limits_are_read_as_getrlimit_and_the_cgroup_give_them() -> None:
    script = ("import json, resource; resource.setrlimit(resource.RLIMIT_NOFILE, (77, 77)); "
              "from fleetcheck.probe.parts.evaluation.objects import read_limits; "
              "print(json.dumps(read_limits()))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60, check=True)
    import json
    limits = json.loads(done.stdout)
    assert {key: limits["NOFILE"][key] for key in ("soft", "hard", "shell")} == {
        "soft": 77, "hard": 77, "shell": "ulimit -n"}
    assert set(limits) >= {"AS", "DATA", "NOFILE", "NPROC", "FSIZE", "MEMLOCK", "STACK"}
    assert read_limits()["AS"]["shell"] == "ulimit -v"


def test_an_entry_owned_by_another_user_is_named_with_its_owner() -> None:
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("needs root and setpriv to make an entry of another user")
    # A dir the other user can reach (pytest's own tmp dirs are root's 0700).
    top = Path(tempfile.mkdtemp(prefix="fleetcheck-objects-"))
    try:
        _foreign_entry(top)
    finally:
        shutil.rmtree(top)


def _foreign_entry(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    entry = cache / "KEY"
    entry.mkdir(parents=True)
    os.chmod(tmp_path, 0o755)
    os.chown(cache, 4242, 4242)
    os.chmod(entry, 0o700)  # root's entry, as `sudo -E` with umask 077 leaves it
    target = entry / "cuda_utils.so"
    script = (f"from fleetcheck.probe.parts.evaluation.objects import explain; "
              f"print(explain('EACCES', {str(target)!r}, '', '', {{}}, 'cache', "
              f"{str(cache)!r})[:2])")
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    done = subprocess.run([str(shutil.which("setpriv")), "--reuid=4242", "--regid=4242",
                           "--clear-groups", sys.executable, "-c", script], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "('path_foreign_owner'" in done.stdout
    assert f"'component': '{entry}'" in done.stdout and "'owner': 'root (uid 0)'" in done.stdout
    # The entry is below the cache dir: it is named before the cache dir's own cause.
    assert done.stdout.index("path_foreign_owner") < done.stdout.index("cache_dir_unwritable")


def test_ldconfig_without_its_cache_is_not_a_missing_ldconfig() -> None:
    text = "/sbin/ldconfig: Can't open cache file /etc/ld.so.cache\n: No such file or directory"
    assert causes(diagnoses({"error": text}, {}))[0] == "ld_so_cache_missing"
    # Triton's own libcuda_dirs() runs it with check_output: only the exit status is said.
    triton = ("CalledProcessError: Command '['/sbin/ldconfig', '-p']' returned non-zero exit "
              "status 1.")
    assert causes(diagnoses({"error": triton}, {}))[0] == "ld_so_cache_missing"


@pytest.mark.parametrize(("text", "cause"), [
    ("gcc: fatal error: cannot execute 'cc1': execvp: No such file or directory",
     "compiler_incomplete"),
    ("/usr/bin/ld: cannot find crti.o: No such file or directory", "libc_crt_missing"),
    ("/tmp/x/main.c:3:10: fatal error: Python.h: No such file or directory",
     "python_headers_missing"),
    ("ImportError: libfoo.so.3: cannot open shared object file: No such file or directory",
     "shared_library_missing"),
])
def test_tool_texts_name_the_part_they_miss(text: str, cause: str) -> None:
    found = diagnoses({"compiler": [{"argv": ["gcc"], "rc": 1, "stderr": text}]}, {})
    assert causes(found)[0] == cause


#: Mounts a 4 MiB tmpfs of 64 inodes at $0 and uses every inode, then runs the command.
FILL_INODES = ('keep=$PATH; PATH=/usr/sbin:/usr/bin:/sbin:/bin; '
               'mount -t tmpfs -o size=4m,nr_inodes=64 tmpfs "$0" && mkdir -p "$0/cache" && '
               'i=0; while touch "$0/f$i" 2>/dev/null; do i=$((i+1)); done; '
               'shift; PATH=$keep; export PATH; exec "$@"')


def _inode_prefix(where: Path) -> list[str] | None:
    """A tmpfs at `where` with bytes left and no inode (private mount namespace), or None."""
    return private_mount_prefix(where, FILL_INODES, "-")


def test_a_cache_out_of_inodes_says_inodes_not_space(tmp_path: Path) -> None:
    full = tmp_path / "full"
    prefix = _inode_prefix(full)
    if prefix is None:
        pytest.skip("cannot mount a tmpfs in a private mount namespace here (unshare -m)")
    node = make_node(tmp_path / "node", env={"TRITON_CACHE_DIR": str(full / "cache")})
    rc, doc, _ = run_probe(node, prefix=prefix)
    triton = doc["triton"]
    assert isinstance(triton, dict)
    assert (rc, triton["verdict"], triton["cause"]) == (1, "cpu-fallback", "fs_out_of_inodes")
    assert "inodes" in triton["fix"] and str(full) in triton["fix"]
    assert "free space" not in triton["fix"]


def _as_limit(gib: int) -> list[str] | None:
    prlimit = shutil.which("prlimit")
    return [prlimit, f"--as={gib << 30}", "--"] if prlimit else None


def test_cuda_out_of_memory_under_an_address_space_limit_names_the_limit(tmp_path: Path) -> None:
    # The case: `ulimit -v 16G`, cuInit answers CUDA_ERROR_OUT_OF_MEMORY (2).
    prefix = _as_limit(16)
    if prefix is None:
        pytest.skip("no prlimit here")
    node = make_node(tmp_path / "node", init_rc=2)
    rc, doc, _ = run_probe(node, prefix=prefix)
    triton = doc["triton"]
    assert isinstance(triton, dict)
    assert (rc, triton["verdict"], triton["cause"]) == (1, "cpu-fallback", "address_space_limit")
    assert "AS (ulimit -v)=16 GiB (16777216 KiB)" in triton["fix"]
    assert "ulimit -v unlimited" in triton["fix"]
    facts = doc["facts"]
    assert isinstance(facts, dict) and facts["limits"]["AS"]["soft"] == 16 << 30
    # Without the limit the same cuInit error is the driver's.
    rc, doc, _ = run_probe(node)
    assert isinstance(doc["triton"], dict) and doc["triton"]["cause"] == "zero_active_drivers"


def test_failed_to_map_segment_is_never_noexec_on_an_exec_mount(tmp_path: Path) -> None:
    error = ("ImportError: /home/job/.triton/cache/AB/cuda_utils.cpython-312-x86_64-linux-gnu.so:"
             " failed to map segment from shared object")
    prefix = _as_limit(16)
    if prefix is None:
        pytest.skip("no prlimit here")
    node = make_node(tmp_path / "node", triton_error=error)
    rc, doc, _ = run_probe(node, prefix=prefix)
    checks = {check["id"]: check for check in doc["checks"]}
    triton = doc["triton"]
    assert isinstance(triton, dict)
    assert checks["cache_dir_noexec"]["status"] == "pass"
    assert (rc, triton["cause"]) == (1, "address_space_limit")
    assert "ulimit -v" in triton["fix"]
    # No limit: the library that does not map is named, still not the mount.
    rc, doc, _ = run_probe(node)
    assert isinstance(doc["triton"], dict) and doc["triton"]["cause"] == "loader_map_failed"


def test_a_dangling_triton_home_is_named_on_the_node(tmp_path: Path) -> None:
    # ~/.triton a link to a scratch file system not mounted here: Triton's os.makedirs raises
    # FileExistsError; the probe names the link, its target and the two ways out.
    node = make_node(tmp_path / "node")
    missing = tmp_path / "scratch-not-mounted" / ".triton"
    (node.home / ".triton").symlink_to(missing)
    rc, doc, _ = run_probe(node)
    triton = doc["triton"]
    assert isinstance(triton, dict)
    assert (rc, triton["verdict"], triton["cause"]) == (1, "cpu-fallback", "path_dangling_link")
    assert f"create {missing}" in triton["fix"]
    assert f"rm {node.home / '.triton'}" in triton["fix"]
    own = {c["id"]: c for c in doc["checks"]}["triton_own_path"]
    assert (own["evidence"]["object"]["component"], own["evidence"]["object"]["target"]) == (
        str(node.home / ".triton"), str(missing))
    # The summary names them too (after the error line; 400 characters at most).
    assert "a symbolic link to a path that does not exist" in own["summary"]


def test_ldconfig_without_its_cache_on_the_node_gets_the_ldconfig_run(tmp_path: Path) -> None:
    node = make_node(tmp_path / "node")
    # What /sbin/ldconfig -p prints, as root's ldconfig does, where /etc/ld.so.cache is absent.
    ldconfig = node.sysroot / "sbin" / "ldconfig"
    ldconfig.write_text("#!/bin/sh\nprintf \"/sbin/ldconfig: Can't open cache file "
                        "/etc/ld.so.cache\\n: No such file or directory\\n\" >&2\nexit 1\n")
    rc, doc, _ = run_probe(node)
    checks = {c["id"]: c for c in doc["checks"]}
    triton = doc["triton"]
    assert isinstance(triton, dict)
    assert checks["ldconfig_binary_missing"]["status"] == "pass"
    assert checks["libcuda_not_in_ldcache"]["status"] == "fail"
    assert (rc, triton["cause"]) == (1, "ld_so_cache_missing")
    assert "run /sbin/ldconfig as root (writes /etc/ld.so.cache)" in triton["fix"]


def test_a_gcc_without_cc1_gets_the_compilers_reinstall(tmp_path: Path) -> None:
    node = make_node(tmp_path / "node")
    # gcc 12 as Debian leaves it when cpp-12 (which ships cc1) is gone: its own words.
    gcc = node.bindir / "gcc"
    gcc.unlink()
    gcc.write_text("#!/bin/sh\necho \"gcc: fatal error: cannot execute 'cc1': execvp: No such "
                   "file or directory\" >&2\necho 'compilation terminated.' >&2\nexit 1\n")
    gcc.chmod(0o755)
    rc, doc, _ = run_probe(node)
    checks = {c["id"]: c for c in doc["checks"]}
    triton = doc["triton"]
    assert isinstance(triton, dict)
    assert checks["no_c_compiler"]["status"] == "pass"
    assert (rc, triton["cause"]) == (1, "compiler_incomplete")
    assert "apt-get install -y --reinstall gcc" in triton["fix"]


def test_a_gcc_without_libcs_startup_files_names_them(tmp_path: Path) -> None:
    node = make_node(tmp_path / "node")
    # Debian's gcc installed with --no-install-recommends: no libc6-dev, so no crti.o.
    gcc = node.bindir / "gcc"
    gcc.unlink()
    gcc.write_text("#!/bin/sh\necho '/usr/bin/ld: cannot find crti.o: No such file or "
                   "directory' >&2\necho 'collect2: error: ld returned 1 exit status' >&2\n"
                   "exit 1\n")
    gcc.chmod(0o755)
    rc, doc, _ = run_probe(node)
    checks = {c["id"]: c for c in doc["checks"]}
    triton = doc["triton"]
    assert isinstance(triton, dict)
    assert (checks["no_linker"]["status"], checks["libc_headers_missing"]["status"]) == (
        "pass", "pass")
    assert (rc, triton["cause"]) == (1, "libc_crt_missing")
    assert triton["fix"].endswith("apt-get install -y libc6-dev")
