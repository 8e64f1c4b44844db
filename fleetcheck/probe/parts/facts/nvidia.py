"""NVIDIA driver facts: /proc/driver/nvidia, /dev/nvidia*, nvidia-smi, NVSwitches."""

import errno
import os
import re

from fleetcheck.probe.parts.core.base import first_line, host_path, read_text


def proc_nvidia():
    """/proc/driver/nvidia: the kernel module's version and the GPUs it drives."""
    version_text = read_text(host_path("/proc/driver/nvidia/version"))
    module = None
    if version_text:
        match = re.search(r"Kernel Module(?: for \S+)?\s+([\d.]+)", version_text)
        module = match.group(1) if match else None
    gpus = []
    base = host_path("/proc/driver/nvidia/gpus")
    try:
        buses = sorted(os.listdir(base))
    except OSError:
        buses = []
    for bus in buses:
        info = read_text(os.path.join(base, bus, "information")) or ""
        fields = {}
        for line in info.splitlines():
            key, sep, value = line.partition(":")
            if sep:
                fields[key.strip()] = value.strip()
        minor = fields.get("Device Minor")
        gpus.append({"bus": bus, "model": fields.get("Model"), "uuid": fields.get("GPU UUID"),
                     "minor": int(minor) if minor and minor.isdigit() else None})
    return {"version_text": first_line(version_text), "kernel_module": module, "gpus": gpus}


def dev_nodes():
    """The /dev/nvidia* names present (numbered GPUs, nvidiactl, nvidia-uvm, ...)."""
    try:
        return sorted(name for name in os.listdir(host_path("/dev")) if name.startswith("nvidia"))
    except OSError:
        return []


def open_result(path):
    """'ok', or the errno name of opening `path` read-write (ENOENT, EPERM and EACCES differ)."""
    try:
        fd = os.open(path, os.O_RDWR | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        return errno.errorcode.get(exc.errno, str(exc.errno))  # type: ignore[arg-type]
    os.close(fd)
    return "ok"


def nodes_summary(name, what, bad, count, none_there, container):
    """The summary of device nodes that do not all open: `none_there` (and the container they
    were not passed into) where none of the `count` exists, else the first bad one's."""
    if all(code == "ENOENT" for code in bad.values()) and len(bad) == count:
        return none_there + (" (not passed into the %s container)" % container
                             if container else "")
    return "/dev/%s %s" % (name, what) + (
        "; %d of %d nodes unusable" % (len(bad), count) if len(bad) > 1 else "")


def parse_smi(result):
    """GPUs from `nvidia-smi --query-gpu=... --format=csv,noheader,nounits`, or its error."""
    out = {"rc": result["rc"], "timed_out": result["timed_out"]}
    if result["error"]:
        out["error"] = result["error"]
        return out
    if result["timed_out"]:
        out["error"] = "nvidia-smi timed out"
        return out
    if result["rc"] != 0:
        out["error"] = first_line(result["stdout"]) or first_line(result["stderr"])
        return out
    gpus = []
    for line in result["stdout"].splitlines():
        cells = [cell.strip() for cell in line.split(",")]
        if len(cells) < 6 or not cells[0].isdigit():
            continue
        memory = cells[3]
        gpus.append({"index": int(cells[0]), "name": cells[1], "uuid": cells[2],
                     "memory_mib": int(memory) if memory.isdigit() else None,
                     "compute_capability": cells[4] if re.match(r"^\d+\.\d+$", cells[4]) else None,
                     "driver": cells[5]})
    out["gpus"] = gpus
    return out


def nvswitch_devices():
    """NVSwitch devices the driver lists (HGX boards): /proc/driver/nvidia-nvswitch/devices."""
    try:
        return sorted(os.listdir(host_path("/proc/driver/nvidia-nvswitch/devices")))
    except OSError:
        return []
