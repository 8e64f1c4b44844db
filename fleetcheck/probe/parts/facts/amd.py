"""AMD GPU facts: KFD topology (gfx, render minor), /dev/kfd and /dev/dri, amdgpu, HIP stage."""

import os
import re

from fleetcheck.probe.parts.core.base import first_line, host_path, read_text
from fleetcheck.probe.parts.core.spawn import stage_answer
from fleetcheck.probe.parts.core.state import ProbeState

#: hipError_t values and names (hip/hip_runtime_api.h, as bundled in Triton's AMD backend).
HIP_ERRORS = {
    0: "hipSuccess", 1: "hipErrorInvalidValue", 2: "hipErrorOutOfMemory",
    3: "hipErrorNotInitialized", 4: "hipErrorDeinitialized", 35: "hipErrorInsufficientDriver",
    100: "hipErrorNoDevice", 101: "hipErrorInvalidDevice", 209: "hipErrorNoBinaryForGpu",
    303: "hipErrorSharedObjectInitFailed", 304: "hipErrorOperatingSystem",
    999: "hipErrorUnknown",
}

#: The architectures Triton's AMD backend is developed and tested for (CDNA2-4, RDNA3-4).
TRITON_HIP_ARCHS = ("gfx90a", "gfx942", "gfx950", "gfx1100", "gfx1101", "gfx1102", "gfx1150",
                    "gfx1151", "gfx1200", "gfx1201", "gfx1250")


def gfx_name(target_version):
    """'gfx942' from KFD's gfx_target_version 90402 (major, minor, stepping; the last two hex)."""
    if not isinstance(target_version, int) or target_version <= 0:
        return None
    major, minor, step = target_version // 10000, target_version // 100 % 100, \
        target_version % 100
    return "gfx%d%x%x" % (major, minor, step)


def gfx_from_override(value):
    """The gfx that HSA_OVERRIDE_GFX_VERSION=10.3.0 makes the runtime report (gfx1030)."""
    match = re.match(r"^\s*(\d+)\.(\d+)\.(\d+)\s*$", value or "")
    if not match:
        return None
    return "gfx%d%x%x" % tuple(int(g) for g in match.groups())


def kfd_gpus():
    """GPU nodes of /sys/class/kfd/kfd/topology/nodes (CPU nodes have simd_count 0)."""
    base = host_path("/sys/class/kfd/kfd/topology/nodes")
    try:
        names = sorted(os.listdir(base), key=lambda n: int(n) if n.isdigit() else 1 << 30)
    except OSError:
        return []
    gpus = []
    for name in names:
        text = read_text(os.path.join(base, name, "properties")) or ""
        props = {}
        for line in text.splitlines():
            key, _, value = line.strip().partition(" ")
            if value.strip().lstrip("-").isdigit():
                props[key] = int(value.strip())
        if not props.get("simd_count"):
            continue
        gpus.append({"node": name, "gfx": gfx_name(props.get("gfx_target_version")),
                     "gfx_target_version": props.get("gfx_target_version"),
                     "vendor_id": props.get("vendor_id"), "device_id": props.get("device_id"),
                     "render_minor": props.get("drm_render_minor"),
                     "simd_count": props.get("simd_count")})
    return gpus


def amdgpu_module():
    """The amdgpu kernel driver: loaded or not, and its version (the DKMS build writes one)."""
    loaded = os.path.isdir(host_path("/sys/module/amdgpu"))
    version = first_line(read_text(host_path("/sys/module/amdgpu/version"))) or None
    return {"loaded": loaded, "version": version}


def amd_dev_nodes():
    """/dev/kfd and the /dev/dri/renderD* names present."""
    found = ["kfd"] if os.path.exists(host_path("/dev/kfd")) else []
    try:
        found += sorted("dri/" + n for n in os.listdir(host_path("/dev/dri"))
                        if n.startswith("renderD"))
    except OSError:
        pass
    return found


def amd_facts():
    """Everything the cheap reads say about AMD GPUs on this node."""
    return {"kfd_gpus": kfd_gpus(), "amdgpu": amdgpu_module(), "dev_nodes": amd_dev_nodes()}


def parse_rocminfo(result):
    """The gfx names `rocminfo` lists for its GPU agents (never required; evidence only)."""
    if result is None:
        return None
    if result["error"] or result["timed_out"] or result["rc"] != 0:
        return {"error": result["error"] or ("timed out" if result["timed_out"] else first_line(
            result["stderr"]) or first_line(result["stdout"]) or "rc %s" % result["rc"])}
    names = re.findall(r"^\s*Name:\s+(gfx[0-9a-f]+)\s*$", result["stdout"], re.M)
    return {"gfx": names}


class AmdFacts(ProbeState):
    """Reads the HIP stage (HIP_SCRIPT), run in the workload interpreter as Triton would be."""

    def collect_hip(self, hip):
        return stage_answer(hip.result(), "HIP probe", last_line=True)
