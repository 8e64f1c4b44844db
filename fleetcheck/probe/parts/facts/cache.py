"""Triton's cache directory and the file systems under it (/proc/self/mountinfo)."""

import os
import re


def mount_of(path, mountinfo):
    """(mount point, options) of the mount that holds `path`, from /proc/self/mountinfo."""
    best = None
    for line in (mountinfo or "").splitlines():
        fields = line.split()
        if len(fields) < 6:
            continue
        point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4])
        inside = path == point or path.startswith(point.rstrip("/") + "/")
        if inside and (best is None or len(point) >= len(best[0])):
            best = (point, fields[5])
    return best


#: File-system types of shared network or FUSE mounts (fuse.* counted separately).
NETWORK_FS = frozenset({"nfs", "nfs4", "lustre", "gpfs", "beegfs", "cifs", "smb3", "smbfs",
                        "ceph", "glusterfs", "afs", "ocfs2", "gfs2", "wekafs", "orangefs"})


def network_fs(fstype):
    """Whether a file-system type is a network or FUSE one (lxcfs is a local FUSE: excluded)."""
    fstype = (fstype or "").lower()
    return fstype in NETWORK_FS or (fstype.startswith("fuse.") and fstype != "fuse.lxcfs")


def mount_fs(path, mountinfo):
    """(mount point, file-system type, source) of the mount that holds `path`."""
    best = None
    for line in (mountinfo or "").splitlines():
        head, sep, tail = line.partition(" - ")
        fields, rest = head.split(), tail.split()
        if not sep or len(fields) < 5 or not rest:
            continue
        point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4])
        inside = path == point or path.startswith(point.rstrip("/") + "/")
        if inside and (best is None or len(point) >= len(best[0])):
            best = (point, rest[0], rest[1] if len(rest) > 1 else "")
    return best


def existing_ancestor(path):
    while path and not os.path.exists(path):
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    return path


def triton_cache_dir(env):
    """The cache dir as Triton computes it: TRITON_CACHE_DIR, TRITON_HOME/.triton/cache, ~."""
    if env.get("TRITON_CACHE_DIR"):
        return env["TRITON_CACHE_DIR"]
    home = env.get("TRITON_HOME") or os.path.expanduser("~/")
    return os.path.join(home, ".triton", "cache")


def cuda_cache_dir(env):
    """Where the CUDA driver keeps its JIT cache, and creates it when a process initialises
    it (seen: ~/.nv/ComputeCache after a probe on an H100): CUDA_CACHE_PATH, else ~/.nv."""
    if env.get("CUDA_CACHE_PATH"):
        return env["CUDA_CACHE_PATH"]
    return os.path.join(env.get("HOME") or os.path.expanduser("~/"), ".nv", "ComputeCache")


#: The workload's environment the stack needs to find its own dirs as its libraries do.
WORKLOAD_ENV_KEYS = ("TMPDIR", "TEMP", "TMP", "TRITON_CACHE_DIR", "TRITON_HOME", "HOME",
                     "TORCHINDUCTOR_CACHE_DIR")


def missing_dirs(path):
    """The directories on the way to `path` that do not exist yet, deepest first."""
    missing = []
    while path and not os.path.exists(path):
        missing.append(path)
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    return missing


#: The probe's own dirs beside the workload's entries, named after its throw-away name.
PROBE_CACHE_DIRS = ("-fresh", "-fresh-warm", "-deep")


def remove_throwaway(name, cache, env, created):
    """Remove <dir>/<name> from the cache and every temp dir candidate, then the directories
    in `created` that are empty (deepest first; a job may have written there since)."""
    import shutil
    import tempfile
    places = [cache, tempfile.gettempdir()] + [env.get(k) for k in ("TMPDIR", "TMP", "TEMP")]
    for where in [*places, "/tmp", "/var/tmp", "/usr/tmp"]:
        path = os.path.join(where, name) if where else None
        if path and os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
    # The fresh-cache attempt's, its warm mirror's and the --deep kernel's dirs in the cache.
    for suffix in PROBE_CACHE_DIRS:
        path = os.path.join(cache, name + suffix) if cache else None
        if path and os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
    # The proof through the real entries writes only tmp.pid_<pid>_<name> dirs inside them
    # (scripts/workload.py, proof_manager): a stack killed mid-proof leaves them behind.
    try:
        keys = os.listdir(cache) if cache and not os.path.islink(cache) else []
    except OSError:
        keys = []
    for key in keys:
        entry = os.path.join(cache, key)
        try:
            mine = [n for n in os.listdir(entry) if n.startswith("tmp.pid_") and n.endswith(
                "_" + name)] if os.path.isdir(entry) and not os.path.islink(entry) else []
        except OSError:
            continue
        for found in mine:
            shutil.rmtree(os.path.join(entry, found), ignore_errors=True)
        if mine:
            try:
                os.rmdir(entry)  # only if the proof made it: empty once its tmp dir is gone
            except OSError:
                pass
    for path in created:
        try:
            os.rmdir(path)
        except OSError:
            pass
