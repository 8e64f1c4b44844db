"""Each GPU's state before the job: memory in use, compute processes (whose, seen or not from
this pid namespace), persistence and compute mode, memory health, GPUs CUDA cannot open, and
the kernel log's Xid events where it is readable."""

import errno
import os
import pwd
import re
import shutil
import stat
import sys

from fleetcheck.probe.parts.core.base import first_line, host_path, read_text
from fleetcheck.probe.parts.core.spawn import Spawned, stage_answer
from fleetcheck.probe.parts.core.stages import GPUSTATE_SCRIPT
from fleetcheck.probe.parts.core.state import ProbeState

MIB = 1 << 20

#: The share of a GPU's memory in use above which the probe warns (a playbook's
#: max_gpu_memory_used decides what fails).
DEFAULT_MEMORY_SHARE = 0.05

#: How far back the kernel log's Xid events count, in seconds.
XID_WINDOW_S = 3600

#: Xids after which the GPU needs a reset, a reboot or service (NVIDIA's Xid catalogue): double
#: bit ECC (48), ECC page retirement or row remap recording (63, 64), NVLink (74), fallen off
#: the bus (79), high single-bit ECC rate (92), contained/uncontained ECC (94, 95), GSP (119,
#: 120).
XID_CRITICAL = frozenset({48, 63, 64, 74, 79, 92, 94, 95, 119, 120})
#: Xids a program causes (an illegal address, a fault of its own kernel): the GPU is fine.
XID_APPLICATION = frozenset({13, 31, 43, 45})

#: NVML's compute modes.
COMPUTE_MODES = {0: "Default", 1: "Exclusive_Thread", 2: "Prohibited", 3: "Exclusive_Process"}

SMI_STATE_FIELDS = ("index,uuid,memory.total,memory.used,memory.free,persistence_mode,"
                    "compute_mode,retired_pages.pending,remapped_rows.pending,"
                    "remapped_rows.failure,ecc.errors.uncorrected.volatile.total")


def parent_pid(pid):
    """The parent of `pid` in this pid namespace (/proc/PID/stat), or None."""
    text = read_text("/proc/%d/stat" % pid, 4096) or ""
    # The command name is in parentheses and may hold spaces or ')': split after the last one.
    fields = text.rpartition(")")[2].split()
    return int(fields[1]) if len(fields) > 1 and fields[1].isdigit() else None


def descends_from(pid, ancestor):
    seen = 0
    while pid and pid > 1 and seen < 64:
        if pid == ancestor:
            return True
        pid = parent_pid(pid)
        seen += 1
    return pid == ancestor


def opens_gpu(pid):
    """True if one of the process's open files is a GPU device node, False if none is, None if
    its fds cannot be read (another user's process, without root)."""
    base = "/proc/%d/fd" % pid
    try:
        names = os.listdir(base)
    except OSError:
        return None
    prefixes = tuple(host_path(p) for p in ("/dev/nvidia", "/dev/kfd", "/dev/dri/"))
    for name in names:
        try:
            if os.readlink(os.path.join(base, name)).startswith(prefixes):
                return True
        except OSError:
            continue
    return False


def describe_pid(pid, own_pids):
    """What this pid namespace knows of a pid the driver lists: never a guess. A pid that is not
    here belongs to another pid namespace (the host's, another container's) or has exited."""
    info = {"pid": pid, "own": False, "here": False}
    if pid in own_pids or descends_from(pid, os.getpid()):
        info["own"] = info["here"] = True
        return info
    if not os.path.isdir("/proc/%d" % pid):
        return info
    holds = opens_gpu(pid)
    if holds is False:
        # The same number names an unrelated process here: the driver's is in another namespace.
        info["pid_reused"] = True
        return info
    info["here"] = True
    info["gpu_fds_checked"] = holds is True
    info["name"] = first_line(read_text("/proc/%d/comm" % pid, 256)) or None
    cmdline = (read_text("/proc/%d/cmdline" % pid, 2048) or "").replace("\0", " ").strip()
    info["cmdline"] = cmdline[:200] or None
    status = read_text("/proc/%d/status" % pid, 8192) or ""
    match = re.search(r"^Uid:\s+(\d+)", status, re.M)
    if match:
        info["uid"] = int(match.group(1))
        try:
            info["user"] = pwd.getpwuid(info["uid"]).pw_name
        except KeyError:
            info["user"] = None
    return info


def smi_number(text):
    text = text.strip()
    return int(text) if text.isdigit() else None


def smi_flag(text):
    text = text.strip().lower()
    return True if text in ("yes", "enabled") else False if text in ("no", "disabled") else None


def parse_smi_state(gpus_result, apps_result):
    """The NVML stage's shape from `nvidia-smi --query-gpu` and `--query-compute-apps` (MiB)."""
    out: dict = {"source": "nvidia-smi"}
    if gpus_result["error"] or gpus_result["timed_out"] or gpus_result["rc"] != 0:
        out["error"] = "nvidia-smi: " + (gpus_result["error"] or (
            "timed out" if gpus_result["timed_out"] else first_line(gpus_result["stdout"])
            or first_line(gpus_result["stderr"]) or "rc %s" % gpus_result["rc"]))
        return out
    by_uuid = {}
    gpus = []
    for line in gpus_result["stdout"].splitlines():
        cells = [cell.strip() for cell in line.split(",")]
        if len(cells) != 11 or not cells[0].isdigit():
            continue
        total, used, free = (smi_number(c) for c in cells[2:5])
        gpu: dict = {"index": int(cells[0]), "uuid": cells[1], "processes": [],
               "persistence_mode": {True: 1, False: 0}.get(smi_flag(cells[5])),
               "compute_mode": {v: k for k, v in COMPUTE_MODES.items()}.get(cells[6]),
               "health": {}}
        if total is not None and used is not None:
            gpu["memory"] = {"total": total * MIB, "used": used * MIB,
                             "free": (free or 0) * MIB}
        health = gpu["health"]
        if smi_flag(cells[7]) is not None:
            health["retired_pages_pending"] = smi_flag(cells[7])
        if smi_flag(cells[8]) is not None or smi_flag(cells[9]) is not None:
            health["remapped_rows"] = {"pending": bool(smi_flag(cells[8])),
                                       "failure": bool(smi_flag(cells[9]))}
        if smi_number(cells[10]) is not None:
            health["ecc_uncorrected_volatile"] = smi_number(cells[10])
        by_uuid[cells[1]] = gpu
        gpus.append(gpu)
    if not gpus:
        out["error"] = "nvidia-smi listed no GPU state"
        return out
    if apps_result and apps_result["rc"] == 0 and not apps_result["timed_out"]:
        for line in apps_result["stdout"].splitlines():
            cells = [cell.strip() for cell in line.split(",")]
            if len(cells) == 3 and cells[0] in by_uuid and cells[1].isdigit():
                used = smi_number(cells[2])
                by_uuid[cells[0]]["processes"].append(
                    {"pid": int(cells[1]), "used": used * MIB if used is not None else None})
    else:
        for gpu in gpus:
            gpu["processes_error"] = "nvidia-smi --query-compute-apps failed"
    out["gpus"] = gpus
    return out


def amd_gpu_state(kfd):
    """Memory and KFD processes of each AMD GPU from sysfs (amdgpu's mem_info_vram_*, KFD's
    /sys/class/kfd/kfd/proc/PID/vram_GPUID); memory health is not read on AMD."""
    gpus = []
    procs = host_path("/sys/class/kfd/kfd/proc")
    try:
        pids = sorted(int(p) for p in os.listdir(procs) if p.isdigit())
    except OSError:
        pids = []
    for index, node in enumerate(kfd):
        gpu: dict = {"index": index, "processes": []}
        minor = node.get("render_minor")
        device = host_path("/sys/class/drm/renderD%s/device" % minor)
        total = first_line(read_text(os.path.join(device, "mem_info_vram_total")))
        used = first_line(read_text(os.path.join(device, "mem_info_vram_used")))
        if total.isdigit() and used.isdigit():
            gpu["memory"] = {"total": int(total), "used": int(used),
                             "free": max(0, int(total) - int(used))}
        gpu_id = first_line(read_text(host_path(
            "/sys/class/kfd/kfd/topology/nodes/%s/gpu_id" % node.get("node"))))
        for pid in pids:
            vram = first_line(read_text(os.path.join(procs, str(pid), "vram_" + gpu_id)))
            if gpu_id and vram.isdigit():
                gpu["processes"].append({"pid": pid, "used": int(vram)})
        gpus.append(gpu)
    return {"source": "sysfs", "gpus": gpus}


def parse_kmsg(text, now_s, window_s, buses):
    """Xid events of the last `window_s` seconds from /dev/kmsg records ("PRIO,SEQ,USEC,-;MSG")."""
    events = []
    for line in text.splitlines():
        head, sep, message = line.partition(";")
        fields = head.split(",")
        if not sep or len(fields) < 3 or not fields[2].isdigit():
            continue
        match = re.search(r"NVRM: Xid \(PCI:([0-9a-fA-F:.]+)\): (\d+),\s*(.*)", message)
        if not match:
            continue
        seconds = int(fields[2]) / 1e6
        if now_s is not None and seconds < now_s - window_s:
            continue
        bus, xid = match.group(1).lower(), int(match.group(2))
        mine = not buses or any(b.startswith(bus) or bus.startswith(b) for b in buses)
        events.append({"xid": xid, "pci": bus, "ago_s": round(now_s - seconds) if now_s else None,
                       "this_node": mine, "text": match.group(3)[:200],
                       "kind": "critical" if xid in XID_CRITICAL else
                       "application" if xid in XID_APPLICATION else "informational"})
    return events


def read_kmsg(path):
    """The kernel log's records (text) without blocking, or (None, why not)."""
    try:
        info = os.stat(path)
    except OSError as exc:
        return None, "%s: %s" % (path, errno.errorcode.get(exc.errno or 0, str(exc)))
    if stat.S_ISCHR(info.st_mode) and (os.major(info.st_rdev), os.minor(info.st_rdev)) != (1, 11):
        # LXC links /dev/kmsg to the console: reading it is not reading the kernel log.
        return None, "%s is not the kernel log (device %d:%d)" % (
            path, os.major(info.st_rdev), os.minor(info.st_rdev))
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        return None, "%s: %s (reading the kernel log needs CAP_SYSLOG where " \
                     "kernel.dmesg_restrict=1, and a container rarely has it)" % (
                         path, errno.errorcode.get(exc.errno or 0, str(exc)))
    chunks, size = [], 0
    try:
        while size < (8 << 20):
            try:
                chunk = os.read(fd, 65536)
            except OSError as exc:
                if exc.errno == errno.EPIPE:  # a record overwritten while reading: go on
                    continue
                if exc.errno in (errno.EAGAIN, errno.EWOULDBLOCK):
                    break
                return None, "%s: %s" % (path, errno.errorcode.get(exc.errno or 0, str(exc)))
            if not chunk:
                break
            chunks.append(chunk.decode("utf-8", "replace"))
            size += len(chunk)
            if not chunk.endswith(b"\n"):
                chunks.append("\n")
    finally:
        os.close(fd)
    return "".join(chunks), None


def xid_events(buses, window_s=XID_WINDOW_S):
    """{"readable", "events", "window_s"} or {"readable": False, "why"}: never a clean log that
    was not read."""
    text, why = read_kmsg(host_path("/dev/kmsg"))
    if text is None:
        return {"readable": False, "why": why, "window_s": window_s}
    uptime = first_line(read_text(host_path("/proc/uptime"))).split()
    now_s = float(uptime[0]) if uptime and re.match(r"^[\d.]+$", uptime[0]) else None
    return {"readable": True, "window_s": window_s,
            "events": parse_kmsg(text, now_s, window_s, buses)[-50:]}


def visible_devices(env):
    """The entries of CUDA_VISIBLE_DEVICES (None when unset): what the job may open."""
    value = env.get("CUDA_VISIBLE_DEVICES")
    if value is None:
        return None
    return [item.strip() for item in value.split(",") if item.strip()]


def the_job_s(gpu, visible):
    """Whether the job may use this GPU: every GPU without CUDA_VISIBLE_DEVICES, else those it
    names by NVML index or by (a prefix of) UUID. A GPU of another job on a shared node (a
    Slurm prolog's neighbours) is not this job's business."""
    if visible is None:
        return True
    uuid = gpu.get("uuid") or ""
    return any(item == str(gpu.get("index")) or (item.startswith("GPU-") and uuid.startswith(
        item)) for item in visible)


class GpuStateFacts(ProbeState):
    """The NVML stage, started before any stage that may create a CUDA context, and read while
    the probe's own subprocesses are alive (so their pids are known as its own)."""

    def start_gpu_state(self):
        """The NVML stage as a helper of its own, where the stack does not read it (--deep:
        before the deep kernel's contexts) or did not (it died first)."""
        self.gpustate = None
        self.gpu_state_info = {"error": "not run: no NVIDIA GPU"}
        if self.possible_gpu and self.vendor == "nvidia" and not self.driver_in_stack:
            self.spawn_gpu_state()

    def spawn_gpu_state(self):
        self.gpustate = Spawned([sys.executable, "-I", "-c", GPUSTATE_SCRIPT],
                                self.deadline.timeout(15), env=self.env, label="gpustate")

    def wait_gpu_state(self, info=None):
        """The GPU state (`info`: the stack's stage, else the helper's answer), before the
        stages that create contexts start (the deep kernel); nvidia-smi's queries where NVML
        did not load."""
        if self.vendor == "amd" and self.possible_gpu:
            info = amd_gpu_state(self.amd["kfd_gpus"])
        elif info is None and self.gpustate is None:
            return
        else:
            if info is None and self.gpustate is not None:
                info = stage_answer(self.gpustate.result(), "NVML state probe")
            if info.get("error") and not info.get("gpus"):
                smi = shutil.which("nvidia-smi", path=self.env.get("PATH", os.defpath))
                if smi:
                    gpus = Spawned([smi, "--query-gpu=" + SMI_STATE_FIELDS,
                                    "--format=csv,noheader,nounits"],
                                   self.deadline.timeout(10), env=self.env).result()
                    apps = Spawned([smi, "--query-compute-apps=gpu_uuid,pid,used_memory",
                                    "--format=csv,noheader,nounits"],
                                   self.deadline.timeout(10), env=self.env).result()
                    fallback = parse_smi_state(gpus, apps)
                    fallback["nvml_error"] = info.get("error")
                    info = fallback if fallback.get("gpus") else dict(
                        info, nvidia_smi=fallback.get("error"))
        own = {os.getpid()} | {s.proc.pid for s in (self.stack, self.gpustate)
                               if s is not None and s.proc is not None}
        for gpu in info.get("gpus") or []:
            gpu["processes"] = [dict(p, **describe_pid(p["pid"], own))
                                for p in gpu.get("processes") or []
                                if isinstance(p.get("pid"), int)]
        self.gpu_state_info = info

    def assemble_gpu_state(self):
        """facts.gpu_state: per GPU memory (MiB), processes, modes, health; the count CUDA
        opens; the kernel log's Xid events."""
        info: dict = self.gpu_state_info
        visible = visible_devices(self.env)
        gpus = []
        for gpu in info.get("gpus") or []:
            memory: dict = gpu.get("memory") or {}
            own_used = sum(p.get("used") or 0 for p in gpu["processes"] if p.get("own"))
            entry: dict = {"index": gpu.get("index"), "uuid": gpu.get("uuid"),
                     "persistence_mode": gpu.get("persistence_mode"),
                     "compute_mode": COMPUTE_MODES.get(gpu.get("compute_mode")),
                     "processes": [{key: p.get(key) for key in (
                         "pid", "used_mib", "own", "here", "name", "user", "cmdline",
                         "pid_reused")} for p in (
                             dict(p, used_mib=p["used"] // MIB if p.get("used") is not None
                                  else None) for p in gpu["processes"])],
                     "processes_error": gpu.get("processes_error"),
                     "health": gpu.get("health") or {}, "job": the_job_s(gpu, visible)}
            if memory.get("total"):
                used = max(0, memory.get("used", 0) - own_used)
                entry.update({"total_mib": memory["total"] // MIB,
                              "used_mib": memory.get("used", 0) // MIB,
                              "held_mib": used // MIB,
                              "held_share": round(used / memory["total"], 4)})
            gpus.append(entry)
        cuda = self.cuda_info
        state = {"source": info.get("source"), "error": info.get("error"),
                 "nvml_error": info.get("nvml_error"), "gpus": gpus,
                 "listed": len(gpus) if gpus else len(self.gpus),
                 "cuda_count": cuda.get("count") if cuda.get("init") == 0 else None,
                 "visible_devices": visible}
        if self.vendor == "nvidia" and self.possible_gpu:
            state["xid"] = xid_events([gpu["bus"].lower() for gpu in self.proc["gpus"]])
        self.facts["gpu_state"] = state
