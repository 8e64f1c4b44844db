"""Every check id in causal order, and the short names of root causes."""



#: Every check id, in causal order (the same as fleetcheck/checks.py; a test compares them).
CHECK_IDS = (
    "gpu_present", "dev_nodes_missing", "fabric_manager_not_ready",
    "cuda_compat_on_unsupported_gpu", "libcuda_stub_shadowing", "driver_userspace_mismatch",
    "zero_active_drivers", "driver_too_old", "torch_cuda", "torch_lacks_arch",
    "gpu_arch_unsupported", "triton_installed", "triton_2x",
    "cc_env_invalid", "no_c_compiler", "no_linker", "libc_headers_missing",
    "python_headers_missing", "ldconfig_binary_missing", "libcuda_not_in_ldcache",
    "ldcache_stale_libcuda_entry", "libcuda_unversioned_missing", "cache_dir_unwritable",
    "cache_dir_noexec", "cache_on_network_fs", "ptxas_missing", "ptxas_override_unparsed",
    "triton_too_old_for_gpu", "driver_too_old_for_bundled_ptxas", "triton_target",
    "stale_cache_masks_compiler", "triton_kernel", "blackwell_no_allocator", "fla_fallback_hidden",
)

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
    "cc_env_invalid": "invalid $CC",
    "no_c_compiler": "no C compiler",
    "no_linker": "no linker",
    "libc_headers_missing": "no libc headers",
    "python_headers_missing": "no Python headers",
    "ldconfig_binary_missing": "no /sbin/ldconfig",
    "libcuda_not_in_ldcache": "libcuda.so.1 not in the linker cache",
    "libcuda_unversioned_missing": "no unversioned libcuda.so",
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
}
