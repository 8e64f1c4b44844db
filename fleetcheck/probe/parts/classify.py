"""Error texts of Triton and its tools, mapped to the catalogue row they belong to."""

import re

#: Error texts of Triton and its tools -> the catalogue row they belong to (first match wins).
#: gcc quotes with ‘’ in UTF-8 locales and with '' under LANG=C, hence the dots.
ERROR_PATTERNS = (
    (r"Failed to find C compiler", "no_c_compiler"),
    (r"cannot find .ld.|cannot execute .(as|ld).|error trying to exec .as.|\"ld\" doesn't exist",
     "no_linker"),
    (r"\bPython\.h\b", "python_headers_missing"),
    (r"\b(stdio|dlfcn|stdlib|string|limits|stddef|features)\.h\b|no include path in which",
     "libc_headers_missing"),
    (r"Error 802|system not yet initialized|SYSTEM_NOT_READY", "fabric_manager_not_ready"),
    (r"Error 804|forward compatibility was attempted", "cuda_compat_on_unsupported_gpu"),
    (r"driver is a stub library|STUB_LIBRARY", "libcuda_stub_shadowing"),
    (r"device kernel image is invalid", "driver_too_old_for_bundled_ptxas"),
    (r"Possible files are located at", "ldcache_stale_libcuda_entry"),
    (r"libcuda\.so cannot found", "libcuda_not_in_ldcache"),
    (r"TRITON_LIBHIP_PATH '.*' does not point to a valid", "libhip_path_invalid"),
    (r"cannot (locate|open) libamdhip64\.so", "libamdhip64_not_found"),
    (r"libamdhip64 version .* is not supported|refusing to mix ROCm installations",
     "libamdhip64_other_rocm"),
    (r"no ROCm-capable device is detected", "zero_active_drivers"),
    (r"/sbin/ldconfig", "ldconfig_binary_missing"),
    (r"cannot find -lcuda", "libcuda_unversioned_missing"),
    (r"failed to map segment", "cache_dir_noexec"),
    (r"active drivers", "zero_active_drivers"),
    (r"Cannot find ptxas", "ptxas_missing"),
    (r"Triton only support CUDA", "ptxas_override_unparsed"),
    (r"for option 'gpu-name'|is not a recognized processor", "triton_too_old_for_gpu"),
    (r"no attribute 'active'", "triton_2x"),
    (r"no allocator was set", "blackwell_no_allocator"),
    (r"Permission denied", "cache_dir_unwritable"),
)


def classify_error(text):
    """The catalogue id a Triton error text belongs to, or None."""
    for pattern, check_id in ERROR_PATTERNS:
        if re.search(pattern, text or ""):
            return check_id
    return None
