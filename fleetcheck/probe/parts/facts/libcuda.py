"""libcuda and the loader: cuInit's error names, `ldconfig -p`, the ctypes stage's answer."""

import os

from fleetcheck.probe.parts.core.spawn import stage_answer
from fleetcheck.probe.parts.evaluation.limits import Limits

CUDA_ERRORS = {
    0: "CUDA_SUCCESS", 1: "CUDA_ERROR_INVALID_VALUE", 2: "CUDA_ERROR_OUT_OF_MEMORY",
    3: "CUDA_ERROR_NOT_INITIALIZED", 34: "CUDA_ERROR_STUB_LIBRARY",
    35: "CUDA_ERROR_INSUFFICIENT_DRIVER", 802: "CUDA_ERROR_SYSTEM_NOT_READY",
    100: "CUDA_ERROR_NO_DEVICE", 101: "CUDA_ERROR_INVALID_DEVICE",
    304: "CUDA_ERROR_OPERATING_SYSTEM", 803: "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
    804: "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE", 999: "CUDA_ERROR_UNKNOWN",
}


def parse_ldconfig(text):
    """(name, path) pairs from `ldconfig -p`."""
    entries = []
    for line in (text or "").splitlines():
        line = line.strip()
        if "=>" not in line:
            continue
        left, _, right = line.partition("=>")
        entries.append((left.split()[0] if left.split() else "", right.strip()))
    return entries


class LibcudaFacts(Limits):
    """Reads the libcuda stage (CUDA_SCRIPT) run with `-I` in a subprocess."""

    def collect_cuda(self, cuda):
        """The stage's answer (`cuda`: its process); where the job's limit stopped it (its
        start refused, the OOM killer), its error names the limit and "limit" the cause."""
        result = cuda.result()
        answer = stage_answer(result, "libcuda probe")
        limit = self.helper_limit(result) if "error" in answer else None
        if limit:
            answer["error"] += self.limit_note(*limit)
            answer["limit"] = limit[0]
        return answer

    def libcuda_dir(self):
        loaded = self.cuda_info.get("loaded")
        return os.path.dirname(loaded) if loaded and os.sep in loaded else None

    def loaded_libcuda(self):
        """The libcuda file really mapped into the process (/proc/self/maps), resolved."""
        loaded = self.cuda_info.get("loaded")
        if not loaded or os.sep not in loaded:
            return None, None
        return loaded, os.path.realpath(loaded)
