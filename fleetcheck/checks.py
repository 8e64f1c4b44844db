"""The check catalogue: ids, titles, causal order and the report columns they feed.

Ids marked `catalogue=True` come from the failure catalogue (docs/checks.md lists them with
their error texts); the others are fleetcheck's own checks around them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class CheckInfo:
    id: str
    title: str
    column: str
    catalogue: bool = True
    #: "nvidia" or "amd" for a check of one vendor's stack only (the other's documents leave it
    #: out); None for the checks every GPU node's document holds.
    vendor: str | None = None
    #: The title on an AMD node, where the shared check answers for HIP (None: `title`).
    amd_title: str | None = None


#: Every check the probe emits, in causal order: the first failing one is the root cause.
CHECKS: tuple[CheckInfo, ...] = (
    CheckInfo("gpu_present", "NVIDIA GPU present", "gpus", catalogue=False,
              amd_title="AMD GPU present"),
    CheckInfo("dev_nodes_missing", "/dev/nvidia* nodes usable", "gpus",
              amd_title="/dev/kfd and /dev/dri render nodes usable"),
    CheckInfo("cgroup_devices_revoked", "GPU access not revoked under the container", "gpus",
              vendor="nvidia"),
    CheckInfo("fabric_manager_not_ready", "NVSwitch fabric ready (cuInit not 802)", "driver",
              vendor="nvidia"),
    CheckInfo("cuda_compat_on_unsupported_gpu", "no forward-compat libcuda on unsupported HW",
              "driver", vendor="nvidia"),
    CheckInfo("libcuda_stub_shadowing", "libcuda is the driver's, not the link stub", "driver",
              vendor="nvidia"),
    CheckInfo("driver_userspace_mismatch", "driver libraries match kernel module", "driver",
              amd_title="ROCm userspace works with the amdgpu driver"),
    CheckInfo("zero_active_drivers", "CUDA driver initialises", "driver",
              amd_title="HIP runtime finds the GPUs"),
    CheckInfo("gpu_exclusive_busy", "GPU not held exclusively by another process", "driver",
              vendor="nvidia"),
    CheckInfo("driver_too_old", "driver new enough for torch's CUDA", "driver", vendor="nvidia"),
    CheckInfo("torch_cuda", "PyTorch sees the GPUs", "torch", catalogue=False,
              amd_title="PyTorch (ROCm build) sees the GPUs"),
    CheckInfo("torch_lacks_arch", "PyTorch built for this GPU", "torch",
              amd_title="PyTorch built for this gfx arch"),
    CheckInfo("gpu_arch_unsupported", "GPU capability >= 7.0 (Triton, inductor)", "gpus",
              catalogue=False, amd_title="gfx arch supported by Triton's AMD backend"),
    CheckInfo("triton_installed", "Triton installed (one distribution)", "triton", False),
    CheckInfo("triton_2x", "Triton 3.x", "triton"),
    CheckInfo("triton_backends", "Triton selects one backend (entry points, active drivers)",
              "triton"),
    CheckInfo("cc_env_invalid", "$CC points at a compiler", "compiler"),
    CheckInfo("no_c_compiler", "C compiler (CC, gcc or clang)", "compiler"),
    CheckInfo("no_linker", "linker (ld)", "compiler"),
    CheckInfo("libc_headers_missing", "libc headers", "headers"),
    CheckInfo("python_headers_missing", "Python.h for the interpreter", "headers"),
    CheckInfo("ldconfig_binary_missing", "/sbin/ldconfig present", "libcuda", vendor="nvidia"),
    CheckInfo("libcuda_not_in_ldcache", "libcuda.so.1 found as Triton finds it", "libcuda",
              vendor="nvidia"),
    CheckInfo("ldcache_stale_libcuda_entry", "ldconfig's libcuda.so.1 exists here", "libcuda",
              vendor="nvidia"),
    CheckInfo("libcuda_unversioned_missing", "libcuda.so for Triton < 3.6", "libcuda",
              vendor="nvidia"),
    CheckInfo("libhip_path_invalid", "TRITON_LIBHIP_PATH names a libamdhip64.so (AMD)",
              "libcuda", vendor="amd"),
    CheckInfo("libamdhip64_not_found", "libamdhip64.so found as Triton finds it (AMD)", "libcuda",
              vendor="amd"),
    CheckInfo("libamdhip64_other_rocm", "libamdhip64 of torch's ROCm (AMD)", "libcuda",
              vendor="amd"),
    CheckInfo("cache_dir_unwritable", "Triton cache writable", "cache"),
    CheckInfo("cache_dir_noexec", "Triton cache on an exec mount", "cache"),
    CheckInfo("cache_on_network_fs", "Triton cache node-local (not NFS/Lustre/FUSE)", "cache"),
    CheckInfo("cache_dir_full", "Triton cache has space for a build", "cache", catalogue=False),
    CheckInfo("tmp_dir_unusable", "temp dir usable for Triton's build", "cache",
              catalogue=False),
    CheckInfo("ptxas_missing", "bundled ptxas", "triton", vendor="nvidia"),
    CheckInfo("ptxas_override_unparsed", "TRITON_PTXAS_PATH usable", "triton", vendor="nvidia"),
    CheckInfo("triton_too_old_for_gpu", "Triton's ptxas knows this GPU", "triton", vendor="nvidia"),
    CheckInfo("driver_too_old_for_bundled_ptxas", "driver loads the cubins of Triton's ptxas",
              "driver", vendor="nvidia"),
    CheckInfo("triton_target", "get_current_target() in a fresh cache", "verdict", False),
    CheckInfo("triton_own_path", "get_current_target() in the workload's own dirs", "verdict",
              False),
    CheckInfo("stale_cache_masks_compiler", "works without relying on a warm cache", "cache"),
    CheckInfo("triton_kernel", "JIT kernel runs on every GPU (--deep)", "verdict", False),
    CheckInfo("blackwell_no_allocator", "FLA registers an allocator on Blackwell", "fla",
              vendor="nvidia"),
    CheckInfo("fla_fallback_hidden", "flash-linear-attention on the GPU", "fla"),
    CheckInfo("workload_env", "no variable moves or slows the kernels", "triton", False),
    CheckInfo("inductor_ready", "torch.compile's own path (user, cache dir)", "triton",
              False),
    # The GPUs' state before a job (docs/checks.md, "The GPUs' state before a job"): a playbook
    # decides whether each fails or warns (max_gpu_memory_used, foreign_processes,
    # memory_health, min_gpus).
    CheckInfo("gpu_memory_in_use", "GPU memory free (not held by another process)",
              "gpu_memory"),
    CheckInfo("gpu_foreign_processes", "no other process on the GPUs", "gpu_memory"),
    CheckInfo("gpu_memory_health", "no pending or failed GPU memory repair", "gpus",
              vendor="nvidia"),
    CheckInfo("gpu_missing_for_cuda", "CUDA opens every GPU the driver lists", "gpus",
              vendor="nvidia"),
    CheckInfo("gpu_persistence_mode", "persistence mode on", "gpus", vendor="nvidia"),
    CheckInfo("gpu_xid_events", "no critical Xid event in the kernel log (last hour)", "gpus",
              vendor="nvidia"),
)

CHECKS_BY_ID: dict[str, CheckInfo] = {info.id: info for info in CHECKS}


def check_title(check_id: str, facts: object = None) -> str:
    """A check's title for a node: its AMD wording on an AMD node (facts.gpu_vendor "amd")."""
    info = CHECKS_BY_ID.get(check_id)
    if info is None:
        return check_id
    amd = isinstance(facts, Mapping) and facts.get("gpu_vendor") == "amd"
    return info.amd_title if amd and info.amd_title else info.title


def vendor_checks(vendor: str) -> tuple[CheckInfo, ...]:
    """The checks a node of `vendor`'s GPUs reports ("nvidia" for a node without a GPU too)."""
    return tuple(info for info in CHECKS if info.vendor in (None, vendor))

#: Report columns in display order, with their headings.
COLUMNS: tuple[tuple[str, str], ...] = (
    ("gpus", "GPUs"),
    # Memory in use on the GPUs: used/total, or `held` and by what (facts.gpu_state).
    ("gpu_memory", "GPU mem"),
    ("driver", "Driver"),
    ("torch", "CUDA/torch"),
    ("triton", "Triton"),
    ("compiler", "Compiler"),
    ("headers", "Headers"),
    ("libcuda", "libcuda"),
    ("cache", "Cache"),
    ("fla", "FLA"),
    # What each installed framework will do (facts.frameworks): fed by no check of its own.
    ("frameworks", "Frameworks"),
)


def causal_rank(check_id: str) -> int:
    """Position in causal order; unknown ids sort last."""
    for index, info in enumerate(CHECKS):
        if info.id == check_id:
            return index
    return len(CHECKS)
