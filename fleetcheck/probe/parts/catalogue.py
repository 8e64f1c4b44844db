"""Every check id in causal order, and the short names of root causes."""



#: Every check id, in causal order (the same as fleetcheck/checks.py; a test compares them).
CHECK_IDS = (
    "gpu_present", "dev_nodes_missing", "cgroup_devices_revoked", "fabric_manager_not_ready",
    "cuda_compat_on_unsupported_gpu", "libcuda_stub_shadowing", "driver_userspace_mismatch",
    "zero_active_drivers", "gpu_exclusive_busy", "driver_too_old", "torch_cuda",
    "torch_lacks_arch",
    "gpu_arch_unsupported", "triton_installed", "triton_2x",
    "triton_backends",
    "cc_env_invalid", "no_c_compiler", "no_linker", "libc_headers_missing",
    "python_headers_missing", "ldconfig_binary_missing", "libcuda_not_in_ldcache",
    "ldcache_stale_libcuda_entry", "libcuda_unversioned_missing", "libhip_path_invalid",
    "libamdhip64_not_found", "libamdhip64_other_rocm", "cache_dir_unwritable",
    "cache_dir_noexec", "cache_on_network_fs", "cache_dir_full", "tmp_dir_unusable",
    "ptxas_missing", "ptxas_override_unparsed",
    "triton_too_old_for_gpu", "driver_too_old_for_bundled_ptxas", "triton_target",
    "triton_own_path", "stale_cache_masks_compiler", "triton_kernel", "blackwell_no_allocator",
    "fla_fallback_hidden", "workload_env", "inductor_ready",
    "gpu_memory_in_use", "gpu_foreign_processes", "gpu_memory_health", "gpu_missing_for_cuda",
    "gpu_persistence_mode", "gpu_xid_events",
)

#: Checks of NVIDIA's stack only (libcuda, ptxas, NVSwitch): an AMD node's document leaves them out.
CUDA_ONLY = frozenset({
    "fabric_manager_not_ready", "cuda_compat_on_unsupported_gpu", "libcuda_stub_shadowing",
    "driver_too_old", "ldconfig_binary_missing", "libcuda_not_in_ldcache",
    "ldcache_stale_libcuda_entry", "libcuda_unversioned_missing", "ptxas_missing",
    "ptxas_override_unparsed", "triton_too_old_for_gpu", "driver_too_old_for_bundled_ptxas",
    "blackwell_no_allocator", "cgroup_devices_revoked", "gpu_exclusive_busy",
    "gpu_memory_health", "gpu_missing_for_cuda", "gpu_persistence_mode", "gpu_xid_events",
})

#: Checks of Triton's HIP backend only (libamdhip64): a node without an AMD GPU leaves them out.
HIP_ONLY = frozenset({"libhip_path_invalid", "libamdhip64_not_found", "libamdhip64_other_rocm"})

#: An AMD node's wording of the shared causes whose CAUSE_LABELS name NVIDIA's stack.
HIP_CAUSE_LABELS = {
    "driver_userspace_mismatch": "ROCm userspace does not match the amdgpu driver",
    "zero_active_drivers": "HIP runtime finds no GPU",
    "gpu_arch_unsupported": "gfx arch not supported by Triton",
}

#: Short names of root causes, used in the verdict's fix ("no C compiler: apt-get ...").
CAUSE_LABELS = {
    "dev_nodes_missing": "GPU device nodes unusable",
    "fabric_manager_not_ready": "NVSwitch fabric not ready (fabric manager)",
    "cuda_compat_on_unsupported_gpu": "CUDA forward-compat libcuda on unsupported hardware",
    "libcuda_stub_shadowing": "the link-time stub libcuda is loaded",
    "gpu_arch_unsupported": "GPU too old for Triton",
    "ldcache_stale_libcuda_entry": "stale libcuda.so.1 entry in the linker cache",
    "cache_on_network_fs": "Triton cache on a network file system",
    "driver_too_old_for_bundled_ptxas": "driver older than Triton's ptxas",
    "driver_userspace_mismatch": "driver library/kernel module mismatch",
    "zero_active_drivers": "CUDA driver does not initialise",
    "driver_too_old": "driver too old for torch's CUDA",
    "torch_cuda": "PyTorch does not see the GPU",
    "torch_lacks_arch": "PyTorch not built for this GPU",
    "triton_installed": "Triton installation",
    "triton_2x": "Triton 2.x",
    "triton_backends": "Triton's backend selection fails",
    "cc_env_invalid": "invalid $CC",
    "no_c_compiler": "no C compiler",
    "no_linker": "no linker",
    "libc_headers_missing": "no libc headers",
    "python_headers_missing": "no Python headers",
    "ldconfig_binary_missing": "no /sbin/ldconfig",
    "libcuda_not_in_ldcache": "libcuda.so.1 not in the linker cache",
    "libcuda_unversioned_missing": "no unversioned libcuda.so",
    "libhip_path_invalid": "TRITON_LIBHIP_PATH invalid",
    "libamdhip64_not_found": "libamdhip64.so not found",
    "libamdhip64_other_rocm": "libamdhip64 from another ROCm than torch's",
    "cache_dir_unwritable": "Triton cache not writable",
    "cache_dir_noexec": "Triton cache on a noexec mount",
    "ptxas_missing": "bundled ptxas missing",
    "ptxas_override_unparsed": "TRITON_PTXAS_PATH unusable",
    "triton_too_old_for_gpu": "Triton too old for this GPU",
    "triton_target": "get_current_target() fails",
    "stale_cache_masks_compiler": "works only thanks to a warm cache",
    "triton_kernel": "Triton kernel does not run",
    "blackwell_no_allocator": "FLA registers no allocator on Blackwell",
    "fla_fallback_hidden": "flash-linear-attention falls back to CPU",
    "cache_dir_full": "Triton cache full",
    "cgroup_devices_revoked": "GPU access revoked under the running container",
    "gpu_exclusive_busy": "GPU in exclusive-process mode, held by another process",
    "tmp_dir_unusable": "temp dir unusable for Triton's build",
    "triton_own_path": "get_current_target() fails where the workload builds",
    "workload_env": "the environment moves the kernels off the GPU",
    "inductor_ready": "torch.compile fails before Triton",
    "gpu_memory_in_use": "GPU memory already in use",
    "gpu_foreign_processes": "another process on the GPU",
    "gpu_memory_health": "GPU memory repair pending or failed",
    "gpu_missing_for_cuda": "a GPU the driver lists that CUDA cannot open",
    "gpu_persistence_mode": "persistence mode off",
    "gpu_xid_events": "critical Xid events in the kernel log",
}

#: The GPUs' state before a job (facts_gpustate.py, checks_gpustate.py): they fail or warn the
#: node under a playbook, never Triton's verdict.
GPU_STATE_IDS = frozenset({"gpu_memory_in_use", "gpu_foreign_processes", "gpu_memory_health",
                           "gpu_missing_for_cuda", "gpu_persistence_mode", "gpu_xid_events"})
