"""The object a failure names, walked as the workload's user, and the limits that explain it.

An OSError's text (`PermissionError: [Errno 13] Permission denied: '/x/.triton/cache/ab/f'`)
gives its errno and path; a loader's or tool's text gives a path or a library. `explain` walks
the path component by component (lstat, readlink, access as this process's user: the probe
runs as the workload's user, with its limits) to the component that explains the errno, reads
its file system (statvfs: bytes and inodes, read-only, noexec) and the process's limits
(getrlimit, cgroup v2 memory.max and pids.max), and returns the causes that name them, the
most precise first, with the values their fixes are filled with.
"""

import errno
import os
import re
import resource
import stat

from fleetcheck.probe.parts.base import host_path, read_text
from fleetcheck.probe.parts.catalogue import ERRNO_RULES
from fleetcheck.probe.parts.facts_cache import mount_of

#: strerror text -> errno name, for messages that carry the text only ("No space left...").
STRERRORS = dict((os.strerror(n), name) for n, name in sorted(errno.errorcode.items()))

#: The limits read, with the shell's name for each.
RLIMITS = (("AS", "ulimit -v"), ("DATA", "ulimit -d"), ("NOFILE", "ulimit -n"),
           ("NPROC", "ulimit -u"), ("FSIZE", "ulimit -f"), ("MEMLOCK", "ulimit -l"),
           ("STACK", "ulimit -s"))

#: Paths whose absence is a catalogue cause of its own.
KNOWN_PATHS = {"/sbin/ldconfig": "ldconfig_binary_missing"}


def parse_oserror(text):
    """{"errno", "strerror", "filename", "filename2"} from an OSError's text, or None."""
    match = re.search(r"\[Errno (\d+)\] ([^:'\n]+)(?:: '([^'\n]*)')?(?: -> '([^'\n]*)')?",
                      text or "")
    if match:
        return {"errno": errno.errorcode.get(int(match.group(1))), "strerror": match.group(2),
                "filename": match.group(3), "filename2": match.group(4)}
    for line in (text or "").splitlines():
        for message, name in STRERRORS.items():
            if len(message) > 12 and message in line:
                # The path just before the text is its object; a leading `prog:` is the tool.
                head = re.sub(r"^\S+?: ", "", line[:line.index(message)])
                paths = re.findall(r"(\S*/[^\s'‘’\":,]+)", head)
                return {"errno": name, "strerror": message,
                        "filename": paths[-1].lstrip("'‘\"") if paths else None,
                        "filename2": None}
    return None


def loader_object(text):
    """(kind, object) a loader's text names: ('map', path), ('missing', library) or None."""
    match = re.search(r"(/[^\s:]+): failed to map segment from shared object", text or "")
    if match:
        return "map", match.group(1)
    if "failed to map segment" in (text or ""):
        return "map", None
    match = re.search(r"([\w.+-]+\.so[\w.]*): cannot open shared object file", text or "")
    if match:
        return "missing", match.group(1)
    return None


def human(value):
    if not isinstance(value, int) or value < 0:
        return "unlimited"
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if value >= size:
            return "%.4g %s" % (value / float(size), unit)
    return str(value)


def read_limits():
    """{"AS": {"soft", "hard", "shell"}, ..., "memory.max": {...}, "pids.max": {...}}."""
    limits = {}
    for name, shell in RLIMITS:
        try:
            soft, hard = resource.getrlimit(getattr(resource, "RLIMIT_" + name))
        except (AttributeError, ValueError, OSError):
            continue
        limits[name] = {"soft": None if soft == resource.RLIM_INFINITY else soft,
                        "hard": None if hard == resource.RLIM_INFINITY else hard,
                        "shell": shell}
    group = None
    for line in (read_text(host_path("/proc/self/cgroup")) or "").splitlines():
        if line.startswith("0::"):
            group = line[3:].strip()
    while group is not None:
        base = host_path("/sys/fs/cgroup" + group.rstrip("/"))
        for name in ("memory.max", "pids.max"):
            value = (read_text(os.path.join(base, name)) or "").strip()
            if value.isdigit() and name not in limits:
                limits[name] = {"soft": int(value), "path": os.path.join(
                    "/sys/fs/cgroup" + group.rstrip("/"), name)}
        group = None if group in ("", "/") else os.path.dirname(group.rstrip("/")) or "/"
    return limits


def limited(limits, *names):
    """(name, limit) of the first of `names` that is set, or (None, None)."""
    for name in names:
        if (limits.get(name) or {}).get("soft") is not None:
            return name, limits[name]
    return None, None


def limit_values(name, limit):
    shell = limit.get("shell") or name
    if name in ("AS", "DATA", "FSIZE", "MEMLOCK", "STACK"):
        # getrlimit's bytes; ulimit -v/-d/-f/-l/-s counts KiB
        value = "%s (%s KiB)" % (human(limit["soft"]), limit["soft"] // 1024)
    elif name == "memory.max":
        value = human(limit["soft"])
    else:
        value = str(limit["soft"])
    return {"limit": "%s (%s)" % (name, shell) if name in dict(RLIMITS) else limit.get(
        "path", name), "value": value, "path": limit.get("path", "")}


def fs_state(path, mountinfo):
    """statvfs of the deepest existing dir of `path` and the mount options that hold it."""
    where = path
    while where and not os.path.exists(where):
        parent = os.path.dirname(where)
        if parent == where:
            break
        where = parent
    state = {"at": where}
    try:
        info = os.statvfs(where)
        state.update(free_bytes=info.f_bavail * info.f_frsize, free_inodes=info.f_favail,
                     inodes=info.f_files, read_only=bool(info.f_flag & os.ST_RDONLY),
                     noexec=bool(info.f_flag & getattr(os, "ST_NOEXEC", 8)))
    except OSError:
        pass
    mount = mount_of(os.path.realpath(where), mountinfo)
    if mount:
        options = mount[1].split(",")
        state["mount"] = mount[0]
        state["read_only"] = state.get("read_only") or "ro" in options
        state["noexec"] = state.get("noexec") or "noexec" in options
    return state


def where_mounted(state):
    """'DIR (mount POINT)': the dir statvfs read, and the mount that holds it."""
    at, mount = state.get("at") or "", state.get("mount") or ""
    return "%s (mount %s)" % (at, mount) if mount and mount != at else at or mount


def owner_name(uid):
    try:
        import pwd
        return "%s (uid %d)" % (pwd.getpwuid(uid).pw_name, uid)
    except (ImportError, KeyError):
        return "uid %d" % uid


def walk(path):
    """Each component of `path` as this user meets it, up to the first that stops the walk.

    Returns (components, finding): finding is None, or {"kind": "missing", "dangling",
    "loop", "not_dir", "no_search", "foreign"...; "component": the path; ...}.
    """
    seen: list = []
    current = "/"
    names = [n for n in (path or "").split("/") if n]
    uid = os.geteuid()
    for index, name in enumerate(names):
        current = os.path.join(current, name)
        last = index == len(names) - 1
        try:
            info = os.lstat(current)
        except OSError as exc:
            kind = "no_search" if exc.errno == errno.EACCES else "missing"
            return seen, {"kind": kind, "component": current}
        entry = {"path": current, "uid": info.st_uid, "mode": "%04o" % stat.S_IMODE(
            info.st_mode)}
        seen.append(entry)
        if stat.S_ISLNK(info.st_mode):
            target = os.readlink(current)
            entry["link"] = target
            resolved = os.path.join(os.path.dirname(current), target)
            try:
                os.stat(current)
            except OSError as exc:
                kind = "loop" if exc.errno == errno.ELOOP else "dangling"
                return seen, {"kind": kind, "component": current, "target": target,
                              "resolved": os.path.normpath(resolved)}
            current = os.path.realpath(current)
            info = os.stat(current)
        if not last and not stat.S_ISDIR(info.st_mode):
            return seen, {"kind": "not_dir", "component": current}
        if stat.S_ISDIR(info.st_mode) and not os.access(current, os.X_OK):
            return seen, {"kind": "foreign" if info.st_uid != uid else "no_search",
                          "component": current, "uid": info.st_uid}
    return seen, None


def denied(path, seen):
    """The component that denies this user what a write under `path` needs: the deepest
    existing dir without write access, or the file itself without it."""
    uid = os.geteuid()
    for entry in reversed(seen):
        where = entry["path"]
        is_dir = os.path.isdir(where)
        if not os.access(where, os.W_OK | (os.X_OK if is_dir else 0)) or not os.access(
                where, os.R_OK):
            return {"kind": "foreign" if entry["uid"] != uid else "no_write",
                    "component": where, "uid": entry["uid"]}
        if is_dir:
            break
    return None


def place_causes(place):
    """errno name -> the cause of a workload dir (the cache's, the temp dir's)."""
    return {"cache": {"ENOSPC": "cache_dir_full", "EDQUOT": "cache_dir_full",
                     "EACCES": "cache_dir_unwritable", "EPERM": "cache_dir_unwritable",
                     "EROFS": "cache_dir_unwritable", "noexec": "cache_dir_noexec"},
           "tmp": {"ENOSPC": "tmp_dir_unusable", "EDQUOT": "tmp_dir_unusable",
                   "EACCES": "tmp_dir_unusable", "EPERM": "tmp_dir_unusable",
                   "EROFS": "tmp_dir_unusable", "ENOTDIR": "tmp_dir_unusable",
                   "noexec": "tmp_dir_unusable"}}.get(place) or {}


def explain(errno_name, path, text, mountinfo, limits, place=None, top=None):
    """[(cause, values)], most precise first, for an errno (or a loader's text) on `path`.

    place: "cache" or "tmp" when `path` is in one of the workload's dirs, `top` that dir: a
    component below it is named before the dir's own cause."""
    values = {"path": path or "", "errno": errno_name or "", "component": path or "",
              "user": owner_name(os.geteuid()),
              "mount": "the file system of %s" % (path or top or "the cache and temp dirs")}
    found = []
    loader = loader_object(text)
    if loader and loader[0] == "map":
        values["path"] = values["component"] = loader[1] or ""
        state = fs_state(loader[1], mountinfo) if loader[1] else {}
        values["mount"] = where_mounted(state)
        if state.get("noexec"):
            found += [(c, values) for c in (place_causes(place).get("noexec"), "path_noexec")
                      if c]
        name, limit = limited(limits, "AS", "DATA")
        if name:
            found.append(("address_space_limit", dict(values, **limit_values(name, limit))))
        name, limit = limited(limits, "memory.max")
        if name:
            found.append(("memory_cgroup_limit", dict(values, **limit_values(name, limit))))
        return [*found, ("loader_map_failed", values)]
    if loader and loader[0] == "missing":
        return [("shared_library_missing", dict(values, library=loader[1]))]
    if errno_name in ("ENOMEM", "EAGAIN", "EMFILE", "ENFILE", "EFBIG"):
        names = {"ENOMEM": (("AS", "address_space_limit"), ("DATA", "address_space_limit"),
                            ("memory.max", "memory_cgroup_limit")),
                 "EAGAIN": (("pids.max", "process_limit"), ("NPROC", "process_limit"),
                            ("memory.max", "memory_cgroup_limit")),
                 "EMFILE": (("NOFILE", "open_files_limit"),),
                 "EFBIG": (("FSIZE", "file_size_limit"),)}.get(errno_name, ())
        for name, cause in names:
            if limited(limits, name)[0]:
                found.append((cause, dict(values, **limit_values(name, limits[name]))))
        return [*found, ("process_limits", values)]
    own, generic = place_causes(place), None
    if not path:
        # A bare errno (`[Errno 28] No space left on device`): the dir it was reproduced in.
        rule = ERRNO_RULES.get(errno_name or "")
        if top and errno_name in ("ENOSPC", "EDQUOT"):
            state = fs_state(top, mountinfo)
            values.update(path=top, component=top, mount=where_mounted(state),
                          free=human(state.get("free_bytes")))
            if state.get("free_inodes") == 0 and (state.get("free_bytes") or 0) > 0:
                return [("fs_out_of_inodes", values)]
        return [(c, values) for c in (own.get(errno_name or ""), rule) if c]
    if path in KNOWN_PATHS and errno_name == "ENOENT" and not os.path.exists(path):
        return [(KNOWN_PATHS[path], values)]
    seen, finding = walk(path)
    values["missing"] = "%s %s" % (errno_name, path)
    state = fs_state(path, mountinfo)
    values["mount"] = where_mounted(state)
    if finding:
        values["component"] = finding["component"]
        values["missing"] = "%s: %s" % (finding["kind"].replace("_", " "), finding["component"])
        if "uid" in finding:
            values.update(uid=str(finding["uid"]), owner=owner_name(finding["uid"]))
        if "target" in finding:
            values["target"] = finding.get("resolved") or finding["target"]
        generic = {"dangling": "path_dangling_link", "loop": "path_link_loop",
                   "not_dir": "path_not_a_dir", "foreign": "path_foreign_owner",
                   "no_search": "path_permission_denied", "missing": "path_missing"}[
                       finding["kind"]]
    if errno_name in ("ENOSPC", "EDQUOT"):
        values["free"] = human(state.get("free_bytes"))
        if (errno_name == "ENOSPC" and state.get("free_inodes") == 0
                and (state.get("inodes") or 0) > 0 and (state.get("free_bytes") or 0) > 0):
            return [("fs_out_of_inodes", values)]
        generic = "disk_full" if errno_name == "ENOSPC" else "quota_exceeded"
    elif errno_name == "EROFS" or (errno_name in ("EACCES", "EPERM") and state.get("read_only")
                                   and not finding):
        generic = "path_read_only"
    elif errno_name in ("EACCES", "EPERM") and not finding:
        refused = denied(path, seen)
        if refused:
            values.update(component=refused["component"], uid=str(refused["uid"]),
                          owner=owner_name(refused["uid"]))
            generic = ("path_foreign_owner" if refused["kind"] == "foreign"
                       else "path_permission_denied")
    if generic is None:
        generic = ERRNO_RULES.get(errno_name or "") or "os_error"
        values["missing"] = values["missing"] if finding else "%s (%s)" % (
            errno_name, path)
    cause = own.get(errno_name or "")
    # An object below the workload's dir (an entry of another owner, a link) is named before
    # the dir; a file system's state (full, read-only) is the dir's own cause first.
    inside = top and values["component"].startswith(top.rstrip("/") + "/") and (
        errno_name not in ("ENOSPC", "EDQUOT", "EROFS"))
    order = (generic, cause) if inside else (cause, generic)
    return found + [(c, values) for c in order if c]
