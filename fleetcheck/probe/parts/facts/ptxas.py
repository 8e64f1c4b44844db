"""Which ptxas Triton runs for each GPU here: the GPUs' compute capabilities, Triton's release
and the ptxas binaries the stack found (its meta stage), read after gathering."""

from fleetcheck.probe.parts.core.base import version_tuple
from fleetcheck.probe.parts.core.state import ProbeState

#: Oldest ptxas (CUDA release) that assembles for a compute capability.
PTXAS_MIN_FOR_CC = {
    (7, 0): (9, 0), (7, 5): (10, 0), (8, 0): (11, 0), (8, 6): (11, 1), (8, 7): (11, 4),
    (8, 9): (11, 8), (9, 0): (11, 8), (10, 0): (12, 8), (10, 1): (12, 8), (10, 3): (12, 8),
    (11, 0): (13, 0), (12, 0): (12, 8), (12, 1): (12, 9),
}


class PtxasFacts(ProbeState):
    """The readings of the gathered facts that the Triton checks and the fixes share."""

    def capabilities(self):
        caps = set()
        for gpu in self.gpus:
            cap = version_tuple(gpu.get("compute_capability"))
            if len(cap) == 2:
                caps.add(cap)
        return sorted(caps)

    def triton_version(self):
        return version_tuple((self.facts.get("triton") or {}).get("version"))

    def ptxas_tools(self):
        return self.stages.get("meta", {}).get("ptxas") or {}

    def active_ptxas(self, cap=None):
        tools = self.ptxas_tools()
        version = self.triton_version()
        blackwell = cap is not None and (cap[0] >= 10 or (version >= (3, 9) and cap[0] >= 9))
        for key in (("TRITON_PTXAS_BLACKWELL_PATH", "ptxas-blackwell") if blackwell else ()) + (
                "TRITON_PTXAS_PATH", "ptxas", "ptxas-2x"):
            tool = tools.get(key)
            if tool and (tool.get("exists") or key == "ptxas"):
                if key == "ptxas" and not tool.get("exists") and tools.get("ptxas-2x"):
                    continue
                return key, tool
        return None, None

    def ptxas_override_too_old(self):
        """(variable, its ptxas, the GPU's capability, the CUDA it needs) where the
        workload's ptxas override (TRITON_PTXAS_PATH, or its Blackwell twin) is the ptxas
        Triton runs for a GPU here and does not know its architecture; else None."""
        for cap in self.capabilities():
            key, tool = self.active_ptxas(cap)
            if key not in ("TRITON_PTXAS_PATH", "TRITON_PTXAS_BLACKWELL_PATH"):
                continue
            have, need = version_tuple(tool.get("version")), PTXAS_MIN_FOR_CC.get(cap)
            if have and need and have[:2] < need:
                return key, tool, cap, need
        return None
