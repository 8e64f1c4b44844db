"""The object a failure names, walked as the workload's user, and the limits that explain it.

An OSError's text (`PermissionError: [Errno 13] Permission denied: '/x/.triton/cache/ab/f'`)
gives its errno and path; a loader's or tool's text gives a path or a library. `explain` walks
the path component by component (lstat, readlink, access as this process's user: the probe
runs as the workload's user, with its limits) to the component that explains the errno, reads
its file system (statvfs: bytes and inodes, read-only, noexec) and the process's limits
(getrlimit, cgroup v2 memory.max and pids.max, the system's file table), and returns the
causes that name them, the most precise first, with the values their fixes are filled with.
A limit is named with its value and where it comes from (Slurm, a container, a systemd unit,
the login's limits.conf: `limit_owner`), and the fix that raises it there.
"""

import errno
import os
import re
import resource
import stat

from fleetcheck.probe.parts.catalogue import ERRNO_RULES, PLACE_RULES
from fleetcheck.probe.parts.core.base import host_path, read_text
from fleetcheck.probe.parts.core.spawn import cgroup_chain, cgroup_file, own_cgroup
from fleetcheck.probe.parts.facts.cache import mount_of
from fleetcheck.probe.parts.facts.where import where_it_runs

#: strerror text -> errno name, for messages that carry the text only ("No space left...").
STRERRORS = dict((os.strerror(n), name) for n, name in sorted(errno.errorcode.items()))

#: The limits read, with the shell's name for each.
RLIMITS = (("AS", "ulimit -v"), ("DATA", "ulimit -d"), ("NOFILE", "ulimit -n"),
           ("NPROC", "ulimit -u"), ("FSIZE", "ulimit -f"), ("MEMLOCK", "ulimit -l"),
           ("STACK", "ulimit -s"))

#: Each rlimit's name in limits.conf and `--ulimit` (docker, podman) and what to raise it to.
RLIMIT_ITEMS = {"AS": ("as", "unlimited"), "DATA": ("data", "unlimited"),
                "NOFILE": ("nofile", "65536"), "NPROC": ("nproc", "unlimited"),
                "FSIZE": ("fsize", "unlimited"), "MEMLOCK": ("memlock", "unlimited"),
                "STACK": ("stack", "unlimited")}

#: Texts of a limit that carry no errno's strerror: the signal of a file-size limit, Python's
#: and glibc's thread-creation failures, compilers' allocation failures.
LIMIT_TEXTS = ((r"File size limit exceeded|terminated with signal 25\b", "EFBIG"),
               (r"can't start new thread|Thread creation failed", "EAGAIN"),
               (r"out of memory allocating|virtual memory exhausted", "ENOMEM"),
               (r"Killed signal terminated program|terminated with signal 9\b", "SIGKILL"))

#: errno name -> the limits that explain it (in order) and the cause each names.
ERRNO_LIMITS = {
    "ENOMEM": (("AS", "address_space_limit"), ("DATA", "address_space_limit"),
               ("memory.max", "memory_cgroup_limit")),
    "EAGAIN": (("pids.max", "process_limit"), ("NPROC", "process_limit"),
               ("AS", "address_space_limit"), ("memory.max", "memory_cgroup_limit")),
    "EMFILE": (("NOFILE", "open_files_limit"),),
    "ENFILE": (("fs.file-max", "file_table_limit"),),
    "EFBIG": (("FSIZE", "file_size_limit"),),
    # Not an errno: a process the OOM killer killed (a tool's "Killed signal terminated
    # program cc1"), named from the cgroup's limit.
    "SIGKILL": (("memory.max", "memory_cgroup_limit"),),
}

#: The causes that name a limit of the job's (or the node's file table).
LIMIT_CAUSES = frozenset(cause for limits in ERRNO_LIMITS.values() for _, cause in limits)

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
    for pattern, name in LIMIT_TEXTS:
        match = re.search(pattern, text or "")
        if match:
            return {"errno": name, "strerror": match.group(0), "filename": None,
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


def number(text):
    """An int from a cgroup or /proc file's text, or None ("max", absent)."""
    text = (text or "").strip()
    return int(text) if text.isdigit() else None


def read_limits():
    """{"AS": {"soft", "hard", "shell", "source"}, ..., "memory.max": {"soft", "path",
    "current", "peak", "source"}, "pids.max": {...}, "fs.file-max": {...}}: this process's
    rlimits (None: unlimited), the cgroup v2 limits of its cgroup or the nearest parent that
    sets one, the system's file table; each with where it comes from."""
    limits: dict = {}
    for name, shell in RLIMITS:
        try:
            soft, hard = resource.getrlimit(getattr(resource, "RLIMIT_" + name))
        except (AttributeError, ValueError, OSError):
            continue
        limits[name] = {"soft": None if soft == resource.RLIM_INFINITY else soft,
                        "hard": None if hard == resource.RLIM_INFINITY else hard,
                        "shell": shell}
    for group in cgroup_chain(own_cgroup()):
        for name, count in (("memory.max", "memory"), ("pids.max", "pids")):
            value = number(read_text(cgroup_file(group, name)))
            if value is not None and name not in limits:
                limits[name] = {"soft": value, "path": "/sys/fs/cgroup" + (
                    group.rstrip("/") + "/" + name), "group": group,
                    "current": number(read_text(cgroup_file(group, count + ".current"))),
                    "peak": number(read_text(cgroup_file(group, count + ".peak")))}
    files = (read_text(host_path("/proc/sys/fs/file-nr")) or "").split()
    most = number(read_text(host_path("/proc/sys/fs/file-max")))
    if most is not None and most < 1 << 62:
        limits["fs.file-max"] = {"soft": most, "path": "/proc/sys/fs/file-max",
                                 "current": number(files[0]) if files else None}
    owner = limit_owner(own_cgroup(), rlimits=True)
    for name, limit in limits.items():
        limit["by"] = list(owner_of(name, limit, owner))
        limit["source"] = limit_source(name, limit)
    return limits


def owner_of(name, limit, owner):
    """(kind, name) of who sets a limit: a cgroup limit's own cgroup's, else the process's."""
    if name in ("memory.max", "pids.max") and limit.get("group") not in (None, "", "/"):
        return limit_owner(limit["group"])
    return tuple(owner)


def limit_owner(group, env=None, rlimits=False):
    """(kind, name): who sets the limits of a process in cgroup `group` (or of a limit set on
    that cgroup): ("slurm", job id), ("docker" / "podman" / "kubernetes" / "lxc", None),
    ("unit", a systemd unit or slice), ("login", a session scope or user slice), (None, None).
    rlimits: a process's rlimits, which a service sets (Limit*=), never a scope or slice."""
    env = os.environ if env is None else env
    group = group or ""
    job = re.search(r"/job_(\d+)", group)
    if env.get("SLURM_JOB_ID") or (job and "slurm" in group):
        return "slurm", env.get("SLURM_JOB_ID") or (job.group(1) if job else None)
    for word, kind in (("kubepods", "kubernetes"), ("libpod", "podman"), ("docker", "docker"),
                       ("lxc", "lxc")):
        if word in group:
            return kind, None
    if group in ("", "/"):
        # The root of a cgroup namespace: the container's own cgroup.
        container = where_it_runs()["container"]
        if container:
            return container, None
    parts = [part for part in group.split("/") if part]
    logins = [part for part in parts if re.match(r"user-\d+\.slice$|session-", part)]
    if logins:
        return "login", logins[0]
    units = [part for part in parts if re.search(r"\.(service|scope|slice)$", part)
             and part not in ("system.slice", "init.scope", "-.slice", "machine.slice")]
    services = [part for part in units if part.endswith(".service")]
    if rlimits and services:
        return "unit", services[-1]
    if units and not rlimits:
        return "unit", units[-1]
    return None, None


def limit_source(name, limit):
    """Where a limit comes from, in words (its `by`: limit_owner's)."""
    kind, who = limit.get("by") or (None, None)
    if name == "fs.file-max":
        return "the kernel's table of open files, for the whole node (sysctl fs.file-max)"
    if name in ("memory.max", "pids.max"):
        where = {"slurm": "Slurm job %s's cgroup" % (who or "?"),
                 "docker": "the Docker container's cgroup", "podman": "the Podman container's "
                 "cgroup", "kubernetes": "the Kubernetes pod's cgroup",
                 "lxc": "the LXC container's cgroup", "unit": "the cgroup of %s" % who,
                 "login": "the cgroup of %s" % who}.get(kind or "", "the cgroup %s" % (
                     limit.get("group") or "/"))
        return where
    soft, hard = limit.get("soft"), limit.get("hard")
    head = "soft limit; hard %s" % ("unlimited" if hard is None else hard) if (
        soft is not None and (hard is None or hard > soft)) else "soft = hard limit"
    where = {"slurm": "propagated by Slurm (job %s) from the shell that submitted it "
             "(PropagateResourceLimits)" % (who or "?"),
             "docker": "the Docker container's (docker run --ulimit, or dockerd's "
             "default-ulimits)", "podman": "the Podman container's (podman run --ulimit)",
             "kubernetes": "the container runtime's default (Kubernetes sets none per pod)",
             "lxc": "the LXC container's (lxc.prlimit)", "unit": "the systemd unit %s's "
             "(Limit%s=)" % (who, name), "login": "the login's (pam_limits: "
             "/etc/security/limits.conf)"}.get(kind or "", "inherited from what started the "
                                                "job")
    return "%s; %s" % (head, where)


def limit_how(name, limit):
    """How to raise a limit where it comes from (its `by`: limit_owner's)."""
    kind, who = limit.get("by") or (None, None)
    if name == "fs.file-max":
        return ("sysctl -w fs.file-max=%d (and in /etc/sysctl.d/), on the host of a container; "
                "find what holds them (/proc/sys/fs/file-nr)" % (max(limit["soft"] * 2, 1 << 20)))
    if name in ("memory.max", "pids.max"):
        memory = name == "memory.max"
        hows = {
            "slurm": "submit with more memory (sbatch --mem=, --mem-per-cpu=; cgroup.conf "
                     "ConstrainRAMSpace)" if memory else "ask the admins to raise TasksMax= "
                     "of slurmstepd.scope (pids.max)",
            "docker": "docker run --memory=<a larger size> (docker update --memory on a "
                      "running container)" if memory else "docker run --pids-limit=<a larger "
                      "count> (or -1)",
            "podman": "podman run --memory=<a larger size>" if memory else "podman run "
                      "--pids-limit=<a larger count> (or -1)",
            "kubernetes": "raise resources.limits.memory in the pod spec" if memory else
                          "raise the kubelet's podPidsLimit",
            "lxc": "raise the container's memory (Proxmox: pct set VMID --memory; "
                   "lxc.cgroup2.memory.max)" if memory else "raise lxc.cgroup2.pids.max in "
                   "the container's config"}
        if kind in hows:
            return hows[kind]
        if kind in ("unit", "login") and who:
            return "systemctl set-property %s %s=<a larger value> (or in the unit)%s" % (
                who, "MemoryMax" if memory else "TasksMax",
                "; a user's slices: UserTasksMax / TasksMax= of user-.slice" if (
                    kind == "login" and not memory) else "")
        return ("raise the job's or container's memory.max: docker --memory, Slurm --mem, "
                "systemd MemoryMax=" if memory else "raise the cgroup's pids.max: docker "
                "--pids-limit, systemd TasksMax=")
    item, target = RLIMIT_ITEMS.get(name, (name.lower(), "unlimited"))
    flag = (limit.get("shell") or "ulimit").split()[-1]
    soft, hard = limit.get("soft"), limit.get("hard")
    steps = []
    if soft is not None and (hard is None or hard > soft):
        steps.append("ulimit -S %s %s in the job's script (the hard limit allows it)" % (
            flag, "unlimited" if hard is None else hard))
    ulimit = "-1" if target == "unlimited" else target
    hows = {
        "slurm": "ulimit %s %s in the shell that runs sbatch/srun (Slurm propagates its limits"
                 "; srun --propagate=NONE takes slurmd's), or the admins' "
                 "PropagateResourceLimitsExcept=%s in slurm.conf and Limit%s= in "
                 "slurmd.service" % (flag, target, name, name),
        "docker": "docker run --ulimit %s=%s:%s (or default-ulimits in "
                  "/etc/docker/daemon.json)" % (item, ulimit, ulimit),
        "podman": "podman run --ulimit %s=%s:%s" % (item, ulimit, ulimit),
        "kubernetes": "raise the container runtime's default (Limit%s= in containerd.service "
                      "or the CRI's default ulimits)" % name,
        "lxc": "lxc.prlimit.%s = %s in the container's config" % (item, target),
        "unit": "Limit%s=%s in %s (systemctl edit %s), then restart it" % (
            name, "infinity" if target == "unlimited" else target, who, who),
        "login": "'%s hard %s %s' in /etc/security/limits.conf, then a new login" % (
            login_name(), item, target)}
    steps.append(hows.get(kind or "", "ulimit %s %s where the job starts (as root, or within "
                          "the hard limit); the hard limit is set by what starts it: %s in "
                          "/etc/security/limits.conf (a login), Limit%s= (a systemd unit), "
                          "docker run --ulimit %s=%s:%s (a container), the submitting shell's "
                          "ulimit (Slurm's PropagateResourceLimits)" % (
                              flag, target, item, name, item, ulimit, ulimit)))
    return "; ".join(steps)


def limited(limits, *names):
    """(name, limit) of the first of `names` that is set, or (None, None)."""
    for name in names:
        if (limits.get(name) or {}).get("soft") is not None:
            return name, limits[name]
    return None, None


def near(limit):
    """Whether a cgroup limit's use (current, peak) reached nine tenths of it."""
    used = max(limit.get("current") or 0, limit.get("peak") or 0)
    return bool(limit.get("soft")) and used * 10 >= limit["soft"] * 9


def limit_order(errno_name, limits):
    """[(limit name, cause)] of the limits set that explain `errno_name`, likeliest first: a
    cgroup limit its use reached first; of the process counts, the smaller limit first."""
    rules = [(n, c) for n, c in ERRNO_LIMITS.get(errno_name or "", ()) if limited(limits, n)[0]]
    if errno_name == "EAGAIN" and limited(limits, "NPROC")[0] and limited(limits, "pids.max")[0]:
        if limits["NPROC"]["soft"] < limits["pids.max"]["soft"] and not near(limits["pids.max"]):
            rules.sort(key=lambda rule: rule[0] != "NPROC")
    if errno_name == "ENOMEM" and limited(limits, "memory.max")[0] and near(limits["memory.max"]):
        rules.sort(key=lambda rule: rule[0] != "memory.max")
    return rules


def limit_values(name, limit):
    shell = limit.get("shell") or name
    if name in ("AS", "DATA", "FSIZE", "MEMLOCK", "STACK"):
        # getrlimit's bytes; ulimit -v/-d/-f/-l/-s counts KiB
        value = human(limit["soft"])
        if not value.endswith(" KiB"):
            value += " (%s KiB)" % (limit["soft"] // 1024)
    elif name == "memory.max":
        value = human(limit["soft"])
    else:
        value = str(limit["soft"])
    if limit.get("current") is not None:
        value += " (%s in use%s)" % (human(limit["current"]) if name == "memory.max" else
                                     limit["current"], ", peak %s" % human(limit["peak"]) if (
                                         name == "memory.max" and limit.get("peak")) else "")
    return {"limit": "%s (%s)" % (name, shell) if name in dict(RLIMITS) else limit.get(
        "path", name), "value": value, "path": limit.get("path", ""),
        "source": limit.get("source") or limit_source(name, limit),
        "how": limit_how(name, limit)}


#: Open files under which a limit is tight for CUDA's initialisation: the driver opens the
#: device nodes and some /proc files (seen on an H100, driver 580: cuInit 100 under
#: `ulimit -n 12`; its tasks: START_TASKS below, 304 under `ulimit -u 12`).
CUDA_FILES = 64


def user_tasks(uid=None):
    """The tasks (threads included) of this real uid's processes, as RLIMIT_NPROC counts
    them, or None where /proc cannot be listed."""
    uid = os.getuid() if uid is None else uid
    try:
        pids = [name for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return None
    count = 0
    for pid in pids:
        status = read_text("/proc/%s/status" % pid, 4096) or ""
        owner = re.search(r"^Uid:\s+(\d+)", status, re.M)
        threads = re.search(r"^Threads:\s+(\d+)", status, re.M)
        if owner and threads and int(owner.group(1)) == uid:
            count += int(threads.group(1))
    return count


#: Tasks to spare under which a process limit is tight for a workload's start: torch's thread
#: pools, the driver's own threads at cuInit (which answers 304 where one is refused), the
#: compiler's processes. There the probe runs the workload's own start alone and in its own
#: order (the driver layer after it, nvidia-smi and ldconfig once it is done), since who
#: starts first gets the last tasks: on an H100 under `ulimit -u 12` the workload's own start
#: failed (torch's cuInit 304, "0 active drivers") while the probe's, its driver layer's cuInit
#: made first beside torch's import, did not. A cuInit 304 under such a limit is the limit's.
START_TASKS = 64


def system_tasks():
    """Every task of the system (or of the container, where /proc/loadavg is its own): the
    total of /proc/loadavg's fourth field; None where it cannot be read."""
    fields = (read_text(host_path("/proc/loadavg")) or "").split()
    total = fields[3].partition("/")[2] if len(fields) > 3 else ""
    return int(total) if total.isdigit() else None


def task_headroom():
    """The tasks this job may still start, or None where no process limit is set near: the
    least of RLIMIT_NPROC less this user's tasks now (not for root, whom it does not bind; a
    limit above 65536 is not counted; where every task of the system leaves room enough, that
    bound, without reading each process's status) and each pids.max up the cgroup tree less
    its pids.current."""
    room = []
    try:
        soft = resource.getrlimit(resource.RLIMIT_NPROC)[0]
    except (AttributeError, ValueError, OSError):
        soft = resource.RLIM_INFINITY
    if soft != resource.RLIM_INFINITY and soft <= 1 << 16 and os.getuid() != 0:
        total = system_tasks()
        if total is not None and soft - total >= START_TASKS:
            room.append(soft - total)  # a bound: this user's tasks are some of them
        else:
            tasks = user_tasks()
            if tasks is not None:
                room.append(soft - tasks)
    for group in cgroup_chain(own_cgroup()):
        most = number(read_text(cgroup_file(group, "pids.max")))
        if most is not None:
            room.append(most - (number(read_text(cgroup_file(group, "pids.current"))) or 0))
    return min(room) if room else None


def cuda_limit(code, limits, nodes_open):
    """(cause, values) of a tight limit of the job's that explains cuInit's `code`, or None:
    304 (CUDA_ERROR_OPERATING_SYSTEM: an OS call the driver made failed) under a process limit
    with fewer than START_TASKS tasks to spare (pids.max by its pids.current, NPROC by the
    user's tasks now), else an open-file limit below CUDA_FILES; 100 (CUDA_ERROR_NO_DEVICE)
    with the device nodes opening fine (`nodes_open`) under an open-file limit below
    CUDA_FILES."""
    found = []
    if code == 304:
        name, limit = limited(limits, "pids.max")
        if name and (limit.get("current") or 0) + START_TASKS >= limit["soft"]:
            found.append(("process_limit", limit_values(name, limit)))
        name, limit = limited(limits, "NPROC")
        tasks = user_tasks() if name else None
        if name and tasks is not None and tasks + START_TASKS >= limit["soft"]:
            values = limit_values(name, limit)
            values["value"] += " (%d tasks of this user now)" % tasks
            found.append(("process_limit", values))
    if code in (304, 100) and (code == 304 or nodes_open):
        name, limit = limited(limits, "NOFILE")
        if name and limit["soft"] < CUDA_FILES:
            found.append(("open_files_limit", limit_values(name, limit)))
    return found[0] if found else None


def limit_causes(errno_name, limits):
    """[(cause, values)] of the limits set that explain `errno_name`, likeliest first."""
    return [(cause, limit_values(name, limits[name]))
            for name, cause in limit_order(errno_name, limits)]


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


def login_name():
    """This process's user name as limits.conf names it (its uid where it has no name)."""
    try:
        import pwd
        return pwd.getpwuid(os.geteuid()).pw_name
    except (ImportError, KeyError):
        return str(os.geteuid())


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
            found += [(c, values) for c in (PLACE_RULES.get(place, {}).get("noexec"), "path_noexec")
                      if c]
        found += [(cause, dict(values, **named)) for cause, named in limit_causes(
            "ENOMEM", limits)]
        return [*found, ("loader_map_failed", values)]
    if loader and loader[0] == "missing":
        return [("shared_library_missing", dict(values, library=loader[1]))]
    if errno_name in ERRNO_LIMITS:
        found += [(cause, dict(values, **named)) for cause, named in limit_causes(
            errno_name, limits)]
        # A kill with no cgroup limit is the node's OOM killer's: the tool's text names it.
        return found if errno_name == "SIGKILL" else [*found, ("process_limits", values)]
    own, generic = PLACE_RULES.get(place, {}), None
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
    if errno_name == "ENAMETOOLONG":
        # Never "missing": no mkdir makes it. The first name longer than NAME_MAX, else the
        # whole path (longer than PATH_MAX).
        parts, long_name = path.split("/"), None
        for index, part in enumerate(parts):
            if len(part.encode("utf-8", "surrogateescape")) > 255:
                long_name = "/".join(parts[:index + 1])
                break
        state = fs_state(os.path.dirname(long_name or path) or "/", mountinfo)
        values.update(component=long_name or path, mount=where_mounted(state))
        return [*found, ("path_name_too_long", values)]
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
