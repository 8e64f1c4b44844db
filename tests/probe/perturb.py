"""Perturbations of a workload node's state: what users' nodes are found in.

Each is a change to one component of the workload's paths (its home, ~/.triton, the cache, an
entry dir, a cached module, its temp dir): another owner, a mode, a link (dangling, a loop, to a
file), a file in its place, a truncated module, a half-written entry; or a file system mounted
there in a private mount namespace (full, out of inodes, read-only, noexec); or a resource limit
(prlimit); or the environment (TRITON_CACHE_DIR, TMPDIR); or a tool or a package part removed
(the compiler, the linker, the driver's libcuda.so.1 link). `apply` makes it, and returns the
command prefix the workload and the probe run under.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.probe.workload_state import IS_ROOT, WorkloadNode

#: What can happen to one path.
PATH_CHANGES = ("foreign-0700", "foreign-0755", "mode-000", "mode-0500", "mode-0300", "file",
                "dangling-link", "link-loop", "link-to-file", "removed")
#: What can happen to a cached module or an entry only.
ENTRY_CHANGES = ("truncated", "not-elf", "half-written", "dir-instead")
MOUNTS = ("full", "no-inodes", "read-only", "noexec")
LIMITS = ("fsize-4k", "nofile-64")
ENVS = ("cache-under-file", "cache-elsewhere", "tmpdir-missing", "tmpdir-file")
TOOLS = ("no-gcc", "no-ld", "no-libcuda-link")

#: The components of the workload's paths a change may hit.
COMPONENTS = ("home", "triton", "cache", "driver-entry", "launcher-entry", "driver-module",
              "launcher-module", "tmp")


@dataclass(frozen=True)
class Perturbation:
    kind: str          # "path", "mount", "limit", "env", "tool"
    change: str
    component: str = ""

    def __str__(self) -> str:
        return f"{self.kind}:{self.change}" + (f"@{self.component}" if self.component else "")


def component_path(state: WorkloadNode, component: str) -> Path | None:
    home = state.node.home
    fixed = {"home": home, "triton": home / ".triton", "cache": state.cache, "tmp": state.tmp}
    if component in fixed:
        return fixed[component]
    if not state.cache.is_dir():
        return None
    pattern = "cuda_utils*.so" if component.startswith("driver") else "__triton_launcher*.so"
    for module in state.cache.glob("*/" + pattern):
        return module if component.endswith("module") else module.parent
    return None


def applicable(perturbation: Perturbation, warm: bool) -> bool:
    """Whether it can be made on this machine and this state."""
    needs_root = (perturbation.change.startswith("foreign") or perturbation.kind == "mount")
    if needs_root and not IS_ROOT:
        return False
    entry = perturbation.component.endswith(("entry", "module"))
    if entry and not warm:
        return False
    if perturbation.change in ENTRY_CHANGES and not entry:
        return False
    if perturbation.change in ("truncated", "not-elf") and not perturbation.component.endswith(
            "module"):
        return False
    wants = {"half-written": "entry", "dir-instead": "module"}.get(perturbation.change)
    if wants and not perturbation.component.endswith(wants):
        return False
    return True


def _replace_path(path: Path, change: str, state: WorkloadNode) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif os.path.lexists(path):
        path.unlink()
    if change == "file":
        path.write_text("")
    elif change == "dangling-link":
        path.symlink_to(state.base / "scratch-not-mounted" / path.name)
    elif change == "link-loop":
        path.symlink_to(path.name)
    elif change == "link-to-file":
        target = state.node.root / ("a-file-" + path.name)
        target.write_text("")
        state.give(target)
        path.symlink_to(target)


def apply(state: WorkloadNode, p: Perturbation) -> tuple[str, ...]:
    """Make `p` on the node; the prefix (a private mount namespace, a limit) to run under."""
    if p.kind == "path":
        path = component_path(state, p.component)
        if path is None:
            return ()
        if p.component in ("triton", "cache") and not path.exists():
            path.mkdir(parents=True)  # a cold cache that exists, empty
            state.give(state.node.home / ".triton")
        if p.change.startswith("foreign"):
            os.chown(path, 0, 0, follow_symlinks=False)
            path.chmod(0o700 if p.change.endswith("0700") else 0o755)
        elif p.change.startswith("mode"):
            path.chmod(int(p.change[5:], 8))
        elif p.change == "truncated":
            path.write_bytes(path.read_bytes()[:200])
        elif p.change == "not-elf":
            path.write_bytes(b"<html>502 Bad Gateway</html>\n" * 40)
        elif p.change == "half-written":
            for child in path.iterdir():
                child.unlink()
            (path / ("tmp.pid_4242_" + "0" * 32)).mkdir()
            state.give(path)
        elif p.change == "dir-instead":
            path.unlink()
            path.mkdir()
            state.give(path)
        elif p.change == "removed":
            _replace_path(path, p.change, state)
        else:
            _replace_path(path, p.change, state)
            state.give(path)
        return ()
    if p.kind == "env":
        env = state.node.env
        if p.change == "cache-under-file":
            (state.node.root / "plain-file").write_text("")
            env["TRITON_CACHE_DIR"] = str(state.node.root / "plain-file" / "cache")
        elif p.change == "cache-elsewhere":
            env["TRITON_CACHE_DIR"] = str(state.node.root / "scratch" / "triton-cache")
            (state.node.root / "scratch").mkdir()
            state.give(state.node.root / "scratch")
        elif p.change == "tmpdir-missing":
            env["TMPDIR"] = str(state.node.root / "no-such-tmp")
        elif p.change == "tmpdir-file":
            (state.node.root / "tmp-file").write_text("")
            env["TMPDIR"] = str(state.node.root / "tmp-file")
        return ()
    if p.kind == "tool":
        bindir = state.node.bindir
        if p.change == "no-gcc":
            for name in ("gcc", "cc", "clang"):
                if os.path.lexists(bindir / name):
                    (bindir / name).unlink()
        elif p.change == "no-libcuda-link":
            # The driver package's libcuda.so.1 link gone (a half-removed driver): the linker
            # cache still names it.
            (state.node.root / "lib" / "libcuda.so.1").unlink()
        elif p.change == "no-ld":
            for name in ("ld", "ld.bfd", "ld.gold"):
                if os.path.lexists(bindir / name):
                    (bindir / name).unlink()
        return ()
    if p.kind == "limit":
        prlimit = shutil.which("prlimit") or "/usr/bin/prlimit"
        return {"fsize-4k": (prlimit, "--fsize=4096", "--"),
                "nofile-64": (prlimit, "--nofile=64", "--")}[p.change]
    # A file system at ~/.triton in a private mount namespace, made anew for each run.
    target = state.node.home / ".triton"
    target.mkdir(exist_ok=True)
    state.give(target)
    uid, gid = (65534, 65534) if IS_ROOT else (os.getuid(), os.getgid())
    own = f"uid={uid},gid={gid},mode=0755"
    script = {
        "full": f'mount -t tmpfs -o size=64k,{own} tmpfs "$0" && '
                'dd if=/dev/zero of="$0/fill" bs=4k 2>/dev/null; ',
        "no-inodes": f'mount -t tmpfs -o nr_inodes=3,{own} tmpfs "$0" && '
                     'touch "$0/a" 2>/dev/null; ',
        "read-only": 'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" && ',
        "noexec": 'mount --bind "$0" "$0" && mount -o remount,bind,noexec "$0" && ',
    }[p.change]
    return (shutil.which("unshare") or "/usr/bin/unshare", "-m", "/bin/sh", "-c",
            "PATH=/usr/sbin:/usr/bin:/sbin:/bin; " + script + 'shift; exec "$@"',
            str(target), "--")


def unshare_works() -> bool:
    """Whether this machine lets us make a private mount namespace (root, no seccomp ban)."""
    if not IS_ROOT:
        return False
    done = subprocess.run([shutil.which("unshare") or "/usr/bin/unshare", "-m", "/bin/true"],
                          capture_output=True)
    return done.returncode == 0
