"""Where the probe runs: the container (LXC, Docker, Podman, Kubernetes) and the virtual machine
it is in, if any, from the signs each leaves (docs/transports.md, "Where the probe runs")."""

import os
import re

from fleetcheck.probe.parts.core.base import host_path, read_text

#: DMI sys_vendor / product_name words of the hypervisors (systemd-detect-virt's table).
DMI_VIRT = (("QEMU", "qemu"), ("KVM", "kvm"), ("VMware", "vmware"), ("VirtualBox", "oracle"),
            ("innotek", "oracle"), ("Xen", "xen"), ("Microsoft Corporation", "microsoft"),
            ("Amazon EC2", "amazon"), ("Google", "google"), ("Parallels", "parallels"),
            ("BHYVE", "bhyve"))
#: cgroup path words of the runtimes (cgroupfs and systemd drivers, v1 and v2).
CGROUP_SIGNS = (("kubepods", "kubernetes"), ("libpod", "podman"), ("/docker", "docker"),
                ("docker-", "docker"), ("lxc.payload", "lxc"), ("/lxc/", "lxc"))


def _pid1_container():
    environ = read_text(host_path("/proc/1/environ")) or ""
    for item in environ.split("\0"):
        if item.startswith("container="):
            return item.split("=", 1)[1] or None
    return None


def where_it_runs():
    """{"kind", "container", "virtual", "signs"}: `kind` the innermost place (lxc, docker,
    podman, kubernetes; a hypervisor such as qemu, or vm when only the CPU's hypervisor flag
    tells; bare-metal), `container` the container kind or None, `virtual` the hypervisor the
    machine (or its container's host) runs on (unknown: the flag alone) or None, `signs`
    what told."""
    signs = []
    container = None
    run = (read_text(host_path("/run/systemd/container")) or "").strip()
    if run:
        signs.append("/run/systemd/container: %s" % run)
        container = run
    pid1 = _pid1_container()
    if pid1:
        signs.append("PID 1's environment: container=%s" % pid1)
        container = container or pid1
    if os.path.exists(host_path("/run/.containerenv")):
        signs.append("/run/.containerenv")
        container = container or "podman"
    if os.path.exists(host_path("/.dockerenv")):
        signs.append("/.dockerenv")
        container = container or "docker"
    if os.environ.get("KUBERNETES_SERVICE_HOST") or os.path.isdir(
            host_path("/var/run/secrets/kubernetes.io/serviceaccount")):
        signs.append("Kubernetes service account or KUBERNETES_SERVICE_HOST")
        container = "kubernetes"
    cgroup = read_text(host_path("/proc/self/cgroup")) or ""
    for word, kind in CGROUP_SIGNS:
        if word in cgroup:
            signs.append("/proc/self/cgroup: %s" % word)
            if container is None or kind == "kubernetes":
                container = kind
            break
    if container is None and "lxcfs" in (read_text(host_path("/proc/self/mountinfo")) or ""):
        signs.append("/proc/self/mountinfo: lxcfs")
        container = "lxc"
    if container in ("oci", "docker-init"):
        container = "docker"
    virtual = None
    dmi = " ".join((read_text(host_path("/sys/class/dmi/id/%s" % name)) or "").strip()
                   for name in ("sys_vendor", "product_name", "bios_vendor"))
    for word, kind in DMI_VIRT:
        if word in dmi:
            virtual = kind
            signs.append("DMI: %s" % word)
            break
    if virtual is None and re.search(r"^flags\s*:.*\bhypervisor\b",
                                     read_text(host_path("/proc/cpuinfo"), 1 << 16) or "", re.M):
        virtual = "unknown"
        signs.append("/proc/cpuinfo: hypervisor flag")
    place = container or (("vm" if virtual == "unknown" else virtual) if virtual
                          else "bare-metal")
    return {"kind": place, "container": container, "virtual": virtual, "signs": signs}

