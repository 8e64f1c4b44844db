"""A node whose Triton builds as Triton does, run as a workload user, with its real state.

The node's stub Triton builds its driver module and launchers through the newest release's own
runtime/build.py and runtime/cache.py (tests/nodeenv.py, real_triton_build). Run as root, the
suite plays the workload user with `setpriv` (uid and gid 65534, the system Python: the
suite's interpreter may live under root's 0700 home) so that entries owned by another user,
and modes, mean what they mean on a real node; run as another user, it is that user.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from tests.nodeenv import NodeEnv, make_node, real_triton_build, run_probe

#: The workload user when the suite runs as root (nobody's uid on Debian).
USER_ID = 65534
SYSTEM_PYTHON = "/usr/bin/python3"
IS_ROOT = os.geteuid() == 0

#: The workload's own start, as it meets Triton: get_current_target() (the driver module), the
#: launcher of a kernel it ran before, then one of a kernel new to the cache. It says which step
#: failed: "FAIL new-compiler ..." when only the new kernel's build failed in the compiler (a
#: warm cache hides a broken toolchain until the first new kernel: fleetcheck's
#: stale_cache_masks_compiler, a gpu verdict with that cause).
TRUTH = r"""
import os, subprocess, sys
step = "target"
try:
    import triton
    from triton.runtime.driver import cache_dir
    driver = triton.runtime.driver.active
    driver.get_current_target()
    step = "old"
    driver.build_launcher(os.path.join(cache_dir(), "launcher-add_one"))
    step = "new"
    if "--warm-only" not in sys.argv:
        driver.build_launcher(os.path.join(cache_dir(), "launcher-new_kernel"))
except BaseException as e:
    if step == "new" and (isinstance(e, subprocess.CalledProcessError)
                          or "Failed to find C compiler" in str(e)):
        step = "new-compiler"
    print("FAIL %s %s: %s" % (step, type(e).__name__, e))
    sys.exit(1)
print("OK")
"""


@dataclass(frozen=True)
class WorkloadNode:
    """A node, and how to run a command as its workload user."""

    node: NodeEnv
    prefix: tuple[str, ...]
    base: Path

    @property
    def cache(self) -> Path:
        return self.node.home / ".triton" / "cache"

    @property
    def tmp(self) -> Path:
        return Path(self.node.env["TMPDIR"])

    def probe(self, prefix: tuple[str, ...] = (), deadline: float | None = None) -> dict:
        args = ("--deadline", str(deadline)) if deadline is not None else ()
        _, doc, _ = run_probe(self.node, *args, prefix=[*prefix, *self.prefix], timeout=180)
        return doc

    def truth(self, *args: str, prefix: tuple[str, ...] = ()) -> tuple[bool, str]:
        done = subprocess.run([*prefix, *self.prefix, self.node.python, "-c", TRUTH, *args],
                              env=self.node.env, capture_output=True, text=True, timeout=120,
                              cwd=self.node.root)
        lines = done.stdout.strip().splitlines()
        return done.returncode == 0, (lines[-1] if lines else done.stderr[-600:])

    def warm(self) -> tuple[bool, str]:
        """The workload's own first start, as its user, in its own new cache (its driver
        module's and an earlier kernel's launcher's entries): truth()'s answer."""
        self.cache.mkdir(parents=True)
        self.give(self.node.home / ".triton")
        return self.truth("--warm-only")

    def as_root(self, *args: str, umask: int = 0o077) -> tuple[bool, str]:
        """The workload run once by root (sudo -E) with `umask`, in the user's own home."""
        done = subprocess.run(["/bin/sh", "-c", 'umask "$0"; exec "$@"', f"{umask:03o}",
                               self.node.python, "-c", TRUTH, *args], env=self.node.env,
                              capture_output=True, text=True, timeout=120, cwd=self.node.root)
        return done.returncode == 0, done.stdout.strip()

    def give(self, *paths: Path) -> None:
        """Make `paths` (and what is under them) the workload user's."""
        if IS_ROOT:
            for path in paths:
                subprocess.run(["chown", "-hR", f"{USER_ID}:{USER_ID}", str(path)], check=True)


@pytest.fixture
def workload_base() -> Iterator[Path]:
    """A dir every user can traverse (pytest's tmp_path is root's 0700 when run as root)."""
    base = Path(tempfile.mkdtemp(prefix="fleetcheck-state-"))
    base.chmod(0o755)
    try:
        yield base
    finally:
        subprocess.run(["chmod", "-R", "u+rwX", str(base)], capture_output=True)
        shutil.rmtree(base, ignore_errors=True)


#: Whether the interpreter has Python.h where Triton looks (posix_local -> posix_prefix).
HAS_HEADERS = ("import os, sysconfig; raise SystemExit(not os.path.exists(os.path.join("
               "sysconfig.get_paths('posix_prefix')['include'], 'Python.h')))")


def _system_python_builds() -> bool:
    if not Path(SYSTEM_PYTHON).exists():
        return False
    return subprocess.run([SYSTEM_PYTHON, "-c", HAS_HEADERS], capture_output=True).returncode == 0


def workload_node(base: Path, name: str = "node", **options: object) -> WorkloadNode:
    """A real-build node under `base`, its home and temp dir the workload user's."""
    if IS_ROOT and not _system_python_builds():
        pytest.skip(f"no {SYSTEM_PYTHON} with its Python.h to run as another user")
    node = real_triton_build(make_node(base / name, **options))  # type: ignore[arg-type]
    tmp = node.root / "job-tmp"
    tmp.mkdir()
    node.env["TMPDIR"] = str(tmp)
    prefix: tuple[str, ...] = ()
    if IS_ROOT:
        node = replace(node, python=SYSTEM_PYTHON)
        prefix = (shutil.which("setpriv") or "/usr/bin/setpriv", f"--reuid={USER_ID}",
                  f"--regid={USER_ID}", "--clear-groups", "--")
        subprocess.run(["chown", "-R", f"{USER_ID}:{USER_ID}", str(node.root)], check=True)
    return WorkloadNode(node=node, prefix=prefix, base=base)


def snapshot(*roots: Path) -> dict[str, tuple[str, int, int, int, int]]:
    """Every path under `roots` (not following links): its type, size, owner, group, mode."""
    seen: dict[str, tuple[str, int, int, int, int]] = {}
    for root in roots:
        if not os.path.lexists(root):
            seen[str(root)] = ("absent", 0, 0, 0, 0)
            continue
        stack = [str(root)]
        while stack:
            path = stack.pop()
            st = os.lstat(path)
            kind = ("dir" if stat.S_ISDIR(st.st_mode) else "link" if stat.S_ISLNK(st.st_mode)
                    else "file")
            size = 0 if kind == "dir" else st.st_size
            seen[path] = (kind, size, st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode))
            if kind == "dir":
                try:
                    stack.extend(os.path.join(path, n) for n in os.listdir(path))
                except OSError:
                    pass
    return seen


def checks(doc: dict) -> dict[str, dict]:
    return {c["id"]: c for c in doc["checks"]}
