"""Facts about the node's system: its distribution, CPUs and memory."""

import os
import re

from fleetcheck.probe.parts.core.base import host_path, read_text


def os_release():
    text = read_text(host_path("/etc/os-release")) or read_text(host_path("/usr/lib/os-release"))
    values = {}
    for line in (text or "").splitlines():
        if "=" in line and not line.startswith("#"):
            key, _, value = line.partition("=")
            values[key.strip()] = value.strip().strip("\"'")
    return {"id": values.get("ID"), "version_id": values.get("VERSION_ID"),
            "pretty_name": values.get("PRETTY_NAME"),
            # `fleetcheck fix` picks the package manager by ID, then by ID_LIKE (rocky, pop...).
            "id_like": values.get("ID_LIKE")}


def memory_bytes():
    match = re.search(r"^MemTotal:\s+(\d+)\s*kB", read_text(host_path("/proc/meminfo")) or "",
                      re.M)
    return int(match.group(1)) * 1024 if match else None


def cpu_count():
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count()
