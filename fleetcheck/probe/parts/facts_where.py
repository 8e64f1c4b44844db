"""Where the probe runs: the kind of container it is in, if any."""

from fleetcheck.probe.parts.base import host_path, read_text


def container_kind():
    """'lxc' when this node is an LXC container, else None (lxcfs mounts are the surest sign)."""
    run = (read_text(host_path("/run/systemd/container")) or "").strip()
    if run:
        return run
    environ = read_text(host_path("/proc/1/environ")) or ""
    for item in environ.split("\0"):
        if item.startswith("container="):
            return item.split("=", 1)[1] or None
    if "lxcfs" in (read_text(host_path("/proc/self/mountinfo")) or ""):
        return "lxc"
    return None
