"""fleetcheck probe: run on a node as `python3 - [--deep] [--deadline S] [--python PATH]`.

Standard library only, CPython >= 3.8. Sent over stdin; leaves nothing behind; needs no network
and no root. FLEETCHECK_SYSROOT (default "/") prefixes the reads of /dev, /proc, /sys, /run,
/etc/os-release and the /sbin/ldconfig that Triton runs, so that tests can build a fake node.
Exit code: 0 ok or warn, 1 fail, 3 error or unknown.
"""

# Built by `python -m fleetcheck.probe.build` from fleetcheck/probe/parts/ (docs/architecture.md:
# "The probe's sources"). Edit the parts, then rebuild; tests/probe/test_build.py checks.

from __future__ import annotations

import collections
import csv
import errno
import json
import os
import platform
import pwd
import re
import resource
import select
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time

# --- core/base ------------------------------------------------------------------------------------

TYPE_CHECKING = False


MAX_TEXT = 4096

SYSROOT = os.environ.get("FLEETCHECK_SYSROOT") or "/"


def host_path(path):
    if SYSROOT in ("", "/"):
        return path
    return SYSROOT.rstrip("/") + path


def clip(text, limit=MAX_TEXT):
    if text is None:
        return None
    text = str(text)
    if len(text) <= limit:
        return text
    return "…" + text[-(limit - 1):]


def clip_head(text, limit):
    text = str(text or "")
    return text if len(text) <= limit else text[:limit - 1] + "…"


def bounded(value, depth=0):
    if depth > 8:
        return None
    if isinstance(value, str):
        return clip(value)
    if isinstance(value, bool) or value is None or isinstance(value, int):
        return value
    if isinstance(value, float):
        return round(value, 3) if value == value else None
    if isinstance(value, dict):
        return {str(k)[:200]: bounded(v, depth + 1) for k, v in list(value.items())[:200]}
    if isinstance(value, (list, tuple)):
        return [bounded(v, depth + 1) for v in list(value)[:200]]
    return clip(repr(value))


def error_text(exc):
    return clip(type(exc).__name__ + ": " + str(exc))


def read_text(path, limit=1 << 20):
    try:
        with open(path, "rb") as handle:
            return handle.read(limit).decode("utf-8", "replace")
    except OSError:
        return None


def first_line(text):
    for line in (text or "").splitlines():
        if line.strip():
            return line.strip()
    return ""


def version_tuple(text):
    parts = []
    for piece in re.split(r"[.+\-]", str(text or "")):
        match = re.match(r"\d+", piece)
        if not match:
            break
        parts.append(int(match.group()))
        if len(parts) == 3:
            break
    return tuple(parts)


CheckResult = collections.namedtuple("CheckResult", "status summary fix evidence")


# --- catalogue ------------------------------------------------------------------------------------

Cause = collections.namedtuple(
    "Cause", "id label fix vendor check amd_label texts errnos repair title amd_title column "
    "catalogue short stack maskable toolchain places scope graded_by",
    defaults=(None, False, None, (), (), None, None, None, None, True, None, False, False,
              False, None, "triton", None))

REPAIRS = {
    "packages": "installs the distribution's packages",
    "ldcache": "lists libcuda's dir in ld.so.conf.d, runs ldconfig",
    "symlink": "links libcuda.so to libcuda.so.1",
    "gpu_access": "prints the node kind's GPU pass-through for the host's admin",
    "host": "prints the fix for the host's admin",
    "cache_dir": "prints a cache dir of the workload user's own",
    None: "prints the fix for the workload's owner",
}

_HOLDER_FIX = ("stop what holds it before the job: nvidia-smi --query-compute-apps=pid,"
               "used_memory --format=csv lists the processes, fuser -v /dev/nvidia* who has "
               "the GPUs open; in a container, run these on the host")

_TRITON_REINSTALL = ("{pip} install --force-reinstall --no-deps triton=={triton} "
                     "(the wheel torch {torch} pins)")

CAUSES = (
    Cause("gpu_present", "no GPU visible", "load the GPU driver; pass the GPU into the "
          "container (docker --gpus all)",
          check=True, repair="host",
          title="NVIDIA GPU present", column="gpus", catalogue=False, amd_title="AMD GPU present",
          short="none"),
    Cause("dev_nodes_missing", "GPU device nodes unusable", "pass /dev/nvidia* "
          "into the container (docker --gpus all)", check=True, repair="gpu_access",
          title="/dev/nvidia* nodes usable", column="gpus",
          amd_title="/dev/kfd and /dev/dri render nodes usable", short="no /dev"),
    Cause("cgroup_devices_revoked", "GPU access revoked under the running container",
          "restart the container; nvidia-ctk system "
          "create-dev-char-symlinks --create-all", "nvidia", True, repair="host",
          title="GPU access not revoked under the container", column="gpus"),
    Cause("fabric_manager_not_ready", "NVSwitch fabric not ready (fabric manager)",
          "systemctl enable --now nvidia-fabricmanager (of "
          "the driver's version)", "nvidia", True,
          texts=(r"Error 802|system not yet initialized|SYSTEM_NOT_READY",), repair="host",
          title="NVSwitch fabric ready (cuInit not 802)", column="driver"),
    Cause("cuda_compat_on_unsupported_gpu", "CUDA forward-compat libcuda on unsupported hardware",
          "take the cuda compat dir off LD_LIBRARY_PATH and "
          "ld.so.conf; run ldconfig", "nvidia", True,
          texts=(r"Error 804|forward compatibility was attempted",),
          title="no forward-compat libcuda on unsupported HW", column="driver"),
    Cause("libcuda_stub_shadowing", "the link-time stub libcuda is loaded",
          "take the stubs dir off LD_LIBRARY_PATH and ld.so.conf; run "
          "ldconfig", "nvidia", True, texts=(r"driver is a stub library|STUB_LIBRARY",),
          title="libcuda is the driver's, not the link stub", column="driver"),
    Cause("driver_userspace_mismatch", "driver library/kernel module mismatch",
          "install the driver userspace of the kernel module's "
          "version, or reboot", check=True, amd_label="ROCm userspace does not match the amdgpu "
          "driver", repair="host",
          title="driver libraries match kernel module", column="driver",
          amd_title="ROCm userspace works with the amdgpu driver", short="mismatch"),
    Cause("zero_active_drivers", "CUDA driver does not initialise", "install the "
          "driver userspace (libcuda.so.1), pass the GPUs in, fix CUDA_VISIBLE_DEVICES", check=True,
          amd_label="HIP runtime finds no GPU",
          texts=(r"libcuda\.so\.1: cannot open shared object file",
                 r"\b0 active drivers|no ROCm-capable device is detected"), repair="gpu_access",
          title="CUDA driver initialises", column="driver", amd_title="HIP runtime finds the GPUs",
          short="no driver"),
    Cause("gpu_exclusive_busy", "GPU in exclusive-process mode, held by another process",
          "nvidia-smi -i N -c DEFAULT on the host, or "
          "wait for the holder", "nvidia", True, repair="host",
          title="GPU not held exclusively by another process", column="driver"),
    Cause("driver_too_old", "driver too old for torch's CUDA", "upgrade the driver, or {pip} "
          "install a torch of the driver's CUDA", "nvidia", True,
          texts=(r"undefined symbol: cu[A-Z]\w*",), repair="host",
          title="driver new enough for torch's CUDA", column="driver", short="too old", stack=True),
    Cause("torch_install_broken", "the torch installation is incomplete",
          "reinstall torch: {pip} install --force-reinstall --no-deps torch=={torch}",
          check=True, texts=(r"No module named .torch\.",),
          title="torch's installed files complete", column="torch", stack=True),
    Cause("torch_cuda", "PyTorch does not see the GPU", "{pip} install a CUDA (or ROCm) "
          "build of torch", check=True,
          title="PyTorch sees the GPUs", column="torch", catalogue=False,
          amd_title="PyTorch (ROCm build) sees the GPUs", short="no CUDA", stack=True),
    Cause("torch_lacks_arch", "PyTorch not built for this GPU", "{pip} install "
          "--upgrade torch (a build for this GPU)", check=True,
          title="PyTorch built for this GPU", column="torch",
          amd_title="PyTorch built for this gfx arch", short="no arch", stack=True),
    Cause("gpu_arch_unsupported", "GPU too old for Triton", "use a GPU of capability >= "
          "7.0", check=True,
          amd_label="gfx arch not supported by Triton", repair="host",
          title="GPU capability >= 7.0 (Triton, inductor)", column="gpus", catalogue=False,
          amd_title="gfx arch supported by Triton's AMD backend"),
    Cause("triton_installed", "Triton installation", "keep one Triton distribution: {pip} "
          "uninstall -y {dists}, then {pip} install triton=={triton}", check=True,
          title="Triton installed (one distribution)", column="triton", catalogue=False,
          stack=True),
    Cause("triton_install_broken", "the Triton installation is incomplete", _TRITON_REINSTALL,
          check=True, texts=(r"No module named .triton[\w.]*|cannot import name .* from "
                             r".triton",),
          title="Triton's installed files complete (RECORD, backend)", column="triton", stack=True),
    Cause("triton_2x", "Triton 2.x", "upgrade to Triton >= 3.3 with torch >= 2.7: {pip} "
          "install --upgrade torch triton", check=True, texts=(r"no attribute 'active'",),
          title="Triton 3.x", column="triton", stack=True),
    Cause("triton_backends", "Triton's backend selection fails", _TRITON_REINSTALL, check=True,
          title="Triton selects one backend (entry points, active drivers)", column="triton",
          stack=True),
    Cause("triton_no_backends", "Triton finds no backend (installed without its metadata)",
          _TRITON_REINSTALL + ", or set TRITON_BACKENDS_IN_TREE=1"),
    Cause("triton_backends_conflict", "more than one active Triton backend",
          "{pip} uninstall the extra "
          "backend's package, or set TRITON_DEFAULT_BACKEND=nvidia",
          texts=(r"\b([2-9]|\d\d+) active drivers",)),
    Cause("triton_default_backend", "TRITON_DEFAULT_BACKEND names no active backend",
          "unset TRITON_DEFAULT_BACKEND, or set it to nvidia",
          texts=(r"Unknown backend device|Backend device '[^']*' is not active",)),
    Cause("cc_env_invalid", "invalid $CC", "fix or unset CC (export CC=/usr/bin/gcc)",
          check=True,
          title="$CC points at a compiler", column="compiler", short="bad $CC", maskable=True,
          toolchain=True),
    Cause("no_c_compiler", "no C compiler", "{install} {pkg_cc}, or set CC", check=True,
          texts=(r"Failed to find C compiler",), repair="packages",
          title="C compiler (CC, gcc or clang)", column="compiler", short="missing", maskable=True,
          toolchain=True),
    Cause("compiler_incomplete", "the C compiler is missing its own parts (cc1, collect2)",
          "{install} --reinstall {pkg_cc} "
          "cpp (cc1), or set CC",
          texts=(r"cannot execute .(cc1|cc1plus|collect2).|error trying to exec .cc1."
                 r"|\bcc1: not found",),
          toolchain=True),
    Cause("no_linker", "no linker", "{install} binutils", check=True,
          texts=(r"cannot find .ld.|\"ld\" doesn't exist|cannot execute .ld."
                 r"|error trying to exec .ld.",
                 r"cannot execute .as.|\"as\" doesn't exist|error trying to exec .as."),
          repair="packages",
          title="linker (ld)", column="compiler", short="no ld", maskable=True, toolchain=True),
    Cause("libc_crt_missing", "libc's startup files (crti.o, crt1.o) missing",
          "{install} {pkg_libc}", texts=(r"cannot find (crt[\w]*\.o|-lc\b)",),
          toolchain=True),
    Cause("compiler_killed", "the C compiler was killed (out of memory)", "raise the job's "
          "memory limit (memory.max, ulimit -v)",
          texts=(r"Killed signal terminated program|out of memory allocating|virtual memory "
                 r"exhausted|internal compiler error: (Killed|Segmentation fault) signal",),
          toolchain=True),
    Cause("cc_rejects_flags", "the C compiler rejects Triton's flags", "set CC to "
          "gcc or clang (export CC=/usr/bin/gcc)",
          texts=(r"unrecognized command[- ]line option|bad value .* for .-m[\w-]+=. switch"
                 r"|unknown argument: |unsupported option",),
          toolchain=True),
    Cause("include_dir_unreadable", "an include dir is unreadable for the workload's user",
          "chmod o+rx {path} and its "
          "parents",
          texts=(r"(error|fatal error): (\S+): Permission denied",),
          toolchain=True),
    Cause("libc_headers_missing", "no libc headers", "{install} {pkg_libc}", check=True,
          texts=(r"fatal error: (?!.?Python\.h).?[\w./-]+\.h.?(: No such file| file not found)",
                 r"\b(stdio|dlfcn|stdlib|string|limits|stddef|features)\.h\b"
                 r"|no include path in which"), repair="packages",
          title="libc headers", column="headers", short="no libc", maskable=True, toolchain=True),
    Cause("python_headers_missing", "no Python headers", "{install} {pkg_python} (headers "
          "for {python})", check=True, texts=(r"\bPython\.h\b",), repair="packages",
          title="Python.h for the interpreter", column="headers", short="no Python.h",
          maskable=True, toolchain=True),
    Cause("ldconfig_binary_missing", "no /sbin/ldconfig", "set TRITON_LIBCUDA_PATH="
          "{libcuda_dir}, or {install} libc-bin", "nvidia", True,
          title="/sbin/ldconfig present", column="libcuda", short="no ldconfig"),
    Cause("ld_so_cache_missing", "no linker cache (/etc/ld.so.cache)", "run /sbin/ldconfig as "
          "root (writes /etc/ld.so.cache), or set TRITON_LIBCUDA_PATH={libcuda_dir}",
          "nvidia", texts=(r"Can't open cache file|ld\.so\.cache"
                          r"|ldconfig', '-p'\]' returned non-zero",)),
    Cause("libcuda_not_in_ldcache", "libcuda.so.1 not in the linker cache", "run ldconfig (an "
          "/etc/ld.so.conf.d entry for {libcuda_dir}), or set TRITON_LIBCUDA_PATH="
          "{libcuda_dir}", "nvidia", True,
          texts=(r"libcuda\.so cannot found", r"cannot find -l:?libcuda\.so\.1"),
          repair="ldcache",
          title="libcuda.so.1 found as Triton finds it", column="libcuda", short="not cached"),
    Cause("ldcache_stale_libcuda_entry", "stale libcuda.so.1 entry in the linker cache",
          "run ldconfig as root, or set "
          "TRITON_LIBCUDA_PATH={libcuda_dir}", "nvidia", True,
          texts=(r"Possible files are located at",), repair="ldcache",
          title="ldconfig's libcuda.so.1 exists here", column="libcuda"),
    Cause("libcuda_unversioned_missing", "no unversioned libcuda.so", "ln -s libcuda.so.1 "
          "{libcuda_dir}/libcuda.so (or upgrade to Triton >= 3.6)", "nvidia", True,
          texts=(r"cannot find -lcuda\b",), repair="symlink",
          title="libcuda.so for Triton < 3.6", column="libcuda", short="no .so", stack=True,
          maskable=True, toolchain=True),
    Cause("libhip_path_invalid", "TRITON_LIBHIP_PATH invalid", "point TRITON_LIBHIP_PATH at "
          "/opt/rocm/lib/libamdhip64.so, or unset it", "amd", True,
          texts=(r"TRITON_LIBHIP_PATH '.*' does not point to a valid",),
          title="TRITON_LIBHIP_PATH names a libamdhip64.so (AMD)", column="libcuda"),
    Cause("libamdhip64_not_found", "libamdhip64.so not found", "export TRITON_LIBHIP_PATH="
          "{library} in the workload's environment (Triton {triton}'s own search does not "
          "reach it), or install ROCm's HIP runtime ({install} hip-runtime-amd)", "amd", True,
          texts=(r"cannot (locate|open) libamdhip64\.so",),
          title="libamdhip64.so found as Triton finds it (AMD)", column="libcuda"),
    Cause("libamdhip64_other_rocm", "libamdhip64 from another ROCm than torch's",
          "point TRITON_LIBHIP_PATH at "
          "torch's ROCm", "amd", True,
          texts=(r"libamdhip64 version .* is not supported|refusing to mix ROCm installations",),
          title="libamdhip64 of torch's ROCm (AMD)", column="libcuda", stack=True),
    Cause("cache_dir_unwritable", "Triton cache not writable", "make {cache_dir} writable by "
          "the workload's user (chown), or export TRITON_CACHE_DIR=/tmp/triton_$USER",
          check=True,
          title="Triton cache writable", column="cache", short="read-only",
          places={"cache": ("EACCES", "EPERM", "EROFS")}, repair="cache_dir"),
    Cause("cache_entry_foreign_owner", "Triton cache entries owned by another user",
          "remove the entries another user left in {cache_dir} (a run as root, e.g. with "
          "sudo -E): sudo rm -rf <the entries named>; or give them back: sudo chown -R "
          "<the workload's user> {cache_dir}", check=True,
          title="Triton cache entries not another user's", column="cache", short="foreign"),
    Cause("cache_entry_unreadable", "Triton cache entries unreadable", "chmod -R u+rwX "
          "<the entries named> under {cache_dir} (or remove them)", check=True,
          title="Triton cache entries readable", column="cache", short="unreadable"),
    Cause("cache_entry_corrupt", "a damaged Triton cache entry", "rm -r {component} (Triton "
          "rebuilds it), or the whole cache: rm -r {cache_dir}", check=True,
          texts=(r"file too short|invalid ELF header",),
          title="Triton cache entries intact", column="cache", short="corrupt"),
    Cause("cache_dir_noexec", "Triton cache on a noexec mount", "export TRITON_CACHE_DIR=<a "
          "dir on an exec mount>, or remount {mount} without noexec", check=True,
          title="Triton cache on an exec mount", column="cache", short="noexec",
          places={"cache": ("noexec",)}, repair="cache_dir"),
    Cause("cache_on_network_fs", "Triton cache on a network file system", "export "
          "TRITON_CACHE_DIR=<a node-local dir> (e.g. /tmp/triton_$USER)", check=True,
          title="Triton cache node-local (not NFS/Lustre/FUSE)", column="cache",
          repair="cache_dir"),
    Cause("cache_dir_full", "Triton cache full", "free space on {mount} (it holds {cache_dir}), "
          "or export TRITON_CACHE_DIR=<a dir with space>", check=True,
          title="Triton cache has space for a build", column="cache", catalogue=False, stack=True,
          places={"cache": ("ENOSPC", "EDQUOT")}),
    Cause("tmp_dir_unusable", "temp dir unusable for Triton's build", "export TMPDIR=<a "
          "writable dir with space> (now {tmp_dir})", check=True,
          texts=(r"No usable temporary directory found|IO failure on output stream"
                 r"|cannot open output file .*: (Permission denied|Read-only file system)",),
          title="temp dir usable for Triton's build", column="cache", catalogue=False, stack=True,
          places={"tmp": ("ENOSPC", "EDQUOT", "EACCES", "EPERM", "EROFS", "ENOTDIR", "noexec")}),
    Cause("ptxas_missing", "bundled ptxas missing", _TRITON_REINSTALL, "nvidia", True,
          texts=(r"Cannot find ptxas",),
          title="bundled ptxas", column="triton", stack=True),
    Cause("ptxas_override_unparsed", "TRITON_PTXAS_PATH unusable", "unset TRITON_PTXAS_PATH "
          "and upgrade Triton instead", "nvidia", True, texts=(r"Triton only support CUDA",),
          title="TRITON_PTXAS_PATH usable", column="triton", stack=True),
    Cause("triton_too_old_for_gpu", "Triton too old for this GPU", "upgrade: {pip} install "
          "--upgrade torch triton (Triton >= 3.3; >= 3.6 for sm_121)", "nvidia", True,
          texts=(r"for option 'gpu-name'|is not a recognized processor",),
          title="Triton's ptxas knows this GPU", column="triton", stack=True),
    Cause("driver_too_old_for_bundled_ptxas", "driver older than Triton's ptxas", "upgrade the "
          "driver, or set TRITON_PTXAS_PATH to an older ptxas",
          "nvidia", True, texts=(r"device kernel image is invalid",), repair="host",
          title="driver loads the cubins of Triton's ptxas", column="driver", stack=True),
    Cause("triton_target", "get_current_target() fails", "run {python} -c 'import triton; "
          "triton.runtime.driver.active.get_current_target()' and fix what it prints", check=True,
          title="get_current_target() in a fresh cache", column="verdict", catalogue=False,
          stack=True, maskable=True),
    Cause("triton_own_path", "get_current_target() fails where the workload builds",
          "run {python} -c 'import triton; "
          "triton.runtime.driver.active.get_current_target()' as the workload's user, with "
          "its TRITON_CACHE_DIR and TMPDIR, and fix what it prints", check=True,
          title="get_current_target() in the workload's own dirs", column="verdict",
          catalogue=False, stack=True),
    Cause("stale_cache_masks_compiler", "works only thanks to a warm cache", "{install} "
          "{pkg_cc}: kernels with a new signature still compile a launcher", check=True,
          title="works without relying on a warm cache", column="cache", short="stale", stack=True),
    Cause("triton_kernel", "Triton kernel does not run", "run a @triton.jit kernel with "
          "{python}; fix what it prints", check=True,
          title="JIT kernel runs on every GPU (--deep)", column="verdict", catalogue=False),
    Cause("blackwell_no_allocator", "FLA registers no allocator on Blackwell", "{pip} "
          "install --upgrade flash-linear-attention",
          "nvidia", True, texts=(r"no allocator was set",),
          title="FLA registers an allocator on Blackwell", column="fla", short="no alloc",
          stack=True),
    Cause("fla_fallback_hidden", "flash-linear-attention falls back to CPU", "{pip} install "
          "--upgrade flash-linear-attention",
          check=True,
          title="flash-linear-attention on the GPU", column="fla", short="cpu", stack=True),
    Cause("fla_import_fails", "flash-linear-attention cannot be imported", "{pip} install "
          "--force-reinstall flash-linear-attention"),
    Cause("workload_env", "the environment moves the kernels off the GPU", "unset the "
          "variable named", check=True,
          title="no variable moves or slows the kernels", column="triton", catalogue=False,
          stack=True),
    Cause("inductor_ready", "torch.compile fails before Triton", "set USER, "
          "or export TORCHINDUCTOR_CACHE_DIR=<a writable dir>", check=True,
          title="torch.compile's own path (user, cache dir)", column="triton", catalogue=False,
          stack=True, scope="framework"),
    Cause("gpu_memory_in_use", "GPU memory already in use", _HOLDER_FIX, check=True,
          repair="host",
          title="GPU memory free (not held by another process)", column="gpu_memory",
          scope="gpu_state", graded_by="max_gpu_memory_used"),
    Cause("gpu_foreign_processes", "another process on the GPU", _HOLDER_FIX, check=True,
          repair="host",
          title="no other process on the GPUs", column="gpu_memory", scope="gpu_state",
          graded_by="foreign_processes"),
    Cause("gpu_memory_health", "GPU memory repair pending or failed", "drain the node and "
          "reset the GPU (nvidia-smi -r -i N, no process on it) or reboot, so that pending row "
          "remaps or page retirements take effect; a failed remap: replace the GPU",
          "nvidia", True, repair="host",
          title="no pending or failed GPU memory repair", column="gpus", short="repair",
          scope="gpu_state", graded_by="memory_health"),
    Cause("gpu_missing_for_cuda", "a GPU the driver lists that CUDA cannot open", "check "
          "CUDA_VISIBLE_DEVICES and the container's device list against nvidia-smi -L; a GPU "
          "that has fallen off the bus needs a reset or reboot", "nvidia", True, repair="host",
          title="CUDA opens every GPU the driver lists", column="gpus", short="missing",
          scope="gpu_state"),
    Cause("gpu_persistence_mode", "persistence mode off", "nvidia-smi -pm 1 (or enable "
          "nvidia-persistenced) on the host", "nvidia", True, repair="host",
          title="persistence mode on", column="gpus", short="no pm", scope="gpu_state"),
    Cause("gpu_xid_events", "critical Xid events in the kernel log", "drain the node, run "
          "dmesg | grep -i xid and look each Xid up in NVIDIA's Xid catalogue: most critical "
          "ones need a GPU reset (nvidia-smi -r -i N) or a reboot", "nvidia", True,
          repair="host",
          title="no critical Xid event in the kernel log (last hour)", column="gpus", short="xid",
          scope="gpu_state"),
    Cause("glibc_too_old", "glibc too old for this Triton", "a newer OS "
          "image, or {pip} install an older triton",
          texts=(r"version .GLIBC_[\d.]+. not found",)),
    Cause("shared_library_missing", "a shared library is missing", "install the package of "
          "{library}, or add its dir to LD_LIBRARY_PATH",
          texts=(r"cannot open shared object file",)),
    Cause("address_space_limit", "the job's address-space limit (ulimit -v)", "raise the "
          "job's address-space limit {limit}={value} ({source}): {how} (Grid Engine h_vmem, "
          "Slurm VSizeFactor): CUDA reserves address space far beyond the memory it uses"),
    Cause("memory_cgroup_limit", "the job's cgroup memory limit", "raise the job's or "
          "container's memory limit ({path} is {value}; {source}): {how}"),
    Cause("open_files_limit", "the job's open-file limit (ulimit -n)", "raise {limit}={value} "
          "({source}): {how}", errnos=("EMFILE",)),
    Cause("process_limit", "the job's process limit (ulimit -u, pids.max)", "raise "
          "{limit}={value} ({source}): {how}", errnos=("EAGAIN",)),
    Cause("file_size_limit", "the job's file-size limit (ulimit -f)", "raise {limit}={value} "
          "({source}): {how}", errnos=("EFBIG",)),
    Cause("file_table_limit", "the node's table of open files is full (fs.file-max)",
          "raise {limit}={value} ({source}): {how}"),
    Cause("process_limits", "a process, file or memory limit of the job", "raise the job's "
          "process, open-file and memory limits (ulimit -u/-n/-v, cgroup pids.max, "
          "memory.max)", errnos=("ENFILE", "ENOMEM")),
    Cause("path_dangling_link", "a symbolic link to a path that does not exist",
          "create {target} (or mount the file system it is on), or replace the link: rm "
          "{component} && mkdir -p {component}"),
    Cause("path_missing", "a path that does not exist", "create {component} (mkdir -p "
          "{component}), or point the workload at a dir that exists"),
    Cause("path_name_too_long", "a path longer than its file system allows", "shorten "
          "{component} (a name of at most 255 bytes, a path of at most 4096): e.g. unset "
          "TRITON_CACHE_DIR (Triton then uses ~/.triton/cache)",
          errnos=("ENAMETOOLONG",)),
    Cause("path_link_loop", "a loop of symbolic links", "replace the link {component} with a "
          "dir (rm {component} && mkdir {component})", errnos=("ELOOP",)),
    Cause("path_not_a_dir", "a file where a directory is expected", "move the file "
          "{component} aside (mv {component} {component}.old) so that the dir can be made"),
    Cause("path_foreign_owner", "a path owned by another user", "give {component} back to the "
          "workload's user (chown -R {user} {component}, as root) or remove it; or export "
          "TRITON_CACHE_DIR=/tmp/triton_$USER"),
    Cause("path_permission_denied", "a path the workload's user may not use", "chmod u+rwx "
          "{component} (owner {owner}), or point the workload at a dir of its own"),
    Cause("path_read_only", "a read-only file system", "point the workload at a writable dir "
          "(TRITON_CACHE_DIR, TMPDIR), or remount {mount} read-write", errnos=("EROFS",)),
    Cause("path_noexec", "a noexec mount where a library is loaded", "export TRITON_CACHE_DIR"
          " / TMPDIR=<a dir on an exec mount>, or remount {mount} without noexec"),
    Cause("fs_out_of_inodes", "no free inodes on a file system (bytes are left)", "delete "
          "files on {mount}: it has {free} free but no inode left (many small files, e.g. an "
          "old Triton cache); or export TRITON_CACHE_DIR=<another file system>"),
    Cause("disk_full", "no space left on a file system Triton writes", "free space on "
          "{mount}, or point the workload at another file system (TRITON_CACHE_DIR, TMPDIR)",
          errnos=("ENOSPC",)),
    Cause("quota_exceeded", "the user's disk quota is used up", "free space under {mount} "
          "(quota -s shows the limit), or ask for a higher quota, or export TRITON_CACHE_DIR="
          "<a dir outside the quota>", errnos=("EDQUOT",)),
    Cause("loader_map_failed", "the loader cannot map a library", "check {path} with ldd and "
          "`file`; rebuild it (rm -r {component})"),
    Cause("os_error", "an OS error on a path", "{errno} on {path}: make {component} usable "
          "by the workload's user ({missing}), or point the workload elsewhere "
          "(TRITON_CACHE_DIR, TMPDIR)"),
)

CAUSES_BY_ID = dict((c.id, c) for c in CAUSES)

CHECK_RECORDS = tuple(c for c in CAUSES if c.check)

CHECK_IDS = tuple(c.id for c in CHECK_RECORDS)


def check_method(cause_id):
    return "check_" + cause_id


CUDA_ONLY = frozenset(c.id for c in CHECK_RECORDS if c.vendor == "nvidia")

HIP_ONLY = frozenset(c.id for c in CHECK_RECORDS if c.vendor == "amd")

STACK_DEPENDENT = frozenset(c.id for c in CHECK_RECORDS if c.stack)

TRITON_DEPENDENT = frozenset(CHECK_IDS[CHECK_IDS.index("triton_2x"):CHECK_IDS.index(
    "blackwell_no_allocator")])

MASKABLE = frozenset(c.id for c in CHECK_RECORDS if c.maskable)

TOOLCHAIN_CAUSES = frozenset(c.id for c in CAUSES if c.toolchain)

GPU_STATE_IDS = frozenset(c.id for c in CHECK_RECORDS if c.scope == "gpu_state")

NODE_ONLY = frozenset(c.id for c in CHECK_RECORDS if c.scope != "triton")

CAUSE_LABELS = dict((c.id, c.label) for c in CAUSES if c.id != "gpu_present")
HIP_CAUSE_LABELS = dict((c.id, c.amd_label) for c in CAUSES if c.amd_label)

MESSAGE_RULES = tuple((text, c.id) for c in CAUSES for text in c.texts)

ERRNO_RULES = dict((name, c.id) for c in CAUSES for name in c.errnos)


def _place_rules():
    rules: dict = {}
    for cause in CAUSES:
        for place, names in (cause.places or {}).items():
            rules.setdefault(place, {}).update((name, cause.id) for name in names)
    return rules


PLACE_RULES = _place_rules()


class _Filled(dict):
    def __missing__(self, key):
        return "<%s>" % key


def fill_fix(cause_id, context):
    cause = CAUSES_BY_ID.get(cause_id)
    if cause is None:
        return ""
    values = _Filled((k, v) for k, v in (context or {}).items() if v not in (None, ""))
    return re.sub(r"\s+", " ", cause.fix.format_map(values)).strip()


def cause_label(cause_id, vendor=None):
    cause = CAUSES_BY_ID.get(cause_id)
    if cause is None:
        return cause_id
    return cause.amd_label if vendor == "amd" and cause.amd_label else cause.label


# --- core/spawn -----------------------------------------------------------------------------------

RESERVE_S = 0.4  # kept back from the deadline to assemble and print the JSON

MARK = "@@fleetcheck@@ "

LIMIT_ERRNOS = ("EAGAIN", "EMFILE", "ENFILE", "ENOMEM")


def own_cgroup():
    group = None
    for line in (read_text(host_path("/proc/self/cgroup")) or "").splitlines():
        if line.startswith("0::"):
            group = line[3:].strip() or "/"
    return group


def cgroup_file(group, name):
    return host_path("/sys/fs/cgroup" + (group or "/").rstrip("/") + "/" + name)


def cgroup_chain(group):
    while group is not None:
        yield group
        group = None if group in ("", "/") else os.path.dirname(group.rstrip("/")) or "/"


def oom_kills():
    group = own_cgroup()
    if group is None:
        return None
    match = re.search(r"^oom_kill (\d+)$", read_text(cgroup_file(group, "memory.events")) or "",
                      re.M)
    return int(match.group(1)) if match else None


RESTARTED = "__fleetcheck_started__"


class Deadline:

    def __init__(self, seconds, start=None):
        self.start = time.monotonic() if start is None else start
        self.end = self.start + max(1.0, float(seconds))

    def remaining(self):
        return self.end - time.monotonic() - RESERVE_S

    def timeout(self, cap=None):
        left = max(0.05, self.remaining())
        return left if cap is None else min(cap, left)

    def elapsed(self):
        return time.monotonic() - self.start


STARTED: list = []

LIVE: "set[Spawned]" = set()


class Terminated(BaseException):
    """SIGTERM or SIGHUP: what the host's `timeout -k` or a container shutdown sends."""


STARTING: list = []
DEFERRED: list = []


def on_terminate(signum, frame):
    if STARTING:
        DEFERRED.append(signum)
        return
    raise Terminated("probe terminated by signal %d" % signum)


def kill_live():
    for spawned in list(LIVE):
        spawned.kill()


class Reader:

    def __init__(self):
        self.lock = threading.Lock()
        self.pipes: dict = {}  # fd -> [stream, sink, spawned, bytes read]
        self.thread = None

    def add(self, spawned, stream, sink):
        with self.lock:
            if self.thread is None:
                thread = threading.Thread(target=self.run, daemon=True)
                try:
                    thread.start()
                except RuntimeError:  # can't start new thread: the job's process limit
                    return False
                self.thread = thread
            self.pipes[stream.fileno()] = [stream, sink, spawned, 0]
            return True

    def run(self):
        while True:
            try:
                self.read_some()
            except Exception:  # never the probe's end: its helpers would block on full pipes
                time.sleep(0.05)

    def read_some(self):
        with self.lock:
            fds = list(self.pipes)
        if not fds:
            time.sleep(0.05)
            return
        poller = select.poll()
        for fd in fds:
            poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
        try:
            ready = poller.poll(50)
        except OSError:
            ready = []
        for fd, _ in ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                chunk = b""
            with self.lock:
                entry = self.pipes.get(fd)
                if entry is None:
                    continue
                if chunk:
                    entry[3] += len(chunk)
                    entry[2].keep(entry[1], entry[3], chunk)
                    continue
                del self.pipes[fd]
            close_quietly(entry[0])
            entry[2].pipe_done()


READER = Reader()


class Spawned:

    def __init__(self, argv, timeout, env=None, cwd=None, max_out=1 << 20, label=None):
        self.argv = list(argv)
        self.label = label or os.path.basename(str(argv[0]))
        self.timeout = timeout
        self.started = time.monotonic()
        self.out: list = []
        self.err: list = []
        self.max_out = max_out
        self.error = None
        self.errno = None
        self.alone = None
        self.proc = None
        self.unread: list = []
        self.open_pipes = 0
        self.drained = threading.Event()
        self._result = None
        self.oom_before = oom_kills()
        self._start(env, cwd)
        if self.proc is None:
            return
        self.open_pipes = 2
        for stream, sink in ((self.proc.stdout, self.out), (self.proc.stderr, self.err)):
            if not READER.add(self, stream, sink):
                self.unread.append((stream, sink))
                self.pipe_done()

    def _start(self, env, cwd):
        give_up = self.started + self.timeout / 2
        while True:
            others = [s for s in LIVE if s.holds()]
            failure = self._popen(env, cwd)
            if failure is None:
                return
            self.error = error_text(failure)
            self.errno = errno.errorcode.get(failure.errno or 0)
            if self.errno not in LIMIT_ERRNOS:
                return
            self.alone = not others
            if not others or not release(others, give_up):
                return
            waited = time.monotonic() - self.started
            self.timeout = max(0.05, self.timeout - waited)
            self.started = time.monotonic()
            give_up = min(give_up, self.started + self.timeout / 2)

    def _popen(self, env, cwd):
        STARTING.append(self)
        try:
            try:
                self.proc = subprocess.Popen(
                    self.argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE, env=env, cwd=cwd, start_new_session=True)
            except OSError as exc:
                return exc
            LIVE.add(self)
            STARTED.append(self.label)
            self.error = self.errno = self.alone = None
            return None
        finally:
            STARTING.remove(self)
            if DEFERRED and not STARTING:
                raise Terminated("probe terminated by signal %d" % DEFERRED[0])

    def holds(self):
        return self.proc is not None and (self.proc.poll() is None or bool(self.unread)
                                          or not self.drained.is_set())

    def keep(self, sink, size, chunk):
        if size <= self.max_out:
            sink.append(chunk)

    def pipe_done(self):
        with READER.lock:
            self.open_pipes -= 1
            if self.open_pipes <= 0:
                self.drained.set()

    def _read_unread(self, until):
        import selectors
        selector = getattr(selectors, "PollSelector", selectors.DefaultSelector)()
        sizes = {}
        for stream, sink in self.unread:
            selector.register(stream, selectors.EVENT_READ, sink)
            sizes[stream] = 0
        ended = None
        try:
            while selector.get_map():
                now = time.monotonic()
                if ended is None and self.proc is not None and self.proc.poll() is not None:
                    ended = now
                if ended is not None and now - ended > 1:
                    break
                left = until - now
                if left <= 0:
                    return False
                for key, _ in selector.select(min(left, 0.1)):
                    try:
                        chunk = os.read(key.fd, 65536)
                    except OSError:
                        chunk = b""
                    if not chunk:
                        selector.unregister(key.fileobj)
                        close_quietly(key.fileobj)
                        continue
                    sizes[key.fileobj] += len(chunk)
                    self.keep(key.data, sizes[key.fileobj], chunk)
            return True
        finally:
            for key in list(selector.get_map().values()):
                close_quietly(key.fileobj)
            self.unread = []
            selector.close()

    def kill(self):
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except OSError:
            try:
                self.proc.kill()
            except OSError:
                pass

    def result(self):
        if self._result is not None:
            return self._result
        timed_out = False
        rc = None
        oom = None
        if self.proc is not None:
            left = max(0.05, self.timeout - (time.monotonic() - self.started))
            if self.unread and not self._read_unread(time.monotonic() + left):
                timed_out = True
                self.kill()
            try:
                rc = self.proc.wait(timeout=max(0.05, self.timeout - (
                    time.monotonic() - self.started)))
            except subprocess.TimeoutExpired:
                timed_out = True
                self.kill()
                try:
                    self.proc.wait(timeout=2)
                except subprocess.TimeoutExpired:
                    pass
            self.drained.wait(timeout=min(10.0, max(1.0, self.timeout - (
                time.monotonic() - self.started))))
            for stream, _ in self.unread:
                close_quietly(stream)
            if rc == -signal.SIGKILL and not timed_out:
                after = oom_kills()
                if after is not None and self.oom_before is not None and after > self.oom_before:
                    oom = [self.oom_before, after]
        LIVE.discard(self)
        self._result = {
            "rc": rc,
            "stdout": b"".join(self.out).decode("utf-8", "replace"),
            "stderr": b"".join(self.err).decode("utf-8", "replace"),
            "timed_out": timed_out,
            "error": self.error,
            "seconds": round(time.monotonic() - self.started, 3),
            "errno": self.errno,
            "alone": self.alone,
            "oom_kill": oom,
        }
        return self._result


def close_quietly(stream):
    try:
        stream.close()
    except (OSError, ValueError):
        pass


def release(others, until):
    while time.monotonic() < until:
        for spawned in others:
            if spawned.proc.poll() is not None:
                spawned.result()
                return True
        time.sleep(0.05)
    return False


def stage_lines(stdout):
    stages = {}
    for line in stdout.splitlines():
        if not line.startswith(MARK):
            continue
        try:
            data = json.loads(line[len(MARK):])
        except ValueError:
            continue
        if isinstance(data, dict) and isinstance(data.get("stage"), str):
            stages[data["stage"]] = data
    return stages


def run_inline(script):
    import io
    buffer = io.StringIO()
    saved = sys.stdout
    sys.stdout = buffer
    try:
        exec(compile(script, "<fleetcheck>", "exec"), {"__name__": "fleetcheck_inline"})
    finally:
        sys.stdout = saved
    return buffer.getvalue()


def stage_answer(result, what, last_line=False):
    if result["timed_out"]:
        return {"error": "%s timed out after %.1f s" % (what, result["seconds"]),
                "timed_out": True}
    text = result["stdout"].strip()
    try:
        return json.loads(text.splitlines()[-1] if last_line else text)
    except (ValueError, IndexError):
        answer = {"error": result["error"] or clip(result["stderr"] or died(result), 1000)}
        for key in ("errno", "alone", "oom_kill"):
            if result.get(key) is not None:
                answer[key] = result[key]
        return answer


def died(result):
    rc = result.get("rc")
    if isinstance(rc, int) and rc < 0:
        try:
            name = signal.Signals(-rc).name
        except ValueError:
            name = "signal %d" % -rc
        return "killed by %s (rc %d)%s, no output" % (name, rc, " by the cgroup's OOM killer" if
                                                      result.get("oom_kill") else "")
    return "no output"


# --- core/stages ----------------------------------------------------------------------------------

HELPER_PRELUDE = r'''
import json, sys, threading
MARK = "@@fleetcheck@@ "
EMITTING = threading.Lock()  # a stage line is whole, whichever thread emits it
def emit(stage, data):
    data["stage"] = stage
    line = MARK + json.dumps(data, default=str) + "\n"
    with EMITTING:
        sys.stdout.write(line)
        sys.stdout.flush()
def err(e):
    return (type(e).__name__ + ": " + str(e))[-4000:]
'''

PY_INCLUDE = r'''
import sysconfig
def py_include():
    if hasattr(sysconfig, "get_default_scheme"):
        scheme = sysconfig.get_default_scheme()
    else:
        scheme = sysconfig._get_default_scheme()
    if scheme == "posix_local":
        scheme = "posix_prefix"
    return sysconfig.get_paths(scheme=scheme)["include"]
'''

FLA_LAYOUTS = (("utils/hardware.py", "fla.utils.hardware"),  # 0.6
               ("utils/_device.py", "fla.utils._device"),    # 0.5.1 - 0.5.x
               ("utils.py", "fla.utils"))                    # 0.1 - 0.5.0

GPU_STATE = r'''
import ctypes
def gpu_state():
    out = {"source": "nvml"}
    try:
        nvml = ctypes.CDLL("libnvidia-ml.so.1")
    except OSError as e:
        out["error"] = "libnvidia-ml.so.1: " + str(e)[:500]
        return out
    NOT_AVAILABLE = 0xFFFFFFFFFFFFFFFF
    class Memory(ctypes.Structure):
        _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong),
                    ("used", ctypes.c_ulonglong)]
    class MemoryV2(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint), ("total", ctypes.c_ulonglong),
                    ("reserved", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong),
                    ("used", ctypes.c_ulonglong)]
    class ProcessV2(ctypes.Structure):
        _fields_ = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong),
                    ("gpuInstanceId", ctypes.c_uint), ("computeInstanceId", ctypes.c_uint)]
    class ProcessV1(ctypes.Structure):
        _fields_ = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong)]
    def call(name, *args):
        fn = getattr(nvml, name, None)
        return None if fn is None else fn(*args)
    def processes(handle):
        for name, kind in (("nvmlDeviceGetComputeRunningProcesses_v3", ProcessV2),
                           ("nvmlDeviceGetComputeRunningProcesses_v2", ProcessV2),
                           ("nvmlDeviceGetComputeRunningProcesses", ProcessV1)):
            if getattr(nvml, name, None) is None:
                continue
            size = 64
            for _ in range(3):
                count = ctypes.c_uint(size)
                buf = (kind * size)()
                rc = call(name, handle, ctypes.byref(count), buf)
                if rc == 7:  # NVML_ERROR_INSUFFICIENT_SIZE: count says how many there are
                    size = count.value + 16
                    continue
                if rc != 0:
                    return "%s: %s" % (name, text(rc))
                return [(buf[i].pid, None if buf[i].usedGpuMemory == NOT_AVAILABLE
                         else buf[i].usedGpuMemory) for i in range(count.value)]
            return "%s: the list kept growing" % name
        return "no nvmlDeviceGetComputeRunningProcesses"
    def text(rc):
        try:
            return (nvml.nvmlErrorString(rc) or b"").decode("utf-8", "replace") or "rc %d" % rc
        except Exception:
            return "rc %d" % rc
    def uint(name, handle):
        value = ctypes.c_uint(0)
        rc = call(name, handle, ctypes.byref(value))
        return value.value if rc == 0 else None
    try:
        nvml.nvmlErrorString.restype = ctypes.c_char_p
        rc = nvml.nvmlInit_v2()
        if rc != 0:
            out["error"] = "nvmlInit_v2: " + text(rc)
            out["init"] = rc
            return out
        count = ctypes.c_uint(0)
        rc = nvml.nvmlDeviceGetCount_v2(ctypes.byref(count))
        if rc != 0:
            out["error"] = "nvmlDeviceGetCount_v2: " + text(rc)
        gpus = []
        for i in range(count.value if rc == 0 else 0):
            gpu = {"index": i}
            gpus.append(gpu)
            handle = ctypes.c_void_p()
            hrc = nvml.nvmlDeviceGetHandleByIndex_v2(i, ctypes.byref(handle))
            if hrc != 0:
                gpu["error"] = "nvmlDeviceGetHandleByIndex_v2: " + text(hrc)
                continue
            buf = ctypes.create_string_buffer(96)
            if call("nvmlDeviceGetUUID", handle, buf, 96) == 0:
                gpu["uuid"] = buf.value.decode("utf-8", "replace")
            memory = MemoryV2(version=ctypes.sizeof(MemoryV2) | (2 << 24))
            if call("nvmlDeviceGetMemoryInfo_v2", handle, ctypes.byref(memory)) == 0:
                gpu["memory"] = {"total": memory.total, "used": memory.used, "free": memory.free,
                                 "reserved": memory.reserved}
            else:
                memory1 = Memory()
                mrc = call("nvmlDeviceGetMemoryInfo", handle, ctypes.byref(memory1))
                if mrc == 0:
                    gpu["memory"] = {"total": memory1.total, "used": memory1.used,
                                     "free": memory1.free}
                else:
                    gpu["memory_error"] = "nvmlDeviceGetMemoryInfo: " + (
                        text(mrc) if mrc is not None else "missing")
            procs = processes(handle)
            if isinstance(procs, str):
                gpu["processes_error"] = procs
            else:
                gpu["processes"] = [{"pid": pid, "used": used} for pid, used in procs]
            gpu["persistence_mode"] = uint("nvmlDeviceGetPersistenceMode", handle)
            gpu["compute_mode"] = uint("nvmlDeviceGetComputeMode", handle)
            health = {}
            corr, unc, pending, failed = (ctypes.c_uint(0) for _ in range(4))
            if call("nvmlDeviceGetRemappedRows", handle, ctypes.byref(corr), ctypes.byref(unc),
                    ctypes.byref(pending), ctypes.byref(failed)) == 0:
                health["remapped_rows"] = {"correctable": corr.value, "uncorrectable": unc.value,
                                           "pending": bool(pending.value),
                                           "failure": bool(failed.value)}
            retired = {}
            for cause, key in ((0, "single_bit"), (1, "double_bit")):
                pages = ctypes.c_uint(0)
                prc = call("nvmlDeviceGetRetiredPages_v2", handle, cause, ctypes.byref(pages), None,
                           None)
                if prc is None:
                    prc = call("nvmlDeviceGetRetiredPages", handle, cause, ctypes.byref(pages),
                               None)
                if prc in (0, 7):  # 7: INSUFFICIENT_SIZE with a NULL buffer, pages has the count
                    retired[key] = pages.value
            if retired:
                health["retired_pages"] = retired
            pend = uint("nvmlDeviceGetRetiredPagesPendingStatus", handle)
            if pend is not None:
                health["retired_pages_pending"] = bool(pend)
            ecc = ctypes.c_ulonglong(0)
            if call("nvmlDeviceGetTotalEccErrors", handle, 1, 0, ctypes.byref(ecc)) == 0:
                health["ecc_uncorrected_volatile"] = ecc.value
            gpu["health"] = health
        out["gpus"] = gpus
        nvml.nvmlShutdown()
    except Exception as e:
        out["error"] = (type(e).__name__ + ": " + str(e))[:500]
    return out
'''
LIBCUDA = r'''
import ctypes
def libcuda_facts():
    out = {"loaded": None}
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError as e:
        out["load_error"] = str(e)[:1000]
        return out
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                if "libcuda.so" in line:
                    out["loaded"] = line.split()[-1]
                    break
    except OSError:
        pass
    out["loaded"] = out["loaded"] or "libcuda.so.1"
    def name(rc):
        p = ctypes.c_char_p()
        try:
            if lib.cuGetErrorName(rc, ctypes.byref(p)) == 0 and p.value:
                return p.value.decode()
        except Exception:
            pass
        return None
    v = ctypes.c_int(0)
    try:
        out["version_rc"] = lib.cuDriverGetVersion(ctypes.byref(v))
        out["version"] = v.value
    except Exception as e:
        out["version_error"] = str(e)
    rc = lib.cuInit(0)
    out["init"] = rc
    out["init_name"] = name(rc)
    if rc == 0:
        n = ctypes.c_int(0)
        rc = lib.cuDeviceGetCount(ctypes.byref(n))
        out["count_rc"] = rc
        out["count"] = n.value
        devices = []
        for i in range(n.value if rc == 0 else 0):
            d = ctypes.c_int(0)
            info = {"index": i}
            if lib.cuDeviceGet(ctypes.byref(d), i) == 0:
                buf = ctypes.create_string_buffer(256)
                if lib.cuDeviceGetName(buf, 256, d) == 0:
                    info["name"] = buf.value.decode("utf-8", "replace")
                major, minor = ctypes.c_int(0), ctypes.c_int(0)
                if (lib.cuDeviceGetAttribute(ctypes.byref(major), 75, d) == 0
                        and lib.cuDeviceGetAttribute(ctypes.byref(minor), 76, d) == 0):
                    info["compute_capability"] = "%d.%d" % (major.value, minor.value)
                mem = ctypes.c_size_t(0)
                try:
                    if lib.cuDeviceTotalMem_v2(ctypes.byref(mem), d) == 0:
                        info["memory_mib"] = mem.value // (1 << 20)
                except AttributeError:
                    pass
            devices.append(info)
        out["devices"] = devices
    try:
        nvml = ctypes.CDLL("libnvidia-ml.so.1")
    except OSError as e:
        nvml = None
        out["nvml_error"] = str(e)[:500]
    modes = {}
    if nvml is not None:
        try:
            nvml.nvmlErrorString.restype = ctypes.c_char_p
            nrc = nvml.nvmlInit_v2()
            out["nvml_init"] = nrc
            if nrc != 0:
                out["nvml_init_text"] = (nvml.nvmlErrorString(nrc) or b"").decode(
                    "utf-8", "replace")
            else:
                for i in range(out.get("count") or 0):
                    handle, mode = ctypes.c_void_p(), ctypes.c_int(-1)
                    if (nvml.nvmlDeviceGetHandleByIndex_v2(i, ctypes.byref(handle)) == 0
                            and nvml.nvmlDeviceGetComputeMode(handle, ctypes.byref(mode)) == 0):
                        modes[i] = mode.value
                nvml.nvmlShutdown()
        except Exception as e:
            out["nvml_error"] = str(e)[:500]
    out["compute_modes"] = {str(k): v for k, v in modes.items()}
    contexts = {}
    for i, mode in modes.items():
        if mode not in (2, 3):
            continue
        d, ctx = ctypes.c_int(0), ctypes.c_void_p()
        if lib.cuDeviceGet(ctypes.byref(d), i) == 0:
            crc = lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), d)
            contexts[str(i)] = {"rc": crc, "name": name(crc)}
            if crc == 0:
                lib.cuDevicePrimaryCtxRelease(d)
    out["contexts"] = contexts
    return out
'''

STACK_SCRIPT = (HELPER_PRELUDE + PY_INCLUDE + "FLA_LAYOUTS = %r\n" % (FLA_LAYOUTS,)
                + GPU_STATE + LIBCUDA + r'''
import errno as _errno, os as _os, shutil as _shutil, stat as _stat, subprocess as _subprocess
import tempfile as _tempfile

COMPILER_RUNS = []


TRACED = []  # subprocess.check_call as it was before trace_compiler(), while traced


def untrace_compiler():
    if not TRACED:
        return False
    _subprocess.check_call = TRACED.pop()
    return True


def guarded(step, *args):
    try:
        return step(*args)
    except BaseException as e:
        failure = failure_of(e)
        return {"probe_error": failure.get("error"),
                "probe_step": failure.get("probe_step") or step.__name__}


STARTED = []


def count_processes():
    popen = _subprocess.Popen
    execute = getattr(popen, "_execute_child", None)
    if execute is None:
        return

    def _execute_child(self, args, *rest, **kwargs):
        STARTED.append(_os.path.basename(str(args[0] if isinstance(args, (list, tuple)) and args
                                             else args)))
        return execute(self, args, *rest, **kwargs)
    popen._execute_child = _execute_child


def trace_compiler():
    original = _subprocess.check_call
    TRACED.append(original)

    def check_call(*popenargs, **kwargs):
        argv = popenargs[0] if popenargs else kwargs.get("args")
        if kwargs.get("stderr") is not None:
            return original(*popenargs, **kwargs)
        run = {"argv": [str(a) for a in argv] if isinstance(argv, (list, tuple)) else argv,
               "rc": None, "stderr": ""}
        COMPILER_RUNS.append(run)
        kwargs["stderr"] = _subprocess.PIPE
        try:
            with _subprocess.Popen(*popenargs, **kwargs) as proc:
                stderr = proc.communicate()[1] or b""
                run["rc"] = proc.returncode
        except OSError as e:
            run.update(failure_of(e))
            raise
        text = stderr.decode("utf-8", "replace")
        run["stderr"] = text[-4000:]
        try:
            sys.stderr.write(text)  # where it went without us
        except Exception:
            pass
        if run["rc"]:
            raise _subprocess.CalledProcessError(run["rc"], argv)
        return 0
    _subprocess.check_call = check_call


PROBE_FILE = (lambda: None).__code__.co_filename


def probe_step(e):
    if isinstance(e, (OSError, _subprocess.CalledProcessError, KeyboardInterrupt,
                      SystemExit, ImportError, SyntaxError)):
        return None  # an import's failure is the imported code's (its frames are trimmed)
    tb, last = getattr(e, "__traceback__", None), None
    while tb is not None:
        last, tb = tb, tb.tb_next
    if last is None or last.tb_frame.f_code.co_filename != PROBE_FILE:
        return None
    return last.tb_frame.f_code.co_name


def failure_of(e):
    out = {"error": err(e), "type": type(e).__name__}
    code = getattr(e, "errno", None)
    if isinstance(code, int):
        out["errno"] = _errno.errorcode.get(code, str(code))
    for key in ("filename", "filename2"):
        if getattr(e, key, None):
            out[key] = str(getattr(e, key))
    if isinstance(e, _subprocess.CalledProcessError):
        out["returncode"] = e.returncode
        out["cmd"] = [str(a) for a in e.cmd] if isinstance(e.cmd, (list, tuple)) else e.cmd
    step = probe_step(e)
    if step:
        out["probe_step"] = step  # the probe's own error: never the workload's verdict
    return out


def gcc_tempdir(env):
    for path in [env.get(k) for k in ("TMPDIR", "TMP", "TEMP")] + ["/tmp", "/var/tmp",
                                                                  "/usr/tmp"]:
        if path and _os.path.isdir(path) and _os.access(path, _os.R_OK | _os.W_OK | _os.X_OK):
            return path
    return "."


def put_env(values):
    for key, value in values.items():
        if value is None:
            _os.environ.pop(key, None)
        else:
            _os.environ[key] = value


def python_tempdir(env):
    saved = {k: _os.environ.get(k) for k in ("TMPDIR", "TEMP", "TMP")}
    saved_dir = _tempfile.tempdir
    try:
        put_env({key: env.get(key) for key in saved})
        _tempfile.tempdir = None
        return _tempfile.gettempdir(), None
    except BaseException as e:
        return None, failure_of(e)
    finally:
        put_env(saved)
        _tempfile.tempdir = saved_dir


def triton_knobs(triton):
    import types
    knobs = getattr(triton, "knobs", None)
    return knobs if isinstance(knobs, types.ModuleType) else None


def triton_cache_dir(triton, env):
    knobs = triton_knobs(triton)
    if env.get("TRITON_CACHE_DIR"):
        return env["TRITON_CACHE_DIR"]
    home = env.get("TRITON_HOME")
    if home is None and knobs is not None:
        try:
            home = knobs.cache.home_dir  # TRITON_HOME, default ~/ (read when knobs loaded)
        except Exception:
            home = None
        home = home if isinstance(home, str) else None
    return _os.path.join(home or _os.path.expanduser("~/"), ".triton", "cache")


def make_dirs(path, made, tries=3):
    for attempt in range(tries):
        missing = []
        probe = path
        while probe and not _os.path.exists(probe):
            missing.append(probe)
            parent = _os.path.dirname(probe)
            if parent == probe:
                break
            probe = parent
        try:
            for one in reversed(missing):
                try:
                    _os.mkdir(one)
                except FileExistsError:
                    if not _os.path.isdir(one):
                        _os.makedirs(path, exist_ok=True)
                        raise
                    continue
                made.append(one)
            return
        except FileNotFoundError:
            if attempt == tries - 1 or _os.path.exists(path):
                raise


def space_of(path):
    while path and not _os.path.exists(path):
        path = _os.path.dirname(path)
    try:
        st = _os.statvfs(path or "/")
    except OSError as e:
        return {"path": path, "error": err(e)}
    out = {"path": path, "free_bytes": st.f_bavail * st.f_frsize,
           "free_inodes": st.f_favail if st.f_files else None,
           "read_only": bool(st.f_flag & getattr(_os, "ST_RDONLY", 1)),
           "noexec": bool(st.f_flag & getattr(_os, "ST_NOEXEC", 8))}
    try:
        info = _os.stat(path)
        out["owner_uid"] = info.st_uid
        out["mode"] = oct(info.st_mode & 0o7777)
    except OSError:
        pass
    return out


def write_test(directory, size):
    path = _os.path.join(directory, "fleetcheck-write-test")
    try:
        with open(path, "wb") as handle:
            handle.write(b"\0" * size)
        return None
    except OSError as e:
        return failure_of(e)
    finally:
        try:
            _os.unlink(path)
        except OSError:
            pass


def reproduce(code, places, size):
    for where, directory in places:
        if directory and _os.path.isdir(directory):
            found = write_test(directory, size)
            if found and found.get("errno") == code:
                return where, dict(found, directory=directory)
    return None, None


def driver_holder(triton):
    holder = getattr(getattr(triton, "runtime", None), "driver", None)
    try:
        return holder, object.__getattribute__(holder, "__dict__")
    except AttributeError:
        return holder, {}


def reset_driver(triton):
    holder, state = driver_holder(triton)
    if "_init_fn" in state:  # 2.x
        object.__setattr__(holder, "_obj", None)
        return
    for name, value in list(state.items()):
        if name in ("_default", "_active"):
            setattr(holder, name, None)
        elif "_init_fn" in getattr(value, "__dict__", {}):
            object.__setattr__(value, "_obj", None)
    if "default" in state and "active" in state and state["active"] is not state["default"]:
        holder.active = state["default"]  # 3.0-3.3: reset_active(), as a new process has it


def current_target(triton):
    holder, state = driver_holder(triton)
    if holder is None:
        raise AttributeError("module 'triton.runtime' has no attribute 'driver'")
    if "_init_fn" not in state:
        return holder.active.get_current_target()
    built = object.__getattribute__(holder, "_initialize_obj")
    built()
    real = object.__getattribute__(holder, "_obj")
    getter = getattr(type(real), "get_current_target", None)
    if getter is not None:
        return real.get_current_target()
    if getattr(real, "utils", None) is None:
        raise RuntimeError("Triton %s found no GPU driver (%s)" % (
            getattr(triton, "__version__", "?"), type(real).__name__))
    import torch
    major, minor = torch.cuda.get_device_capability()
    return ("hip" if "hip" in type(real).__name__.lower() else "cuda", major * 10 + minor)


class SkeletonBuilt(Exception):
    """Raised once the release's own build compiled, linked and loaded the skeleton of its
    driver module (`skeleton_proof`): nothing more of the driver is needed."""


def skeleton_source(source, name, home=None):
    import re as _re
    kept, going_on = [], False
    for line in source.splitlines():
        if going_on or line.lstrip().startswith("#"):
            quoted = _re.match(r'\s*#\s*include\s*"([^"]+)"', line) if home else None
            if quoted and _os.path.isfile(_os.path.join(home, quoted.group(1))):
                line = '#include "%s"' % _os.path.join(home, quoted.group(1))
            kept.append(line)
            going_on = line.rstrip().endswith("\\")
    if "Python.h" not in source:
        kept.append("#include <Python.h>")
    kept.append("static struct PyModuleDef fleetcheck_skeleton = "
                "{PyModuleDef_HEAD_INIT, \"%s\", NULL, -1, NULL};" % name)
    kept.append("PyMODINIT_FUNC PyInit_%s(void) { return PyModule_Create(&fleetcheck_skeleton); }"
                % name)
    return "\n".join(kept) + "\n"


def release_builds(triton):
    spaces = [getattr(module, "__dict__", {}) for name, module in list(sys.modules.items())
              if module is not None and (name == "triton" or name.startswith("triton."))]
    backends = getattr(getattr(triton, "backends", None), "backends", None)
    for backend in (backends.values() if isinstance(backends, dict) else ()):
        for value in vars(getattr(backend, "driver", None) or object).values():
            space = getattr(value, "__globals__", None)
            if isinstance(space, dict):
                spaces.append(space)
    found, seen = [], set()
    for space in spaces:
        build = space.get("_build")
        if id(space) not in seen and callable(build) and getattr(
                build, "__name__", "") == "_build":
            seen.add(id(space))
            found.append((space, build))
    return found


def give_back_freed_memory():
    try:
        import ctypes
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError, ImportError):  # musl, or no ctypes
        pass


def skeleton_proof(triton, where):
    patched = release_builds(triton)
    if not patched:
        return False

    def skeleton_of(original):
        def _build(name, src, srcdir, *args, **kwargs):
            with open(src, encoding="utf-8", errors="replace") as handle:
                text = handle.read()
            skeleton = _os.path.join(where, "src", _os.path.basename(src))
            _os.makedirs(_os.path.dirname(skeleton), exist_ok=True)
            with open(skeleton, "w", encoding="utf-8") as handle:
                handle.write(skeleton_source(text, name, _os.path.dirname(_os.path.abspath(src))))
            made = original(name, skeleton, srcdir, *args, **kwargs)
            placed = _os.path.join(where, _os.path.basename(made))
            _shutil.copyfile(made, placed)
            import importlib.util
            spec = importlib.util.spec_from_file_location(name, placed)
            spec.loader.exec_module(  # type: ignore[union-attr]
                importlib.util.module_from_spec(spec))
            raise SkeletonBuilt(placed)
        return _build
    saved = _os.environ.get("TRITON_CACHE_DIR")
    _os.environ["TRITON_CACHE_DIR"] = where
    for space, original in patched:
        space["_build"] = skeleton_of(original)
    try:
        reset_driver(triton)
        current_target(triton)
        return False
    except SkeletonBuilt:
        return True
    finally:
        for space, original in patched:
            space["_build"] = original
        put_env({"TRITON_CACHE_DIR": saved})
        reset_driver(triton)


def owner_name(uid):
    try:
        import pwd
        return pwd.getpwuid(uid).pw_name
    except (ImportError, KeyError):
        return None


def elf_damage(path):
    try:
        with open(path, "rb") as handle:
            head = handle.read(64)
        size = _os.path.getsize(path)
    except OSError as e:
        return err(e)
    if head[:4] != b"\x7fELF":
        return "not an ELF file (%d bytes)" % size
    if head[4:5] != b"\x02" or len(head) < 64:
        return None if len(head) >= 52 else "file too short (%d bytes)" % size
    import struct
    order = "<" if head[5:6] == b"\x01" else ">"
    phoff, shoff = struct.unpack(order + "QQ", head[32:48])
    phsize, phnum, shsize, shnum = struct.unpack(order + "HHHH", head[54:62])
    end = max(phoff + phsize * phnum, shoff + shsize * shnum)
    if end > size:
        return "file too short (%d bytes, its headers end at %d)" % (size, end)
    return None


def rebuilds_bad_entries(triton):
    path = _os.path.join(_os.path.dirname(triton.__file__), "runtime", "build.py")
    try:
        with open(path, encoding="utf-8") as handle:
            return "could not be loaded" in handle.read()
    except OSError:
        return False


KEY_NAME = r"^(?:[A-Z2-7]{52}|[0-9a-f]{64})$"


def audit_entries(cache, rebuilds, skip=".fleetcheck-probe", budget=3.0):
    import time
    end = time.monotonic() + budget
    out = {"cache_dir": cache, "count": 0, "problems": []}
    try:
        names = sorted(_os.listdir(cache))
    except FileNotFoundError:
        return out
    except OSError as e:
        out["error"] = failure_of(e)
        return out
    uid = _os.geteuid()
    for index, name in enumerate(names):
        if name.startswith(skip):
            continue
        if time.monotonic() > end:
            out["unread"] = len(names) - index
            break
        out["count"] += 1
        problem = entry_problem(_os.path.join(cache, name), name, uid, rebuilds)
        if problem is not None:
            problem["entry"] = _os.path.join(cache, name)
            if len(out["problems"]) < 20:
                out["problems"].append(problem)
            out["unusable"] = out.get("unusable", 0) + 1
    return out


def entry_problem(path, name, uid, rebuilds):
    import re as _re
    key_like = bool(_re.match(KEY_NAME, name))

    def problem(kind, why, st=None, where=path):
        out = {"path": where, "kind": kind, "why": why}
        if st is not None:
            out.update(owner_uid=st.st_uid, owner=owner_name(st.st_uid),
                       mode=oct(st.st_mode & 0o7777))
            if st.st_uid != uid and kind != "corrupt":
                out["kind"] = "foreign_owner"
        return out
    try:
        st = _os.stat(path)  # Triton's os.makedirs and os.path.exists follow links
    except OSError as e:
        if not key_like:
            return None
        if _os.path.islink(path):
            try:
                target = _os.readlink(path)
            except OSError:
                target = "?"
            if e.errno == _errno.ENOENT:
                return problem("corrupt", "a link to %s, which does not exist" % target)
            if e.errno == _errno.ELOOP:
                return problem("corrupt", "a link loop (%s)" % target)
        try:
            return problem("unreadable", err(e), _os.lstat(path))
        except OSError:
            return problem("unreadable", err(e))
    if not _stat.S_ISDIR(st.st_mode):
        return problem("corrupt", "a file where Triton keeps an entry dir") if key_like else None
    writable = _os.access(path, _os.W_OK | _os.X_OK)
    if not _os.access(path, _os.X_OK):
        return problem("unreadable", "cannot be entered (mode %s)" % oct(st.st_mode & 0o777), st)
    try:
        names = sorted(_os.listdir(path))
    except OSError:
        return None  # searchable but not listable: Triton never lists it
    files = [n for n in names if not n.startswith("tmp.pid_") and n != "lock"]
    if not files:
        if writable:
            return None
        return problem("unreadable", "half-written (%s) and not writable" % (
            ", ".join(names[:3]) or "empty"), st)
    for file_name in files:
        file_path = _os.path.join(path, file_name)
        try:
            file_st = _os.stat(file_path)
        except OSError as e:
            why, bad_st, kind = err(e), None, "corrupt"
        else:
            bad_st = file_st
            if _stat.S_ISDIR(file_st.st_mode):
                return problem("corrupt", "a dir where Triton keeps a file", where=file_path)
            damage = elf_damage(file_path) if file_name.endswith(".so") else None
            if not _os.access(file_path, _os.R_OK):
                why, kind = "not readable (mode %s)" % oct(file_st.st_mode & 0o777), "unreadable"
            elif damage is not None:
                why, kind = damage, "corrupt"
                if not rebuilds:
                    return problem(kind, why + "; this Triton raises instead of rebuilding it",
                                   where=file_path)
            else:
                continue
        if writable and not (st.st_mode & _stat.S_ISVTX and bad_st is not None
                             and bad_st.st_uid != uid and st.st_uid != uid):
            continue  # Triton builds it again and replaces it
        found = problem(kind, why + "; its dir %s is not writable" % path, bad_st,
                        where=file_path)
        if bad_st is None or bad_st.st_uid == uid:
            found.update(owner_uid=st.st_uid, owner=owner_name(st.st_uid))
            if st.st_uid != uid and kind != "corrupt":
                found["kind"] = "foreign_owner"
        return found
    return None


def replace_blocked(source, target):
    try:
        st = _os.lstat(target)
    except FileNotFoundError:
        return None
    except OSError as e:
        return e
    if _stat.S_ISDIR(st.st_mode):
        return IsADirectoryError(_errno.EISDIR, _os.strerror(_errno.EISDIR), source, None,
                                 target)
    uid = _os.geteuid()
    parent = _os.stat(_os.path.dirname(target))
    if parent.st_mode & _stat.S_ISVTX and uid not in (0, st.st_uid, parent.st_uid):
        return PermissionError(_errno.EPERM, _os.strerror(_errno.EPERM), source, None, target)
    return None


def proof_manager(base, cache, made, written, keys, name, hits):

    def __init__(self, *args, **kwargs):
        key = args[0] if args else kwargs.get("key")
        flags = [*args[1:3], kwargs.get("override"), kwargs.get("dump")]
        if isinstance(key, str) and not any(flags):
            keys.append(key)
            try:
                make_dirs(_os.path.join(cache, key), made)
            except OSError:
                pass  # Triton's own os.makedirs below raises it as the workload sees it
        base.__init__(self, *args, **kwargs)

    def entry_hit(self, filename, found):
        where = str(getattr(self, "cache_dir", None) or "")
        if found and where.startswith(cache):
            hits.append(_os.path.join(where, str(filename)))
        return found

    def has_file(self, filename):
        return entry_hit(self, filename, base.has_file(self, filename))

    def get_file(self, filename):
        return entry_hit(self, filename, base.get_file(self, filename))

    def put(self, data, filename, binary=True):
        if not str(getattr(self, "cache_dir", None) or "").startswith(cache):
            return base.put(self, data, filename, binary)
        binary = isinstance(data, bytes)
        temp_dir = _os.path.join(self.cache_dir, "tmp.pid_%d_%s" % (_os.getpid(), name))
        make_dirs(temp_dir, written)  # Triton's os.makedirs(temp_dir), each dir noted
        temp_path = _os.path.join(temp_dir, filename)
        with open(temp_path, "wb" if binary else "w") as handle:
            handle.write(data if binary else str(data))
        blocked = replace_blocked(temp_path, self._make_path(filename))
        if blocked is not None:
            raise blocked
        return temp_path
    methods = {"__init__": __init__, "put": put}
    if callable(getattr(base, "has_file", None)):
        methods["has_file"] = has_file
    else:
        methods["get_file"] = get_file
    return type(base.__name__, (base,), methods)


def swap_manager(cache_module, old, new):
    if getattr(cache_module, "FileCacheManager", None) is old:
        cache_module.FileCacheManager = new
    if getattr(cache_module, "__cache_cls", None) is old:
        setattr(cache_module, "__cache_cls", new)


class OwnPath:

    def __init__(self, triton, env, name, size=65536):
        self.triton, self.env, self.name = triton, env, name
        self.size = size    # of a module Triton builds: a bare errno's write is redone with it
        self.made = []      # directories created, parents first: removed in reverse
        self.throwaway = []  # our own subdirectories: removed whole
        self.written = []   # what the proof's cache manager created in real entries
        self.keys = []      # the keys Triton asked its cache manager for
        self.hits = []      # the existing entries' files it found (and loaded, not built)
        self.runs = []      # the compiler runs of this build
        self.report = {"cache_dir": triton_cache_dir(triton, env)}
        self.saved = {}
        self.patched = None
        self.proof = None
        self.custom = False  # the workload's own cache manager: entries the probe cannot see
        self.suspended = None

    def real_manager(self):
        if self.env.get("TRITON_CACHE_MANAGER") or _os.environ.get("TRITON_CACHE_MANAGER"):
            self.custom = True
            return None  # the workload's own manager keeps its entries elsewhere
        try:
            import triton.runtime.cache as cache_module
        except BaseException:
            return None
        base = getattr(cache_module, "FileCacheManager", None)
        if not isinstance(base, type) or not callable(
                getattr(cache_module, "get_cache_manager", None)):
            return None
        knobs = triton_knobs(self.triton)
        try:
            if knobs is not None and knobs.cache.manager_class:
                self.custom = True
                return None
        except Exception:
            pass
        return cache_module, base

    def prepare(self):
        rep = self.report
        cache = rep["cache_dir"]
        rep["cache_space"] = space_of(cache)
        rep["cache_existed"] = _os.path.isdir(cache)
        py_tmp, failure = python_tempdir(self.env)
        rep["python_tmp"], rep["gcc_tmp"] = py_tmp, gcc_tempdir(self.env)
        rep["tmp_space"] = space_of(rep["gcc_tmp"])
        if failure:
            failure["where"] = "tmp"
            return failure
        real = self.real_manager()
        probe_cache = cache if real else _os.path.join(cache, self.name)
        rep["probe_cache"] = probe_cache
        rep["through"] = "entries" if real else "subdir"
        if real:
            rep["entries"] = guarded(audit_entries, cache, rebuilds_bad_entries(self.triton),
                                     self.name)
        self.saved = {"TRITON_CACHE_DIR": _os.environ.get("TRITON_CACHE_DIR"),
                      "TMPDIR": _os.environ.get("TMPDIR"), "tempdir": _tempfile.tempdir}
        _os.environ["TRITON_CACHE_DIR"] = probe_cache
        try:
            make_dirs(probe_cache, self.made)
        except OSError as e:
            failure = failure_of(e)
            failure["where"] = "cache"
            failure["step"] = "os.makedirs(%s)" % probe_cache
            return failure
        if real:
            cache_module, base = real
            self.proof = proof_manager(base, cache, self.made, self.written, self.keys,
                                       self.name, self.hits)
            swap_manager(cache_module, base, self.proof)
            self.patched = real
        else:
            self.throwaway.append(probe_cache)
        subs = {}
        for key, where in (("python_tmp", py_tmp), ("gcc_tmp", rep["gcc_tmp"])):
            if where in subs:
                continue
            try:
                subs[where] = _os.path.join(where, self.name)
                _os.mkdir(subs[where], 0o700)
                self.throwaway.append(subs[where])
            except OSError as e:
                subs[where] = None
                rep[key + "_error"] = failure_of(e)
        emit("own-made", {"made": self.made, "throwaway": self.throwaway})
        gcc_sub = subs.get(rep["gcc_tmp"])
        if gcc_sub:
            _os.environ["TMPDIR"] = gcc_sub
        elif self.env.get("TMPDIR") is not None:
            _os.environ["TMPDIR"] = self.env["TMPDIR"]
        else:
            _os.environ.pop("TMPDIR", None)
        _tempfile.tempdir = subs.get(py_tmp) or py_tmp
        return None

    def attempt(self, target_of):
        rep = self.report
        emit("own-start", {})  # the fresh-cache attempt waits for this one: see its check
        failure = self.prepare()
        if failure is None:
            raced = False
            for _ in range(4):
                reset_driver(self.triton)
                first = len(COMPILER_RUNS)
                try:
                    rep["target"] = target_of(current_target(self.triton))
                    rep["ok"] = True
                    failure = None
                except BaseException as e:
                    failure = failure_of(e)
                    failure["compiler"] = COMPILER_RUNS[first:]
                    step = failure.get("probe_step")
                    if step == "check_call" and self.untraced(failure):
                        continue  # the tracer's own error: prove the build without it
                    if step and self.patched and self.without_proof(failure):
                        continue  # the proof manager's: prove it in a throw-away subdir
                    if not raced and self.removed_meanwhile(failure):
                        raced = True
                        continue  # once: another process removed a dir of the cache mid-build
                self.runs = COMPILER_RUNS[first:]
                break
        if failure is not None:
            rep["ok"] = False
            rep["failure"] = failure
        if self.patched:
            rep["keys"] = sorted(set(self.keys))
            rep["hits"] = sorted(set(self.hits))
            emit("own-made", {"made": self.made, "throwaway": self.throwaway,
                              "written": self.written})
        return rep

    def without_proof(self, failure):
        rep = self.report
        self.restore_manager()
        rep["instrumentation"] = {"error": failure.get("error"), "step": failure["probe_step"],
                                  "what": "the proof's cache manager over the real entries"}
        probe_cache = _os.path.join(rep["cache_dir"], self.name)
        try:
            make_dirs(probe_cache, self.made)
        except OSError:
            return False
        self.throwaway.append(probe_cache)
        rep["probe_cache"], rep["through"] = probe_cache, "subdir"
        self.keys, self.hits = [], []
        _os.environ["TRITON_CACHE_DIR"] = probe_cache
        return True

    def removed_meanwhile(self, failure):
        cache, missing = self.report["cache_dir"], failure.get("filename")
        if failure.get("errno") != "ENOENT" or not missing or not (
                missing == cache or missing.startswith(cache.rstrip("/") + "/")):
            return False
        try:
            make_dirs(self.report.get("probe_cache") or cache, self.made)
        except OSError:
            return False
        return True

    def fresh_dir(self, fallback):
        path = _os.path.join(self.report["cache_dir"], self.name + "-fresh")
        try:
            make_dirs(path, self.made)
        except OSError:
            return fallback
        self.throwaway.append(path)
        return path

    def untraced(self, failure):
        if not untrace_compiler():
            return False
        self.report["instrumentation"] = {"error": failure.get("error"),
                                          "step": failure["probe_step"],
                                          "what": "the compiler runs' tracer"}
        return True

    def restore_manager(self):
        if self.patched:
            cache_module, base = self.patched
            swap_manager(cache_module, self.proof, base)
            self.patched = None

    def built_from_nothing(self):
        if not self.report.get("ok") or not self.runs:
            return False
        if any(run.get("rc") or run.get("error") for run in self.runs):
            return False
        if self.report.get("through") == "entries":
            return bool(self.keys) and not self.hits
        return self.report.get("through") == "subdir" and not self.custom

    def finish(self):
        failure = self.report.get("failure") or {}
        if failure.get("errno") and not failure.get("filename") and not failure.get("where"):
            failure["where"] = self.locate(failure["errno"])
        return self.report

    def suspend(self):
        self.suspended = ({key: _os.environ.get(key) for key in ("TRITON_CACHE_DIR", "TMPDIR")},
                          _tempfile.tempdir, self.patched)
        self.restore()

    def resume(self):
        if self.suspended is None:
            return
        env, tempdir, patched = self.suspended
        self.suspended = None
        put_env(env)
        _tempfile.tempdir = tempdir
        if patched:
            swap_manager(patched[0], patched[1], self.proof)
            self.patched = patched

    def locate(self, code):
        where, found = reproduce(code, (("cache", self.report.get("probe_cache")),
                                        ("tmp", _tempfile.tempdir),
                                        ("tmp", _os.environ.get("TMPDIR"))), self.size)
        if found:
            self.report["reproduced"] = found
        return where

    def restore(self):
        self.restore_manager()
        put_env({key: value for key, value in self.saved.items() if key != "tempdir"})
        if "tempdir" in self.saved:
            _tempfile.tempdir = self.saved["tempdir"]

    def clean(self):
        self.restore()
        for path in reversed(self.written):
            if _os.path.basename(path).startswith("tmp.pid_"):
                _shutil.rmtree(path, ignore_errors=True)
            else:
                try:
                    _os.rmdir(path)
                except OSError:
                    pass
        for path in reversed(self.throwaway):
            _shutil.rmtree(path, ignore_errors=True)
        for path in reversed(self.made):
            try:
                _os.rmdir(path)  # only if empty: another job may have written there since
            except OSError:
                pass


def truthy(value):
    return (value or "").strip().lower() in ("1", "true", "on")


def knob_report(triton, env):
    knobs = triton_knobs(triton)
    out = {"knobs": knobs is not None}
    try:
        value = knobs.runtime.interpret if knobs is not None else (
            env.get("TRITON_INTERPRET", "0") == "1")  # Triton <= 3.3
        out["interpret"] = value if isinstance(value, bool) else None
    except Exception as e:
        out["interpret_error"] = err(e)
    if knobs is not None:
        for key, read in (("cache_dir", lambda: knobs.cache.dir),
                          ("home_dir", lambda: knobs.cache.home_dir),
                          ("dump_dir", lambda: knobs.cache.dump_dir),
                          ("override_dir", lambda: knobs.cache.override_dir),
                          ("dump_ir", lambda: knobs.compilation.dump_ir),
                          ("override", lambda: knobs.compilation.override),
                          ("always_compile", lambda: knobs.compilation.always_compile),
                          ("build_impl", lambda: knobs.build.impl and repr(knobs.build.impl))):
            try:
                value = read()
                out[key] = value if isinstance(value, (str, bool, int)) or value is None else (
                    repr(value))
            except Exception as e:
                out[key + "_error"] = err(e)
    return out


def inductor_report(torch_dir, env, py_tmp, name):
    out = {}
    import getpass
    try:
        out["user"] = getpass.getuser()
    except BaseException as e:
        out["user_error"] = failure_of(e)
    cache = env.get("TORCHINDUCTOR_CACHE_DIR")
    if cache is None and "user" in out:
        import re as _re
        cache = _os.path.join(py_tmp or "/tmp", "torchinductor_" + _re.sub(
            r'[\\/:*?"<>|]', "_", out["user"]))
    out["cache_dir"] = cache
    if cache:
        made = []
        probe = _os.path.join(cache, name)
        try:
            make_dirs(probe, made)
            found = write_test(probe, 65536)
            if found:
                out["cache_error"] = dict(found, where="cache")
        except OSError as e:
            out["cache_error"] = dict(failure_of(e), where="cache")
        finally:
            for path in reversed(made):
                _shutil.rmtree(path, ignore_errors=True) if path == probe else None
                try:
                    _os.rmdir(path)
                except OSError:
                    pass
        out["cache_space"] = space_of(cache)
    config = _os.path.join(torch_dir, "_inductor", "config.py")
    try:
        found = source_settings(config, (("triton_disable_device_detection", None),
                                         ("cxx", "cpp")))
        out["disable_device_detection"] = found.get("triton_disable_device_detection") is True
        out["cxx"] = repr(found.get("cxx"))
        out["config_read"] = "source"
    except Exception:
        try:
            from torch._inductor import config as inductor_config
            out["disable_device_detection"] = getattr(
                inductor_config, "triton_disable_device_detection", False) is True
            out["cxx"] = repr(getattr(getattr(inductor_config, "cpp", None), "cxx", None))
            out["config_read"] = "import"
        except BaseException as e:
            out["config_error"] = err(e)
    return out


class NotPlain(ValueError):
    """A setting whose value is more than the environment, constants and sys.platform."""


def plain_value(node):
    import ast
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Tuple):
        return tuple(plain_value(item) for item in node.elts)
    if isinstance(node, ast.Attribute) and _dotted(node) == "sys.platform":
        return sys.platform
    if isinstance(node, ast.Subscript) and _dotted(node.value) == "os.environ":
        index = node.slice
        if type(index).__name__ == "Index":  # Python 3.8's wrapper of the subscript
            index = index.value
        key = plain_value(index)
        if key not in _os.environ:
            raise NotPlain("os.environ[%r] would raise" % (key,))
        return _os.environ[key]
    if isinstance(node, ast.Call) and _dotted(node.func) in ("os.environ.get", "os.getenv") \
            and not node.keywords and 1 <= len(node.args) <= 2:
        args = [plain_value(arg) for arg in node.args]
        return _os.environ.get(args[0], args[1] if len(args) > 1 else None)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return not plain_value(node.operand)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = plain_value(node.operand)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BoolOp):
        value = None
        for item in node.values:
            value = plain_value(item)
            if bool(value) is isinstance(node.op, ast.Or):
                return value
        return value
    if isinstance(node, ast.IfExp):
        return plain_value(node.body if plain_value(node.test) else node.orelse)
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        left, right = plain_value(node.left), plain_value(node.comparators[0])
        compare = {ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b,
                   ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b,
                   ast.Is: lambda a, b: a is b, ast.IsNot: lambda a, b: a is not b}
        for kind, function in compare.items():
            if isinstance(node.ops[0], kind):
                return function(left, right)
    raise NotPlain(type(node).__name__)


def _dotted(node):
    import ast
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def source_settings(path, wanted):
    import ast
    with open(path, encoding="utf-8") as handle:
        tree = ast.parse(handle.read(), path)
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            made = any(alias.name == "*" for alias in node.names)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            made = node.name == "__getattr__"
        else:
            targets = getattr(node, "targets", None) or [getattr(node, "target", None)]
            made = any(isinstance(t, ast.Name) and t.id == "__getattr__" for t in targets)
        if made:
            raise NotPlain("the module makes attributes its source does not assign")
    scopes: dict = {None: tree.body}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            scopes[node.name] = node.body
    found = {}
    for name, scope in wanted:
        values = [node.value for node in scopes.get(scope, ())
                  if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None
                  and name in [t.id for t in (node.targets if isinstance(node, ast.Assign)
                                              else [node.target]) if isinstance(t, ast.Name)]]
        if len(values) > 1:
            raise NotPlain("%s is set %d times" % (name, len(values)))
        if values:
            found[name] = plain_value(values[0])
    return found


VENDORED_FLA = (
    ("vllm", "vllm", "third_party/flash_linear_attention/ops/utils.py"),
    ("vllm", "vllm", "model_executor/layers/fla/ops/utils.py"),
    ("sglang", "sglang", "kernels/ops/attention/fla/utils.py"),
    ("sglang", "sglang", "srt/layers/attention/fla/utils.py"),
    ("unsloth_zoo", "unsloth_zoo", "_vendored/fla/utils/_device.py"),
)


def detection_function(path, names=("get_available_device", "_cpu_device_warning")):
    import ast
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    try:
        tree = ast.parse(text, path)
    except SystemError as e:
        if "recursion depth mismatch" not in str(e):
            raise
        tree = ast.parse(text, path)
    body = [node for node in tree.body
            if isinstance(node, ast.FunctionDef) and node.name in names]
    if not any(node.name == names[0] for node in body):
        return None
    module = ast.Module(body=body, type_ignores=[])
    return compile(module, path, "exec")


def run_detection(code, triton):
    import functools, warnings
    space = {"triton": triton, "warnings": warnings, "functools": functools,
             "cache": getattr(functools, "cache", functools.lru_cache(maxsize=None)),
             "lru_cache": functools.lru_cache, "logger": None, "__name__": "fleetcheck"}
    exec(code, space)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            return space["get_available_device"](), [str(w.message) for w in caught], None
        except BaseException as e:
            return None, [str(w.message) for w in caught], err(e)


def backend_report(triton):
    out = {"in_tree": _os.environ.get("TRITON_BACKENDS_IN_TREE", "") == "1",
           "default": _os.environ.get("TRITON_DEFAULT_BACKEND")}
    try:
        from importlib.metadata import entry_points
        eps = entry_points()
        group = (eps.select(group="triton.backends") if hasattr(eps, "select")
                 else eps.get("triton.backends", []))
        out["entry_points"] = sorted("%s=%s" % (ep.name, ep.value) for ep in group)
        dists = [(ep.name, getattr(ep, "dist", None)) for ep in group]
        out["providers"] = {name: "%s %s" % (dist.name, dist.version)
                            for name, dist in dists if dist is not None}
    except Exception as e:
        out["entry_points_error"] = err(e)
    try:
        import importlib.util
        if importlib.util.find_spec("triton.backends") is None:
            out["absent"] = True
            return out
        import triton.backends as found_backends
        found = getattr(found_backends, "backends", None)
        if isinstance(found, dict):
            out["discovered"] = sorted(found)
            active = out["active"] = []
            for name, backend in found.items():
                try:
                    if backend.driver.is_active():
                        active.append(name)
                except BaseException as e:
                    out.setdefault("is_active_errors", {})[name] = err(e)
            out["selection"] = selection(found)
    except BaseException as e:
        failure = failure_of(e)
        if failure.get("probe_step"):
            out.update(probe_error=failure["error"], probe_step=failure["probe_step"])
        else:
            out["error"] = failure["error"]
    return out


def selection(found):
    import triton.runtime as runtime
    path = _os.path.join(_os.path.dirname(runtime.__file__), "driver.py")
    try:
        with open(path, encoding="utf-8") as handle:
            source = handle.read()
        code = detection_function(path, ("_create_driver",))
    except (OSError, SyntaxError, ValueError) as e:
        return {"file": path, "unavailable": err(e)}
    if code is None:
        return {"file": path, "unavailable": "no _create_driver() in this Triton"}
    out = {"file": path, "reads_default": "TRITON_DEFAULT_BACKEND" in source}

    class Named(type):
        def __repr__(cls):
            return repr(cls.real)

    class Chosen(Exception):
        pass

    def stand_in(name, backend):
        def built(self):
            raise Chosen(name)  # _create_driver() builds the driver it picked: stop there
        driver = Named("Picked", (object,), {"real": backend.driver, "__init__": built,
                                             "is_active": staticmethod(backend.driver.is_active)})
        return type("Backend", (object,), {"driver": driver, "compiler": None})
    space: dict = {"os": _os, "backends": {name: stand_in(name, backend)
                                     for name, backend in found.items()},
             "DriverBase": object, "__name__": "fleetcheck"}
    exec(code, space)
    try:
        space["_create_driver"]()
        out["selected"] = None
    except Chosen as picked:
        out["selected"] = str(picked)
    except BaseException as e:
        out["error"] = err(e)
    return out


def vllm_report():
    import logging
    records = []

    class Keep(logging.Handler):
        def emit(self, record):
            try:
                records.append([record.levelname, record.name, record.getMessage()[:600]])
            except Exception:
                pass
    out = {}
    try:
        import vllm.logger  # noqa: F401  (vllm/__init__ and its logging configuration)
    except BaseException as e:
        out["import_error"] = failure_of(e)
        return out
    log = logging.getLogger("vllm")
    saved = (list(log.handlers), log.level)
    log.handlers = [Keep(logging.DEBUG)]
    log.setLevel(logging.DEBUG)
    try:
        import vllm.platforms as platforms
        found = platforms.current_platform
        out["platform"] = type(found).__name__
        out["platform_module"] = type(found).__module__
        out["device_type"] = str(getattr(found, "device_type", "") or "")
    except BaseException as e:
        out["platform_error"] = failure_of(e)
    if "platform_error" not in out:
        try:
            from vllm.triton_utils.importing import HAS_TRITON
            out["has_triton"] = bool(HAS_TRITON)
        except BaseException as e:
            out["triton_error"] = failure_of(e)
    log.handlers, level = saved
    log.setLevel(level)
    out["log"] = records[-40:]
    return out


FLA_KERNEL_NEEDS = ("einops", "torch", "triton", "fla-core")


def release_key(text):
    import re as _re
    found = _re.match(r"\s*v?(\d+(?:\.\d+)*)", text or "")
    return tuple(int(p) for p in found.group(1).split(".")) if found else ()


def satisfies(version, spec):
    have = release_key(version)
    for clause in [c.strip() for c in spec.split(",") if c.strip()]:
        for op in ("~=", "==", "!=", ">=", "<=", ">", "<"):
            if clause.startswith(op):
                want = release_key(clause[len(op):].rstrip(".*"))
                size = max(len(have), len(want))
                a, b = have + (0,) * (size - len(have)), want + (0,) * (size - len(want))
                if op == "~=":
                    ok = a >= b and a[:len(want) - 1] == want[:len(want) - 1]
                elif op == "==" and clause.endswith(".*"):
                    ok = have[:len(want)] == want
                else:
                    ok = {"==": a == b, "!=": a != b, ">=": a >= b, "<=": a <= b, ">": a > b,
                          "<": a < b}[op]
                if not ok:
                    return False
                break
    return True


def fla_requirements():
    import re as _re
    try:
        from importlib import metadata
    except ImportError:
        return None
    unmet = []
    for dist_name in ("fla-core", "flash-linear-attention"):
        try:
            dist = metadata.distribution(dist_name)
        except Exception:
            continue
        for line in dist.requires or []:
            body, _, marker = line.partition(";")
            marker = marker.strip().replace("'", '"')
            if marker and marker not in ('extra == "cuda"',):
                continue
            found = _re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*\(?([^)]*)\)?",
                              body)
            if not found:
                continue
            name, spec = found.group(1), found.group(3).strip()
            if name.lower().replace("_", "-") not in FLA_KERNEL_NEEDS:
                continue
            item = {"dist": "%s %s" % (dist_name, dist.version), "requires": body.strip()}
            try:
                installed = metadata.version(name)
            except Exception:
                installed = None
            if installed is None:
                item["problem"] = "not installed"
            elif spec and not satisfies(installed, spec):
                item["problem"] = "%s %s installed" % (name, installed)
            else:
                continue
            item["name"] = name.lower().replace("_", "-")
            item["requires"] = item["requires"].replace(found.group(2) or "\0", "")
            if not any(u["dist"] == item["dist"] and u["name"] == item["name"] for u in unmet):
                unmet.append(item)
    return unmet


def framework_imports(meta):
    import importlib, logging, warnings
    records = []

    class Keep(logging.Handler):
        def emit(self, record):
            try:
                records.append(record.getMessage()[:600])
            except Exception:
                pass
    out = {}
    for name, decide in (("xformers", "_is_triton_available"), ("liger_kernel", None),
                         ("mamba_ssm", None), ("causal_conv1d", None)):
        if not meta.get(name + "_dir"):
            continue
        item = out[name] = {}
        del records[:]
        log = logging.getLogger(name)
        log.addHandler(Keep(logging.DEBUG))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                module = importlib.import_module(name)
                if decide:
                    item[decide] = bool(getattr(module, decide)())
                if name == "liger_kernel":
                    item["infer_device"] = str(importlib.import_module(
                        "liger_kernel.utils").infer_device())
            except BaseException as e:
                item["import_error"] = failure_of(e)
        log.handlers = [h for h in log.handlers if not isinstance(h, Keep)]
        item["log"] = records[-5:]
        item["warnings"] = [str(w.message)[:300] for w in caught][:5]
    return out
'''
                + r'''
import os, re, subprocess, time, warnings
count_processes()
fresh = sys.argv[1]
user_cache = json.loads(sys.argv[2])
own_opts = json.loads(sys.argv[4]) if len(sys.argv) > 4 else {}
own_env = own_opts.get("env") or {}
own_name = own_opts.get("name") or ".fleetcheck-probe"
def read_driver():
    emit("gpustate", guarded(gpu_state))
    emit("libcuda", guarded(libcuda_facts))
driver_reader = None
driver_after = own_opts.get("driver") == "after"
if own_opts.get("driver") and not driver_after:
    driver_reader = threading.Thread(target=read_driver, daemon=True)
    try:
        driver_reader.start()
    except RuntimeError:  # can't start new thread: the job's process limit counts threads
        driver_reader = None
        read_driver()
import importlib.util, sysconfig
def spec_dir(name):
    try:
        spec = importlib.util.find_spec(name)
    except Exception:
        return None
    if spec is None:
        return None
    locs = list(spec.submodule_search_locations or [])
    return locs[0] if locs else (os.path.dirname(spec.origin) if spec.origin else None)
def spec_dirs(name):
    try:
        spec = importlib.util.find_spec(name)
    except Exception:
        return []
    return list(spec.submodule_search_locations or []) if spec else []
def dist_meta(path):
    text = ""
    for name in ("METADATA", "PKG-INFO"):
        try:
            with open(os.path.join(path, name), encoding="utf-8", errors="replace") as f:
                text = f.read(8192)
            break
        except OSError:
            pass
    found = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key in ("Name", "Version") and key not in found:
            found[key] = value.strip()
        if not line.strip():
            break
    return found
def provides(path, package):
    try:
        with open(os.path.join(path, "RECORD"), encoding="utf-8", errors="replace") as f:
            return any(line.startswith(package + "/__init__.py") for line in f)
    except OSError:
        pass
    try:
        with open(os.path.join(path, "top_level.txt"), encoding="utf-8") as f:
            return package in f.read().split()
    except OSError:
        return True
def distributions(package, prefixes):
    found, seen = [], set()
    for entry in sys.path:
        try:
            real = os.path.realpath(entry or ".")
            names = os.listdir(real)
        except OSError:
            continue
        if real in seen:
            continue
        seen.add(real)
        for name in names:
            low = name.lower()
            if not (low.endswith(".dist-info") or low.endswith(".egg-info")):
                continue
            low = low.replace("-", "_")
            if not any(low.startswith(p) for p in prefixes):
                continue
            path = os.path.join(real, name)
            if not provides(path, package):
                continue
            meta = dist_meta(path)
            found.append({"name": meta.get("Name", name.split("-")[0]),
                          "version": meta.get("Version"), "path": path})
    return found
def ptxas(path):
    info = {"path": path, "exists": os.path.exists(path), "executable": os.access(path, os.X_OK)}
    if info["executable"]:
        try:
            info["run"] = subprocess.Popen([path, "--version"], stdout=subprocess.PIPE,
                                           stderr=subprocess.STDOUT)
        except Exception as e:
            info["error"] = err(e)
    return info
def ptxas_done(info):
    run = info.pop("run", None)
    if run is not None:
        try:
            out = run.communicate(timeout=10)[0].decode("utf-8", "replace")
            m = re.search(r"release (\d+)\.(\d+)", out)
            info["version"] = m.group(1) + "." + m.group(2) if m else None
            info["output"] = out[-400:]
        except Exception as e:
            run.kill()
            run.wait()
            info["error"] = err(e)
    return info
meta = {"python": {"executable": sys.executable, "include": None,
                   "version": "%d.%d.%d" % sys.version_info[:3]}}
try:
    meta["python"]["include"] = py_include()
except Exception as e:
    meta["python"]["include_error"] = err(e)
meta["triton_dir"] = spec_dir("triton")
def path_entry(package_dir):
    for entry in sys.path:
        if package_dir and os.path.realpath(os.path.join(entry or ".", os.path.basename(
                package_dir))) == os.path.realpath(package_dir):
            return entry or os.getcwd()
    return None
meta["triton_entry"] = path_entry(meta["triton_dir"])
meta["triton_dists"] = distributions("triton", ("triton", "pytorch_triton"))
meta["torch_dir"] = spec_dir("torch")
meta["fla_dir"] = spec_dir("fla")
meta["fla_dirs"] = spec_dirs("fla")
meta["vllm_dir"] = spec_dir("vllm")
if meta["vllm_dir"]:
    meta["amdsmi_dir"] = spec_dir("amdsmi")
    dists = distributions("vllm", ("vllm",))
    meta["vllm_version"] = dists[0]["version"] if dists else None
for name in ("xformers", "liger_kernel", "sglang", "unsloth_zoo", "mamba_ssm", "causal_conv1d"):
    meta[name + "_dir"] = spec_dir(name)
meta["vendored_fla"] = [
    [fw, os.path.join(meta[pkg + "_dir"], rel)] for fw, pkg, rel in VENDORED_FLA
    if meta.get(pkg + "_dir") and os.path.isfile(os.path.join(meta[pkg + "_dir"], rel))]
meta["inductor"] = bool(meta["torch_dir"]) and os.path.isdir(
    os.path.join(meta["torch_dir"], "_inductor"))
if meta["torch_dir"]:
    try:
        with open(os.path.join(meta["torch_dir"], "version.py"), encoding="utf-8") as f:
            text = f.read(8192)
        m = re.search(r"^__version__\s*(?::[^=]*)?=\s*['\"]([^'\"]+)", text, re.M)
        c = re.search(r"^cuda\s*(?::[^=]*)?=\s*(?:['\"]([^'\"]+)['\"]|None)", text, re.M)
        meta["torch_version"] = m.group(1) if m else None
        meta["torch_cuda"] = c.group(1) if c else None
        h = re.search(r"^hip\s*(?::[^=]*)?=\s*['\"]([^'\"]+)['\"]", text, re.M)
        meta["torch_hip"] = h.group(1) if h else None
    except OSError as e:
        meta["torch_version_error"] = err(e)
if meta["fla_dir"]:
    dists = distributions("fla", ("flash_linear_attention", "fla_core", "fla"))
    meta["fla_version"] = dists[0]["version"] if dists else None
if meta["triton_dir"]:
    base = meta["triton_dir"]
    tools = {}
    for name, rel in (("ptxas", "backends/nvidia/bin/ptxas"),
                      ("ptxas-blackwell", "backends/nvidia/bin/ptxas-blackwell"),
                      ("ptxas-2x", "third_party/cuda/bin/ptxas")):
        p = os.path.join(base, rel)
        if os.path.exists(p) or name == "ptxas":
            tools[name] = ptxas(p)
    for var in ("TRITON_PTXAS_PATH", "TRITON_PTXAS_BLACKWELL_PATH"):
        if os.environ.get(var):
            tools[var] = ptxas(os.environ[var])
    meta["ptxas"] = {name: ptxas_done(info) for name, info in tools.items()}
emit("meta", meta)
if len(sys.argv) > 3 and sys.argv[3] == "meta":
    emit("done", {"processes": STARTED, "compiler_runs": 0})
    sys.exit(0)
trace_compiler()

torch = None
if meta["torch_dir"]:
    data = {"installed": True}
    t0 = time.time()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            import torch
            data["import_s"] = round(time.time() - t0, 3)
            data["version"] = str(torch.__version__)
            data["cuda"] = torch.version.cuda
            data["hip"] = getattr(torch.version, "hip", None)
            data["cuda_available"] = bool(torch.cuda.is_available())
            data["device_count"] = int(torch.cuda.device_count()) if data["cuda_available"] else 0
            data["arch_list"] = list(torch.cuda.get_arch_list()) if data["cuda_available"] else []
        except BaseException as e:
            data["error"] = err(e)
    data["warnings"] = [str(w.message)[:1000] for w in caught][:10]
    emit("torch", data)
    if meta["inductor"] and torch is not None:
        try:
            emit("inductor", inductor_report(meta["torch_dir"], own_env,
                                             python_tempdir(own_env)[0], own_name))
        except BaseException as e:
            emit("inductor", {"error": err(e)})
else:
    emit("torch", {"installed": False})

def mirror_cache(cache):
    mirror = fresh + "-warm"
    os.mkdir(mirror)
    if own is not None:
        own.throwaway.append(mirror)
    try:
        keys = os.listdir(cache)
    except OSError:
        keys = []
    for key in keys:
        source = os.path.join(cache, key)
        if key.startswith(".fleetcheck-probe"):
            continue  # the probe's own throw-away dirs (this run's, or a concurrent one's)
        try:
            names = os.listdir(source) if os.path.isdir(source) else None
        except OSError:
            names = None
        if names is None:
            continue
        target = os.path.join(mirror, key)
        os.mkdir(target)
        for name in names:
            path = os.path.join(source, name)
            if os.path.isdir(path):
                continue  # a tmp.pid_* dir: another process is writing this entry now
            try:
                os.symlink(os.path.abspath(path), os.path.join(target, name))
            except OSError:
                pass
    return mirror
def target_of(t):
    if isinstance(t, tuple):
        return {"backend": t[0], "arch": t[1] if len(t) > 1 else None, "warp_size": None}
    return {"backend": getattr(t, "backend", None), "arch": getattr(t, "arch", None),
            "warp_size": getattr(t, "warp_size", None)}
def fresh_attempt(data):
    os.environ["TRITON_CACHE_DIR"] = fresh
    t0 = time.time()
    for _ in range(2):
        reset_driver(triton)
        first = len(COMPILER_RUNS)
        try:
            data["target"] = target_of(current_target(triton))
            data["ok"] = True
            data["compiler"] = COMPILER_RUNS[first:]
        except BaseException as e:
            failure = failure_of(e)
            if failure.get("probe_step") == "check_call" and untrace_compiler():
                data["instrumentation"] = {"error": failure.get("error"), "step": "check_call",
                                           "what": "the compiler runs' tracer"}
                continue
            data["ok"] = False
            data["error"] = err(e)
            data["failure"] = dict(failure, compiler=COMPILER_RUNS[first:])
        break
    data["seconds"] = round(time.time() - t0, 3)
    data["cache"] = "fresh"
    data["fresh_dir"] = fresh
    failure = data.get("failure") or {}
    if failure.get("errno") and not failure.get("filename"):
        failure["where"] = reproduce(failure["errno"], (("cache", fresh), (
            "tmp", os.environ.get("TMPDIR"))), 65536)[0]
    emit("target", data)
    if not data["ok"]:
        warm = {"cache_dir": None}
        if user_cache is None:
            home = os.environ.get("TRITON_HOME") or os.path.expanduser("~/")
            cache = os.path.join(home, ".triton", "cache")
        else:
            cache = user_cache
        warm["cache_dir"] = cache
        if os.path.isdir(cache):
            try:
                os.environ["TRITON_CACHE_DIR"] = mirror_cache(cache)
                warm["target"] = target_of(current_target(triton))
                warm["ok"] = True
            except BaseException as e:
                warm["ok"] = False
                warm["error"] = err(e)
        else:
            warm["ok"] = None
        emit("warm", warm)
    os.environ["TRITON_CACHE_DIR"] = fresh
def skeleton_attempt(data):
    where = os.path.join(fresh, "skeleton")
    first = len(COMPILER_RUNS)
    t0 = time.time()
    try:
        os.mkdir(where)
        built = skeleton_proof(triton, where)
    except BaseException:
        built = False
    if built:
        data.update(ok=True, target=own.report.get("target"), compiler=COMPILER_RUNS[first:],
                    cache="skeleton", fresh_dir=where, seconds=round(time.time() - t0, 3))
        emit("target", data)
    return built
triton = None
own = None
if meta["triton_dir"]:
    os.environ["TRITON_CACHE_DIR"] = fresh
    data = {}
    t0 = time.time()
    try:
        import triton
        data["version"] = getattr(triton, "__version__", None)
        data["location"] = os.path.dirname(triton.__file__)
    except BaseException as e:
        triton = None
        data["ok"] = False
        data["error"] = err(e)
        data["failure"] = dict(failure_of(e), compiler=list(COMPILER_RUNS))
        data["seconds"] = round(time.time() - t0, 3)
        data["cache"] = "fresh"
        emit("target", data)
if triton is not None:
    emit("knobs", guarded(knob_report, triton, own_env))
    emit("backends", guarded(backend_report, triton))
    own = OwnPath(triton, own_env, own_name)
    t0 = time.time()
    try:
        report = own.attempt(target_of)
    except BaseException as e:  # the proof's own step, not Triton's: still the fresh attempt
        report = own.report
        report.update(ok=False, failure=failure_of(e))
    report["seconds"] = round(time.time() - t0, 3)
    emit("own", report)  # now: what follows may hang; finish() completes it below
    if driver_after:
        driver_after = False
        read_driver()
    if own.built_from_nothing():
        data.update(ok=True, target=report["target"], seconds=report["seconds"], cache="own",
                    cache_dir=report.get("cache_dir"), compiler=own.runs)
        emit("target", data)
    else:
        own.suspend()
        fresh = own.fresh_dir(fresh)
        give_back_freed_memory()
        try:
            if not (report.get("ok") and skeleton_attempt(data)):
                fresh_attempt(data)
            if data.get("ok") and data.get("cache") == "fresh":
                built = [os.path.getsize(os.path.join(d, f)) for d, _, names in os.walk(fresh)
                         for f in names if f.endswith(".so")]
                if built:  # a module Triton built, not one a full disk cut short
                    own.size = max(built)
        finally:
            own.resume()
    emit("own", own.finish())

if meta["fla_dir"]:
    data = {"layout": None}
    t0 = time.time()
    if own is None:
        os.environ["TRITON_CACHE_DIR"] = fresh
    else:
        reset_driver(triton)  # FLA decides as the workload's own process would
    swallowed, shown = [], []
    def show(message, category, filename, lineno, file=None, line=None):
        text = str(message)
        if "roll back to CPU" in text:
            shown.append("%s: %s" % (category.__name__, text))
            exc = sys.exc_info()[1]
            if exc is not None:
                swallowed.append(err(exc))
    for rel, module in FLA_LAYOUTS:
        if not any(os.path.isfile(os.path.join(d, rel)) for d in meta["fla_dirs"]):
            continue
        data["layout"] = rel
        data["module"] = module
        break
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = show
        try:
            if "fla" not in sys.modules:
                import types
                pkg = types.ModuleType("fla")
                pkg.__path__ = list(meta["fla_dirs"])
                pkg.__version__ = meta.get("fla_version") or "0"
                sys.modules["fla"] = pkg
            import importlib
            utils = importlib.import_module(data.get("module") or "fla.utils")
            data["device_platform"] = getattr(utils, "device_platform", None)
            data["is_blackwell"] = getattr(utils, "IS_NVIDIA_BLACKWELL", None)
            if data["layout"] is None:
                data["layout"] = "unknown"
        except BaseException as e:
            data["error"] = err(e)
            if data["layout"] is None:
                data["layout"] = "unknown"
    data["warnings"] = shown[:5]
    data["swallowed"] = swallowed[0] if swallowed else None
    try:
        data["unmet"] = fla_requirements()
    except Exception as e:
        data["unmet_error"] = err(e)
    data["seconds"] = round(time.time() - t0, 3)
    emit("fla", data)
if own is not None:
    found = []
    for fw, path in meta.get("vendored_fla") or []:
        item = {"framework": fw, "file": path}
        try:
            code = detection_function(path)
            if code is None:
                item["error"] = "no get_available_device() in this release"
            else:
                reset_driver(triton)
                item["backend"], item["warnings"], item["raised"] = run_detection(code, triton)
        except BaseException as e:
            item["error"] = err(e)
        found.append(item)
    emit("vendored", {"detections": found})
    own.clean()
if meta["vllm_dir"]:
    t0 = time.time()
    try:
        data = vllm_report()
    except BaseException as e:
        data = {"import_error": failure_of(e)}
    data["seconds"] = round(time.time() - t0, 3)
    emit("vllm", data)
if any(meta.get(n + "_dir") for n in ("xformers", "liger_kernel", "mamba_ssm", "causal_conv1d")):
    t0 = time.time()
    try:
        data = framework_imports(meta)
    except BaseException as e:
        data = {"error": failure_of(e)}
    data["seconds"] = round(time.time() - t0, 3)
    emit("imports", data)
if driver_after:  # no workload's own start to wait for
    read_driver()
if driver_reader is not None:
    driver_reader.join(30)  # the driver layer's own cap as a helper of its own
emit("done", {"processes": STARTED, "compiler_runs": len(COMPILER_RUNS)})
''')

COMPILED_RUN = "import sys;exec(compile(sys.argv.pop(1),'<string>','exec'))"

CUDA_SCRIPT = LIBCUDA + "import json\nprint(json.dumps(libcuda_facts()))\n"

HIP_SCRIPT = r'''
import ctypes, json, os, subprocess
paths = []
out = {"search": paths, "path": None}
lib_name = "libamdhip64.so"
sysroot = os.environ.get("FLEETCHECK_SYSROOT") or "/"
ldconfig = "/sbin/ldconfig" if sysroot == "/" else sysroot.rstrip("/") + "/sbin/ldconfig"
def package_dir(name):
    try:
        import importlib.util
        spec = importlib.util.find_spec(name)
    except Exception:
        return None
    locs = list(spec.submodule_search_locations or []) if spec else []
    return locs[0] if locs else None
torch_dir = package_dir("torch")
def found(path, how):
    out["path"], out["how"] = path, how
def locate():
    env_path = os.environ.get("TRITON_LIBHIP_PATH")
    if env_path:
        if os.path.basename(env_path).startswith(lib_name) and os.path.isfile(env_path):
            return found(env_path, "TRITON_LIBHIP_PATH")
        out["error"] = ("RuntimeError: TRITON_LIBHIP_PATH '%s' does not point to a valid %s"
                        % (env_path, lib_name))
        out["row"] = "libhip_path_invalid"
        return None
    try:
        import rocm_sdk
        return found(str(rocm_sdk.find_libraries("amdhip64")[0]), "rocm_sdk (TheRock)")
    except Exception:
        pass
    bundled = os.path.join(torch_dir, "lib", lib_name) if torch_dir else ""
    if bundled and os.path.exists(bundled):
        return found(bundled, "mapped by torch")
    triton_dir = package_dir("triton")
    if triton_dir:
        local = os.path.join(triton_dir, "backends", "amd", "lib", lib_name)
        if os.path.exists(local):
            return found(local, "Triton's backend")
        paths.append(local)
    import site
    site_packages = site.getsitepackages()
    if site.ENABLE_USER_SITE:
        site_packages = [site.getusersitepackages(), *site_packages]
    for path in site_packages:
        path = os.path.join(path, "torch", "lib", lib_name)
        if os.path.exists(path):
            return found(path, "site-packages torch")
        paths.append(path)
    for d in (os.getenv("LD_LIBRARY_PATH") or "").split(":") if os.getenv("LD_LIBRARY_PATH") \
            else []:
        f = os.path.join(d, lib_name)
        if os.path.exists(f):
            return found(f, "LD_LIBRARY_PATH")
        paths.append(f)
    for var, how in (("HIP_PATH", "HIP_PATH"),):
        if os.getenv(var):
            f = os.path.join(os.getenv(var), "lib", lib_name)
            if os.path.exists(f):
                return found(f, how)
            paths.append(f)
    try:
        root = subprocess.check_output(["hipconfig", "--path"], stderr=subprocess.DEVNULL,
                                       timeout=10).decode().strip()
        if root:
            f = os.path.join(root, "lib", lib_name)
            if os.path.exists(f):
                return found(f, "hipconfig --path")
            paths.append(f)
    except (subprocess.CalledProcessError, OSError, subprocess.TimeoutExpired):
        pass
    if os.getenv("ROCM_PATH"):
        f = os.path.join(os.getenv("ROCM_PATH"), "lib", lib_name)
        if os.path.exists(f):
            return found(f, "ROCM_PATH")
        paths.append(f)
    try:
        libs = subprocess.check_output([ldconfig, "-p"], timeout=10).decode(errors="ignore")
    except FileNotFoundError:
        out["error"] = ("FileNotFoundError: [Errno 2] No such file or directory: "
                        "'/sbin/ldconfig'")
        out["row"] = "libamdhip64_not_found"
        return None
    except Exception as e:
        out["ldconfig_error"] = (type(e).__name__ + ": " + str(e))[-1000:]
        libs = ""
    locs = [line.split()[-1] for line in libs.splitlines() if line.strip().endswith(lib_name)]
    out["ldconfig"] = locs
    for loc in locs:
        if os.path.exists(loc):
            return found(loc, "ldconfig -p")
        paths.append(loc)
    common = os.path.join("/opt/rocm/lib/", lib_name)
    if os.path.exists(common):
        return found(common, "/opt/rocm/lib")
    paths.append(common)
    out["error"] = "RuntimeError: cannot locate %s after attempted paths %s" % (lib_name, paths)
    out["row"] = "libamdhip64_not_found"
    return None
locate()
if out["path"]:
    out["real"] = os.path.realpath(out["path"])
    try:
        lib = ctypes.CDLL(out["path"])
    except OSError as e:
        out["load_error"] = str(e)[:1000]
        lib = None
    if lib is not None:
        def name(rc):
            try:
                f = lib.hipGetErrorName
                f.restype = ctypes.c_char_p
                value = f(rc)
                return value.decode() if value else None
            except Exception:
                return None
        for fn in ("hipDriverGetVersion", "hipRuntimeGetVersion"):
            v = ctypes.c_int(0)
            try:
                rc = getattr(lib, fn)(ctypes.byref(v))
                out[fn] = v.value if rc == 0 else None
            except AttributeError:
                out[fn] = None
        n = ctypes.c_int(0)
        rc = lib.hipGetDeviceCount(ctypes.byref(n))
        out["count_rc"] = rc
        out["count_name"] = name(rc)
        out["count"] = n.value if rc == 0 else 0
        devices = []
        for i in range(out["count"]):
            info = {"index": i}
            buf = ctypes.create_string_buffer(256)
            if lib.hipDeviceGetName(buf, 256, i) == 0:
                info["name"] = buf.value.decode("utf-8", "replace")
            mem = ctypes.c_size_t(0)
            if lib.hipDeviceTotalMem(ctypes.byref(mem), i) == 0:
                info["memory_mib"] = mem.value // (1 << 20)
            devices.append(info)
        out["devices"] = devices
print(json.dumps(out))
'''

PYINFO_SCRIPT = PY_INCLUDE + r'''
import json, sys
print(json.dumps({"executable": sys.executable, "version": "%d.%d.%d" % sys.version_info[:3],
                  "include": py_include()}))
'''

DEEP_SCRIPT = HELPER_PRELUDE + r'''
import os, sys, time
try:
    import torch
    import triton
    import triton.language as tl
    waited = time.time()
    while len(sys.argv) > 1 and not os.path.exists(sys.argv[1]) and time.time() - waited < 20:
        time.sleep(0.01)
    driver = triton.runtime.driver
    if "active" in getattr(driver, "__dict__", {}) or hasattr(type(driver), "active"):
        driver = driver.active
    getter = getattr(driver, "get_current_target", None)
    target = getter() if getter else "Triton %s" % triton.__version__
    emit("target", {"ok": True, "target": str(target)})

    @triton.jit
    def fleetcheck_add_one(X, Y, N, B: tl.constexpr):
        offsets = tl.arange(0, B)
        mask = offsets < N
        tl.store(Y + offsets, tl.load(X + offsets, mask=mask) + 1, mask=mask)

    count = torch.cuda.device_count()
    emit("count", {"count": count})
    for index in range(count):
        t0 = time.time()
        info = {"index": index}
        try:
            info["name"] = torch.cuda.get_device_name(index)
            x = torch.arange(64, device="cuda:%d" % index, dtype=torch.float32)
            y = torch.empty_like(x)
            with torch.cuda.device(index):
                fleetcheck_add_one[(1,)](x, y, 64, B=64)
            torch.cuda.synchronize(index)
            info["ok"] = bool((y == x + 1).all())
            if not info["ok"]:
                info["error"] = "wrong result: y != x + 1"
        except BaseException as e:
            info["ok"] = False
            info["error"] = err(e)
        info["seconds"] = round(time.time() - t0, 3)
        emit("device%d" % index, info)
except BaseException as e:
    emit("error", {"error": err(e)})
emit("done", {})
'''

GPUSTATE_SCRIPT = GPU_STATE + "import json\nprint(json.dumps(gpu_state()))\n"


# --- core/state -----------------------------------------------------------------------------------

if TYPE_CHECKING:
    from typing import Any


class ProbeState:

    deep: bool
    deadline: Deadline
    tmp: str  # the probe's own temp dir, removed at its end
    env: dict[str, str]
    workload_python: str

    facts: dict[str, Any]

    proc: dict[str, Any]  # /proc/driver/nvidia (proc_nvidia)
    dev_names: list[str]  # /dev/nvidia*
    amd: dict[str, Any]  # KFD's topology, /dev/kfd and /dev/dri, amdgpu (amd_facts)
    vendor: str  # "nvidia" or "amd": whose checks answer
    possible_gpu: bool  # a GPU of either vendor is there to be reached
    mountinfo: str | None
    proc_devices: str

    own_name: str  # "" until gathering names them
    own_missing: list[str]

    stack: Spawned  # the workload's Python stack (STACK_SCRIPT)
    driver_in_stack: bool  # the stack reads the GPU state and the driver layer
    alone: bool  # a tight process limit: the workload's own start first, alone
    deep_run: Spawned | None
    cuda: Spawned | None
    smi: Spawned | None
    ldconfig: Spawned | None
    compile: Spawned | None
    hip: Spawned | None
    rocminfo: Spawned | None
    gpustate: Spawned | None

    stack_result: dict[str, Any]
    stages: dict[str, dict[str, Any]]
    deep_result: dict[str, Any] | None
    deep_stages: dict[str, dict[str, Any]]
    ld_result: dict[str, Any] | None
    cuda_info: dict[str, Any]
    smi_info: dict[str, Any]
    hip_info: dict[str, Any]
    rocminfo_info: dict[str, Any]
    gpu_state_info: dict[str, Any]
    pyinfo: dict[str, Any]  # the workload interpreter's executable, version, include dir
    gpus: list[dict[str, Any]]

    compiler: dict[str, Any]
    compile_result: dict[str, Any] | None
    compile_argv: list[str] | None
    compile_by: str | None  # "triton", "deadline", None (the probe's own test compile)

    limits: dict[str, Any] | None  # the job's limits (objects.read_limits), read once
    statuses: dict[str, str]  # each check's status so far, in causal order
    no_gpu: bool
    triton_missing: bool
    stack_failed: bool

    def __init__(self, deep: bool, deadline: Deadline, workload_python: str | None,
                 tmp: str) -> None:
        self.deep = deep
        self.deadline = deadline
        self.tmp = tmp
        self.env = dict(os.environ)
        self.workload_python = workload_python or sys.executable
        self.facts = {}
        self.own_name = ""
        self.mountinfo = None
        self.hip_info = {}
        self.compile_argv = None
        self.compile_by = None
        self.limits = None


# --- facts/system ---------------------------------------------------------------------------------

def os_release():
    text = read_text(host_path("/etc/os-release")) or read_text(host_path("/usr/lib/os-release"))
    values = {}
    for line in (text or "").splitlines():
        if "=" in line and not line.startswith("#"):
            key, _, value = line.partition("=")
            values[key.strip()] = value.strip().strip("\"'")
    return {"id": values.get("ID"), "version_id": values.get("VERSION_ID"),
            "pretty_name": values.get("PRETTY_NAME"),
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


# --- facts/where ----------------------------------------------------------------------------------

DMI_VIRT = (("QEMU", "qemu"), ("KVM", "kvm"), ("VMware", "vmware"), ("VirtualBox", "oracle"),
            ("innotek", "oracle"), ("Xen", "xen"), ("Microsoft Corporation", "microsoft"),
            ("Amazon EC2", "amazon"), ("Google", "google"), ("Parallels", "parallels"),
            ("BHYVE", "bhyve"))
CGROUP_SIGNS = (("kubepods", "kubernetes"), ("libpod", "podman"), ("/docker", "docker"),
                ("docker-", "docker"), ("lxc.payload", "lxc"), ("/lxc/", "lxc"))


def _pid1_container():
    environ = read_text(host_path("/proc/1/environ")) or ""
    for item in environ.split("\0"):
        if item.startswith("container="):
            return item.split("=", 1)[1] or None
    return None


def where_it_runs():
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


# --- facts/nvidia ---------------------------------------------------------------------------------

def proc_nvidia():
    version_text = read_text(host_path("/proc/driver/nvidia/version"))
    module = None
    if version_text:
        match = re.search(r"Kernel Module(?: for \S+)?\s+([\d.]+)", version_text)
        module = match.group(1) if match else None
    gpus = []
    base = host_path("/proc/driver/nvidia/gpus")
    try:
        buses = sorted(os.listdir(base))
    except OSError:
        buses = []
    for bus in buses:
        info = read_text(os.path.join(base, bus, "information")) or ""
        fields = {}
        for line in info.splitlines():
            key, sep, value = line.partition(":")
            if sep:
                fields[key.strip()] = value.strip()
        minor = fields.get("Device Minor")
        gpus.append({"bus": bus, "model": fields.get("Model"), "uuid": fields.get("GPU UUID"),
                     "minor": int(minor) if minor and minor.isdigit() else None})
    return {"version_text": first_line(version_text), "kernel_module": module, "gpus": gpus}


def dev_nodes():
    try:
        return sorted(name for name in os.listdir(host_path("/dev")) if name.startswith("nvidia"))
    except OSError:
        return []


def open_result(path):
    try:
        fd = os.open(path, os.O_RDWR | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        return errno.errorcode.get(exc.errno, str(exc.errno))  # type: ignore[arg-type]
    os.close(fd)
    return "ok"


def nodes_summary(name, what, bad, count, none_there, container):
    if all(code == "ENOENT" for code in bad.values()) and len(bad) == count:
        return none_there + (" (not passed into the %s container)" % container
                             if container else "")
    return "/dev/%s %s" % (name, what) + (
        "; %d of %d nodes unusable" % (len(bad), count) if len(bad) > 1 else "")


def parse_smi(result):
    out = {"rc": result["rc"], "timed_out": result["timed_out"]}
    if result["error"]:
        out["error"] = result["error"]
        return out
    if result["timed_out"]:
        out["error"] = "nvidia-smi timed out"
        return out
    if result["rc"] != 0:
        out["error"] = first_line(result["stdout"]) or first_line(result["stderr"])
        return out
    gpus = []
    for line in result["stdout"].splitlines():
        cells = [cell.strip() for cell in line.split(",")]
        if len(cells) < 6 or not cells[0].isdigit():
            continue
        memory = cells[3]
        gpus.append({"index": int(cells[0]), "name": cells[1], "uuid": cells[2],
                     "memory_mib": int(memory) if memory.isdigit() else None,
                     "compute_capability": cells[4] if re.match(r"^\d+\.\d+$", cells[4]) else None,
                     "driver": cells[5]})
    out["gpus"] = gpus
    return out


def nvswitch_devices():
    try:
        return sorted(os.listdir(host_path("/proc/driver/nvidia-nvswitch/devices")))
    except OSError:
        return []


# --- facts/cache ----------------------------------------------------------------------------------

def mount_of(path, mountinfo):
    best = None
    for line in (mountinfo or "").splitlines():
        fields = line.split()
        if len(fields) < 6:
            continue
        point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4])
        inside = path == point or path.startswith(point.rstrip("/") + "/")
        if inside and (best is None or len(point) >= len(best[0])):
            best = (point, fields[5])
    return best


NETWORK_FS = frozenset({"nfs", "nfs4", "lustre", "gpfs", "beegfs", "cifs", "smb3", "smbfs",
                        "ceph", "glusterfs", "afs", "ocfs2", "gfs2", "wekafs", "orangefs"})


def network_fs(fstype):
    fstype = (fstype or "").lower()
    return fstype in NETWORK_FS or (fstype.startswith("fuse.") and fstype != "fuse.lxcfs")


def mount_fs(path, mountinfo):
    best = None
    for line in (mountinfo or "").splitlines():
        head, sep, tail = line.partition(" - ")
        fields, rest = head.split(), tail.split()
        if not sep or len(fields) < 5 or not rest:
            continue
        point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4])
        inside = path == point or path.startswith(point.rstrip("/") + "/")
        if inside and (best is None or len(point) >= len(best[0])):
            best = (point, rest[0], rest[1] if len(rest) > 1 else "")
    return best


def existing_ancestor(path):
    while path and not os.path.exists(path):
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    return path


def triton_cache_dir(env):
    if env.get("TRITON_CACHE_DIR"):
        return env["TRITON_CACHE_DIR"]
    home = env.get("TRITON_HOME") or os.path.expanduser("~/")
    return os.path.join(home, ".triton", "cache")


def cuda_cache_dir(env):
    if env.get("CUDA_CACHE_PATH"):
        return env["CUDA_CACHE_PATH"]
    return os.path.join(env.get("HOME") or os.path.expanduser("~/"), ".nv", "ComputeCache")


WORKLOAD_ENV_KEYS = ("TMPDIR", "TEMP", "TMP", "TRITON_CACHE_DIR", "TRITON_HOME", "HOME",
                     "TORCHINDUCTOR_CACHE_DIR")


def missing_dirs(path):
    missing = []
    while path and not os.path.exists(path):
        missing.append(path)
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    return missing


PROBE_CACHE_DIRS = ("-fresh", "-fresh-warm", "-deep")


def remove_throwaway(name, cache, env, created):
    import shutil
    import tempfile
    places = [cache, tempfile.gettempdir()] + [env.get(k) for k in ("TMPDIR", "TMP", "TEMP")]
    for where in [*places, "/tmp", "/var/tmp", "/usr/tmp"]:
        path = os.path.join(where, name) if where else None
        if path and os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
    for suffix in PROBE_CACHE_DIRS:
        path = os.path.join(cache, name + suffix) if cache else None
        if path and os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
    try:
        keys = os.listdir(cache) if cache and not os.path.islink(cache) else []
    except OSError:
        keys = []
    for key in keys:
        entry = os.path.join(cache, key)
        try:
            mine = [n for n in os.listdir(entry) if n.startswith("tmp.pid_") and n.endswith(
                "_" + name)] if os.path.isdir(entry) and not os.path.islink(entry) else []
        except OSError:
            continue
        for found in mine:
            shutil.rmtree(os.path.join(entry, found), ignore_errors=True)
        if mine:
            try:
                os.rmdir(entry)  # only if the proof made it: empty once its tmp dir is gone
            except OSError:
                pass
    for path in created:
        try:
            os.rmdir(path)
        except OSError:
            pass


# --- facts/env ------------------------------------------------------------------------------------

def env_on(value):
    return (value or "").strip().lower() in ("1", "true", "on")


def env_one(value):
    return (value or "").strip() == "1"


def env_set(value):
    return bool((value or "").strip())


ENV_EFFECTS = (
    ("TRITON_INTERPRET", env_on, "moves", "triton",
     "every @triton.jit kernel runs in Triton's interpreter on the CPU (numpy), about 10,000x "
     "slower, and reports success"),
    ("VLLM_TARGET_DEVICE", lambda v: (v or "").strip().lower() == "cpu", "moves", "vllm",
     "vLLM selects its CPU platform: every model runs on the CPU"),
    ("TORCHINDUCTOR_TRITON_DISABLE_DEVICE_DETECTION", env_one, "moves", "inductor",
     "inductor's has_triton() is False: torch.compile of CUDA code raises TritonMissing"),
    ("TORCH_COMPILE_DISABLE", env_one, "slows", "inductor",
     "torch.compile does nothing: models run eagerly, without inductor's Triton kernels"),
    ("XFORMERS_FORCE_DISABLE_TRITON", env_one, "slows", "xformers",
     "xformers' Triton kernels are off (its other kernels run instead)"),
    *((name, test, "slows", "triton", text) for name, test, text in (
        ("TRITON_ALWAYS_COMPILE", env_on,
         "every kernel is compiled again in every process (the cache is not used)"),
        ("TRITON_DEBUG", env_on, "kernels carry device-side asserts: slower"),
        ("TRITON_KERNEL_DUMP", env_on,
         "every kernel's IR is written to TRITON_DUMP_DIR: slower compiles, disk use"),
        ("TRITON_KERNEL_OVERRIDE", env_on,
         "kernels are replaced by files from TRITON_OVERRIDE_DIR: what runs is not the code"),
        ("TRITON_OVERRIDE_ARCH", env_set,
         "kernels are compiled for {v}, not for the GPU's own architecture"),
        ("TRITON_F32_DEFAULT", env_set,
         "fp32 dot products use {v}: results differ from the default precision"),
        ("TRITON_DEFAULT_FP_FUSION", lambda v: (v or "").strip().lower() in ("0", "false", "off"),
         "no fused multiply-add: slower kernels, other rounding"),
        ("TRITON_FORCE_DISABLE_FP_FUSION", env_on,
         "no fused multiply-add: slower kernels, other rounding"),
        ("DISABLE_PTXAS_OPT", env_on, "ptxas optimisation is off: slower kernels"),
        ("PTXAS_OPTIONS", env_set, "ptxas runs with extra options {v}"),
        ("TRITON_ENABLE_ASAN", env_on, "kernels run under a sanitizer: slower"),
        ("TRITON_INSTRUMENTATION_MODE", env_set,
         "kernels are instrumented ({v}): slower"),
        ("MLIR_ENABLE_DUMP", env_on, "every compile dumps its MLIR: slower"),
        ("LLVM_IR_ENABLE_DUMP", env_on, "every compile dumps its LLVM IR: slower"),
        ("TRITON_ENABLE_LLVM_DEBUG", env_on, "LLVM debug output: slower compiles"),
        ("TRITON_CACHE_MANAGER", env_set,
         "kernels are cached by {v}, not in TRITON_CACHE_DIR"),
        ("TRITON_REMOTE_CACHE_BACKEND", env_set,
         "kernels are cached remotely ({v})"),
        ("TRITON_MOCK_PTX_VERSION", env_set, "PTX version forced to {v}"),
    )),
    ("CUDA_LAUNCH_BLOCKING", env_one, "slows", "torch",
     "every CUDA launch waits for the GPU to finish: much slower"),
    ("PYTORCH_NO_CUDA_MEMORY_CACHING", env_one, "slows", "torch",
     "every tensor allocation goes to the driver: slower"),
    ("TORCHINDUCTOR_FORCE_DISABLE_CACHES", env_one, "slows", "inductor",
     "inductor compiles everything again in every process"),
    ("TORCH_COMPILE_DEBUG", env_one, "slows", "inductor",
     "every compile writes debug traces: slower, disk use"),
    ("FLA_DISABLE_TENSOR_CACHE", env_one, "slows", "fla", "FLA's tensor cache is off: slower"),
    ("VLLM_DISABLE_COMPILE_CACHE", env_one, "slows", "vllm",
     "vLLM compiles its graphs again at every start"),
)


def env_findings(env, installed):
    found = []
    for name, test, effect, library, text in ENV_EFFECTS:
        value = env.get(name)
        if value is None or library not in installed or not test(value):
            continue
        found.append({"variable": name, "value": value, "effect": effect, "library": library,
                      "text": text.replace("{v}", value)})
    return found


# --- evaluation/classify --------------------------------------------------------------------------

def message_causes(text):
    found: list = []
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    for pattern, cause in MESSAGE_RULES:
        if any(cause == seen for seen, _ in found):
            continue
        for line in lines:
            if re.search(pattern, line):
                found.append((cause, line))
                break
    return found


def classify_error(text):
    found = message_causes(text)
    return found[0][0] if found else None


# --- evaluation/objects ---------------------------------------------------------------------------

STRERRORS = dict((os.strerror(n), name) for n, name in sorted(errno.errorcode.items()))

RLIMITS = (("AS", "ulimit -v"), ("DATA", "ulimit -d"), ("NOFILE", "ulimit -n"),
           ("NPROC", "ulimit -u"), ("FSIZE", "ulimit -f"), ("MEMLOCK", "ulimit -l"),
           ("STACK", "ulimit -s"))

RLIMIT_ITEMS = {"AS": ("as", "unlimited"), "DATA": ("data", "unlimited"),
                "NOFILE": ("nofile", "65536"), "NPROC": ("nproc", "unlimited"),
                "FSIZE": ("fsize", "unlimited"), "MEMLOCK": ("memlock", "unlimited"),
                "STACK": ("stack", "unlimited")}

LIMIT_TEXTS = ((r"File size limit exceeded|terminated with signal 25\b", "EFBIG"),
               (r"can't start new thread|Thread creation failed", "EAGAIN"),
               (r"out of memory allocating|virtual memory exhausted", "ENOMEM"),
               (r"Killed signal terminated program|terminated with signal 9\b", "SIGKILL"))

ERRNO_LIMITS = {
    "ENOMEM": (("AS", "address_space_limit"), ("DATA", "address_space_limit"),
               ("memory.max", "memory_cgroup_limit")),
    "EAGAIN": (("pids.max", "process_limit"), ("NPROC", "process_limit"),
               ("AS", "address_space_limit"), ("memory.max", "memory_cgroup_limit")),
    "EMFILE": (("NOFILE", "open_files_limit"),),
    "ENFILE": (("fs.file-max", "file_table_limit"),),
    "EFBIG": (("FSIZE", "file_size_limit"),),
    "SIGKILL": (("memory.max", "memory_cgroup_limit"),),
}

LIMIT_CAUSES = frozenset(cause for limits in ERRNO_LIMITS.values() for _, cause in limits)

KNOWN_PATHS = {"/sbin/ldconfig": "ldconfig_binary_missing"}


def parse_oserror(text):
    match = re.search(r"\[Errno (\d+)\] ([^:'\n]+)(?:: '([^'\n]*)')?(?: -> '([^'\n]*)')?",
                      text or "")
    if match:
        return {"errno": errno.errorcode.get(int(match.group(1))), "strerror": match.group(2),
                "filename": match.group(3), "filename2": match.group(4)}
    for line in (text or "").splitlines():
        for message, name in STRERRORS.items():
            if len(message) > 12 and message in line:
                head = re.sub(r"^\S+?: ", "", line[:line.index(message)])
                paths = re.findall(r"(\S*/[^\s'‘’\":,]+)", head)
                return {"errno": name, "strerror": message,
                        "filename": paths[-1].lstrip("'‘\"") if paths else None,
                        "filename2": None}
    for pattern, name in LIMIT_TEXTS:
        match = re.search(pattern, text or "")
        if match:
            return {"errno": name, "strerror": match.group(0), "filename": None,
                    "filename2": None}
    return None


def loader_object(text):
    match = re.search(r"(/[^\s:]+): failed to map segment from shared object", text or "")
    if match:
        return "map", match.group(1)
    if "failed to map segment" in (text or ""):
        return "map", None
    match = re.search(r"([\w.+-]+\.so[\w.]*): cannot open shared object file", text or "")
    if match:
        return "missing", match.group(1)
    return None


def human(value):
    if not isinstance(value, int) or value < 0:
        return "unlimited"
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if value >= size:
            return "%.4g %s" % (value / float(size), unit)
    return str(value)


def number(text):
    text = (text or "").strip()
    return int(text) if text.isdigit() else None


def read_limits():
    limits: dict = {}
    for name, shell in RLIMITS:
        try:
            soft, hard = resource.getrlimit(getattr(resource, "RLIMIT_" + name))
        except (AttributeError, ValueError, OSError):
            continue
        limits[name] = {"soft": None if soft == resource.RLIM_INFINITY else soft,
                        "hard": None if hard == resource.RLIM_INFINITY else hard,
                        "shell": shell}
    for group in cgroup_chain(own_cgroup()):
        for name, count in (("memory.max", "memory"), ("pids.max", "pids")):
            value = number(read_text(cgroup_file(group, name)))
            if value is not None and name not in limits:
                limits[name] = {"soft": value, "path": "/sys/fs/cgroup" + (
                    group.rstrip("/") + "/" + name), "group": group,
                    "current": number(read_text(cgroup_file(group, count + ".current"))),
                    "peak": number(read_text(cgroup_file(group, count + ".peak")))}
    files = (read_text(host_path("/proc/sys/fs/file-nr")) or "").split()
    most = number(read_text(host_path("/proc/sys/fs/file-max")))
    if most is not None and most < 1 << 62:
        limits["fs.file-max"] = {"soft": most, "path": "/proc/sys/fs/file-max",
                                 "current": number(files[0]) if files else None}
    owner = limit_owner(own_cgroup(), rlimits=True)
    for name, limit in limits.items():
        limit["by"] = list(owner_of(name, limit, owner))
        limit["source"] = limit_source(name, limit)
    return limits


def owner_of(name, limit, owner):
    if name in ("memory.max", "pids.max") and limit.get("group") not in (None, "", "/"):
        return limit_owner(limit["group"])
    return tuple(owner)


def limit_owner(group, env=None, rlimits=False):
    env = os.environ if env is None else env
    group = group or ""
    job = re.search(r"/job_(\d+)", group)
    if env.get("SLURM_JOB_ID") or (job and "slurm" in group):
        return "slurm", env.get("SLURM_JOB_ID") or (job.group(1) if job else None)
    for word, kind in (("kubepods", "kubernetes"), ("libpod", "podman"), ("docker", "docker"),
                       ("lxc", "lxc")):
        if word in group:
            return kind, None
    if group in ("", "/"):
        container = where_it_runs()["container"]
        if container:
            return container, None
    parts = [part for part in group.split("/") if part]
    logins = [part for part in parts if re.match(r"user-\d+\.slice$|session-", part)]
    if logins:
        return "login", logins[0]
    units = [part for part in parts if re.search(r"\.(service|scope|slice)$", part)
             and part not in ("system.slice", "init.scope", "-.slice", "machine.slice")]
    services = [part for part in units if part.endswith(".service")]
    if rlimits and services:
        return "unit", services[-1]
    if units and not rlimits:
        return "unit", units[-1]
    return None, None


def limit_source(name, limit):
    kind, who = limit.get("by") or (None, None)
    if name == "fs.file-max":
        return "the kernel's table of open files, for the whole node (sysctl fs.file-max)"
    if name in ("memory.max", "pids.max"):
        where = {"slurm": "Slurm job %s's cgroup" % (who or "?"),
                 "docker": "the Docker container's cgroup", "podman": "the Podman container's "
                 "cgroup", "kubernetes": "the Kubernetes pod's cgroup",
                 "lxc": "the LXC container's cgroup", "unit": "the cgroup of %s" % who,
                 "login": "the cgroup of %s" % who}.get(kind or "", "the cgroup %s" % (
                     limit.get("group") or "/"))
        return where
    soft, hard = limit.get("soft"), limit.get("hard")
    head = "soft limit; hard %s" % ("unlimited" if hard is None else hard) if (
        soft is not None and (hard is None or hard > soft)) else "soft = hard limit"
    where = {"slurm": "propagated by Slurm (job %s) from the shell that submitted it "
             "(PropagateResourceLimits)" % (who or "?"),
             "docker": "the Docker container's (docker run --ulimit, or dockerd's "
             "default-ulimits)", "podman": "the Podman container's (podman run --ulimit)",
             "kubernetes": "the container runtime's default (Kubernetes sets none per pod)",
             "lxc": "the LXC container's (lxc.prlimit)", "unit": "the systemd unit %s's "
             "(Limit%s=)" % (who, name), "login": "the login's (pam_limits: "
             "/etc/security/limits.conf)"}.get(kind or "", "inherited from what started the "
                                                "job")
    return "%s; %s" % (head, where)


def limit_how(name, limit):
    kind, who = limit.get("by") or (None, None)
    if name == "fs.file-max":
        return ("sysctl -w fs.file-max=%d (and in /etc/sysctl.d/), on the host of a container; "
                "find what holds them (/proc/sys/fs/file-nr)" % (max(limit["soft"] * 2, 1 << 20)))
    if name in ("memory.max", "pids.max"):
        memory = name == "memory.max"
        hows = {
            "slurm": "submit with more memory (sbatch --mem=, --mem-per-cpu=; cgroup.conf "
                     "ConstrainRAMSpace)" if memory else "ask the admins to raise TasksMax= "
                     "of slurmstepd.scope (pids.max)",
            "docker": "docker run --memory=<a larger size> (docker update --memory on a "
                      "running container)" if memory else "docker run --pids-limit=<a larger "
                      "count> (or -1)",
            "podman": "podman run --memory=<a larger size>" if memory else "podman run "
                      "--pids-limit=<a larger count> (or -1)",
            "kubernetes": "raise resources.limits.memory in the pod spec" if memory else
                          "raise the kubelet's podPidsLimit",
            "lxc": "raise the container's memory (Proxmox: pct set VMID --memory; "
                   "lxc.cgroup2.memory.max)" if memory else "raise lxc.cgroup2.pids.max in "
                   "the container's config"}
        if kind in hows:
            return hows[kind]
        if kind in ("unit", "login") and who:
            return "systemctl set-property %s %s=<a larger value> (or in the unit)%s" % (
                who, "MemoryMax" if memory else "TasksMax",
                "; a user's slices: UserTasksMax / TasksMax= of user-.slice" if (
                    kind == "login" and not memory) else "")
        return ("raise the job's or container's memory.max: docker --memory, Slurm --mem, "
                "systemd MemoryMax=" if memory else "raise the cgroup's pids.max: docker "
                "--pids-limit, systemd TasksMax=")
    item, target = RLIMIT_ITEMS.get(name, (name.lower(), "unlimited"))
    flag = (limit.get("shell") or "ulimit").split()[-1]
    soft, hard = limit.get("soft"), limit.get("hard")
    steps = []
    if soft is not None and (hard is None or hard > soft):
        steps.append("ulimit -S %s %s in the job's script (the hard limit allows it)" % (
            flag, "unlimited" if hard is None else hard))
    ulimit = "-1" if target == "unlimited" else target
    hows = {
        "slurm": "ulimit %s %s in the shell that runs sbatch/srun (Slurm propagates its limits"
                 "; srun --propagate=NONE takes slurmd's), or the admins' "
                 "PropagateResourceLimitsExcept=%s in slurm.conf and Limit%s= in "
                 "slurmd.service" % (flag, target, name, name),
        "docker": "docker run --ulimit %s=%s:%s (or default-ulimits in "
                  "/etc/docker/daemon.json)" % (item, ulimit, ulimit),
        "podman": "podman run --ulimit %s=%s:%s" % (item, ulimit, ulimit),
        "kubernetes": "raise the container runtime's default (Limit%s= in containerd.service "
                      "or the CRI's default ulimits)" % name,
        "lxc": "lxc.prlimit.%s = %s in the container's config" % (item, target),
        "unit": "Limit%s=%s in %s (systemctl edit %s), then restart it" % (
            name, "infinity" if target == "unlimited" else target, who, who),
        "login": "'%s hard %s %s' in /etc/security/limits.conf, then a new login" % (
            login_name(), item, target)}
    steps.append(hows.get(kind or "", "ulimit %s %s where the job starts (as root, or within "
                          "the hard limit); the hard limit is set by what starts it: %s in "
                          "/etc/security/limits.conf (a login), Limit%s= (a systemd unit), "
                          "docker run --ulimit %s=%s:%s (a container), the submitting shell's "
                          "ulimit (Slurm's PropagateResourceLimits)" % (
                              flag, target, item, name, item, ulimit, ulimit)))
    return "; ".join(steps)


def limited(limits, *names):
    for name in names:
        if (limits.get(name) or {}).get("soft") is not None:
            return name, limits[name]
    return None, None


def near(limit):
    used = max(limit.get("current") or 0, limit.get("peak") or 0)
    return bool(limit.get("soft")) and used * 10 >= limit["soft"] * 9


def limit_order(errno_name, limits):
    rules = [(n, c) for n, c in ERRNO_LIMITS.get(errno_name or "", ()) if limited(limits, n)[0]]
    if errno_name == "EAGAIN" and limited(limits, "NPROC")[0] and limited(limits, "pids.max")[0]:
        if limits["NPROC"]["soft"] < limits["pids.max"]["soft"] and not near(limits["pids.max"]):
            rules.sort(key=lambda rule: rule[0] != "NPROC")
    if errno_name == "ENOMEM" and limited(limits, "memory.max")[0] and near(limits["memory.max"]):
        rules.sort(key=lambda rule: rule[0] != "memory.max")
    return rules


def limit_values(name, limit):
    shell = limit.get("shell") or name
    if name in ("AS", "DATA", "FSIZE", "MEMLOCK", "STACK"):
        value = human(limit["soft"])
        if not value.endswith(" KiB"):
            value += " (%s KiB)" % (limit["soft"] // 1024)
    elif name == "memory.max":
        value = human(limit["soft"])
    else:
        value = str(limit["soft"])
    if limit.get("current") is not None:
        value += " (%s in use%s)" % (human(limit["current"]) if name == "memory.max" else
                                     limit["current"], ", peak %s" % human(limit["peak"]) if (
                                         name == "memory.max" and limit.get("peak")) else "")
    return {"limit": "%s (%s)" % (name, shell) if name in dict(RLIMITS) else limit.get(
        "path", name), "value": value, "path": limit.get("path", ""),
        "source": limit.get("source") or limit_source(name, limit),
        "how": limit_how(name, limit)}


CUDA_FILES = 64


def user_tasks(uid=None):
    uid = os.getuid() if uid is None else uid
    try:
        pids = [name for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return None
    count = 0
    for pid in pids:
        status = read_text("/proc/%s/status" % pid, 4096) or ""
        owner = re.search(r"^Uid:\s+(\d+)", status, re.M)
        threads = re.search(r"^Threads:\s+(\d+)", status, re.M)
        if owner and threads and int(owner.group(1)) == uid:
            count += int(threads.group(1))
    return count


START_TASKS = 64


def system_tasks():
    fields = (read_text(host_path("/proc/loadavg")) or "").split()
    total = fields[3].partition("/")[2] if len(fields) > 3 else ""
    return int(total) if total.isdigit() else None


def task_headroom():
    room = []
    try:
        soft = resource.getrlimit(resource.RLIMIT_NPROC)[0]
    except (AttributeError, ValueError, OSError):
        soft = resource.RLIM_INFINITY
    if soft != resource.RLIM_INFINITY and soft <= 1 << 16 and os.getuid() != 0:
        total = system_tasks()
        if total is not None and soft - total >= START_TASKS:
            room.append(soft - total)  # a bound: this user's tasks are some of them
        else:
            tasks = user_tasks()
            if tasks is not None:
                room.append(soft - tasks)
    for group in cgroup_chain(own_cgroup()):
        most = number(read_text(cgroup_file(group, "pids.max")))
        if most is not None:
            room.append(most - (number(read_text(cgroup_file(group, "pids.current"))) or 0))
    return min(room) if room else None


def cuda_limit(code, limits, nodes_open):
    found = []
    if code == 304:
        name, limit = limited(limits, "pids.max")
        if name and (limit.get("current") or 0) + START_TASKS >= limit["soft"]:
            found.append(("process_limit", limit_values(name, limit)))
        name, limit = limited(limits, "NPROC")
        tasks = user_tasks() if name else None
        if name and tasks is not None and tasks + START_TASKS >= limit["soft"]:
            values = limit_values(name, limit)
            values["value"] += " (%d tasks of this user now)" % tasks
            found.append(("process_limit", values))
    if code in (304, 100) and (code == 304 or nodes_open):
        name, limit = limited(limits, "NOFILE")
        if name and limit["soft"] < CUDA_FILES:
            found.append(("open_files_limit", limit_values(name, limit)))
    return found[0] if found else None


def limit_causes(errno_name, limits):
    return [(cause, limit_values(name, limits[name]))
            for name, cause in limit_order(errno_name, limits)]


def fs_state(path, mountinfo):
    where = path
    while where and not os.path.exists(where):
        parent = os.path.dirname(where)
        if parent == where:
            break
        where = parent
    state = {"at": where}
    try:
        info = os.statvfs(where)
        state.update(free_bytes=info.f_bavail * info.f_frsize, free_inodes=info.f_favail,
                     inodes=info.f_files, read_only=bool(info.f_flag & os.ST_RDONLY),
                     noexec=bool(info.f_flag & getattr(os, "ST_NOEXEC", 8)))
    except OSError:
        pass
    mount = mount_of(os.path.realpath(where), mountinfo)
    if mount:
        options = mount[1].split(",")
        state["mount"] = mount[0]
        state["read_only"] = state.get("read_only") or "ro" in options
        state["noexec"] = state.get("noexec") or "noexec" in options
    return state


def where_mounted(state):
    at, mount = state.get("at") or "", state.get("mount") or ""
    return "%s (mount %s)" % (at, mount) if mount and mount != at else at or mount


def login_name():
    try:
        import pwd
        return pwd.getpwuid(os.geteuid()).pw_name
    except (ImportError, KeyError):
        return str(os.geteuid())


def owner_name(uid):
    try:
        import pwd
        return "%s (uid %d)" % (pwd.getpwuid(uid).pw_name, uid)
    except (ImportError, KeyError):
        return "uid %d" % uid


def walk(path):
    seen: list = []
    current = "/"
    names = [n for n in (path or "").split("/") if n]
    uid = os.geteuid()
    for index, name in enumerate(names):
        current = os.path.join(current, name)
        last = index == len(names) - 1
        try:
            info = os.lstat(current)
        except OSError as exc:
            kind = "no_search" if exc.errno == errno.EACCES else "missing"
            return seen, {"kind": kind, "component": current}
        entry = {"path": current, "uid": info.st_uid, "mode": "%04o" % stat.S_IMODE(
            info.st_mode)}
        seen.append(entry)
        if stat.S_ISLNK(info.st_mode):
            target = os.readlink(current)
            entry["link"] = target
            resolved = os.path.join(os.path.dirname(current), target)
            try:
                os.stat(current)
            except OSError as exc:
                kind = "loop" if exc.errno == errno.ELOOP else "dangling"
                return seen, {"kind": kind, "component": current, "target": target,
                              "resolved": os.path.normpath(resolved)}
            current = os.path.realpath(current)
            info = os.stat(current)
        if not last and not stat.S_ISDIR(info.st_mode):
            return seen, {"kind": "not_dir", "component": current}
        if stat.S_ISDIR(info.st_mode) and not os.access(current, os.X_OK):
            return seen, {"kind": "foreign" if info.st_uid != uid else "no_search",
                          "component": current, "uid": info.st_uid}
    return seen, None


def denied(path, seen):
    uid = os.geteuid()
    for entry in reversed(seen):
        where = entry["path"]
        is_dir = os.path.isdir(where)
        if not os.access(where, os.W_OK | (os.X_OK if is_dir else 0)) or not os.access(
                where, os.R_OK):
            return {"kind": "foreign" if entry["uid"] != uid else "no_write",
                    "component": where, "uid": entry["uid"]}
        if is_dir:
            break
    return None


def explain(errno_name, path, text, mountinfo, limits, place=None, top=None):
    values = {"path": path or "", "errno": errno_name or "", "component": path or "",
              "user": owner_name(os.geteuid()),
              "mount": "the file system of %s" % (path or top or "the cache and temp dirs")}
    found = []
    loader = loader_object(text)
    if loader and loader[0] == "map":
        values["path"] = values["component"] = loader[1] or ""
        state = fs_state(loader[1], mountinfo) if loader[1] else {}
        values["mount"] = where_mounted(state)
        if state.get("noexec"):
            found += [(c, values) for c in (PLACE_RULES.get(place, {}).get("noexec"), "path_noexec")
                      if c]
        found += [(cause, dict(values, **named)) for cause, named in limit_causes(
            "ENOMEM", limits)]
        return [*found, ("loader_map_failed", values)]
    if loader and loader[0] == "missing":
        return [("shared_library_missing", dict(values, library=loader[1]))]
    if errno_name in ERRNO_LIMITS:
        found += [(cause, dict(values, **named)) for cause, named in limit_causes(
            errno_name, limits)]
        return found if errno_name == "SIGKILL" else [*found, ("process_limits", values)]
    own, generic = PLACE_RULES.get(place, {}), None
    if not path:
        rule = ERRNO_RULES.get(errno_name or "")
        if top and errno_name in ("ENOSPC", "EDQUOT"):
            state = fs_state(top, mountinfo)
            values.update(path=top, component=top, mount=where_mounted(state),
                          free=human(state.get("free_bytes")))
            if state.get("free_inodes") == 0 and (state.get("free_bytes") or 0) > 0:
                return [("fs_out_of_inodes", values)]
        return [(c, values) for c in (own.get(errno_name or ""), rule) if c]
    if path in KNOWN_PATHS and errno_name == "ENOENT" and not os.path.exists(path):
        return [(KNOWN_PATHS[path], values)]
    if errno_name == "ENAMETOOLONG":
        parts, long_name = path.split("/"), None
        for index, part in enumerate(parts):
            if len(part.encode("utf-8", "surrogateescape")) > 255:
                long_name = "/".join(parts[:index + 1])
                break
        state = fs_state(os.path.dirname(long_name or path) or "/", mountinfo)
        values.update(component=long_name or path, mount=where_mounted(state))
        return [*found, ("path_name_too_long", values)]
    seen, finding = walk(path)
    values["missing"] = "%s %s" % (errno_name, path)
    state = fs_state(path, mountinfo)
    values["mount"] = where_mounted(state)
    if finding:
        values["component"] = finding["component"]
        values["missing"] = "%s: %s" % (finding["kind"].replace("_", " "), finding["component"])
        if "uid" in finding:
            values.update(uid=str(finding["uid"]), owner=owner_name(finding["uid"]))
        if "target" in finding:
            values["target"] = finding.get("resolved") or finding["target"]
        generic = {"dangling": "path_dangling_link", "loop": "path_link_loop",
                   "not_dir": "path_not_a_dir", "foreign": "path_foreign_owner",
                   "no_search": "path_permission_denied", "missing": "path_missing"}[
                       finding["kind"]]
    if errno_name in ("ENOSPC", "EDQUOT"):
        values["free"] = human(state.get("free_bytes"))
        if (errno_name == "ENOSPC" and state.get("free_inodes") == 0
                and (state.get("inodes") or 0) > 0 and (state.get("free_bytes") or 0) > 0):
            return [("fs_out_of_inodes", values)]
        generic = "disk_full" if errno_name == "ENOSPC" else "quota_exceeded"
    elif errno_name == "EROFS" or (errno_name in ("EACCES", "EPERM") and state.get("read_only")
                                   and not finding):
        generic = "path_read_only"
    elif errno_name in ("EACCES", "EPERM") and not finding:
        refused = denied(path, seen)
        if refused:
            values.update(component=refused["component"], uid=str(refused["uid"]),
                          owner=owner_name(refused["uid"]))
            generic = ("path_foreign_owner" if refused["kind"] == "foreign"
                       else "path_permission_denied")
    if generic is None:
        generic = ERRNO_RULES.get(errno_name or "") or "os_error"
        values["missing"] = values["missing"] if finding else "%s (%s)" % (
            errno_name, path)
    cause = own.get(errno_name or "")
    inside = top and values["component"].startswith(top.rstrip("/") + "/") and (
        errno_name not in ("ENOSPC", "EDQUOT", "EROFS"))
    order = (generic, cause) if inside else (cause, generic)
    return found + [(c, values) for c in order if c]


# --- evaluation/diagnose --------------------------------------------------------------------------

def inside(path, top):
    if not path or not top:
        return False
    for one, other in ((path, top), (os.path.realpath(path), os.path.realpath(top))):
        if one == other or one.startswith(other.rstrip("/") + "/"):
            return True
    return False


def place_of(path, places):
    for place in ("cache", "tmp"):
        for top in places.get(place) or []:
            if inside(path, top):
                return place, top
    return None, None


def first_text_line(text):
    for line in (text or "").splitlines():
        if line.strip():
            return line.strip()
    return ""


def object_causes(text, errno_name, filename, where, places, node):
    parsed = parse_oserror(text) or {}
    errno_name = errno_name or parsed.get("errno")
    filename = filename or parsed.get("filename")
    line = first_text_line(text)
    for one in (text or "").splitlines():
        if (parsed.get("strerror") and parsed["strerror"] in one) or "failed to map" in one:
            line = one.strip()
            break
    if not errno_name and "failed to map segment" not in (text or "") and (
            "cannot open shared object" not in (text or "")):
        return []
    if errno_name in ("ENOENT", "ENOEXEC") and filename and filename == places.get("cc"):
        return [("cc_env_invalid", line, {})]
    place, top = place_of(filename, places) if filename else (None, None)
    if place is None and where in ("cache", "tmp") and not filename:
        place, top = where, (places.get(where) or [None])[0]
    mapped = re.search(r"(/[^\s:]+): failed to map segment", text or "")
    if mapped and place is None:
        place, top = place_of(mapped.group(1), places)
    found = explain(errno_name, filename, text, node.get("mountinfo"), node.get("limits") or {},
                    place, top)
    return [(cause, line, values) for cause, values in found]


def compiler_causes(run, places, node):
    stderr = run.get("stderr") or ""
    found = []
    for cause, line in message_causes(stderr):
        if cause == "include_dir_unreadable":
            named = re.search(r": (/\S+): Permission denied", line)
            if named and place_of(named.group(1), places)[0] == "tmp":
                cause = "tmp_dir_unusable"
        found.append((cause, line, {"path": (re.findall(r"(/\S+): Permission", line)
                                             or [""])[0]}))
    objects = object_causes(stderr, None, None, "tmp", places, node)
    limits = [one for one in objects if one[2].get("limit")]
    objects = [one for one in objects if not one[2].get("limit")]
    found = limits + (objects + found if not found or found[0][0] == "tmp_dir_unusable" else (
        found + objects))
    if run.get("error"):
        found += object_causes(run["error"], run.get("errno"), run.get("filename"), None,
                               places, node)
    return found


def diagnoses(failure, places, node=None):
    node = node or {}
    for run in reversed(failure.get("compiler") or []):
        if run.get("rc") not in (0, None) or run.get("error"):
            return compiler_causes(run, places, node)
    text = failure.get("error") or ""
    if "No usable temporary directory" in text:
        return [("tmp_dir_unusable", first_text_line(text), {})]
    found = object_causes(text, failure.get("errno"), failure.get("filename"),
                          failure.get("where"), places, node)
    texts: list = [(cause, line, {}) for cause, line in message_causes(text)]
    if "cannot open shared object" in text:
        return texts + found
    return found + texts


def diagnose(failure, places, node=None):
    found = diagnoses(failure, places, node)
    if found:
        return found[0][0], found[0][1]
    runs = [r for r in failure.get("compiler") or [] if r.get("rc") not in (0, None)
            or r.get("error")]
    if runs:
        return None, first_text_line(runs[-1].get("stderr") or runs[-1].get("error"))
    return None, ""


# --- evaluation/limits ----------------------------------------------------------------------------

class Limits(ProbeState):

    def cause_label(self, cause):
        return cause_label(cause, self.vendor)

    def node_limits(self):
        if self.limits is None:
            self.limits = read_limits()
        return self.limits

    def limit_named(self, errno_name):
        for cause, values in explain(errno_name, None, "", None, self.node_limits()):
            if "limit" in values:
                return cause, values
        return None

    def helper_limit(self, result):
        if not result or result.get("timed_out"):
            return None
        if result.get("errno") in LIMIT_ERRNOS:
            return self.limit_named(result["errno"])
        if result.get("rc") != -9:
            return None
        name, limit = limited(self.node_limits(), "memory.max")
        if name and (result.get("oom_kill") or (oom_kills() is None and near(limit))):
            values = dict(limit_values(name, limit), oom_kill="%s -> %s" % tuple(
                result["oom_kill"]) if result.get("oom_kill") else "not counted")
            return "memory_cgroup_limit", values
        return None

    def cuda_os_limit(self, code):
        return cuda_limit(code, self.node_limits(),
                          self.statuses.get("dev_nodes_missing") == "pass")

    def limit_note(self, cause, values):
        return "; %s: %s = %s (%s)" % (self.cause_label(cause), values.get("limit"),
                                       values.get("value"), values.get("source"))


# --- facts/libcuda --------------------------------------------------------------------------------

CUDA_ERRORS = {
    0: "CUDA_SUCCESS", 1: "CUDA_ERROR_INVALID_VALUE", 2: "CUDA_ERROR_OUT_OF_MEMORY",
    3: "CUDA_ERROR_NOT_INITIALIZED", 34: "CUDA_ERROR_STUB_LIBRARY",
    35: "CUDA_ERROR_INSUFFICIENT_DRIVER", 802: "CUDA_ERROR_SYSTEM_NOT_READY",
    100: "CUDA_ERROR_NO_DEVICE", 101: "CUDA_ERROR_INVALID_DEVICE",
    304: "CUDA_ERROR_OPERATING_SYSTEM", 803: "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
    804: "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE", 999: "CUDA_ERROR_UNKNOWN",
}


def parse_ldconfig(text):
    entries = []
    for line in (text or "").splitlines():
        line = line.strip()
        if "=>" not in line:
            continue
        left, _, right = line.partition("=>")
        entries.append((left.split()[0] if left.split() else "", right.strip()))
    return entries


class LibcudaFacts(Limits):

    def collect_cuda(self, cuda):
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
        loaded = self.cuda_info.get("loaded")
        if not loaded or os.sep not in loaded:
            return None, None
        return loaded, os.path.realpath(loaded)


# --- facts/amd ------------------------------------------------------------------------------------

HIP_ERRORS = {
    0: "hipSuccess", 1: "hipErrorInvalidValue", 2: "hipErrorOutOfMemory",
    3: "hipErrorNotInitialized", 4: "hipErrorDeinitialized", 35: "hipErrorInsufficientDriver",
    100: "hipErrorNoDevice", 101: "hipErrorInvalidDevice", 209: "hipErrorNoBinaryForGpu",
    303: "hipErrorSharedObjectInitFailed", 304: "hipErrorOperatingSystem",
    999: "hipErrorUnknown",
}

TRITON_HIP_ARCHS = ("gfx90a", "gfx942", "gfx950", "gfx1100", "gfx1101", "gfx1102", "gfx1150",
                    "gfx1151", "gfx1200", "gfx1201", "gfx1250")


def gfx_name(target_version):
    if not isinstance(target_version, int) or target_version <= 0:
        return None
    major, minor, step = target_version // 10000, target_version // 100 % 100, \
        target_version % 100
    return "gfx%d%x%x" % (major, minor, step)


def gfx_from_override(value):
    match = re.match(r"^\s*(\d+)\.(\d+)\.(\d+)\s*$", value or "")
    if not match:
        return None
    return "gfx%d%x%x" % tuple(int(g) for g in match.groups())


def kfd_gpus():
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
    loaded = os.path.isdir(host_path("/sys/module/amdgpu"))
    version = first_line(read_text(host_path("/sys/module/amdgpu/version"))) or None
    return {"loaded": loaded, "version": version}


def amd_dev_nodes():
    found = ["kfd"] if os.path.exists(host_path("/dev/kfd")) else []
    try:
        found += sorted("dri/" + n for n in os.listdir(host_path("/dev/dri"))
                        if n.startswith("renderD"))
    except OSError:
        pass
    return found


def amd_facts():
    return {"kfd_gpus": kfd_gpus(), "amdgpu": amdgpu_module(), "dev_nodes": amd_dev_nodes()}


def parse_rocminfo(result):
    if result is None:
        return None
    if result["error"] or result["timed_out"] or result["rc"] != 0:
        return {"error": result["error"] or ("timed out" if result["timed_out"] else first_line(
            result["stderr"]) or first_line(result["stdout"]) or "rc %s" % result["rc"])}
    names = re.findall(r"^\s*Name:\s+(gfx[0-9a-f]+)\s*$", result["stdout"], re.M)
    return {"gfx": names}


class AmdFacts(ProbeState):

    def collect_hip(self, hip):
        return stage_answer(hip.result(), "HIP probe", last_line=True)


# --- facts/toolchain ------------------------------------------------------------------------------

COMPILE_SOURCE = """\
#include <stdio.h>
#include <dlfcn.h>
#include <Python.h>
/* What Triton's cuda_utils.c needs: libc (stdio, dlfcn) and the interpreter's Python.h. */
int fleetcheck_probe(void) { return (int)sizeof(PyObject) + (dlsym != 0) + (printf != 0); }
"""


def install_hint(os_id, python_version, what):
    xy = ".".join(str(python_version or "3").split(".")[:2])
    rhel = (os_id or "") in ("rhel", "centos", "rocky", "almalinux", "fedora", "ol", "amzn")
    names = {
        "compiler": ("gcc libc6-dev python%s-dev" % xy, "gcc glibc-devel python%s-devel" % xy),
        "linker": ("binutils", "binutils"),
        "libc": ("libc6-dev", "glibc-devel"),
        "python": ("python%s-dev" % xy, "python%s-devel" % xy),
    }[what]
    if rhel:
        return "dnf install -y " + names[1]
    return "apt-get install -y " + names[0]


class ToolchainFacts(ProbeState):

    def workload_pyinfo(self):
        if os.path.realpath(self.workload_python) == os.path.realpath(sys.executable):
            info = json.loads(run_inline(PYINFO_SCRIPT))
            return info
        result = Spawned([self.workload_python, "-c", PYINFO_SCRIPT],
                         self.deadline.timeout(15), env=self.env, label="pyinfo").result()
        try:
            return json.loads(result["stdout"])
        except ValueError:
            return {"executable": self.workload_python, "version": None, "include": None,
                    "error": result["error"] or clip(result["stderr"] or "no output", 1000)}

    def find_compiler(self):
        path = self.env.get("PATH", os.defpath)
        cc = self.env.get("CC")
        if cc is not None:
            found = shutil.which(cc, path=path) if os.sep not in cc else (
                cc if os.path.isfile(cc) and os.access(cc, os.X_OK) else None)
            return {"path": found, "source": "CC", "value": cc}
        for name in ("gcc", "clang"):
            found = shutil.which(name, path=path)
            if found:
                return {"path": found, "source": name, "value": None}
        return {"path": None, "source": None, "value": None,
                "plain_cc": shutil.which("cc", path=path)}

    def start_compile(self):
        if not self.compiler["path"]:
            return None
        work = os.path.join(self.tmp, "cc")
        os.mkdir(work)
        source = os.path.join(work, "fleetcheck_cc.c")
        with open(source, "w") as handle:
            handle.write(COMPILE_SOURCE)
        argv = [self.compiler["path"], source, "-O0", "-shared", "-fPIC", "-Wno-psabi", "-o",
                os.path.join(work, "fleetcheck_cc.so")]
        if self.pyinfo.get("include"):
            argv.append("-I" + self.pyinfo["include"])
        env = dict(self.env)
        env["TMPDIR"] = work
        self.compile_argv = argv
        return Spawned(argv, self.deadline.timeout(30), env=env, cwd=work)


# --- facts/gpustate -------------------------------------------------------------------------------

MIB = 1 << 20

DEFAULT_MEMORY_SHARE = 0.05

XID_WINDOW_S = 3600

XID_CRITICAL = frozenset({48, 63, 64, 74, 79, 92, 94, 95, 119, 120})
XID_APPLICATION = frozenset({13, 31, 43, 45})

COMPUTE_MODES = {0: "Default", 1: "Exclusive_Thread", 2: "Prohibited", 3: "Exclusive_Process"}

SMI_STATE_FIELDS = ("index,uuid,memory.total,memory.used,memory.free,persistence_mode,"
                    "compute_mode,retired_pages.pending,remapped_rows.pending,"
                    "remapped_rows.failure,ecc.errors.uncorrected.volatile.total")


def parent_pid(pid):
    text = read_text("/proc/%d/stat" % pid, 4096) or ""
    fields = text.rpartition(")")[2].split()
    return int(fields[1]) if len(fields) > 1 and fields[1].isdigit() else None


def descends_from(pid, ancestor):
    seen = 0
    while pid and pid > 1 and seen < 64:
        if pid == ancestor:
            return True
        pid = parent_pid(pid)
        seen += 1
    return pid == ancestor


def opens_gpu(pid):
    base = "/proc/%d/fd" % pid
    try:
        names = os.listdir(base)
    except OSError:
        return None
    prefixes = tuple(host_path(p) for p in ("/dev/nvidia", "/dev/kfd", "/dev/dri/"))
    for name in names:
        try:
            if os.readlink(os.path.join(base, name)).startswith(prefixes):
                return True
        except OSError:
            continue
    return False


def describe_pid(pid, own_pids):
    info = {"pid": pid, "own": False, "here": False}
    if pid in own_pids or descends_from(pid, os.getpid()):
        info["own"] = info["here"] = True
        return info
    if not os.path.isdir("/proc/%d" % pid):
        return info
    holds = opens_gpu(pid)
    if holds is False:
        info["pid_reused"] = True
        return info
    info["here"] = True
    info["gpu_fds_checked"] = holds is True
    info["name"] = first_line(read_text("/proc/%d/comm" % pid, 256)) or None
    cmdline = (read_text("/proc/%d/cmdline" % pid, 2048) or "").replace("\0", " ").strip()
    info["cmdline"] = cmdline[:200] or None
    status = read_text("/proc/%d/status" % pid, 8192) or ""
    match = re.search(r"^Uid:\s+(\d+)", status, re.M)
    if match:
        info["uid"] = int(match.group(1))
        try:
            info["user"] = pwd.getpwuid(info["uid"]).pw_name
        except KeyError:
            info["user"] = None
    return info


def smi_number(text):
    text = text.strip()
    return int(text) if text.isdigit() else None


def smi_flag(text):
    text = text.strip().lower()
    return True if text in ("yes", "enabled") else False if text in ("no", "disabled") else None


def parse_smi_state(gpus_result, apps_result):
    out: dict = {"source": "nvidia-smi"}
    if gpus_result["error"] or gpus_result["timed_out"] or gpus_result["rc"] != 0:
        out["error"] = "nvidia-smi: " + (gpus_result["error"] or (
            "timed out" if gpus_result["timed_out"] else first_line(gpus_result["stdout"])
            or first_line(gpus_result["stderr"]) or "rc %s" % gpus_result["rc"]))
        return out
    by_uuid = {}
    gpus = []
    for line in gpus_result["stdout"].splitlines():
        cells = [cell.strip() for cell in line.split(",")]
        if len(cells) != 11 or not cells[0].isdigit():
            continue
        total, used, free = (smi_number(c) for c in cells[2:5])
        gpu: dict = {"index": int(cells[0]), "uuid": cells[1], "processes": [],
               "persistence_mode": {True: 1, False: 0}.get(smi_flag(cells[5])),
               "compute_mode": {v: k for k, v in COMPUTE_MODES.items()}.get(cells[6]),
               "health": {}}
        if total is not None and used is not None:
            gpu["memory"] = {"total": total * MIB, "used": used * MIB,
                             "free": (free or 0) * MIB}
        health = gpu["health"]
        if smi_flag(cells[7]) is not None:
            health["retired_pages_pending"] = smi_flag(cells[7])
        if smi_flag(cells[8]) is not None or smi_flag(cells[9]) is not None:
            health["remapped_rows"] = {"pending": bool(smi_flag(cells[8])),
                                       "failure": bool(smi_flag(cells[9]))}
        if smi_number(cells[10]) is not None:
            health["ecc_uncorrected_volatile"] = smi_number(cells[10])
        by_uuid[cells[1]] = gpu
        gpus.append(gpu)
    if not gpus:
        out["error"] = "nvidia-smi listed no GPU state"
        return out
    if apps_result and apps_result["rc"] == 0 and not apps_result["timed_out"]:
        for line in apps_result["stdout"].splitlines():
            cells = [cell.strip() for cell in line.split(",")]
            if len(cells) == 3 and cells[0] in by_uuid and cells[1].isdigit():
                used = smi_number(cells[2])
                by_uuid[cells[0]]["processes"].append(
                    {"pid": int(cells[1]), "used": used * MIB if used is not None else None})
    else:
        for gpu in gpus:
            gpu["processes_error"] = "nvidia-smi --query-compute-apps failed"
    out["gpus"] = gpus
    return out


def amd_gpu_state(kfd):
    gpus = []
    procs = host_path("/sys/class/kfd/kfd/proc")
    try:
        pids = sorted(int(p) for p in os.listdir(procs) if p.isdigit())
    except OSError:
        pids = []
    for index, node in enumerate(kfd):
        gpu: dict = {"index": index, "processes": []}
        minor = node.get("render_minor")
        device = host_path("/sys/class/drm/renderD%s/device" % minor)
        total = first_line(read_text(os.path.join(device, "mem_info_vram_total")))
        used = first_line(read_text(os.path.join(device, "mem_info_vram_used")))
        if total.isdigit() and used.isdigit():
            gpu["memory"] = {"total": int(total), "used": int(used),
                             "free": max(0, int(total) - int(used))}
        gpu_id = first_line(read_text(host_path(
            "/sys/class/kfd/kfd/topology/nodes/%s/gpu_id" % node.get("node"))))
        for pid in pids:
            vram = first_line(read_text(os.path.join(procs, str(pid), "vram_" + gpu_id)))
            if gpu_id and vram.isdigit():
                gpu["processes"].append({"pid": pid, "used": int(vram)})
        gpus.append(gpu)
    return {"source": "sysfs", "gpus": gpus}


def parse_kmsg(text, now_s, window_s, buses):
    events = []
    for line in text.splitlines():
        head, sep, message = line.partition(";")
        fields = head.split(",")
        if not sep or len(fields) < 3 or not fields[2].isdigit():
            continue
        match = re.search(r"NVRM: Xid \(PCI:([0-9a-fA-F:.]+)\): (\d+),\s*(.*)", message)
        if not match:
            continue
        seconds = int(fields[2]) / 1e6
        if now_s is not None and seconds < now_s - window_s:
            continue
        bus, xid = match.group(1).lower(), int(match.group(2))
        mine = not buses or any(b.startswith(bus) or bus.startswith(b) for b in buses)
        events.append({"xid": xid, "pci": bus, "ago_s": round(now_s - seconds) if now_s else None,
                       "this_node": mine, "text": match.group(3)[:200],
                       "kind": "critical" if xid in XID_CRITICAL else
                       "application" if xid in XID_APPLICATION else "informational"})
    return events


def read_kmsg(path):
    try:
        info = os.stat(path)
    except OSError as exc:
        return None, "%s: %s" % (path, errno.errorcode.get(exc.errno or 0, str(exc)))
    if stat.S_ISCHR(info.st_mode) and (os.major(info.st_rdev), os.minor(info.st_rdev)) != (1, 11):
        return None, "%s is not the kernel log (device %d:%d)" % (
            path, os.major(info.st_rdev), os.minor(info.st_rdev))
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        return None, "%s: %s (reading the kernel log needs CAP_SYSLOG where " \
                     "kernel.dmesg_restrict=1, and a container rarely has it)" % (
                         path, errno.errorcode.get(exc.errno or 0, str(exc)))
    chunks, size = [], 0
    try:
        while size < (8 << 20):
            try:
                chunk = os.read(fd, 65536)
            except OSError as exc:
                if exc.errno == errno.EPIPE:  # a record overwritten while reading: go on
                    continue
                if exc.errno in (errno.EAGAIN, errno.EWOULDBLOCK):
                    break
                return None, "%s: %s" % (path, errno.errorcode.get(exc.errno or 0, str(exc)))
            if not chunk:
                break
            chunks.append(chunk.decode("utf-8", "replace"))
            size += len(chunk)
            if not chunk.endswith(b"\n"):
                chunks.append("\n")
    finally:
        os.close(fd)
    return "".join(chunks), None


def xid_events(buses, window_s=XID_WINDOW_S):
    text, why = read_kmsg(host_path("/dev/kmsg"))
    if text is None:
        return {"readable": False, "why": why, "window_s": window_s}
    uptime = first_line(read_text(host_path("/proc/uptime"))).split()
    now_s = float(uptime[0]) if uptime and re.match(r"^[\d.]+$", uptime[0]) else None
    return {"readable": True, "window_s": window_s,
            "events": parse_kmsg(text, now_s, window_s, buses)[-50:]}


def visible_devices(env):
    value = env.get("CUDA_VISIBLE_DEVICES")
    if value is None:
        return None
    return [item.strip() for item in value.split(",") if item.strip()]


def the_job_s(gpu, visible):
    if visible is None:
        return True
    uuid = gpu.get("uuid") or ""
    return any(item == str(gpu.get("index")) or (item.startswith("GPU-") and uuid.startswith(
        item)) for item in visible)


class GpuStateFacts(ProbeState):

    def start_gpu_state(self):
        self.gpustate = None
        self.gpu_state_info = {"error": "not run: no NVIDIA GPU"}
        if self.possible_gpu and self.vendor == "nvidia" and not self.driver_in_stack:
            self.spawn_gpu_state()

    def spawn_gpu_state(self):
        self.gpustate = Spawned([sys.executable, "-I", "-c", GPUSTATE_SCRIPT],
                                self.deadline.timeout(15), env=self.env, label="gpustate")

    def wait_gpu_state(self, info=None):
        if self.vendor == "amd" and self.possible_gpu:
            info = amd_gpu_state(self.amd["kfd_gpus"])
        elif info is None and self.gpustate is None:
            return
        else:
            if info is None and self.gpustate is not None:
                info = stage_answer(self.gpustate.result(), "NVML state probe")
            if info.get("error") and not info.get("gpus"):
                smi = shutil.which("nvidia-smi", path=self.env.get("PATH", os.defpath))
                if smi:
                    gpus = Spawned([smi, "--query-gpu=" + SMI_STATE_FIELDS,
                                    "--format=csv,noheader,nounits"],
                                   self.deadline.timeout(10), env=self.env).result()
                    apps = Spawned([smi, "--query-compute-apps=gpu_uuid,pid,used_memory",
                                    "--format=csv,noheader,nounits"],
                                   self.deadline.timeout(10), env=self.env).result()
                    fallback = parse_smi_state(gpus, apps)
                    fallback["nvml_error"] = info.get("error")
                    info = fallback if fallback.get("gpus") else dict(
                        info, nvidia_smi=fallback.get("error"))
        own = {os.getpid()} | {s.proc.pid for s in (self.stack, self.gpustate)
                               if s is not None and s.proc is not None}
        for gpu in info.get("gpus") or []:
            gpu["processes"] = [dict(p, **describe_pid(p["pid"], own))
                                for p in gpu.get("processes") or []
                                if isinstance(p.get("pid"), int)]
        self.gpu_state_info = info

    def assemble_gpu_state(self):
        info: dict = self.gpu_state_info
        visible = visible_devices(self.env)
        gpus = []
        for gpu in info.get("gpus") or []:
            memory: dict = gpu.get("memory") or {}
            own_used = sum(p.get("used") or 0 for p in gpu["processes"] if p.get("own"))
            entry: dict = {"index": gpu.get("index"), "uuid": gpu.get("uuid"),
                     "persistence_mode": gpu.get("persistence_mode"),
                     "compute_mode": COMPUTE_MODES.get(gpu.get("compute_mode")),
                     "processes": [{key: p.get(key) for key in (
                         "pid", "used_mib", "own", "here", "name", "user", "cmdline",
                         "pid_reused")} for p in (
                             dict(p, used_mib=p["used"] // MIB if p.get("used") is not None
                                  else None) for p in gpu["processes"])],
                     "processes_error": gpu.get("processes_error"),
                     "health": gpu.get("health") or {}, "job": the_job_s(gpu, visible)}
            if memory.get("total"):
                used = max(0, memory.get("used", 0) - own_used)
                entry.update({"total_mib": memory["total"] // MIB,
                              "used_mib": memory.get("used", 0) // MIB,
                              "held_mib": used // MIB,
                              "held_share": round(used / memory["total"], 4)})
            gpus.append(entry)
        cuda = self.cuda_info
        state = {"source": info.get("source"), "error": info.get("error"),
                 "nvml_error": info.get("nvml_error"), "gpus": gpus,
                 "listed": len(gpus) if gpus else len(self.gpus),
                 "cuda_count": cuda.get("count") if cuda.get("init") == 0 else None,
                 "visible_devices": visible}
        if self.vendor == "nvidia" and self.possible_gpu:
            state["xid"] = xid_events([gpu["bus"].lower() for gpu in self.proc["gpus"]])
        self.facts["gpu_state"] = state


# --- facts/gather ---------------------------------------------------------------------------------

def give_back_freed_memory():
    try:
        import ctypes
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError, ImportError):  # musl, or no ctypes
        pass


def gpu_signs():
    proc, names, amd = proc_nvidia(), dev_nodes(), amd_facts()
    return (proc, names, amd, bool(proc["gpus"] or names),
            bool(amd["kfd_gpus"] or "kfd" in amd["dev_nodes"]))


def hip_version_text(version):
    if not isinstance(version, int) or version <= 0:
        return None
    return "%d.%d.%d" % (version // 10000000, version % 10000000 // 100000, version % 100000)


class Gather(LibcudaFacts, AmdFacts, ToolchainFacts, GpuStateFacts):

    def remove_workload_dirs(self):
        if self.own_name:
            remove_throwaway(self.own_name, triton_cache_dir(self.env), self.env,
                             self.own_missing)

    def own_cache_dir(self, suffix):
        path = os.path.join(triton_cache_dir(self.env), self.own_name + suffix)
        try:
            os.makedirs(path)
        except OSError:
            path = os.path.join(self.tmp, suffix.strip("-") + "-cache")
            os.mkdir(path)
        return path

    def gather(self, signs=None):
        self.proc, self.dev_names, self.amd, nvidia, amd = signs or gpu_signs()
        self.vendor = "amd" if amd and not nvidia else "nvidia"
        self.possible_gpu = nvidia or amd
        if self.possible_gpu:  # before the workload's interpreter makes the node's peak
            give_back_freed_memory()
        env = dict(self.env)
        env["PYTHONDONTWRITEBYTECODE"] = "1"  # leave no .pyc behind in the workload's venv
        scratch = os.path.join(self.tmp, "tmp")
        os.mkdir(scratch)
        env["TMPDIR"] = scratch  # anything the stack leaves in its temp dir goes with ours
        fresh = os.path.join(self.tmp, "cache")
        os.mkdir(fresh)
        user_cache = json.dumps(self.env.get("TRITON_CACHE_DIR") or None)
        mode = "full" if self.possible_gpu else "meta"
        self.own_name = ".fleetcheck-probe-%d-%s" % (os.getpid(), os.urandom(4).hex())
        self.own_missing = (missing_dirs(triton_cache_dir(self.env))
                            + missing_dirs(cuda_cache_dir(self.env)))
        self.driver_in_stack = self.possible_gpu and self.vendor == "nvidia" and not self.deep
        headroom = task_headroom() if self.possible_gpu and self.vendor == "nvidia" else None
        self.alone = headroom is not None and headroom < START_TASKS
        self.start_gpu_state()  # before any stage that may create a CUDA context
        own = json.dumps({"name": self.own_name, "deep": self.deep, "env": {
            key: self.env.get(key) for key in WORKLOAD_ENV_KEYS},
            "driver": "after" if self.driver_in_stack and self.alone else self.driver_in_stack})
        self.stack = Spawned([self.workload_python, "-c", COMPILED_RUN, STACK_SCRIPT, fresh,
                              user_cache, mode, own],
                             self.deadline.timeout(), env=env, cwd=self.tmp, label="stack")
        self.deep_run = self.cuda = self.smi = self.ldconfig = self.compile = None
        self.hip = self.rocminfo = None
        state_read = os.path.join(self.tmp, "gpu-state-read")
        if self.possible_gpu and self.deep:
            script = os.path.join(self.tmp, "fleetcheck_deep_kernel.py")
            with open(script, "w") as handle:
                handle.write(DEEP_SCRIPT)
            deep_env = dict(env)
            deep_env["TRITON_CACHE_DIR"] = self.own_cache_dir("-deep")
            self.deep_run = Spawned([self.workload_python, script, state_read],
                                    self.deadline.timeout(), env=deep_env, cwd=self.tmp,
                                    label="deep")
        self.wait_gpu_state()  # read while the stack imports torch; contexts come after
        if self.deep_run is not None:
            with open(state_read, "w"):
                pass
        if self.possible_gpu and self.vendor == "amd":
            self.hip = Spawned([self.workload_python, "-c", HIP_SCRIPT],
                               self.deadline.timeout(30), env=env, cwd=self.tmp, label="hip")
            rocminfo = shutil.which("rocminfo", path=self.env.get("PATH", os.defpath))
            if rocminfo:
                self.rocminfo = Spawned([rocminfo], self.deadline.timeout(15), env=self.env)
        elif self.possible_gpu:
            if not self.driver_in_stack:
                self.start_libcuda()
            if not self.alone:
                self.start_driver_tools()
        self.pyinfo = self.workload_pyinfo()
        self.compiler = self.find_compiler()

        where = where_it_runs()
        self.facts.update({
            "hostname": socket.gethostname(),
            "os": os_release(),
            "kernel": platform.release(),
            "container": where["container"],
            "where": where,
            "cpus": cpu_count(),
            "memory_bytes": memory_bytes(),
            "python": {"executable": self.pyinfo.get("executable"),
                       "version": self.pyinfo.get("version")},
            "probe_python": {"executable": sys.executable,
                             "version": "%d.%d.%d" % sys.version_info[:3],
                             "isolated": bool(sys.flags.isolated)},
            "cuda_visible_devices": self.env.get("CUDA_VISIBLE_DEVICES"),
            "triton_cache_dir": triton_cache_dir(self.env),
        })
        self.mountinfo = read_text(host_path("/proc/self/mountinfo"))
        self.proc_devices = read_text(host_path("/proc/devices")) or ""

        self.hip_info = self.collect_hip(self.hip) if self.hip else {"error": "not run"}
        self.rocminfo_info = parse_rocminfo(self.rocminfo.result() if self.rocminfo else None)
        self.stack_result = self.stack.result()
        if self.alone:
            self.start_driver_tools()
        self.smi_info = parse_smi(self.smi.result()) if self.smi else {"error": "not run"}
        if self.possible_gpu and not self.smi and self.vendor == "nvidia":
            self.smi_info = {"error": "not on PATH"}
        self.ld_result = self.ldconfig.result() if self.ldconfig else None
        self.deep_result = self.deep_run.result() if self.deep_run else None
        self.remove_workload_dirs()
        self.stages = stage_lines(self.stack_result["stdout"])
        driver = self.driver_from_stack() if self.driver_in_stack else None
        if driver is None:
            driver = self.collect_cuda(self.cuda) if self.cuda else {"error": "not run: no GPU"}
        self.cuda_info = driver
        self.compile_result = self.test_compile() if self.possible_gpu else None
        self.deep_stages = stage_lines(self.deep_result["stdout"]) if self.deep_result else {}
        self.assemble_facts()
        self.facts["probe_cost"] = self.cost()

    def start_driver_tools(self):
        smi = shutil.which("nvidia-smi", path=self.env.get("PATH", os.defpath))
        if smi:
            self.smi = Spawned([smi, "--query-gpu=index,name,uuid,memory.total,compute_cap,"
                                "driver_version", "--format=csv,noheader,nounits"],
                               self.deadline.timeout(15), env=self.env)
        ldconfig = host_path("/sbin/ldconfig")
        if os.access(ldconfig, os.X_OK):
            self.ldconfig = Spawned([ldconfig, "-p"], self.deadline.timeout(10), env=self.env)

    def cost(self):
        done = self.stages.get("done") or {}
        runs = done.get("compiler_runs")
        return {"helpers": list(STARTED), "stack_processes": done.get("processes"),
                "workload_alone": self.alone,
                "restarted_lean": RESTARTED in globals(),
                "compiler_runs": None if runs is None else runs + (1 if self.compile else 0)}

    def start_libcuda(self):
        self.cuda = Spawned([sys.executable, "-I", "-c", CUDA_SCRIPT],
                            self.deadline.timeout(30), env=self.env, label="libcuda")

    def stack_stage(self, name):
        data = self.stages.get(name)
        if data is None:
            return None
        data = {key: value for key, value in data.items() if key != "stage"}
        if data.get("probe_step"):
            return {"error": "probe error in %s: %s" % (data["probe_step"],
                                                        data.get("probe_error"))}
        return data

    def driver_from_stack(self):
        state = self.stack_stage("gpustate")
        if state is None:
            self.spawn_gpu_state()
        self.wait_gpu_state(state)
        driver = self.stack_stage("libcuda")
        if driver is None:
            self.start_libcuda()
        return driver

    def test_compile(self):
        meta = self.stages.get("meta")
        if meta is not None and not meta.get("triton_dir"):
            return None
        target = self.stages.get("target") or {}
        runs = target.get("compiler") or []
        if target.get("ok") and runs and all(
                isinstance(run, dict) and run.get("rc") == 0 and not run.get("error")
                and self.same_compiler(run.get("argv")) for run in runs):
            self.compile_argv = runs[-1].get("argv")
            self.compile_by = "triton"
            return {"rc": 0, "stdout": "", "stderr": "".join(r.get("stderr") or "" for r in runs),
                    "timed_out": False, "error": None, "seconds": None}
        budget = self.deadline.timeout(30)
        if self.stack_result["timed_out"] or budget < 1:
            self.compile_by = "deadline"
            return None
        self.compile = self.start_compile()
        result = self.compile.result() if self.compile else None
        if result is not None and result["timed_out"] and budget < 30:
            self.compile_by = "deadline"
            return None
        return result

    def same_compiler(self, argv):
        if not isinstance(argv, list) or not argv or not isinstance(argv[0], str):
            return False
        path = self.env.get("PATH", os.defpath)
        ran = argv[0] if os.sep in argv[0] else shutil.which(argv[0], path=path)
        found = self.compiler["path"]
        if not ran or not found:
            return False
        return os.path.abspath(ran) == os.path.abspath(found)

    def assemble_facts(self):
        meta = self.stages.get("meta", {})
        torch = self.stages.get("torch", {})
        target = self.stages.get("target", {})
        fla = self.stages.get("fla")
        python = meta.get("python") or {}
        if python.get("executable"):
            self.facts["python"] = {"executable": python["executable"],
                                    "version": python.get("version")}
        self.gpus = self.gpu_list()
        if self.vendor == "amd":
            self.assemble_amd_facts()
        else:
            self.assemble_nvidia_facts()
        self.assemble_stack_facts(meta, torch, target, fla)
        self.assemble_gpu_state()

    def assemble_amd_facts(self):
        hip = self.hip_info
        runtime = hip.get("hipRuntimeGetVersion")
        self.facts.update({
            "gpu_vendor": "amd",
            "gpus": [{key: gpu.get(key) for key in ("index", "name", "uuid", "memory_mib",
                                                     "compute_capability", "gfx")}
                     for gpu in self.gpus],
            "gpu_count": len(self.gpus),
            "driver": {"kernel_module": self.amd["amdgpu"]["version"],
                       "userspace": hip_version_text(runtime), "cuda_driver_version": None},
            "dev_nodes": self.amd["dev_nodes"],
            "amd": {"kfd_gpus": self.amd["kfd_gpus"], "amdgpu": self.amd["amdgpu"],
                    "libamdhip64": hip.get("path"), "libamdhip64_found_by": hip.get("how"),
                    "hip_runtime": hip_version_text(runtime),
                    "hip_driver": hip_version_text(hip.get("hipDriverGetVersion")),
                    "rocminfo": self.rocminfo_info,
                    "HSA_OVERRIDE_GFX_VERSION": self.env.get("HSA_OVERRIDE_GFX_VERSION")},
        })

    def assemble_nvidia_facts(self):
        kernel_module = self.proc["kernel_module"]
        loaded = self.cuda_info.get("loaded")
        userspace = None
        if loaded:
            match = re.search(r"libcuda\.so\.(\d+\.\d+(?:\.\d+)?)$", os.path.realpath(loaded))
            userspace = match.group(1) if match else None
        version = self.cuda_info.get("version")
        self.facts.update({
            "gpus": [{key: gpu.get(key) for key in ("index", "name", "uuid", "memory_mib",
                                                     "compute_capability")}
                     for gpu in self.gpus],
            "gpu_count": len(self.gpus),
            "driver": {"kernel_module": kernel_module, "userspace": userspace,
                       "cuda_driver_version": "%d.%d" % (version // 1000, version % 1000 // 10)
                       if isinstance(version, int) and version > 0 else None},
            "dev_nodes": self.dev_names,
        })

    def assemble_stack_facts(self, meta, torch, target, fla):
        if torch.get("installed"):
            self.facts["torch"] = {
                "version": torch.get("version") or meta.get("torch_version"),
                "cuda": torch.get("cuda", meta.get("torch_cuda")),
                "cuda_available": torch.get("cuda_available"),
                "device_count": torch.get("device_count"),
                "arch_list": torch.get("arch_list"),
            }
            if self.vendor == "amd":
                self.facts["torch"]["hip"] = torch.get("hip", meta.get("torch_hip"))
        else:
            self.facts["torch"] = None
        if meta.get("triton_dir"):
            self.facts["triton"] = {
                "version": target.get("version") or self.triton_dist_version(),
                "location": target.get("location") or meta.get("triton_dir"),
                "distributions": ["%s %s" % (d.get("name"), d.get("version"))
                                  for d in meta.get("triton_dists") or []],
            }
        else:
            self.facts["triton"] = None
        self.facts["fla"] = None
        if meta.get("fla_dir"):
            self.facts["fla"] = {"version": meta.get("fla_version"),
                                 "device_platform": (fla or {}).get("device_platform"),
                                 "layout": (fla or {}).get("layout"),
                                 "warning": ((fla or {}).get("warnings") or [None])[0],
                                 "swallowed": (fla or {}).get("swallowed")}
        self.facts["compiler"] = ({"path": self.compiler["path"],
                                   "source": self.compiler["source"]}
                                  if self.compiler["path"] else None)

    def triton_dist_version(self):
        dists = self.stages.get("meta", {}).get("triton_dists") or []
        return dists[0].get("version") if dists else None

    def gpu_list(self):
        if self.vendor == "amd":
            return self.amd_gpu_list()
        smi = self.smi_info.get("gpus")
        cuda_devices = self.cuda_info.get("devices") or []
        if smi:
            gpus = [dict(gpu) for gpu in smi]
            for gpu in gpus:
                if not gpu.get("compute_capability") and gpu["index"] < len(cuda_devices):
                    gpu["compute_capability"] = cuda_devices[gpu["index"]].get(
                        "compute_capability")
            return gpus
        if cuda_devices:
            return [{"index": d["index"], "name": d.get("name"), "uuid": None,
                     "memory_mib": d.get("memory_mib"),
                     "compute_capability": d.get("compute_capability")} for d in cuda_devices]
        return [{"index": i, "name": gpu["model"], "uuid": gpu["uuid"], "memory_mib": None,
                 "compute_capability": None} for i, gpu in enumerate(self.proc["gpus"])]

    def amd_gpu_list(self):
        devices = self.hip_info.get("devices") or []
        kfd = self.amd["kfd_gpus"]
        gpus = []
        for index in range(max(len(devices), len(kfd))):
            device = devices[index] if index < len(devices) else {}
            node = kfd[index] if index < len(kfd) else {}
            gfx = node.get("gfx")
            gpus.append({"index": index, "uuid": None, "compute_capability": None, "gfx": gfx,
                         "name": device.get("name") or "AMD GPU" + (" " + gfx if gfx else ""),
                         "memory_mib": device.get("memory_mib")})
        return gpus


# --- facts/ptxas ----------------------------------------------------------------------------------

PTXAS_MIN_FOR_CC = {
    (7, 0): (9, 0), (7, 5): (10, 0), (8, 0): (11, 0), (8, 6): (11, 1), (8, 7): (11, 4),
    (8, 9): (11, 8), (9, 0): (11, 8), (10, 0): (12, 8), (10, 1): (12, 8), (10, 3): (12, 8),
    (11, 0): (13, 0), (12, 0): (12, 8), (12, 1): (12, 9),
}


class PtxasFacts(ProbeState):

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
        for cap in self.capabilities():
            key, tool = self.active_ptxas(cap)
            if key not in ("TRITON_PTXAS_PATH", "TRITON_PTXAS_BLACKWELL_PATH"):
                continue
            have, need = version_tuple(tool.get("version")), PTXAS_MIN_FOR_CC.get(cap)
            if have and need and have[:2] < need:
                return key, tool, cap, need
        return None


# --- evaluation/findings --------------------------------------------------------------------------

class Findings(PtxasFacts, LibcudaFacts):

    def stack_error(self):
        result = self.stack_result
        evidence = {"python": self.workload_python, "stderr": clip(result["stderr"]),
                    "rc": result["rc"]}
        limit = self.helper_limit(result)
        if limit:
            return self.limit_stopped("the workload interpreter", result, limit[0], limit[1],
                                      evidence)
        if result["timed_out"]:
            summary = "the workload's Python stack did not answer within the deadline (%.1f s)" % (
                result["seconds"])
        elif result["error"]:
            summary = "cannot run the workload interpreter: " + result["error"]
        else:
            summary = "the workload interpreter failed: " + (
                first_line(result["stderr"].splitlines()[-1] if result["stderr"] else "")
                or "rc %s" % result["rc"])
            tail = result["stderr"][-4000:] if result["rc"] else ""
            parsed = parse_oserror(first_line(tail.splitlines()[-1] if tail.strip() else "")
                                   ) or parse_oserror(tail)
            named = self.limit_named(parsed["errno"]) if parsed else None
            if named:
                return ("error", summary + self.limit_note(*named), self.cause_fix(*named),
                        dict(evidence, matches=named[0], object=named[1]))
        return ("error", summary, "", evidence)

    def stage_missing(self, stage):
        result = self.stack_result
        evidence = {"stderr": clip(result["stderr"]), "rc": result["rc"]}
        limit = self.helper_limit(result)
        if limit:
            return self.limit_stopped("the workload interpreter", result, limit[0], limit[1],
                                      evidence, step=stage)
        if result["timed_out"]:
            summary = "timed out before %s finished (deadline %.1f s)" % (
                stage, self.deadline.end - self.deadline.start)
        else:
            summary = "%s did not report (workload interpreter exited with rc %s)" % (
                stage, result["rc"])
        return ("error", summary, "", evidence)

    def probe_fault(self, step, failure, evidence):
        evidence = dict(evidence, probe_step=failure.get("probe_step"),
                        probe_error=failure.get("error"), matches=None)
        return ("error", "%s: the probe's own step %s() failed (%s); the workload's Triton "
                "was not judged" % (step, failure.get("probe_step"), first_line(
                    failure.get("error"))), "", evidence)

    def hardware_evidence(self):
        if self.vendor == "amd":
            return bool(self.amd["kfd_gpus"] or (self.hip_info.get("count") or 0) > 0)
        numbered = [n for n in self.dev_names if re.match(r"^nvidia\d+$", n)]
        return bool(self.proc["gpus"] or numbered or self.smi_info.get("gpus")
                    or (self.cuda_info.get("count") or 0) > 0)

    def fix_context(self, values=None):
        python = self.facts["python"].get("executable") or self.workload_python
        os_id, version = self.facts["os"].get("id"), self.facts["python"].get("version")
        context = {"python": python, "pip": "%s -m pip" % python,
                   "library": self.hip_info.get("path")
                   or "/opt/rocm/lib/libamdhip64.so",
                   "triton": (self.facts.get("triton") or {}).get("version"),
                   "torch": (self.facts.get("torch") or {}).get("version"),
                   "cache_dir": self.facts.get("triton_cache_dir"),
                   "tmp_dir": (self.stages.get("own") or {}).get("gcc_tmp"),
                   "dists": " ".join(d.get("name") or "" for d in self.stages.get(
                       "meta", {}).get("triton_dists") or []) or "triton"}
        for key, what in (("pkg_cc", "compiler"), ("pkg_libc", "libc"),
                          ("pkg_python", "python")):
            line = install_hint(os_id, version, what).split()
            context["install"], context[key] = " ".join(line[:3]), " ".join(line[3:])
        try:
            context["libcuda_dir"] = self.libcuda_dir()
        except Exception:
            pass
        context.update(values or {})
        return context

    def compile_fix(self, what):
        return install_hint(self.facts["os"].get("id"), self.facts["python"].get("version"), what)

    def cause_fix(self, cause, values=None):
        override = self.ptxas_override_fix() if cause == "triton_too_old_for_gpu" else ""
        if override:
            return override  # the override is the object, not the release
        return fill_fix(cause, self.fix_context(values)) if cause else ""

    def ptxas_override_fix(self):
        found = self.ptxas_override_too_old()
        if not found:
            return ""
        key, tool, cap, need = found
        own = self.ptxas_tools().get("ptxas") or {}
        return ("unset %s (now %s, ptxas %s) in the workload's environment, so Triton runs its "
                "own ptxas%s; or point it at a ptxas of CUDA >= %d.%d, which knows sm_%d%d" % (
                    key, tool.get("path"), tool.get("version"),
                    " %s" % own["version"] if own.get("version") else "", need[0], need[1],
                    cap[0], cap[1]))

    def limit_stopped(self, what, result, cause, values, evidence, step=""):
        before = " before %s reported" % step if step else ""
        if result.get("errno") and result.get("alone"):
            how = ("this job cannot start a process: the probe, holding no other, could not "
                   "start %s%s (%s)" % (what, before, first_line(result["error"])))
        elif result.get("errno"):
            how = "the probe could not start %s%s while its other helpers ran (%s)" % (
                what, before, first_line(result["error"]))
        else:
            how = ("%s was killed by the cgroup's OOM killer%s (rc -9, oom_kill %s): the probe "
                   "needed more memory than the limit left, the workload itself is untested" % (
                       what, before, values.get("oom_kill")))
        evidence = dict(evidence, matches=cause, object=values, errno=result.get("errno"),
                        oom_kill=result.get("oom_kill"))
        return ("error", "not evaluated: " + how + self.limit_note(cause, values),
                self.cause_fix(cause, values), evidence)

    def object_note(self, cause, values):
        if not values or not cause:
            return ""
        if values.get("limit"):
            what = "%s = %s" % (values["limit"], values.get("value"))
        elif values.get("target"):
            what = "%s -> %s (missing)" % (values.get("component"), values["target"])
        elif values.get("owner"):
            what = "%s (owner %s)" % (values.get("component"), values["owner"])
        else:
            what = values.get("component") or values.get("library") or ""
        return "; %s: %s" % (self.cause_label(cause), what) if what else ""

    def name_failure(self, failure, places, more=""):
        found = diagnoses(failure, places, {"mountinfo": self.mountinfo,
                                            "limits": self.node_limits()})
        if more:
            found += diagnoses({"error": more}, places, {"mountinfo": self.mountinfo,
                                                         "limits": self.node_limits()})
        told = set()
        for text in [failure.get("error"), more] + [
                r.get("stderr") for r in failure.get("compiler") or [] if isinstance(r, dict)]:
            told |= {cause for cause, _ in message_causes(text or "")}
        for cause, line, values in found:
            if self.statuses.get(cause) != "pass":
                return cause, line, values
            if cause in told:  # ...unless the tool's own message names it
                return cause, line, dict(values, **self.message_object(cause, line))
        runs = [r for r in failure.get("compiler") or [] if r.get("rc") or r.get("error")]
        line = first_line((runs[-1].get("stderr") or runs[-1].get("error")) if runs else
                          failure.get("error"))
        return None, line, {}

    def message_object(self, cause, line):
        values = {"check_passed": True, "message": line}
        if cause == "libamdhip64_not_found":
            tried = re.search(r"attempted paths (\[.*\])", line or "")
            values["searched"] = tried.group(1) if tried else None
            values["check_searched"] = self.hip_info.get("search")
            if self.hip_info.get("path"):
                values["library"] = self.hip_info["path"]
        return values


# --- checks/driver --------------------------------------------------------------------------------

def gpu_passthrough_fix(container):
    if container == "docker":
        return ("start the container with the GPUs: docker run --gpus all (NVIDIA Container "
                "Toolkit) or, with CDI, docker run --device nvidia.com/gpu=all (after "
                "nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml where dockerd runs); "
                "a device line in the LXC config around it does not reach this container")
    if container == "podman":
        return ("start the container with the GPUs through CDI: podman run --device "
                "nvidia.com/gpu=all (after nvidia-ctk cdi generate "
                "--output=/etc/cdi/nvidia.yaml where podman runs)")
    if container == "kubernetes":
        return ("request the GPUs in the pod spec (resources.limits nvidia.com/gpu: N) on a node "
                "running the NVIDIA device plugin or GPU operator")
    return ""

class DriverChecks(Findings):

    def check_gpu_present(self):
        evidence = {"proc_gpus": [g["bus"] for g in self.proc["gpus"]],
                    "proc_version": self.proc["version_text"], "dev_nodes": self.dev_names,
                    "nvidia_smi": self.smi_info.get("error") or "%d GPU(s)" % len(
                        self.smi_info.get("gpus") or []),
                    "libcuda": self.cuda_info.get("loaded") or self.cuda_info.get("load_error"),
                    "cuda_device_count": self.cuda_info.get("count")}
        if not self.hardware_evidence():
            return ("warn", "no NVIDIA GPU on this node", "", evidence)
        names: dict = {}
        for gpu in self.gpus:
            label = gpu.get("name") or "NVIDIA GPU"
            if gpu.get("compute_capability"):
                label += " (sm_%s)" % gpu["compute_capability"].replace(".", "")
            names[label] = names.get(label, 0) + 1
        text = ", ".join("%d× %s" % (count, label) for label, count in names.items())
        return ("pass", text, "", evidence)

    def check_dev_nodes_missing(self):
        expected = ["nvidiactl", "nvidia-uvm"]
        minors = [g["minor"] for g in self.proc["gpus"] if g["minor"] is not None]
        if not minors:
            minors = sorted(int(n[6:]) for n in self.dev_names if re.match(r"^nvidia\d+$", n))
        if not minors:
            minors = list(range(len(self.gpus)))
        expected += ["nvidia%d" % minor for minor in minors]
        results = {name: open_result(host_path("/dev/" + name)) for name in expected}
        bad = {name: code for name, code in results.items() if code != "ok"}
        evidence = {"open": results, "container": self.facts.get("container")}
        if not bad:
            return ("pass", "%d device nodes open read-write" % len(results), "", evidence)
        if self.access_revoked():
            return ("skip", "the nodes are there but refused (EPERM): see cgroup_devices_revoked",
                    "", evidence)
        cuda_ok = self.cuda_info.get("init") == 0 and (self.cuda_info.get("count") or 0) >= len(
            minors)
        name, code = sorted(bad.items(), key=lambda item: expected.index(item[0]))[0]
        uvm_major = re.search(r"^\s*(\d+)\s+nvidia-uvm\s*$", self.proc_devices, re.M)
        uvm = uvm_major.group(1) if uvm_major else "<uvm-major>"
        container = self.facts.get("container")
        passing = gpu_passthrough_fix(container)
        if code == "ENOENT":
            what = "missing (not passed through)"
            if passing:
                fix = passing
            else:
                fix = ("pass every node into the container, uvm included: lxc.mount.entry: "
                       "/dev/%s dev/%s none bind,optional,create=file (and for nvidiactl, "
                       "nvidia-uvm, nvidia-uvm-tools, nvidiaN) in /etc/pve/lxc/<vmid>.conf; on "
                       "a host, load nvidia-uvm (nvidia-modprobe -u -c=0)" % (name, name))
        elif code == "EPERM":
            what = "blocked by the device cgroup (EPERM)"
            if passing:
                fix = passing
            else:
                fix = ("allow the majors in the container config: lxc.cgroup2.devices.allow: "
                       "c 195:* rwm and c %s:* rwm (majors from /proc/devices on the host)"
                       % uvm)
        elif code == "EACCES":
            what = "not permitted by its file mode (EACCES)"
            fix = ("make the node usable by the workload user: mode 0666 on the host node, or "
                   "devN: /dev/%s,mode=0666 (or gid=) in the container config" % name)
        else:
            what = "unusable (%s)" % code
            fix = "check that the NVIDIA driver is loaded and the node is passed through"
        summary = nodes_summary(name, what, bad, len(results), "no /dev/nvidia* device nodes, "
                                "though the driver lists %d GPU(s)" % len(minors),
                                self.facts.get("container"))
        evidence["cuda_init"] = self.cuda_info.get("init_name") or self.cuda_info.get("init")
        if cuda_ok and not self.facts.get("container"):
            return ("warn", summary + " (CUDA initialises anyway)", fix, evidence)
        return ("fail", summary, fix, evidence)

    def unknown_error(self, evidence):
        container = self.facts.get("container") or (
            "docker" if os.path.exists(host_path("/.dockerenv")) else None)
        evidence["nvml"] = self.smi_info.get("error") or self.cuda_info.get("nvml_init_text")
        uvm = open_result(host_path("/dev/nvidia-uvm"))
        evidence["nvidia_uvm"] = uvm
        head = "cuInit failed: CUDA_ERROR_UNKNOWN (999)"
        if uvm != "ok":
            return ("fail", head + ": /dev/nvidia-uvm %s (CUDA needs the uvm node)" % uvm,
                    "load nvidia-uvm on the host (nvidia-modprobe -u -c=0) and pass "
                    "/dev/nvidia-uvm into the container", evidence)
        if self.nvml_unknown_error():
            return ("fail", head + " with NVML's 'Unknown Error': the driver is in a bad state "
                    "or access to it changed under this %s" % (container or "host"),
                    "recreate the container" if container else
                    "reload the driver (rmmod nvidia_uvm nvidia; modprobe nvidia nvidia_uvm) or "
                    "reboot", evidence)
        if container:
            return ("fail", head + " in a %s container whose device nodes all open: the host's "
                    "driver changed (upgraded, or reloaded) after the container started" % (
                        container), "restart the container after the host's driver is back; "
                    "if it persists, reload nvidia_uvm on the host", evidence)
        return ("fail", head + " on the host with every device node usable: nvidia_uvm's state "
                "(after a suspend/resume) or a CUDA_VISIBLE_DEVICES changed after start",
                "reload nvidia_uvm (rmmod nvidia_uvm && modprobe nvidia_uvm) or reboot; check "
                "CUDA_VISIBLE_DEVICES", evidence)

    def nvml_unknown_error(self):
        smi = self.smi_info.get("error") or ""
        return ("Unknown Error" in smi or self.cuda_info.get("nvml_init") == 999
                or "Unknown Error" in (self.cuda_info.get("nvml_init_text") or ""))

    def access_revoked(self):
        names = [n for n in self.dev_names if n in ("nvidiactl", "nvidia-uvm")
                 or re.match(r"^nvidia\d+$", n)]
        codes = [open_result(host_path("/dev/" + n)) for n in names]
        return bool(codes) and "EPERM" in codes and self.nvml_unknown_error()

    def check_cgroup_devices_revoked(self):
        evidence = {"nvidia_smi": self.smi_info.get("error"),
                    "nvml_init": self.cuda_info.get("nvml_init"),
                    "container": self.facts.get("container"),
                    "cuda_init": self.cuda_info.get("init_name") or self.cuda_info.get("init")}
        if not self.access_revoked():
            return ("pass", "device access not refused", "", evidence)
        return ("fail", "the /dev/nvidia* nodes exist but open() is refused (EPERM) and NVML "
                "says 'Failed to initialize NVML: Unknown Error': the device cgroup no longer "
                "lets this container at the GPU (after it worked: a systemctl daemon-reload on a "
                "cgroup-v1/systemd host drops the rules runc set)",
                "recreate the container (docker rm -f && docker run ...); on the host, NVIDIA's "
                "fix: nvidia-ctk system create-dev-char-symlinks --create-all (and its udev "
                "rule), or run containers through CDI", evidence)

    def check_gpu_exclusive_busy(self):
        info = self.cuda_info
        modes = info.get("compute_modes") or {}
        contexts = info.get("contexts") or {}
        evidence = {"compute_modes": modes, "contexts": contexts}
        names = {0: "Default", 1: "Exclusive_Thread", 2: "Prohibited", 3: "Exclusive_Process"}
        busy = sorted(i for i, c in contexts.items() if c.get("rc") == 46)
        fix = ("set the compute mode back on the host (nvidia-smi -i N -c DEFAULT, as root), or "
               "run one process per GPU")
        if busy:
            return ("fail", "GPU %s is in %s mode and held by another process: CUDA error 46 "
                    "(CUDA-capable device(s) is/are busy or unavailable)" % (
                        ", ".join(busy), names.get(int(modes.get(busy[0], 3)), "exclusive")), fix,
                    evidence)
        prohibited = sorted(i for i, m in modes.items() if m == 2)
        if prohibited:
            return ("fail", "GPU %s is in compute mode Prohibited: no process may use it" % (
                ", ".join(prohibited)), fix, evidence)
        exclusive = sorted(i for i, m in modes.items() if m == 3)
        if exclusive:
            return ("warn", "GPU %s is in Exclusive_Process mode: one process at a time (a "
                    "second one, e.g. a compile worker or another rank, gets error 46)" % (
                        ", ".join(exclusive)), fix, evidence)
        if not modes:
            return ("skip", "compute mode unknown (NVML: %s)" % (
                info.get("nvml_error") or info.get("nvml_init_text") or "not read"), "",
                evidence)
        return ("pass", "compute mode Default", "", evidence)

    def check_driver_userspace_mismatch(self):
        kernel = self.facts["driver"]["kernel_module"]
        user = self.facts["driver"]["userspace"]
        smi_error = self.smi_info.get("error") or ""
        evidence = {"kernel_module": kernel, "libcuda": self.cuda_info.get("loaded"),
                    "libcuda_version": user, "nvidia_smi": smi_error or None,
                    "cuda_init": self.cuda_info.get("init_name")}
        fix = ("install the driver userspace of the same version as the host's kernel module "
               "(%s) in the container: NVIDIA-Linux-x86_64-%s.run --no-kernel-module" % (
                   kernel or "?", kernel or "<version>"))
        loaded = self.cuda_info.get("loaded") or ""
        if "/compat/" in loaded or "/compat/" in os.path.realpath(loaded or "."):
            return ("skip", "libcuda %s is CUDA's forward-compat library over kernel module %s"
                    % (loaded, kernel or "?"), "", evidence)
        if "version mismatch" in smi_error:
            return ("fail", "driver/library version mismatch: kernel module %s, libcuda %s" % (
                kernel or "?", user or "?"), fix, evidence)
        if kernel and user:
            if kernel != user:
                return ("fail", "driver/library version mismatch: kernel module %s, libcuda %s" % (
                    kernel, user), fix, evidence)
            return ("pass", "kernel module and libcuda are both %s" % kernel, "", evidence)
        missing = "/proc/driver/nvidia/version" if not kernel else "a versioned libcuda.so"
        return ("skip", "cannot compare versions: no %s" % missing, "", evidence)

    def check_zero_active_drivers(self):
        info = self.cuda_info
        evidence = {key: info.get(key) for key in ("loaded", "load_error", "init", "init_name",
                                                    "count", "error")}
        evidence["CUDA_VISIBLE_DEVICES"] = self.env.get("CUDA_VISIBLE_DEVICES")
        if info.get("timed_out"):
            return ("error", info["error"], "", evidence)
        if info.get("error"):
            return ("error", "libcuda probe failed: " + info["error"], "", evidence)
        if info.get("load_error"):
            cause, _, values = self.name_failure({"error": info["load_error"]}, {})
            evidence["matches"] = cause if cause not in (None, "zero_active_drivers") else None
            return ("fail", "libcuda.so.1 cannot be loaded: " + first_line(info["load_error"]),
                    self.cause_fix(evidence["matches"], values) if evidence["matches"] else
                    "install the NVIDIA driver userspace (libcuda.so.1) matching the kernel "
                    "module, or bind-mount it into the container and run ldconfig", evidence)
        if info.get("init") != 0:
            code = info.get("init")
            known = CUDA_ERRORS.get(code, "CUDA error") if isinstance(code, int) else "CUDA error"
            name = info.get("init_name") or known
            if code == 999:
                return self.unknown_error(evidence)
            limit = self.limit_named("ENOMEM") if code == 2 else self.cuda_os_limit(code)
            if limit:
                evidence["matches"] = limit[0]
                return ("fail", "cuInit failed: %s (%s) under the job's %s of %s" % (
                    name, code, limit[1]["limit"], limit[1]["value"]),
                    self.cause_fix(*limit), evidence)
            return ("fail", "cuInit failed: %s (%s)" % (name, code),
                    self.cause_fix("zero_active_drivers"), evidence)
        if not info.get("count"):
            visible = self.env.get("CUDA_VISIBLE_DEVICES")
            hint = " (CUDA_VISIBLE_DEVICES=%r hides them)" % visible if visible is not None else ""
            return ("fail", "CUDA driver sees 0 devices" + hint,
                    "unset or fix CUDA_VISIBLE_DEVICES" if hint else "pass the GPUs through",
                    evidence)
        return ("pass", "cuInit OK, %d device(s), driver API %s" % (
            info["count"], self.facts["driver"]["cuda_driver_version"]), "", evidence)

    def cuda_code(self):
        info = self.cuda_info
        code = info.get("init")
        if not isinstance(code, int):
            return None, None
        return code, info.get("init_name") or CUDA_ERRORS.get(code) or "CUDA error"

    def gpu_models(self):
        return sorted({g.get("name") or g.get("model") or "NVIDIA GPU" for g in self.gpus}
                      ) or sorted({g["model"] for g in self.proc["gpus"] if g.get("model")})

    def check_fabric_manager_not_ready(self):
        code, name = self.cuda_code()
        switches = nvswitch_devices()
        evidence = {"cuda_init": code, "cuda_init_name": name, "nvswitches": switches,
                    "gpu_models": self.gpu_models(), "kernel_module": self.proc["kernel_module"]}
        if code is None:
            return ("skip", "cuInit not reached (see zero_active_drivers)", "", evidence)
        if code != 802:
            if switches:
                return ("pass", "%d NVSwitch(es), cuInit %s" % (len(switches), name), "",
                        evidence)
            return ("pass", "cuInit %s (not 802)" % name, "", evidence)
        board = ("%d NVSwitch(es) in /proc/driver/nvidia-nvswitch" % len(switches)
                 if switches else "no NVSwitch listed to this node")
        version = self.proc["kernel_module"] or "<driver version>"
        evidence["expected_error"] = "Error 802: system not yet initialized"
        return ("fail", "cuInit returns 802 %s on %s (%s): the NVSwitch fabric is not "
                "initialised, so CUDA sees no GPU" % (name, ", ".join(
                    evidence["gpu_models"]) or "this GPU", board),
                "install and start nvidia-fabricmanager at exactly the driver's version (%s) on "
                "the host (apt-get install nvidia-fabricmanager-%s; systemctl enable --now "
                "nvidia-fabricmanager); the container only sees the result" % (
                    version, version.split(".")[0]), evidence)

    def check_cuda_compat_on_unsupported_gpu(self):
        code, name = self.cuda_code()
        loaded, real = self.loaded_libcuda()
        compat = bool(real and re.search(r"/compat(/|$)", os.path.dirname(real) + "/"))
        compat = compat or bool(loaded and "/compat/" in loaded)
        evidence = {"cuda_init": code, "cuda_init_name": name, "libcuda": loaded,
                    "libcuda_real": real, "kernel_module": self.proc["kernel_module"],
                    "gpu_models": self.gpu_models(),
                    "LD_LIBRARY_PATH": self.env.get("LD_LIBRARY_PATH")}
        if code is None:
            return ("skip", "cuInit not reached (see zero_active_drivers)", "", evidence)
        if code == 804 or (compat and code != 0):
            where = os.path.dirname(loaded or real or "") or "/usr/local/cuda/compat"
            gpus = ", ".join(evidence["gpu_models"]) or "this GPU"
            kernel = self.proc["kernel_module"] or "?"
            if code == 804:
                evidence["expected_error"] = ("Error 804: forward compatibility was attempted on "
                                              "non supported HW")
                summary = ("cuInit returns 804 %s: the CUDA forward-compat libcuda %s is loaded "
                           "on %s (kernel module %s), which does not support it" % (
                               name, real or loaded, gpus, kernel))
            else:
                summary = ("cuInit returns %d %s: the CUDA forward-compat libcuda %s is loaded "
                           "over kernel module %s on %s" % (code, name, real or loaded, kernel,
                                                            gpus))
            return ("fail", summary,
                    "drop %s from LD_LIBRARY_PATH / ld.so.conf.d (then run ldconfig), or upgrade "
                    "the host driver" % where, evidence)
        if compat:
            return ("pass", "forward-compat libcuda %s works on this GPU" % real, "", evidence)
        return ("pass", "libcuda %s is not a forward-compat library" % (real or loaded or "?"), "",
                evidence)

    def check_libcuda_stub_shadowing(self):
        code, name = self.cuda_code()
        loaded, real = self.loaded_libcuda()
        ld_path = [d for d in (self.env.get("LD_LIBRARY_PATH") or "").split(":") if d]
        stub_dirs = [d for d in ld_path if os.path.basename(d.rstrip("/")) == "stubs"]
        entries = parse_ldconfig(self.ld_result["stdout"]) if self.ld_result else []
        cached = [p for n, p in entries if n.startswith("libcuda.so") and "/stubs/" in p]
        evidence = {"cuda_init": code, "cuda_init_name": name, "libcuda": loaded,
                    "libcuda_real": real, "LD_LIBRARY_PATH_stubs": stub_dirs,
                    "ldconfig_stubs": cached}
        if code is None:
            return ("skip", "cuInit not reached (see zero_active_drivers)", "", evidence)
        is_stub = bool(real and "/stubs/" in real) or bool(loaded and "/stubs/" in loaded)
        if code == 34 or is_stub:
            where = os.path.dirname(loaded or "") or (stub_dirs or cached or ["the stubs dir"])[0]
            evidence["expected_error"] = "CUDA driver is a stub library"
            return ("fail", "cuInit returns %d %s: the loaded libcuda %s is the link-time stub" % (
                code, name, loaded or "?"),
                "remove %s from the runtime search path (LD_LIBRARY_PATH / ld.so.conf.d, then "
                "ldconfig), so the driver's libcuda.so.1 loads" % where, evidence)
        return ("pass", "libcuda %s is the driver's" % (loaded or "?"), "", evidence)

    def check_gpu_arch_unsupported(self):
        caps = self.capabilities()
        evidence = {"gpu_capabilities": ["%d.%d" % c for c in caps],
                    "gpu_models": self.gpu_models()}
        if not caps:
            return ("skip", "compute capability unknown", "", evidence)
        old = [c for c in caps if c < (7, 0)]
        if old:
            return ("fail", "%s has compute capability %s: Triton and torch.compile need >= 7.0"
                    % (", ".join(evidence["gpu_models"]) or "the GPU",
                       ", ".join("%d.%d" % c for c in old)),
                    "run Triton workloads on a GPU of compute capability 7.0 or newer (Volta+)",
                    evidence)
        return ("pass", "compute capability %s" % ", ".join("%d.%d" % c for c in caps), "",
                evidence)


# --- checks/packages ------------------------------------------------------------------------------

def record_missing(dist_path, package, limit=5):
    site = os.path.dirname(dist_path)
    missing = []
    try:
        with open(os.path.join(dist_path, "RECORD"), newline="") as handle:
            for row in csv.reader(handle):
                name = row[0] if row else ""
                if (name.startswith(package + "/") and not name.endswith(".pyc")
                        and not os.path.lexists(os.path.join(site, name))):
                    missing.append(name)
                    if len(missing) >= limit:
                        break
    except (OSError, csv.Error):
        return [], False
    return missing, True


def dist_infos(site, name):
    try:
        entries = os.listdir(site)
    except OSError:
        return []
    low = name.lower().replace("-", "_")
    return [os.path.join(site, e) for e in sorted(entries) if e.endswith(".dist-info")
            and e.split("-")[0].lower().replace(".", "_") == low]


def missing_module(text):
    match = re.search(r"No module named '((triton|torch)[\w.]*)'", text or "")
    return match.group(1) if match else None


class PackageChecks(Findings):

    def package_check(self, package, top, dists, errors):
        evidence = {"location": top, "distributions": [
            "%s %s" % (d.get("name"), d.get("version")) for d in dists]}
        broken = []
        for dist in dists:
            missing, has_record = record_missing(dist["path"], package)
            if not has_record:
                broken.append("%s %s has no RECORD" % (dist.get("name"), dist.get("version")))
            elif missing:
                broken.append("%s %s lacks %s" % (dist.get("name"), dist.get("version"),
                                                  ", ".join(missing)))
        for text in errors:
            module = missing_module(text)
            if module and (module == package or module.startswith(package + ".")):
                broken.append("No module named '%s' (%s)" % (module, first_line(text)))
                break
        evidence["broken"] = broken
        shadow = self.shadowing(package, top, dists)
        if shadow and broken:
            evidence["shadowed_by"] = shadow
            return CheckResult("fail", "%s at %s (from %s) shadows %s installed in %s: %s" % (
                package, top, shadow["source"], shadow["installed"], shadow["site"],
                "; ".join(broken)), "take %s off %s (it holds %s, which shadows the "
                "installed %s), or build that %s there" % (
                    shadow["entry"], shadow["variable"], top, shadow["installed"], package),
                evidence)
        if not dists and not broken:
            status = "fail" if package == "triton" and self.triton_version() >= (3, 4) else "warn"
            return CheckResult(status, "no %s dist-info for %s (installed without its "
                               "metadata)" % (package, top), self.cause_fix(
                                   package + "_install_broken"), evidence)
        if broken:
            return CheckResult("fail", "the %s installation at %s is incomplete: %s" % (
                package, top, "; ".join(broken)), self.cause_fix(package + "_install_broken"),
                evidence)
        return CheckResult("pass", "%s's files are all there (%s)" % (
            package, ", ".join(evidence["distributions"])), "", evidence)

    def shadowing(self, package, top, dists):
        sites = {os.path.realpath(os.path.dirname(d["path"])) for d in dists if d.get("path")}
        here = os.path.realpath(os.path.dirname(top)) if top else None
        if not sites or here is None or here in sites:
            return None
        entry = self.stages.get("meta", {}).get(package + "_entry") or os.path.dirname(top)
        listed = [p for p in (self.env.get("PYTHONPATH") or "").split(os.pathsep) if p]
        if any(os.path.realpath(p) == os.path.realpath(entry) for p in listed):
            variable, source = "PYTHONPATH", "PYTHONPATH"
        else:
            variable, source = "sys.path (a .pth file or the script's directory)", "sys.path"
        first = dists[0]
        return {"entry": entry, "variable": variable, "source": source,
                "installed": "%s %s" % (first.get("name"), first.get("version")),
                "site": os.path.dirname(first["path"])}

    def check_triton_install_broken(self):
        meta = self.stages.get("meta", {})
        if not meta.get("triton_dir"):
            return CheckResult("skip", "Triton is not installed", "", {})
        target = self.stages.get("target") or {}
        errors = [(self.stages.get("backends") or {}).get("error"), target.get("error")]
        return self.package_check("triton", meta["triton_dir"], meta.get("triton_dists") or [],
                                  [e for e in errors if e])

    def check_torch_install_broken(self):
        meta = self.stages.get("meta", {})
        top = meta.get("torch_dir")
        if not top:
            return CheckResult("skip", "PyTorch not installed", "", {})
        dists = [{"name": "torch", "version": os.path.basename(p)[:-len(".dist-info")].split(
            "-")[1], "path": p} for p in dist_infos(os.path.dirname(top), "torch")]
        error = (self.stages.get("torch") or {}).get("error")
        return self.package_check("torch", top, dists, [error] if error else [])


# --- checks/torch ---------------------------------------------------------------------------------

def arch_supported(arch_list, cap):
    major, minor = cap
    for arch in arch_list:
        match = re.match(r"^(sm|compute)_(\d+)(\d)([af]?)$", arch)
        if not match:
            continue
        kind, a_major, a_minor, suffix = match.group(1), int(match.group(2)), int(
            match.group(3)), match.group(4)
        if kind == "sm" and a_major == major and a_minor <= minor and (
                not suffix or a_minor == minor):
            return True
        if kind == "compute" and not suffix and (a_major, a_minor) <= (major, minor):
            return True
    return False


class TorchChecks(Findings):

    def torch_info(self):
        return self.stages.get("torch") or {}

    def torch_imported(self, *extra):
        torch = self.torch_info()
        if not self.stages.get("meta", {}).get("torch_dir"):
            return ("skip", "PyTorch not installed", "", {}), None, None
        if not torch:
            return self.stage_missing("import torch"), None, None
        evidence = {key: torch.get(key) for key in ("version", *extra, "cuda", "cuda_available",
                                                     "device_count", "import_s", "warnings",
                                                     "error")}
        if torch.get("error"):
            return ("fail", "import torch failed: " + first_line(torch["error"]),
                    "reinstall PyTorch for %s" % self.workload_python, evidence), None, None
        return None, torch, evidence

    def check_driver_too_old(self):
        meta = self.stages.get("meta", {})
        torch_cuda = self.torch_info().get("cuda") or meta.get("torch_cuda")
        driver = self.facts["driver"]["cuda_driver_version"]
        evidence = {"torch_cuda": torch_cuda, "driver_cuda": driver}
        if not meta.get("torch_dir"):
            return ("skip", "PyTorch not installed", "", evidence)
        if not torch_cuda or not driver:
            return ("skip", "cannot compare: torch CUDA %s, driver CUDA %s" % (
                torch_cuda, driver), "", evidence)
        need, have = version_tuple(torch_cuda)[:2], version_tuple(driver)[:2]
        fix = "upgrade the NVIDIA driver to one supporting CUDA %s, or install a torch built " \
              "for CUDA %s" % (torch_cuda, driver)
        if have[:1] < need[:1]:
            return ("fail", "driver supports CUDA %s, torch needs CUDA %s" % (driver, torch_cuda),
                    fix, evidence)
        if have < need:
            return ("warn", "driver supports CUDA %s, torch is built for %s (minor-version "
                    "compatibility only)" % (driver, torch_cuda), fix, evidence)
        return ("pass", "driver CUDA %s >= torch CUDA %s" % (driver, torch_cuda), "", evidence)

    def check_torch_cuda(self):
        result, torch, evidence = self.torch_imported()
        if result:
            return result
        if not torch.get("cuda"):
            return ("fail", "CPU-only PyTorch build (torch %s)" % torch.get("version"),
                    "install a CUDA build of torch, e.g. %s -m pip install torch --index-url "
                    "https://download.pytorch.org/whl/cu128" % self.workload_python, evidence)
        if not torch.get("cuda_available"):
            warning = first_line((torch.get("warnings") or [""])[0])
            code = re.search(r"\bError (\d+):", warning or "")
            limit = self.limit_named("ENOMEM") if code and code.group(1) == "2" else (
                self.cuda_os_limit(int(code.group(1))) if code else None)
            if limit:
                evidence["matches"] = limit[0]
                return ("fail", "torch.cuda.is_available() is False: %s under the job's %s of "
                        "%s" % (warning, limit[1]["limit"], limit[1]["value"]),
                        self.cause_fix(*limit), evidence)
            return ("fail", "torch.cuda.is_available() is False" + (
                ": " + warning if warning else ""),
                "fix the driver layer (device nodes, driver, CUDA_VISIBLE_DEVICES)", evidence)
        count = torch.get("device_count") or 0
        if count < len(self.gpus):
            return ("warn", "torch sees %d of %d GPUs (CUDA_VISIBLE_DEVICES=%s)" % (
                count, len(self.gpus), self.env.get("CUDA_VISIBLE_DEVICES")), "", evidence)
        return ("pass", "torch %s (CUDA %s) sees %d GPU(s)" % (
            torch.get("version"), torch.get("cuda"), count), "", evidence)

    def check_torch_lacks_arch(self):
        torch = self.torch_info()
        arch_list = torch.get("arch_list") or []
        caps = self.capabilities()
        evidence = {"arch_list": arch_list, "gpu_capabilities": ["%d.%d" % c for c in caps]}
        if not self.stages.get("meta", {}).get("torch_dir"):
            return ("skip", "PyTorch not installed", "", evidence)
        if not arch_list or not caps:
            return ("skip", "arch list or compute capability unknown", "", evidence)
        missing = [cap for cap in caps if not arch_supported(arch_list, cap)]
        if missing:
            sm = ", ".join("sm_%d%d" % cap for cap in missing)
            return ("fail", "torch %s has no kernels for %s (built for %s)" % (
                torch.get("version"), sm, " ".join(arch_list)),
                "install a torch build that includes %s (cu128 or newer wheels for "
                "Blackwell)" % sm, evidence)
        return ("pass", "torch built for %s" % ", ".join("sm_%d%d" % c for c in caps), "",
                evidence)


# --- checks/toolchain -----------------------------------------------------------------------------

NOT_COMPILED = ("none", "deadline", "timeout")


def compiler_error_line(text):
    for line in (text or "").splitlines():
        if "error" in line.lower():
            return line.strip()[:300]
    return first_line(text)[:300]


def header_missing(text):
    match = re.search(r"fatal error: '?([\w./-]+\.h)'?(?::| file not found)", text or "")
    return match.group(1) if match else None


class ToolchainChecks(Findings):

    def check_cc_env_invalid(self):
        cc = self.env.get("CC")
        evidence = {"CC": cc}
        if cc is None:
            return ("pass", "CC not set (Triton looks for gcc, then clang)", "", evidence)
        if self.compiler["path"]:
            return ("pass", "CC=%s is executable" % cc, "", evidence)
        text = "FileNotFoundError: [Errno 2] No such file or directory: '%s'" % cc
        evidence["expected_error"] = text
        return ("fail", "CC=%s is not an executable (Triton uses it unchecked)" % cc,
                "fix or unset CC (export CC=/usr/bin/gcc)", evidence)

    def check_no_c_compiler(self):
        path = self.env.get("PATH", os.defpath)
        gcc, clang = shutil.which("gcc", path=path), shutil.which("clang", path=path)
        evidence = {"PATH": path, "gcc": gcc, "clang": clang, "CC": self.env.get("CC"),
                    "cc": shutil.which("cc", path=path)}
        fix = self.compile_fix("compiler") + ", or set CC"
        if self.compiler["source"] == "CC":
            if self.compiler["path"]:
                return ("pass", "compiler from CC: %s" % self.compiler["path"], "", evidence)
            if gcc or clang:
                return ("pass", "%s on PATH (unused while CC is set)" % (gcc or clang), "",
                        evidence)
            return ("fail", "no C compiler: CC is invalid and there is no gcc or clang on PATH",
                    fix, evidence)
        if self.compiler["path"]:
            return ("pass", "%s (%s)" % (self.compiler["path"], self.compiler["source"]), "",
                    evidence)
        summary = "no C compiler: CC unset, no gcc or clang on PATH"
        if evidence["cc"]:
            summary += " (%s exists, but Triton never tries cc)" % evidence["cc"]
        evidence["expected_error"] = ("RuntimeError: Failed to find C compiler. Please specify "
                                      "via CC environment variable or set "
                                      "triton.knobs.build.impl.")
        return ("fail", summary, fix, evidence)

    def compile_outcome(self):
        result = self.compile_result
        by = getattr(self, "compile_by", None)
        if result is None:
            return ("deadline" if by == "deadline" else "none"), {}
        evidence = {"argv": getattr(self, "compile_argv", None), "rc": result["rc"],
                    "stderr": clip(result["stderr"]), "seconds": result["seconds"],
                    "by": "triton" if by == "triton" else "probe"}
        if result["timed_out"]:
            return "timeout", evidence
        if result["error"]:
            evidence["error"] = result["error"]
            return result["error"], evidence
        if result["rc"] == 0:
            return "ok", evidence
        return result["stderr"] or "rc %s" % result["rc"], evidence

    def check_no_linker(self):
        outcome, evidence = self.compile_outcome()
        ld = shutil.which("ld", path=self.env.get("PATH", os.defpath))
        evidence["ld"] = ld
        if outcome == "ok":
            return ("pass", "compiled and linked a Python extension with %s%s" % (
                self.compiler["path"], " (Triton's own build)" if evidence["by"] == "triton"
                else ""), "", evidence)
        if outcome == "deadline":
            return ("skip", "not tested: the workload's stack left too little of the deadline "
                    "(ld: %s)" % (ld or "absent"), "", evidence)
        if outcome == "none":
            return ("skip", "no compiler to test the linker with (ld: %s)" % (ld or "absent"),
                    "", evidence)
        if outcome == "timeout":
            return ("error", "test compile timed out", "", evidence)
        if classify_error(outcome) == "no_linker":
            return ("fail", "no linker: " + compiler_error_line(outcome),
                    self.compile_fix("linker"), evidence)
        return ("pass", "ld at %s (the test compile failed earlier)" % ld if ld else
                "linker not reached (the test compile failed earlier)", "", evidence)

    def check_libc_headers_missing(self):
        outcome, evidence = self.compile_outcome()
        headers = {name: os.path.exists("/usr/include/" + name) for name in ("stdio.h", "dlfcn.h")}
        evidence["headers"] = headers
        fix = self.compile_fix("libc")
        if outcome == "ok":
            return ("pass", "libc headers found (stdio.h, dlfcn.h)", "", evidence)
        if outcome not in NOT_COMPILED and classify_error(outcome) == "libc_headers_missing":
            return ("fail", "libc headers missing: " + compiler_error_line(outcome), fix, evidence)
        if outcome in NOT_COMPILED or header_missing(outcome) is None:
            if not all(headers.values()):
                return ("fail", "libc headers missing: no /usr/include/%s" % ", ".join(
                    n for n, ok in headers.items() if not ok), fix, evidence)
            return ("pass", "/usr/include/stdio.h and dlfcn.h present", "", evidence)
        return ("pass", "libc headers found", "", evidence)

    def check_python_headers_missing(self):
        outcome, evidence = self.compile_outcome()
        include = self.pyinfo.get("include")
        header = os.path.join(include, "Python.h") if include else None
        evidence.update({"include": include, "python_h_exists": bool(
            header and os.path.exists(header))})
        fix = self.compile_fix("python") + " (headers for %s)" % (
            self.facts["python"].get("executable"))
        if outcome == "ok":
            return ("pass", "Python.h for %s compiles" % self.facts["python"].get("version"), "",
                    evidence)
        if outcome not in NOT_COMPILED and re.search(r"\bPython\.h\b", outcome):
            return ("fail", "Python.h missing for Python %s: %s" % (
                self.facts["python"].get("version"), compiler_error_line(outcome)), fix, evidence)
        if not evidence["python_h_exists"]:
            return ("fail", "Python.h missing for Python %s (not in %s)" % (
                self.facts["python"].get("version"), include), fix, evidence)
        return ("pass", "%s present" % header, "", evidence)


# --- checks/libcuda -------------------------------------------------------------------------------

class LoaderChecks(Findings):

    def check_ldconfig_binary_missing(self):
        path = host_path("/sbin/ldconfig")
        evidence = {"path": "/sbin/ldconfig", "TRITON_LIBCUDA_PATH":
                    self.env.get("TRITON_LIBCUDA_PATH")}
        if os.access(path, os.X_OK):
            return ("pass", "/sbin/ldconfig present", "", evidence)
        if self.env.get("TRITON_LIBCUDA_PATH"):
            return ("pass", "/sbin/ldconfig absent but unused (TRITON_LIBCUDA_PATH is set)", "",
                    evidence)
        evidence["expected_error"] = ("FileNotFoundError: [Errno 2] No such file or directory: "
                                      "'/sbin/ldconfig'")
        return ("fail", "/sbin/ldconfig missing (Triton runs it by that path)",
                "set TRITON_LIBCUDA_PATH=%s, or install libc-bin" % (
                    self.libcuda_dir() or "<dir of libcuda.so.1>"), evidence)

    def libcuda_dirs(self):
        env_path = self.env.get("TRITON_LIBCUDA_PATH")
        if env_path:
            return [env_path], None, []
        text = self.ld_result["stdout"] if self.ld_result else ""
        entries = parse_ldconfig(text)
        locs = [path for name, path in entries if "libcuda.so.1" in name]
        dirs = [os.path.dirname(loc) for loc in locs]
        ld_path = self.env.get("LD_LIBRARY_PATH")
        if ld_path and not dirs:
            dirs = [d for d in ld_path.split(":") if os.path.exists(os.path.join(d,
                                                                               "libcuda.so.1"))]
        msg = "libcuda.so cannot found!\n"
        if locs:
            msg += "Possible files are located at %s." % str(locs)
            msg += "Please create a symlink of libcuda.so to any of the files."
        else:
            msg += 'Please make sure GPU is set up and then run "/sbin/ldconfig"'
            msg += " (requires sudo) to refresh the linker cache."
        ok = any(os.path.exists(os.path.join(d, "libcuda.so.1")) for d in dirs)
        return dirs, (None if ok else "AssertionError: " + msg), entries

    def ldconfig_limit(self):
        result = self.ld_result
        if not result or self.env.get("TRITON_LIBCUDA_PATH"):
            return None
        limit = self.helper_limit(result)
        if limit:
            return limit[0], limit[1], bool(result.get("alone")) and not result.get("oom_kill")
        if result["rc"] in (0, None) and result["stdout"].strip():
            return None
        parsed = parse_oserror(result["stderr"])
        named = self.limit_named(parsed["errno"]) if parsed and parsed["errno"] in (
            ERRNO_LIMITS) else None
        return (named[0], named[1], True) if named else None

    def check_libcuda_not_in_ldcache(self):
        if self.ld_result is None and not self.env.get("TRITON_LIBCUDA_PATH"):
            return ("skip", "no /sbin/ldconfig to ask (see ldconfig_binary_missing)", "", {})
        if self.ld_result and self.ld_result["timed_out"]:
            return ("error", "/sbin/ldconfig -p timed out", "", {})
        ran = self.ld_result or {}
        said = ran.get("stderr") or ""
        limit = self.ldconfig_limit()
        if limit:
            cause, values, shared = limit
            evidence = {"stderr": said, "rc": ran["rc"], "error": ran["error"],
                        "errno": ran.get("errno")}
            if not shared:
                return self.limit_stopped("/sbin/ldconfig -p", ran, cause, values, evidence)
            evidence.update(matches=cause, object=values, expected_error=first_line(
                ran["error"] or said))
            return ("fail", "/sbin/ldconfig -p, which Triton runs to find libcuda, cannot run "
                    "in this job: %s%s" % (first_line(ran["error"]) or " ".join(
                        said.split()), self.limit_note(cause, values)),
                    self.cause_fix(cause, values), evidence)
        if "Can't open cache file" in said and not self.env.get("TRITON_LIBCUDA_PATH"):
            return ("fail", "/sbin/ldconfig -p fails: %s" % " ".join(said.split()),
                    self.cause_fix("ld_so_cache_missing"), {
                        "matches": "ld_so_cache_missing", "stderr": said, "rc": ran["rc"]})
        dirs, failure, entries = self.libcuda_dirs()
        locs = [p for n, p in entries if "libcuda.so.1" in n]
        if failure and locs and not self.env.get("TRITON_LIBCUDA_PATH"):
            return ("skip", "ldconfig lists libcuda.so.1, at a path that does not exist (see "
                    "ldcache_stale_libcuda_entry)", "", {"ldconfig_libcuda": locs})
        evidence = {"dirs": dirs, "ldconfig_libcuda": [p for n, p in entries if "libcuda" in n],
                    "LD_LIBRARY_PATH": self.env.get("LD_LIBRARY_PATH"),
                    "TRITON_LIBCUDA_PATH": self.env.get("TRITON_LIBCUDA_PATH"),
                    "dlopen": self.cuda_info.get("loaded")}
        if failure:
            evidence["expected_error"] = failure
            where = self.libcuda_dir()
            fix = ("run ldconfig (add an /etc/ld.so.conf.d entry for %s), or set "
                   "TRITON_LIBCUDA_PATH=%s" % (where or "the libcuda dir",
                                               where or "<dir of libcuda.so.1>"))
            summary = "libcuda.so.1 is not in the ldconfig cache nor on LD_LIBRARY_PATH"
            if where:
                summary += " (the loader finds %s)" % self.cuda_info.get("loaded")
            return ("fail", summary, fix, evidence)
        return ("pass", "libcuda.so.1 in %s" % ", ".join(dirs), "", evidence)

    def check_libcuda_unversioned_missing(self):
        version = self.triton_version()
        if not version:
            return ("skip", "Triton version unknown", "", {})
        if version >= (3, 6):
            return ("pass", "not needed: Triton >= 3.6 links libcuda.so.1", "", {})
        dirs, failure, entries = self.libcuda_dirs()
        if failure:
            return ("skip", "libcuda.so.1 not found (see libcuda_not_in_ldcache)", "", {})
        in_dirs = [d for d in dirs if os.path.exists(os.path.join(d, "libcuda.so"))]
        in_cache = [p for n, p in entries if n == "libcuda.so"]
        evidence = {"dirs": dirs, "with_libcuda_so": in_dirs, "ldconfig": in_cache}
        if in_dirs or in_cache:
            return ("pass", "libcuda.so present for -lcuda", "", evidence)
        evidence["expected_error"] = "/usr/bin/ld: cannot find -lcuda"
        target = os.path.join(dirs[0], "libcuda.so") if dirs else "libcuda.so"
        return ("fail", "Triton %s links -lcuda but only libcuda.so.1 exists" % ".".join(
            map(str, version)), "ln -s libcuda.so.1 %s, or upgrade to Triton >= 3.6" % target,
            evidence)

    def check_ldcache_stale_libcuda_entry(self):
        if self.env.get("TRITON_LIBCUDA_PATH"):
            return ("pass", "not consulted (TRITON_LIBCUDA_PATH is set)", "", {})
        if self.ld_result is None:
            return ("skip", "no /sbin/ldconfig to ask (see ldconfig_binary_missing)", "", {})
        if self.ldconfig_limit():
            return ("skip", "/sbin/ldconfig -p gave no answer under the job's limit (see "
                    "libcuda_not_in_ldcache)", "", {})
        entries = parse_ldconfig(self.ld_result["stdout"])
        locs = [p for n, p in entries if "libcuda.so.1" in n]
        loaded, _ = self.loaded_libcuda()
        evidence = {"ldconfig_libcuda": locs, "exists": {p: os.path.exists(p) for p in locs},
                    "dlopen": loaded}
        if not locs:
            return ("skip", "ldconfig lists no libcuda.so.1 (see libcuda_not_in_ldcache)", "",
                    evidence)
        if any(os.path.exists(p) for p in locs):
            return ("pass", "ldconfig's libcuda.so.1 exists (%s)" % ", ".join(
                p for p in locs if os.path.exists(p)), "", evidence)
        if not loaded:
            return ("skip", "ldconfig's libcuda.so.1 is missing and the loader finds none either "
                    "(see zero_active_drivers)", "", evidence)
        real_dir = os.path.dirname(loaded)
        evidence["expected_error"] = (
            "AssertionError: libcuda.so cannot found!\nPossible files are located at %s."
            "Please create a symlink of libcuda.so to any of the files." % str(locs))
        return ("fail", "ldconfig -p lists libcuda.so.1 only at %s, which does not exist here; "
                "the loader uses %s, which Triton ignores" % (", ".join(locs), loaded),
                "set TRITON_LIBCUDA_PATH=%s, or rerun ldconfig over %s" % (real_dir, real_dir),
                evidence)


# --- checks/cache ---------------------------------------------------------------------------------

class CacheChecks(Findings):

    def check_cache_dir_unwritable(self):
        cache = self.facts["triton_cache_dir"]
        evidence = {"cache_dir": cache, "HOME": self.env.get("HOME")}
        fix = self.cause_fix("cache_dir_unwritable", {"cache_dir": cache})
        if os.path.isdir(cache):
            if not os.access(cache, os.W_OK | os.X_OK):
                return ("fail", "Triton cache %s not writable: PermissionError: [Errno 13] "
                        "Permission denied: '%s'" % (cache, cache), fix, evidence)
            return ("pass", "%s writable" % cache, "", evidence)
        ancestor = existing_ancestor(cache)
        evidence["nearest_existing"] = ancestor
        if not os.path.isdir(ancestor):
            return ("fail", "Triton cache %s cannot be created: %s is not a directory" % (
                cache, ancestor), fix, evidence)
        if not os.access(ancestor, os.W_OK | os.X_OK):
            missing = os.path.join(ancestor, os.path.relpath(cache, ancestor).split(os.sep)[0])
            return ("fail", "Triton cache cannot be created: PermissionError: [Errno 13] "
                    "Permission denied: '%s'" % missing, fix, evidence)
        return ("pass", "%s can be created under %s" % (cache, ancestor), "", evidence)

    def _cache_mount(self, find):
        cache = self.facts["triton_cache_dir"]
        if not self.mountinfo:
            return cache, None, ("skip", "no /proc/self/mountinfo", "", {"cache_dir": cache})
        where = existing_ancestor(os.path.realpath(cache) if os.path.exists(cache) else cache)
        return cache, find(where, self.mountinfo), None

    def check_cache_dir_noexec(self):
        cache, mount, skipped = self._cache_mount(mount_of)
        if skipped:
            return skipped
        evidence = {"cache_dir": cache, "mount": mount[0] if mount else None,
                    "options": mount[1] if mount else None}
        space = (self.stages.get("own") or {}).get("cache_space") or {}
        if space.get("noexec") and not (mount and "noexec" in mount[1].split(",")):
            mount = (space.get("path") or cache, "noexec")
            evidence.update(mount=mount[0], options=mount[1], seen_by="statvfs ST_NOEXEC")
        if mount and "noexec" in mount[1].split(","):
            evidence["expected_error"] = ("ImportError: cuda_utils.so: failed to map segment "
                                          "from shared object")
            return ("fail", "Triton cache %s is on noexec mount %s" % (cache, mount[0]),
                    "set TRITON_CACHE_DIR to a dir on a mount without noexec", evidence)
        return ("pass", "cache mount %s allows exec" % (mount[0] if mount else "/"), "",
                evidence)

    def check_cache_on_network_fs(self):
        cache, mount, skipped = self._cache_mount(mount_fs)
        if skipped:
            return skipped
        evidence = {"cache_dir": cache, "mount": mount and mount[0],
                    "fstype": mount and mount[1], "source": mount and mount[2]}
        if mount and network_fs(mount[1]):
            return ("warn", "Triton cache %s is on %s %s (%s): ranks sharing it race on its "
                    "files (FileNotFoundError on .tmp.pid_*, Stale file handle)" % (
                        cache, mount[1], mount[0], mount[2]),
                    "export TRITON_CACHE_DIR=<a node-local dir>, e.g. /tmp/triton-$USER", evidence)
        return ("pass", "cache on %s (%s)" % (mount[0], mount[1]) if mount else
                "cache mount unknown", "", evidence)

    def _entry_problems(self, kind):
        own = self.stages.get("own") or {}
        entries = own.get("entries")
        evidence = {"cache_dir": own.get("cache_dir"), "through": own.get("through"),
                    "keys": own.get("keys")}
        if not own:
            return None, ("skip", "the workload's own path was not tried", "", evidence)
        if entries is None:
            return None, ("skip", "entries not read: this Triton's cache manager is not "
                          "Triton's FileCacheManager", "", evidence)
        evidence["entries"] = entries.get("count")
        evidence["unread"] = entries.get("unread")
        found = [p for p in entries.get("problems") or [] if p.get("kind") == kind]
        evidence["problems"] = found[:8]
        if not found:
            unread = entries.get("unread")
            return None, ("pass", "%d entries of %s usable%s" % (
                entries.get("count") or 0, own.get("cache_dir"),
                " (%d more not read within the probe's time)" % unread if unread else ""),
                "", evidence)
        return found, evidence

    @staticmethod
    def _paths(found):
        import shlex
        paths = sorted({p.get("entry") or p["path"] for p in found})
        return " ".join(shlex.quote(p) for p in paths[:6]) + (" ..." if len(paths) > 6 else "")

    def check_cache_entry_foreign_owner(self):
        found, evidence = self._entry_problems("foreign_owner")
        if found is None:
            return evidence
        first = found[0]
        owner = first.get("owner") or "uid %s" % first.get("owner_uid")
        me = user_name()
        return ("fail", "Triton cache entry %s is %s's (mode %s): %s; the workload (%s) can "
                "neither use nor replace it%s" % (
                    first["path"], owner, first.get("mode"), first.get("why"), me,
                    " (%d such entries)" % len(found) if len(found) > 1 else ""),
                "remove the entries %s left in the cache (it ran the workload as %s, e.g. with "
                "sudo): sudo rm -rf %s; or give them back: sudo chown -R %s %s" % (
                    owner, owner, self._paths(found), me,
                    self._paths([{"path": evidence.get("cache_dir") or ""}])),
                evidence)

    def check_cache_entry_unreadable(self):
        found, evidence = self._entry_problems("unreadable")
        if found is None:
            return evidence
        first = found[0]
        return ("fail", "Triton cache entry %s is unusable: %s" % (first["path"], first.get(
                    "why")), "chmod -R u+rwX %s (or remove it: rm -rf %s)" % (
                    self._paths(found), self._paths(found)), evidence)

    def check_cache_entry_corrupt(self):
        found, evidence = self._entry_problems("corrupt")
        if found is None:
            return evidence
        first = found[0]
        return ("fail", "Triton cache entry %s is corrupt: %s" % (first["path"], first.get(
                    "why")), "rm -rf %s (Triton builds the entry again)" % self._paths(found),
                evidence)


def user_name():
    try:
        import pwd
        return pwd.getpwuid(os.geteuid()).pw_name
    except (ImportError, KeyError):
        return str(os.geteuid())


# --- checks/triton --------------------------------------------------------------------------------

class TritonChecks(Findings):

    def check_triton_installed(self):
        meta = self.stages.get("meta", {})
        dists = meta.get("triton_dists") or []
        evidence = {"location": meta.get("triton_dir"), "distributions": dists}
        if not meta.get("triton_dir"):
            return ("warn", "Triton is not installed for %s" % (
                self.facts["python"].get("executable")),
                "%s -m pip install triton (PyTorch's CUDA wheels bring it)" % (
                    self.workload_python), evidence)
        if len(dists) > 1:
            names = ", ".join("%s %s" % (d.get("name"), d.get("version")) for d in dists)
            return ("fail", "%d Triton distributions installed (%s)" % (len(dists), names),
                    self.cause_fix("triton_installed"), evidence)
        version = self.facts["triton"]["version"]
        return ("pass", "triton %s at %s" % (version, meta["triton_dir"]), "", evidence)

    def check_triton_2x(self):
        version = self.triton_version()
        evidence = {"version": (self.facts.get("triton") or {}).get("version")}
        if not version:
            return ("skip", "Triton version unknown", "", evidence)
        if version[0] < 3:
            return ("pass", "Triton %s (no driver.active: FLA and vLLM need Triton >= 3.0; "
                    "their checks say whether they fall back)" % evidence["version"], "",
                    evidence)
        return ("pass", "Triton %s" % evidence["version"], "", evidence)

    def check_triton_backends(self):
        found = self.stages.get("backends")
        if found is None:
            return ("skip", "Triton's backends were not read (the stack stopped before)", "", {})
        evidence = dict(found)
        if found.get("probe_error"):
            return ("skip", "not judged: the probe's own step %s() failed (%s)" % (
                found.get("probe_step"), first_line(found["probe_error"])), "", evidence)
        if found.get("error"):
            evidence["matches"] = None
            return ("fail", "import triton.backends fails: %s" % first_line(found["error"]),
                    "reinstall Triton: %s -m pip install --force-reinstall triton==%s" % (
                        self.workload_python,
                        (self.facts.get("triton") or {}).get("version") or "<version>"),
                    evidence)
        if "discovered" not in found:
            return ("skip", "this Triton has no triton.backends (Triton < 3.0)", "", evidence)
        if found["discovered"] == [] and not found.get("in_tree"):
            evidence["matches"] = "triton_no_backends"
            return ("fail", "Triton discovers no backend: no `triton.backends` entry points "
                    "(installed without its dist-info)", self.cause_fix("triton_no_backends"),
                    evidence)
        chosen = found.get("selection") or {}
        providers = found.get("providers") or {}
        names = ", ".join("%s (%s)" % (n, providers[n]) if n in providers else n
                          for n in found.get("active") or [])
        if chosen.get("error"):
            cause, line, values = self.name_failure({"error": chosen["error"]}, {})
            evidence["matches"] = cause
            if cause == "zero_active_drivers":
                return ("skip", "no active Triton backend: the driver checks above say why",
                        "", evidence)
            if cause == "triton_backends_conflict":
                extra = [n for n in found.get("active") or [] if n not in ("nvidia", "amd")]
                own = [n for n in found.get("active") or [] if n in ("nvidia", "amd")]
                fix = "%s -m pip uninstall the package of the extra backend%s" % (
                    self.workload_python,
                    " (%s)" % ", ".join(providers.get(n, n) for n in extra) if extra else "")
                if chosen.get("reads_default") and own:
                    fix += ", or set TRITON_DEFAULT_BACKEND=%s in the workload's environment" % (
                        own[0])
                ignored = found.get("default") and not chosen.get("reads_default")
                return ("fail", "%d active Triton backends: %s; Triton's own selection raises "
                        "%s%s" % (len(found.get("active") or []), names, first_line(
                            chosen["error"]), " (TRITON_DEFAULT_BACKEND=%s is set, but this "
                            "Triton's runtime/driver.py does not read it)" % found["default"]
                            if ignored else ""), fix, evidence)
            fix = self.cause_fix(cause, values) or self.cause_fix("triton_backends")
            return ("fail", "Triton's own backend selection raises %s" % (
                line or first_line(chosen["error"])), fix, evidence)
        if chosen.get("selected"):
            default = found.get("default")
            return ("pass", "Triton selects backend %s%s (active: %s)" % (
                chosen["selected"], " (TRITON_DEFAULT_BACKEND)" if default else "", names),
                "", evidence)
        return ("skip", "Triton's selection not run: %s" % (
            chosen.get("unavailable") or "no result"), "", evidence)

    def check_ptxas_missing(self):
        _, tool = self.active_ptxas()
        evidence = {"ptxas": self.ptxas_tools()}
        if tool is None:
            return ("skip", "ptxas location unknown", "", evidence)
        if not tool.get("executable"):
            version = (self.facts.get("triton") or {}).get("version")
            return ("fail", "Triton's ptxas %s at %s" % (
                "is not executable" if tool.get("exists") else "is missing", tool["path"]),
                "reinstall the wheel: %s -m pip install --force-reinstall triton==%s" % (
                    self.workload_python, version),
                evidence)
        return ("pass", "ptxas %s (%s)" % (tool.get("version"), tool["path"]), "", evidence)

    def check_ptxas_override_unparsed(self):
        tool = self.ptxas_tools().get("TRITON_PTXAS_PATH") or self.ptxas_tools().get(
            "TRITON_PTXAS_BLACKWELL_PATH")
        if not tool:
            return ("pass", "TRITON_PTXAS_PATH not set", "", {})
        evidence = {"ptxas": tool, "triton": (self.facts.get("triton") or {}).get("version")}
        cuda = version_tuple(tool.get("version"))
        triton = self.triton_version()
        if not cuda or not triton:
            return ("skip", "ptxas or Triton version unknown", "", evidence)
        too_old = self.ptxas_override_too_old()
        if too_old:
            key, tool, cap, need = too_old
            evidence["override"] = {"variable": key, "value": tool.get("path")}
            return ("fail", "%s=%s is ptxas %s, which does not know sm_%d%d (needs CUDA >= "
                    "%d.%d); Triton %s runs it instead of its own" % (
                        key, tool.get("path"), tool.get("version"), cap[0], cap[1], need[0],
                        need[1], evidence["triton"]), self.ptxas_override_fix(), evidence)
        if (triton <= (3, 2, 99) and cuda >= (12, 7)) or (triton <= (3, 4, 99) and cuda >= (13,)):
            evidence["expected_error"] = ("Triton only support CUDA 10.0 or higher, but got "
                                          "CUDA version: %s" % tool.get("version"))
            return ("fail", "Triton %s cannot parse the version of TRITON_PTXAS_PATH's ptxas %s"
                    % (evidence["triton"], tool.get("version")),
                    "unset TRITON_PTXAS_PATH and upgrade Triton instead", evidence)
        return ("pass", "TRITON_PTXAS_PATH ptxas %s" % tool.get("version"), "", evidence)

    def check_triton_too_old_for_gpu(self):
        caps = self.capabilities()
        evidence: dict = {"gpu_capabilities": ["%d.%d" % c for c in caps]}
        if not caps:
            return ("skip", "compute capability unknown", "", evidence)
        for cap in caps:
            key, tool = self.active_ptxas(cap)
            have = version_tuple((tool or {}).get("version"))
            need = PTXAS_MIN_FOR_CC.get(cap)
            evidence["sm_%d%d" % cap] = {"ptxas": key, "version": (tool or {}).get("version"),
                                          "needs": "%d.%d" % need if need else None}
            if not have or not need:
                continue
            if have[:2] < need:
                version = (self.facts.get("triton") or {}).get("version")
                if key in ("TRITON_PTXAS_PATH", "TRITON_PTXAS_BLACKWELL_PATH"):
                    return ("skip", "%s=%s overrides Triton %s's ptxas (see "
                            "ptxas_override_unparsed)" % (key, tool.get("path"), version), "",
                            evidence)
                return ("fail", "Triton %s's ptxas %s does not know sm_%d%d (needs >= %d.%d)" % (
                    version, tool.get("version"), cap[0], cap[1], need[0], need[1]),
                    "upgrade: torch >= 2.7 with Triton >= 3.3 (Triton >= 3.6 for sm_121)",
                    evidence)
        return ("pass", "ptxas knows %s" % ", ".join("sm_%d%d" % c for c in caps), "", evidence)

    def check_driver_too_old_for_bundled_ptxas(self):
        version = self.cuda_info.get("version")
        caps = self.capabilities() or [None]
        key, tool = self.active_ptxas(caps[-1])
        ptxas = version_tuple((tool or {}).get("version"))
        evidence = {"cuda_driver_version": version, "ptxas": key,
                    "ptxas_version": (tool or {}).get("version"),
                    "ptxas_path": (tool or {}).get("path")}
        if not isinstance(version, int) or version <= 0 or not ptxas:
            return ("skip", "driver or ptxas version unknown", "", evidence)
        driver = (version // 1000, version % 1000 // 10)
        if ptxas[0] > driver[0]:
            evidence["expected_error"] = ("RuntimeError: Triton Error [CUDA]: device kernel "
                                          "image is invalid")
            return ("fail", "driver supports CUDA %d.%d (cuDriverGetVersion %d), Triton %s's %s "
                    "is CUDA %s: the first kernel fails ('device kernel image is invalid'), "
                    "get_current_target() still works" % (
                        driver[0], driver[1], version,
                        (self.facts.get("triton") or {}).get("version"), key,
                        tool.get("version")),
                    "upgrade the NVIDIA driver to one supporting CUDA %d.x, or set "
                    "TRITON_PTXAS_PATH to a ptxas no newer than CUDA %d.%d" % (
                        ptxas[0], driver[0], driver[1]), evidence)
        return ("pass", "driver CUDA %d.%d loads ptxas %s's cubins" % (
            driver[0], driver[1], tool.get("version")), "", evidence)

    def check_triton_target(self):
        target = self.stages.get("target")
        if target is None:
            if "own-start" in self.stages and "own" not in self.stages:
                return ("skip", "not tried: the workload's own get_current_target(), which "
                        "runs first, did not finish", "", {})
            return self.stage_missing("get_current_target()")
        evidence = {"seconds": target.get("seconds"), "cache": target.get("cache") or "fresh",
                    "stderr": clip(self.stack_result["stderr"], 2000)}
        if target.get("ok"):
            t = target.get("target") or {}
            if target.get("cache") == "own":
                evidence["cache_dir"] = target.get("cache_dir")
                return ("pass", "get_current_target() = %s:%s, built from nothing (no entry "
                        "of it in the workload's cache)" % (t.get("backend"), t.get("arch")),
                        "", evidence)
            if target.get("cache") == "skeleton":
                return ("pass", "get_current_target() = %s:%s through the workload's cache; "
                        "Triton's own build of its driver module's skeleton (the same "
                        "compiler, headers, flags and link) loaded from a fresh cache" % (
                            t.get("backend"), t.get("arch")), "", evidence)
            return ("pass", "get_current_target() = %s:%s in a fresh cache" % (
                t.get("backend"), t.get("arch")), "", evidence)
        error = target.get("error") or ""
        evidence["error"] = error
        if (target.get("failure") or {}).get("probe_step"):
            return self.probe_fault("get_current_target() in a fresh cache", target["failure"],
                                    evidence)
        fresh = target.get("fresh_dir") or os.path.join(self.tmp, "cache")
        places = {"cache": [d for d in (self.facts.get("triton_cache_dir"), fresh)
                            if d and inside(fresh, d)] or [fresh],
                  "tmp": [os.path.join(self.tmp, "tmp")],
                  "include": [self.pyinfo.get("include") or ""],
                  "cc": self.compiler.get("path") or self.env.get("CC")}
        cause, line, values = self.name_failure(target.get("failure") or {"error": error}, places,
                                                self.stack_result["stderr"][-4000:])
        evidence["matches"] = cause
        evidence["object"] = values or None
        evidence["message"] = line or None
        backends = self.stages.get("backends") or {}
        evidence["backends"] = backends or None
        if (evidence["matches"] == "zero_active_drivers" and backends.get("discovered") == []
                and not backends.get("in_tree")):
            evidence["matches"] = "triton_no_backends"
        runs = [r for r in (target.get("failure") or {}).get("compiler") or []
                if r.get("rc") or r.get("error")]
        if runs:
            evidence["compiler_stderr"] = runs[-1].get("stderr")
        fix = self.cause_fix(evidence["matches"], values) if evidence["matches"] else (
            "no known cause matches this error (%s): run the workload's get_current_target() "
            "with the same environment to investigate" % (line or first_line(error)))
        summary = "get_current_target() in a fresh cache: " + (
            "%s (%s)" % (line, (target.get("failure") or {}).get("type") or "error")
            if line and line not in first_line(error) else first_line(error))
        return ("fail", summary + self.object_note(evidence["matches"], values), fix, evidence)

    def check_stale_cache_masks_compiler(self):
        target = self.stages.get("target")
        warm = self.stages.get("warm")
        if target is None:
            return ("skip", "no target result", "", {})
        if target.get("ok"):
            return ("pass", "Triton works from a fresh cache", "", {})
        failure = target.get("failure") or {}
        if failure.get("probe_step"):
            return ("skip", "not judged: the probe's own step %s() failed (%s)" % (
                failure["probe_step"], first_line(failure.get("error"))), "",
                {"probe_step": failure["probe_step"], "probe_error": failure.get("error")})
        if not warm or warm.get("ok") is None:
            return ("skip", "no warm cache to compare with", "",
                    {"cache_dir": (warm or {}).get("cache_dir")})
        evidence = {"cache_dir": warm.get("cache_dir"), "warm_error": warm.get("error")}
        if warm.get("ok"):
            return ("warn", "Triton works only thanks to the warm cache %s: a fresh cache fails "
                    "(%s)" % (warm.get("cache_dir"), first_line(target.get("error"))),
                    "install the toolchain anyway (%s): kernels with a new signature still "
                    "compile a launcher" % self.compile_fix("compiler"), evidence)
        return ("skip", "the warm cache fails too", "", evidence)

    def check_triton_kernel(self):
        if not self.deep:
            return ("skip", "not run (use --deep)", "", {})
        stages = self.deep_stages
        result = self.deep_result
        if result is None:  # never started: no GPU here (the other checks are skipped too)
            return ("skip", "not run: no GPU to run it on", "", {})
        evidence = {"stderr": clip(result["stderr"], 2000), "seconds": result["seconds"]}
        if "error" in stages:
            error = stages["error"]["error"]
            evidence["error"] = error
            cause, _, values = self.name_failure({"error": error}, {}, result["stderr"][-4000:])
            evidence["matches"] = cause
            return ("fail", "kernel run failed: " + first_line(error), self.cause_fix(
                cause or "triton_kernel", values), evidence)
        if "count" not in stages:
            if result["timed_out"]:
                return ("error", "kernel run timed out after %.1f s" % result["seconds"], "",
                        evidence)
            return ("error", "kernel run did not report (rc %s)" % result["rc"], "", evidence)
        count = stages["count"].get("count") or 0
        devices = [stages.get("device%d" % i) for i in range(count)]
        evidence["devices"] = devices
        if count == 0:
            return ("fail", "kernel run: torch sees no GPU", self.cause_fix("torch_cuda"),
                    evidence)
        answered = [d for d in devices if d is not None]
        if len(answered) < count:
            return ("error", "kernel run timed out before GPU %d" % devices.index(None), "",
                    evidence)
        bad = [d for d in answered if not d.get("ok")]
        if bad:
            cause, _, values = self.name_failure({"error": bad[0].get("error")}, {})
            evidence["matches"] = cause
            return ("fail", "kernel failed on GPU %d: %s" % (
                bad[0]["index"], first_line(bad[0].get("error"))), self.cause_fix(
                    cause or "triton_kernel", values), evidence)
        return ("pass", "JIT kernel verified on %d GPU(s) in a fresh cache" % count, "", evidence)


# --- checks/fla -----------------------------------------------------------------------------------

class FlaChecks(Findings):

    def check_blackwell_no_allocator(self):
        meta = self.stages.get("meta", {})
        caps = self.capabilities()
        blackwell = [c for c in caps if c[0] in (10, 12)]
        evidence = {"fla_version": meta.get("fla_version"),
                    "gpu_capabilities": ["%d.%d" % c for c in caps]}
        if not meta.get("fla_dir"):
            return ("skip", "flash-linear-attention not installed", "", evidence)
        if not blackwell:
            return ("pass", "not a Blackwell GPU", "", evidence)
        version = version_tuple(meta.get("fla_version"))
        fla = self.stages.get("fla") or {}
        if version and version < (0, 5, 0):
            return ("fail", "FLA %s registers no Triton allocator on Blackwell" % (
                meta.get("fla_version")), "upgrade flash-linear-attention to >= 0.5.1", evidence)
        if fla.get("device_platform") == "cpu":
            return ("fail", "FLA fell back to CPU, so no allocator is set on Blackwell",
                    "fix the fallback (see fla_fallback_hidden)", evidence)
        return ("pass", "FLA %s sets an allocator on Blackwell" % meta.get("fla_version"), "",
                evidence)

    def check_fla_fallback_hidden(self):
        meta = self.stages.get("meta", {})
        if not meta.get("fla_dir"):
            return ("skip", "flash-linear-attention not installed", "", {})
        fla = self.stages.get("fla")
        if fla is None:
            return self.stage_missing("FLA's device detection")
        target = self.stages.get("target") or {}
        evidence = {"version": meta.get("fla_version"), "layout": fla.get("layout"),
                    "module": fla.get("module"), "device_platform": fla.get("device_platform"),
                    "warnings": fla.get("warnings"), "swallowed": fla.get("swallowed"),
                    "error": fla.get("error"), "seconds": fla.get("seconds"),
                    "triton_error": target.get("error")}
        version = meta.get("fla_version") or "?"
        evidence["unmet"] = fla.get("unmet")
        if fla.get("error") and fla.get("layout") != "unknown":
            evidence["matches"] = "fla_import_fails"
            missing = re.search(r"No module named '([^']+)'", fla["error"])
            return ("fail", "FLA %s: import %s fails: %s" % (
                version, fla.get("module"), first_line(fla["error"])),
                "%s -m pip install %s" % (self.workload_python, missing.group(1).split(".")[0])
                if missing and not missing.group(1).startswith("fla") else
                "install the torch and Triton this FLA supports, or the FLA release made for "
                "them (%s -m pip install -U flash-linear-attention)" % self.workload_python,
                evidence)
        if fla.get("unmet"):
            evidence["matches"] = "fla_import_fails"
            first = fla["unmet"][0]
            return ("fail", "FLA %s cannot import its kernels: %s requires %s (%s)" % (
                version, first["dist"], first["requires"], first["problem"]) + (
                    "; %d more unmet" % (len(fla["unmet"]) - 1) if len(fla["unmet"]) > 1
                    else ""),
                "%s -m pip install %s" % (self.workload_python, " ".join(
                    "'%s'" % u["requires"] for u in fla["unmet"])), evidence)
        if fla.get("error"):
            if fla.get("layout") == "unknown":
                return ("warn", "FLA %s: layout unknown to this probe (no %s); import fla.utils: "
                        "%s" % (version, ", ".join("fla/" + rel for rel, _ in FLA_LAYOUTS),
                                first_line(fla["error"])), "", evidence)
            return ("fail", "FLA %s: import %s failed: %s" % (
                version, fla.get("module"), first_line(fla["error"])),
                self.cause_fix("fla_import_fails"), evidence)
        if fla.get("device_platform") == "cpu" or fla.get("warnings"):
            warning = first_line((fla.get("warnings") or ["no warning"])[0])
            hidden = (fla.get("swallowed") or target.get("error")
                      or "not seen (FLA cached its verdict before the probe looked)")
            cause, _, values = self.name_failure({"error": fla.get("swallowed") or target.get(
                "error") or ""}, {})
            evidence["matches"] = cause
            return ("fail", "FLA %s falls back to CPU (device_platform=%s): %s; the exception "
                    "it swallowed: %s" % (version, fla.get("device_platform"), warning,
                                          first_line(hidden)),
                    self.cause_fix(cause or "fla_fallback_hidden", values), evidence)
        return ("pass", "FLA %s runs on the GPU (device_platform=%s, from fla/%s)" % (
            version, fla.get("device_platform"), fla.get("layout")), "", evidence)


# --- checks/workload ------------------------------------------------------------------------------

LOW_SPACE_BYTES = 100 << 20
LOW_INODES = 2000

def mib(value):
    return "%.1f MiB" % (value / 1048576.0) if isinstance(value, int) else "?"


class WorkloadChecks(Findings):

    def own_stage(self):
        return self.stages.get("own") or {}

    def places(self):
        own = self.own_stage()
        tmp = [d for d in (own.get("python_tmp"), own.get("gcc_tmp"), self.env.get("TMPDIR"))
               if d]
        return {"cache": [d for d in (own.get("cache_dir"), own.get("probe_cache")) if d],
                "tmp": tmp, "include": [self.pyinfo.get("include") or ""],
                "cc": self.compiler.get("path") or self.env.get("CC")}

    def own_diagnosis(self):
        failure = self.own_stage().get("failure")
        if not failure or failure.get("probe_step"):
            return None, "", {}  # the probe's own error names no cause of the workload's
        return self.name_failure(failure, self.places())

    def check_cache_dir_full(self):
        own = self.own_stage()
        space = own.get("cache_space") or {}
        cache = own.get("cache_dir") or self.facts["triton_cache_dir"]
        evidence = {"cache_dir": cache, "space": space, "failure": own.get("failure"),
                    "reproduced": own.get("reproduced")}
        if not own:
            return ("skip", "the workload's own path was not tried", "", evidence)
        fix = self.cause_fix("cache_dir_full", {"mount": space.get("path") or cache,
                                                "cache_dir": cache})
        cause, line, _ = self.own_diagnosis()
        if cause == "cache_dir_full":
            return ("fail", "Triton cache %s is full: the workload's own build fails (%s); %s "
                    "free" % (cache, line, mib(space.get("free_bytes"))), fix, evidence)
        free, inodes = space.get("free_bytes"), space.get("free_inodes")
        if isinstance(inodes, int) and inodes < LOW_INODES and not (
                isinstance(free, int) and free < LOW_SPACE_BYTES):
            return ("warn", "Triton cache %s has %s inodes free (and %s): a job's kernels may "
                    "not fit" % (cache, inodes, mib(free)), self.cause_fix("fs_out_of_inodes", {
                        "mount": space.get("path") or cache, "free": mib(free)}), evidence)
        if isinstance(free, int) and free < LOW_SPACE_BYTES:
            return ("warn", "Triton cache %s has %s and %s inodes free: a job's kernels may "
                    "not fit" % (cache, mib(free), inodes), fix, evidence)
        return ("pass", "%s free for the Triton cache %s" % (mib(free), cache), "", evidence)

    def check_tmp_dir_unusable(self):
        own = self.own_stage()
        space = own.get("tmp_space") or {}
        evidence = {"TMPDIR": self.env.get("TMPDIR"), "python_tmp": own.get("python_tmp"),
                    "gcc_tmp": own.get("gcc_tmp"), "space": space,
                    "failure": own.get("failure")}
        if not own:
            return ("skip", "the workload's own path was not tried", "", evidence)
        where = own.get("gcc_tmp") or own.get("python_tmp") or "the temp dir"
        fix = self.cause_fix("tmp_dir_unusable", {"tmp_dir": where})
        cause, line, _ = self.own_diagnosis()
        if cause == "tmp_dir_unusable":
            return ("fail", "the workload's temp dir %s is unusable: its own build fails (%s)" % (
                where, line), fix, evidence)
        free = space.get("free_bytes")
        if isinstance(free, int) and free < LOW_SPACE_BYTES:
            return ("warn", "temp dir %s has %s free: Triton's builds write there" % (
                where, mib(free)), fix, evidence)
        tmpdir = self.env.get("TMPDIR")
        if tmpdir and own.get("python_tmp") and own["python_tmp"] != tmpdir:
            return ("warn", "TMPDIR=%s is not usable: Python falls back to %s, gcc uses %s" % (
                tmpdir, own["python_tmp"], own.get("gcc_tmp")), fix, evidence)
        return ("pass", "temp dir %s (%s free)" % (where, mib(free)), "", evidence)

    def check_triton_own_path(self):
        if "own" not in self.stages:
            if "target" in self.stages:
                return ("skip", "not tried: " + (self.stages.get("own-skip") or {}).get(
                    "why", "no Triton target stage"), "", {})
            return self.stage_missing("the workload's own get_current_target()")
        own = self.own_stage()
        evidence = {key: own.get(key) for key in ("cache_dir", "probe_cache", "python_tmp",
                                                  "gcc_tmp", "failure", "reproduced")}
        if own.get("ok"):
            target = own.get("target") or {}
            return ("pass", "get_current_target() = %s:%s in the workload's own cache %s and "
                    "temp dir %s" % (target.get("backend"), target.get("arch"),
                                     own.get("cache_dir"), own.get("gcc_tmp")), "", evidence)
        failure = own.get("failure") or {}
        if failure.get("probe_step"):
            return self.probe_fault("the workload's own get_current_target()", failure,
                                    evidence)
        cause, line, values = self.own_diagnosis()
        evidence["matches"] = cause
        evidence["object"] = values or None
        evidence["message"] = line or first_line(failure.get("error"))
        runs = [r for r in failure.get("compiler") or [] if r.get("rc") or r.get("error")]
        if runs:
            evidence["compiler_stderr"] = runs[-1].get("stderr")
            evidence["compiler_argv"] = runs[-1].get("argv")
        fix = self.cause_fix(cause, values) if cause else (
            "no known cause matches (%s): run the workload's get_current_target() as its "
            "user with the same environment to investigate" % (
                line or first_line(failure.get("error"))))
        told = first_line(failure.get("error"))
        return ("fail", "the workload's own get_current_target() fails: %s%s" % (
            "%s (%s)" % (line, failure.get("type") or "error") if line and line not in told
            else told, self.object_note(cause, values)), fix, evidence)

    def installed_libraries(self):
        meta = self.stages.get("meta", {})
        found = {"triton"} if meta.get("triton_dir") else set()
        if meta.get("torch_dir"):
            found |= {"torch"} | ({"inductor"} if meta.get("inductor") else set())
        for key in ("vllm", "xformers", "fla"):
            if meta.get(key + "_dir"):
                found.add(key)
        return found

    def env_report(self):
        findings = env_findings(self.env, self.installed_libraries())
        knobs = self.stages.get("knobs") or {}
        if knobs.get("interpret") and not any(f["variable"] == "TRITON_INTERPRET"
                                              for f in findings):
            findings.insert(0, {"variable": "TRITON_INTERPRET", "value": self.env.get(
                "TRITON_INTERPRET"), "effect": "moves", "library": "triton",
                "text": "Triton's knobs say interpret: every kernel runs on the CPU"})
        return findings

    def check_workload_env(self):
        findings = self.env_report()
        evidence = {"findings": findings, "knobs": self.stages.get("knobs")}
        moves = [f for f in findings if f["effect"] == "moves" and f["library"] != "inductor"]
        slows = [f for f in findings if f["effect"] == "slows"]
        if moves:
            first = moves[0]
            return ("fail", "%s=%s: %s" % (first["variable"], first["value"], first["text"]),
                    "unset %s in the workload's environment" % ", ".join(
                        f["variable"] for f in moves), evidence)
        if slows:
            return ("warn", "; ".join("%s=%s: %s" % (f["variable"], f["value"], f["text"])
                                      for f in slows[:3]),
                    "unset %s unless meant" % ", ".join(f["variable"] for f in slows), evidence)
        return ("pass", "no variable changes where or how the kernels run", "", evidence)

    def check_inductor_ready(self):
        meta = self.stages.get("meta", {})
        if not meta.get("inductor"):
            return ("skip", "torch.compile (inductor) not installed", "", {})
        data = self.stages.get("inductor")
        if data is None:
            return ("skip", "not evaluated (no torch in the workload stack)", "", {})
        evidence = dict(data)
        user = data.get("user_error")
        if user:
            return ("fail", "torch.compile fails before any kernel: inductor looks up the user "
                    "name: %s" % user.get("error"),
                    "run the workload as a user with a passwd entry, or set USER (or LOGNAME) "
                    "in its environment", evidence)
        cache_error = data.get("cache_error")
        if cache_error:
            return ("fail", "torch.compile fails before any kernel: inductor's cache dir %s: %s"
                    % (data.get("cache_dir"), cache_error.get("error")),
                    "export TORCHINDUCTOR_CACHE_DIR=<a writable dir with space>", evidence)
        moves = [f for f in self.env_report() if f["library"] == "inductor" and
                 f["effect"] == "moves"]
        if moves or data.get("disable_device_detection"):
            name = (moves[0]["variable"] if moves
                    else "TORCHINDUCTOR_TRITON_DISABLE_DEVICE_DETECTION")
            return ("fail", "torch.compile of CUDA code raises TritonMissing: %s=1 disables "
                    "inductor's Triton" % name, "unset %s" % name, evidence)
        return ("pass", "inductor's cache dir %s usable, user %s" % (
            data.get("cache_dir"), data.get("user")), "", evidence)


# --- checks/hip -----------------------------------------------------------------------------------

HIP_VISIBILITY = ("ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES")


def base_gfx(arch):
    return str(arch or "").split(":")[0]


def node_group(path):
    try:
        gid = os.stat(path).st_gid
    except OSError:
        return None
    try:
        import grp
        return grp.getgrgid(gid).gr_name
    except (ImportError, KeyError):
        return str(gid)


class HipChecks(TorchChecks):

    def hip_gfx(self):
        real = sorted({g["gfx"] for g in self.gpus if g.get("gfx")})
        override = gfx_from_override(self.env.get("HSA_OVERRIDE_GFX_VERSION"))
        return real, ([override] if override else real), override

    def check_gpu_present_hip(self):
        hip = self.hip_info
        evidence = {"kfd_gpus": self.amd["kfd_gpus"], "dev_nodes": self.amd["dev_nodes"],
                    "amdgpu": self.amd["amdgpu"], "libamdhip64": hip.get("path"),
                    "hip_device_count": hip.get("count"), "rocminfo": self.rocminfo_info}
        if not self.hardware_evidence():
            return ("warn", "no AMD GPU on this node (/dev/kfd without a KFD GPU node)", "",
                    evidence)
        names: dict = {}
        for gpu in self.gpus:
            label = gpu.get("name") or "AMD GPU"
            if gpu.get("gfx") and gpu["gfx"] not in label:
                label += " (%s)" % gpu["gfx"]
            names[label] = names.get(label, 0) + 1
        return ("pass", ", ".join("%d× %s" % (n, label) for label, n in names.items()), "",
                evidence)

    def check_dev_nodes_missing_hip(self):
        minors = [g["render_minor"] for g in self.amd["kfd_gpus"]
                  if isinstance(g.get("render_minor"), int) and g["render_minor"] > 0]
        if not minors:
            minors = sorted(int(n[len("dri/renderD"):]) for n in self.amd["dev_nodes"]
                            if re.match(r"^dri/renderD\d+$", n))
        expected = ["kfd"] + ["dri/renderD%d" % minor for minor in minors]
        results = {name: open_result(host_path("/dev/" + name)) for name in expected}
        bad = {name: code for name, code in results.items() if code != "ok"}
        container = self.facts.get("container")
        evidence = {"open": results, "container": container}
        if not bad:
            return ("pass", "%d device nodes open read-write" % len(results), "", evidence)
        kfd_major = re.search(r"^\s*(\d+)\s+kfd\s*$", self.proc_devices, re.M)
        kfd = kfd_major.group(1) if kfd_major else "<kfd major>"
        evidence["kfd_major"] = kfd_major.group(1) if kfd_major else None
        name, code = sorted(bad.items(), key=lambda item: expected.index(item[0]))[0]
        if code == "ENOENT":
            what = "missing (not passed through)"
            fix = ("pass /dev/kfd and /dev/dri into the container: lxc.mount.entry: /dev/kfd "
                   "dev/kfd none bind,optional,create=file and lxc.mount.entry: /dev/dri dev/dri "
                   "none bind,optional,create=dir, with lxc.cgroup2.devices.allow: c %s:* rwm "
                   "and c 226:* rwm, in /etc/pve/lxc/<vmid>.conf (Docker: --device=/dev/kfd "
                   "--device=/dev/dri); on a host, load amdgpu (modprobe amdgpu)" % kfd)
        elif code == "EPERM":
            what = "blocked by the device cgroup (EPERM)"
            fix = ("allow the majors in the container config: lxc.cgroup2.devices.allow: "
                   "c %s:* rwm (kfd) and c 226:* rwm (dri), majors from /proc/devices on the "
                   "host" % kfd)
        elif code == "EACCES":
            group = node_group(host_path("/dev/" + name)) or "render"
            evidence["group"] = group
            what = "not permitted by its file mode (EACCES; group %s)" % group
            fix = ("add the workload user to the node's groups: usermod -aG render,video <user> "
                   "(the node's group is %s); in an unprivileged LXC map the host's render gid "
                   "(lxc.idmap) or set the node's mode to 0666" % group)
        else:
            what = "unusable (%s)" % code
            fix = "check that amdgpu is loaded and the node is passed through"
        summary = nodes_summary(name, what, bad, len(results), "no /dev/kfd or render nodes, "
                                "though KFD lists %d GPU(s)" % len(self.amd["kfd_gpus"]), container)
        evidence["hip_device_count"] = self.hip_info.get("count")
        return ("fail", summary, fix, evidence)

    def hip_count_error(self):
        rc = self.hip_info.get("count_rc")
        if not isinstance(rc, int):
            return None, None
        return rc, self.hip_info.get("count_name") or HIP_ERRORS.get(rc) or "hipError"

    def check_driver_userspace_mismatch_hip(self):
        rc, name = self.hip_count_error()
        amdgpu = self.amd["amdgpu"]
        runtime = self.facts["driver"]["userspace"]
        evidence = {"amdgpu_loaded": amdgpu["loaded"], "amdgpu_version": amdgpu["version"],
                    "hip_runtime": runtime, "libamdhip64": self.hip_info.get("path"),
                    "hipGetDeviceCount": rc, "error_name": name}
        if rc is None:
            return ("skip", "HIP runtime not reached (see libamdhip64_not_found)", "", evidence)
        if rc == 35:
            return ("fail", "hipGetDeviceCount returns 35 %s: the ROCm userspace (HIP %s) does "
                    "not work with this amdgpu kernel driver (%s)" % (
                        name, runtime or "?", amdgpu["version"] or "in-tree"),
                    "install the amdgpu driver (amdgpu-dkms) of the ROCm release the container's "
                    "userspace comes from, on the host; or use a ROCm userspace that supports "
                    "this kernel driver", evidence)
        return ("pass", "amdgpu %s, HIP runtime %s (hipGetDeviceCount: %s)" % (
            amdgpu["version"] or "in-tree", runtime or "?", name), "", evidence)

    def check_zero_active_drivers_hip(self):
        hip = self.hip_info
        evidence = {key: hip.get(key) for key in ("path", "how", "load_error", "count_rc",
                                                   "count_name", "count", "error")}
        evidence.update({var: self.env.get(var) for var in HIP_VISIBILITY})
        if hip.get("timed_out"):
            return ("error", hip["error"], "", evidence)
        if not hip.get("path"):
            if hip.get("row"):
                return ("skip", "libamdhip64 not located (see %s)" % hip["row"], "", evidence)
            return ("error", "HIP probe failed: %s" % (hip.get("error") or "no answer"), "",
                    evidence)
        if hip.get("load_error"):
            return ("skip", "libamdhip64 does not load (see libamdhip64_not_found)", "",
                    evidence)
        rc, name = self.hip_count_error()
        if rc == 35:
            return ("skip", "hipGetDeviceCount: 35 %s (see driver_userspace_mismatch)" % name, "",
                    evidence)
        if rc:
            return ("fail", "hipGetDeviceCount failed: %s (%s), though KFD lists %d GPU(s)" % (
                name, rc, len(self.amd["kfd_gpus"])),
                "fix the driver layer: /dev/kfd and render nodes, amdgpu, "
                "ROCR_VISIBLE_DEVICES/HIP_VISIBLE_DEVICES; see the checks above", evidence)
        if not hip.get("count"):
            hidden = ["%s=%r" % (v, self.env[v]) for v in HIP_VISIBILITY if v in self.env]
            return ("fail", "HIP runtime sees 0 devices" + (
                " (%s hides them)" % ", ".join(hidden) if hidden else ""),
                "unset or fix " + "/".join(v.split("=")[0] for v in hidden) if hidden
                else "pass the GPUs through", evidence)
        return ("pass", "HIP runtime %s sees %d device(s)" % (
            self.facts["driver"]["userspace"] or "?", hip["count"]), "", evidence)

    def check_torch_cuda_hip(self):
        result, torch, evidence = self.torch_imported("hip")
        if result:
            return result
        if not torch.get("hip"):
            kind = "CUDA" if torch.get("cuda") else "CPU-only"
            return ("fail", "%s PyTorch build on an AMD node (torch %s, torch.version.hip is "
                    "None)" % (kind, torch.get("version")),
                    "install a ROCm build of torch, e.g. %s -m pip install torch --index-url "
                    "https://download.pytorch.org/whl/rocm6.4" % self.workload_python, evidence)
        if not torch.get("cuda_available"):
            warning = first_line((torch.get("warnings") or [""])[0])
            return ("fail", "torch.cuda.is_available() is False (ROCm %s)" % torch["hip"] + (
                ": " + warning if warning else ""),
                "fix the driver layer (/dev/kfd, render nodes, amdgpu, HIP_VISIBLE_DEVICES)",
                evidence)
        count = torch.get("device_count") or 0
        if count < len(self.gpus):
            return ("warn", "torch sees %d of %d GPUs" % (count, len(self.gpus)), "", evidence)
        return ("pass", "torch %s (ROCm %s) sees %d GPU(s)" % (
            torch.get("version"), torch.get("hip"), count), "", evidence)

    def check_torch_lacks_arch_hip(self):
        torch = self.torch_info()
        arch_list = sorted({base_gfx(a) for a in torch.get("arch_list") or []})
        real, effective, override = self.hip_gfx()
        evidence = {"arch_list": torch.get("arch_list") or [], "gpu_gfx": real,
                    "HSA_OVERRIDE_GFX_VERSION": self.env.get("HSA_OVERRIDE_GFX_VERSION")}
        if not self.stages.get("meta", {}).get("torch_dir"):
            return ("skip", "PyTorch not installed", "", evidence)
        if not arch_list or not real:
            return ("skip", "arch list or gfx arch unknown", "", evidence)
        missing = [gfx for gfx in effective if gfx not in arch_list]
        if missing:
            summary = "torch %s (ROCm %s) has no kernels for %s (built for %s)" % (
                torch.get("version"), torch.get("hip"), ", ".join(missing), " ".join(arch_list))
            if override:
                summary += "; HSA_OVERRIDE_GFX_VERSION=%s makes the runtime report %s" % (
                    self.env["HSA_OVERRIDE_GFX_VERSION"], override)
            return ("fail", summary, "install a torch ROCm build that includes %s" % (
                ", ".join(missing)) + ("" if override else "; for a consumer GPU of a supported "
                                       "family, HSA_OVERRIDE_GFX_VERSION is the usual (unsupported)"
                                       " workaround"), evidence)
        if override and override not in real:
            return ("warn", "HSA_OVERRIDE_GFX_VERSION=%s: the runtime reports %s for the %s GPU "
                    "(torch's kernels for %s run on another chip)" % (
                        self.env["HSA_OVERRIDE_GFX_VERSION"], override, ", ".join(real),
                        override), "", evidence)
        return ("pass", "torch built for %s" % ", ".join(effective), "", evidence)

    def check_gpu_arch_unsupported_hip(self):
        real, effective, override = self.hip_gfx()
        evidence = {"gpu_gfx": real, "effective_gfx": effective,
                    "triton_hip_archs": list(TRITON_HIP_ARCHS),
                    "HSA_OVERRIDE_GFX_VERSION": self.env.get("HSA_OVERRIDE_GFX_VERSION")}
        if not real:
            return ("skip", "gfx arch unknown (no KFD gfx_target_version)", "", evidence)
        other = [gfx for gfx in effective if gfx not in TRITON_HIP_ARCHS]
        if other:
            return ("warn", "%s%s is not among the architectures Triton's AMD backend supports "
                    "(CDNA2+, RDNA3+): kernels may fail to compile" % (
                        ", ".join(other), " (HSA_OVERRIDE_GFX_VERSION)" if override else ""),
                    "run Triton workloads on gfx90a, gfx942, gfx950, gfx11xx or gfx12xx", evidence)
        return ("pass", "gfx %s" % ", ".join(effective), "", evidence)

    def check_libhip_path_invalid(self):
        value = self.env.get("TRITON_LIBHIP_PATH")
        evidence = {"TRITON_LIBHIP_PATH": value}
        if not value:
            return ("pass", "TRITON_LIBHIP_PATH not set", "", evidence)
        if self.hip_info.get("row") == "libhip_path_invalid":
            evidence["expected_error"] = self.hip_info["error"]
            return ("fail", "TRITON_LIBHIP_PATH %r is not a libamdhip64.so file (Triton raises "
                    "at its first use)" % value,
                    "unset TRITON_LIBHIP_PATH (Triton then uses torch's libamdhip64.so), or set it "
                    "to an existing libamdhip64.so file", evidence)
        return ("pass", "TRITON_LIBHIP_PATH=%s" % value, "", evidence)

    def check_libamdhip64_not_found(self):
        hip = self.hip_info
        evidence = {"search": hip.get("search"), "ldconfig": hip.get("ldconfig"),
                    "path": hip.get("path"), "how": hip.get("how"),
                    "load_error": hip.get("load_error"),
                    "ROCM_PATH": self.env.get("ROCM_PATH"), "HIP_PATH": self.env.get("HIP_PATH"),
                    "LD_LIBRARY_PATH": self.env.get("LD_LIBRARY_PATH")}
        if hip.get("row") == "libhip_path_invalid":
            return ("skip", "not searched (see libhip_path_invalid)", "", evidence)
        if hip.get("row") == "libamdhip64_not_found":
            evidence["expected_error"] = hip["error"]
            return ("fail", "Triton cannot locate libamdhip64.so (%d places tried)" % len(
                hip.get("search") or []),
                "install a ROCm build of torch (it bundles libamdhip64.so), or set ROCM_PATH / "
                "TRITON_LIBHIP_PATH to the ROCm install, and run ldconfig", evidence)
        if hip.get("load_error"):
            evidence["expected_error"] = "RuntimeError: cannot open libamdhip64.so"
            return ("fail", "libamdhip64 %s does not load: %s" % (
                hip.get("path"), first_line(hip["load_error"])),
                "reinstall the ROCm runtime (or torch's ROCm wheel) that provides %s" % (
                    hip.get("path")), evidence)
        if not hip.get("path"):
            return ("error", "HIP probe failed: %s" % (hip.get("error") or "no answer"), "",
                    evidence)
        return ("pass", "libamdhip64 %s (%s)" % (hip["path"], hip.get("how")), "", evidence)

    def check_libamdhip64_other_rocm(self):
        hip = self.hip_info
        runtime = self.facts["driver"]["userspace"]
        torch_hip = (self.facts.get("torch") or {}).get("hip")
        torch_dir = self.stages.get("meta", {}).get("torch_dir")
        bundled = os.path.join(torch_dir, "lib", "libamdhip64.so") if torch_dir else None
        evidence = {"libamdhip64": hip.get("path"), "real": hip.get("real"),
                    "hip_runtime": runtime, "torch_hip": torch_hip,
                    "torch_libamdhip64": bundled if bundled and os.path.exists(bundled) else None}
        if not hip.get("path") or hip.get("load_error"):
            return ("skip", "no libamdhip64 loaded (see libamdhip64_not_found)", "", evidence)
        have = version_tuple(runtime)
        if have and have[0] < 6:
            evidence["expected_error"] = ("RuntimeError: libamdhip64 version %s is not "
                                          "supported! Required major version is >=6." % runtime)
            return ("fail", "libamdhip64 %s is HIP %s: Triton's driver needs major version >= 6"
                    % (hip["path"], runtime),
                    "use ROCm >= 6 (torch's ROCm wheel bundles it): unset TRITON_LIBHIP_PATH or "
                    "point it at torch's libamdhip64.so", evidence)
        if not torch_hip:
            return ("skip", "torch's ROCm version unknown", "", evidence)
        want = version_tuple(torch_hip)[:2]
        if have and want and have[:2] != want:
            return ("fail", "Triton loads libamdhip64 %s (HIP %s, found by %s), torch is built "
                    "for ROCm %s" % (hip["path"], runtime, hip.get("how"), torch_hip),
                    "make Triton use torch's HIP runtime: unset TRITON_LIBHIP_PATH%s, or install "
                    "the torch build for ROCm %d.%d" % (
                        " or set it to " + evidence["torch_libamdhip64"]
                        if evidence["torch_libamdhip64"] else "", have[0], have[1]), evidence)
        return ("pass", "libamdhip64 HIP %s matches torch's ROCm %s" % (runtime, torch_hip), "",
                evidence)


# --- checks/gpustate ------------------------------------------------------------------------------

HOLDER_FIX = ("stop what holds it before the job: `nvidia-smi --query-compute-apps=pid,"
              "used_memory --format=csv` lists the processes, `fuser -v /dev/nvidia*` who has "
              "the GPUs open; in a container, processes of other containers or of the host are "
              "seen only as memory in use: run these on the host")


def gib(mib):
    return "%.1f GiB" % (mib / 1024.0)


def process_words(process):
    if not process.get("here"):
        return "pid %s (not in this pid namespace: another container's or the host's%s)" % (
            process["pid"], ", the same pid here is another process" if process.get(
                "pid_reused") else "")
    what = process.get("cmdline") or process.get("name") or "?"
    words = [what[:60]]
    if process.get("user"):
        words.append("user " + process["user"])
    if process.get("used_mib") is not None:
        words.append(gib(process["used_mib"]))
    return "pid %s (%s)" % (process["pid"], ", ".join(words))


def foreign(gpu):
    return [p for p in gpu.get("processes") or [] if not p.get("own")]


class GpuStateChecks(Findings):

    def gpu_state(self):
        return self.facts.get("gpu_state") or {}

    def job_gpus(self):
        return [g for g in self.gpu_state().get("gpus") or [] if g.get("job", True)]

    def state_unread(self):
        state = self.gpu_state()
        return ("skip", "GPU state not read (%s)" % (
            state.get("error") or "no NVML, no nvidia-smi"), "", {"error": state.get("error")})

    def check_gpu_memory_in_use(self):
        gpus = [g for g in self.job_gpus() if g.get("total_mib")]
        if not gpus:
            return self.state_unread()
        worst = max(gpus, key=lambda g: g["held_share"])
        evidence = {"max_share": DEFAULT_MEMORY_SHARE, "worst_share": worst["held_share"],
                    "gpus": [{key: g.get(key) for key in ("index", "held_mib", "total_mib",
                                                          "held_share")} for g in gpus]}
        held = [g for g in gpus if g["held_share"] > DEFAULT_MEMORY_SHARE]
        if not held:
            return ("pass", "GPU memory free: at most %.0f%% in use (GPU %s)" % (
                worst["held_share"] * 100, worst["index"]), "", evidence)
        parts = []
        for gpu in held:
            who = foreign(gpu)
            parts.append("GPU %s: %s of %s in use (%.0f%%)%s" % (
                gpu["index"], gib(gpu["held_mib"]), gib(gpu["total_mib"]),
                gpu["held_share"] * 100,
                " by " + ", ".join(process_words(p) for p in who[:3]) if who else
                " by no process this node can list (another pid namespace's)"))
        return ("warn", "; ".join(parts), HOLDER_FIX, evidence)

    def check_gpu_foreign_processes(self):
        gpus = self.job_gpus()
        if not gpus:
            return self.state_unread()
        found, unseen, unread = [], [], []
        for gpu in gpus:
            for process in foreign(gpu):
                found.append((gpu["index"], process))
            if (not foreign(gpu) and gpu.get("held_share") is not None
                    and gpu["held_share"] > DEFAULT_MEMORY_SHARE):
                unseen.append(gpu)
            if gpu.get("processes_error"):
                unread.append(gpu)
        evidence = {"processes": [dict(p, gpu=index) for index, p in found][:32],
                    "unseen": [g["index"] for g in unseen],
                    "unread": [g["index"] for g in unread]}
        if found or unseen:
            words = ["GPU %s: %s" % (index, process_words(p)) for index, p in found[:4]]
            words += ["GPU %s: %s in use by processes of another pid namespace (the host's or "
                      "another container's: seen only as memory)" % (g["index"],
                                                                     gib(g["held_mib"]))
                      for g in unseen[:4]]
            count = len(found) + len(unseen)
            return ("warn", "%d foreign process%s on the GPUs: %s" % (
                count, "" if count == 1 else "es", "; ".join(words)), HOLDER_FIX, evidence)
        if unread and len(unread) == len(gpus):
            return ("skip", "GPU processes not listed (%s)" % unread[0]["processes_error"], "",
                    evidence)
        return ("pass", "no other process on the GPUs", "", evidence)

    def check_gpu_memory_health(self):
        gpus = [g for g in self.job_gpus() if g.get("health")]
        if not gpus:
            return self.state_unread() if not self.job_gpus() else (
                "skip", "memory-health counters not readable (NVML: not supported here)", "",
                {})
        pending, failed, ecc, retired = [], [], [], []
        for gpu in gpus:
            health = gpu["health"]
            rows = health.get("remapped_rows") or {}
            if rows.get("failure"):
                failed.append(gpu["index"])
            if rows.get("pending") or health.get("retired_pages_pending"):
                pending.append(gpu["index"])
            if health.get("ecc_uncorrected_volatile"):
                ecc.append((gpu["index"], health["ecc_uncorrected_volatile"]))
            if (health.get("retired_pages") or {}).get("double_bit"):
                retired.append((gpu["index"], health["retired_pages"]["double_bit"]))
        evidence = {"gpus": [{"index": g["index"], "health": g["health"]} for g in gpus]}
        if failed:
            return ("fail", "GPU %s: row remapping failed (uncorrectable memory the GPU could "
                    "not remap): the GPU needs service" % ", ".join(str(i) for i in failed),
                    "drain the node and have the GPU serviced (RMA); `nvidia-smi -q -d "
                    "ROW_REMAPPER -i N` shows the counters", evidence)
        if pending:
            return ("fail", "GPU %s: memory repair pending (row remapping or page retirement "
                    "waits for a GPU reset): the next large allocation may hit the bad memory"
                    % ", ".join(str(i) for i in pending),
                    "reset the GPU once nothing uses it (`nvidia-smi -r -i N`, as root, on the "
                    "host) or reboot the node; `nvidia-smi -q -d ROW_REMAPPER,PAGE_RETIREMENT "
                    "-i N` shows what waits", evidence)
        if ecc or retired:
            words = ["GPU %s: %d uncorrected ECC error(s) since boot" % e for e in ecc]
            words += ["GPU %s: %d page(s) retired for double-bit errors" % r for r in retired]
            return ("warn", "; ".join(words), "watch the GPU: `nvidia-smi -q -d ECC,"
                    "ROW_REMAPPER -i N`; more errors mean a reset or service", evidence)
        return ("pass", "no pending memory repair, no uncorrected ECC error", "", evidence)

    def check_gpu_missing_for_cuda(self):
        state = self.gpu_state()
        listed = state.get("listed") or 0
        cuda = state.get("cuda_count")
        visible = state.get("visible_devices")
        expected = listed if visible is None else min(listed, len(visible))
        evidence = {"listed": listed, "cuda_count": cuda, "visible_devices": visible,
                    "expected": expected}
        if cuda is None:
            return ("skip", "CUDA does not initialise (see zero_active_drivers): no count to "
                    "compare", "", evidence)
        if cuda < expected:
            return ("warn", "the driver lists %d GPU(s)%s, CUDA opens %d: %d missing for CUDA" % (
                listed, " (%d visible to the job)" % expected if expected != listed else "",
                cuda, expected - cuda),
                "look for the GPU CUDA cannot open: `nvidia-smi -q` (a GPU that 'requires "
                "reset', 'Unknown Error', fallen off the bus: Xid 79) and the kernel log; a GPU "
                "reset (`nvidia-smi -r -i N`) or a reboot; in a container, every /dev/nvidiaN "
                "of the GPUs it is given must be passed in", evidence)
        return ("pass", "CUDA opens the %d GPU(s) the driver lists" % cuda, "", evidence)

    def check_gpu_persistence_mode(self):
        gpus = [g for g in self.job_gpus() if g.get("persistence_mode") is not None]
        if not gpus:
            return ("skip", "persistence mode not read", "", {})
        off = [g["index"] for g in gpus if g["persistence_mode"] == 0]
        evidence = {"gpus": [{"index": g["index"], "persistence_mode": g["persistence_mode"],
                              "compute_mode": g.get("compute_mode")} for g in gpus]}
        if off:
            return ("warn", "GPU %s: persistence mode off (each job pays the driver's start, "
                    "and the GPU's state is reset between jobs)" % ", ".join(
                        str(i) for i in off),
                    "enable it on the host: `systemctl enable --now nvidia-persistenced` (or "
                    "`nvidia-smi -pm 1`, as root)", evidence)
        return ("pass", "persistence mode on", "", evidence)

    def check_gpu_xid_events(self):
        xid = self.gpu_state().get("xid") or {}
        if not xid.get("readable"):
            return ("skip", "kernel log not readable, Xid events unknown (not clean): %s" % (
                xid.get("why") or "not read"), "", {"why": xid.get("why")})
        events = [e for e in xid.get("events") or [] if e.get("this_node")]
        hours = xid.get("window_s", 3600) / 3600.0
        evidence = {"window_s": xid.get("window_s"), "events": events[-20:]}
        critical = [e for e in events if e["kind"] == "critical"]
        if critical:
            last = critical[-1]
            return ("fail", "%d critical Xid event(s) in the last %g h: Xid %d on %s (%s)" % (
                len(critical), hours, last["xid"], last["pci"], last["text"][:80]),
                "reboot the node (a GPU reset, `nvidia-smi -r -i N` with nothing using it, "
                "clears the GPU too, but this check counts the Xid for %g h after it was "
                "logged); look the Xid up in NVIDIA's Xid catalogue; a repeating one needs "
                "service" % hours, evidence)
        app = [e for e in events if e["kind"] == "application"]
        if app:
            return ("warn", "%d application Xid event(s) in the last %g h (Xid %s: a program's "
                    "fault, the GPU is fine)" % (len(app), hours, ", ".join(
                        sorted({str(e["xid"]) for e in app}))),
                    "see the program that faulted (the pid in the kernel log's Xid line)",
                    evidence)
        return ("pass", "no critical Xid event in the last %g h%s" % (
            hours, " (%d informational)" % len(events) if events else ""), "", evidence)


# --- evaluation/frameworks ------------------------------------------------------------------------

CATCHES = {"vllm": "(RuntimeError, AttributeError): silent",
           "sglang": "BaseException, with FLA's warning",
           "unsloth_zoo": "Exception, with a warning"}


class Frameworks(TorchChecks, WorkloadChecks):

    def frameworks(self, checks, triton):
        by_id = {c["id"]: c for c in checks}
        meta = self.stages.get("meta", {})
        torch = self.torch_info()
        target = self.stages.get("target") or {}
        verdict = triton["verdict"]
        cause = triton.get("cause")
        label = self.cause_label(cause) if cause else None
        if torch.get("installed") or meta.get("torch_dir"):
            active = bool(torch.get("cuda_available"))
        else:
            active = self.cuda_info.get("init") == 0 and (self.cuda_info.get("count") or 0) > 0
        if cause == "fla_import_fails" and target.get("ok"):
            verdict, cause, label = "gpu", None, None
        late = verdict == "cpu-fallback" and bool(target.get("ok"))
        out = {}
        fla = by_id.get("fla_fallback_hidden") or {}
        if not meta.get("fla_dir"):
            out["fla"] = {"installed": False, "outcome": "not-installed",
                          "detail": "flash-linear-attention not installed"}
        else:
            ev = fla.get("evidence") or {}
            version = meta.get("fla_version")
            ready = by_id.get("inductor_ready") or {}
            before = ready.get("status") == "fail" and any(
                (ready.get("evidence") or {}).get(k) for k in ("user_error", "cache_error"))
            interpreted = any(f["variable"] == "TRITON_INTERPRET" for f in self.env_report())
            if (fla.get("evidence") or {}).get("matches") == "fla_import_fails":
                outcome, detail = "import-fails", fla["summary"]
            elif before:
                outcome = "import-fails"
                detail = "import fla fails before any kernel (its torch.compile import reaches " \
                    "inductor's cache dir): %s" % ready["summary"]
            elif interpreted:
                outcome = "cpu"
                detail = "FLA %s picks device %s, but TRITON_INTERPRET runs its kernels in " \
                    "Triton's interpreter on the CPU" % (version, ev.get("device_platform"))
            elif fla.get("status") == "fail" and ev.get("device_platform") == "cpu":
                outcome = "cpu-fallback"
                detail = "FLA %s falls back to CPU: %s" % (version, first_line(
                    ev.get("swallowed") or ev.get("triton_error") or "cause not seen"))
            elif fla.get("status") == "pass" and late:
                outcome = "fails-at-kernel"
                detail = "FLA %s picks the GPU, its first kernel fails: %s" % (version, label)
            elif fla.get("status") == "pass":
                outcome = "gpu"
                detail = "FLA %s runs on the GPU (device_platform=%s)" % (
                    version, ev.get("device_platform"))
            else:
                outcome = "unknown"
                detail = "FLA %s: %s" % (version, fla.get("summary") or "not evaluated")
            out["fla"] = {"installed": True, "version": version, "outcome": outcome,
                          "detail": detail}
        if not meta.get("vllm_dir"):
            out["vllm"] = {"installed": False, "outcome": "not-installed",
                           "detail": "vLLM not installed"}
        else:
            outcome, detail = self.vllm_outcome(verdict, label)
            real = self.stages.get("vllm") or {}
            out["vllm"] = {"installed": True, "version": meta.get("vllm_version"),
                           "outcome": outcome, "detail": detail,
                           "platform": real.get("platform"), "has_triton": real.get("has_triton")}
        if not meta.get("inductor"):
            out["inductor"] = {"installed": False, "outcome": "not-installed",
                               "detail": "torch.compile (inductor) not installed"}
        else:
            path = self.env.get("PATH", os.defpath)
            cxx_name = self.env.get("CXX") or "g++"
            cxx = shutil.which(cxx_name, path=path)
            caps = self.capabilities()
            if self.triton_missing:
                outcome, why = "no-triton", "no Triton: Cannot find a working triton installation"
            elif not active:
                outcome, why = "cpu-only", "no %s device: compiles for the CPU only" % (
                    "ROCm (torch.cuda)" if self.vendor == "amd" else "CUDA")
            elif caps and min(caps) < (7, 0):
                outcome, why = "gpu-unsupported", "GPU capability < 7.0: no Triton path"
            elif (by_id.get("inductor_ready") or {}).get("status") == "fail":
                outcome, why = "fails-before-triton", by_id["inductor_ready"]["summary"]
            elif any(f["variable"] == "TRITON_INTERPRET" for f in self.env_report()):
                outcome, why = "cpu", ("its Triton kernels run in Triton's interpreter on the "
                                       "CPU (TRITON_INTERPRET)")
            elif verdict == "gpu":
                outcome, why = "triton", "Triton path usable" + (
                    " (HIP backend)" if self.vendor == "amd" else "")
            else:
                outcome, why = "fails-at-kernel", "BackendCompilerFailed at code generation: %s" % (
                    label or "Triton verdict %s" % verdict)
            cxx_text = ("C++ compiler %s" % cxx if cxx else
                        "no C++ compiler for its CPU/cpp-wrapper path (InvalidCxxCompiler: No "
                        "working C++ compiler found in torch._inductor.config.cpp.cxx: (None, "
                        "'%s'))" % cxx_name)
            out["inductor"] = {"installed": True, "version": torch.get("version") or meta.get(
                "torch_version"), "outcome": outcome, "cxx": cxx,
                "detail": "torch.compile (inductor): %s; %s" % (why, cxx_text)}
        self.vendored_outcomes(out, active, verdict, label)
        self.other_outcomes(out, active, verdict, label)
        return out

    def vllm_outcome(self, verdict, label):
        real = self.stages.get("vllm")
        if real is None:
            return "unknown", "vLLM's own detection did not report (the stack stopped first)"
        log = real.get("log") or []

        def said(logger, *words):
            for _, name, message in log:
                if name.startswith(logger) and all(w in message for w in words):
                    return message
            return None
        for key, what in (("import_error", "import vllm fails"),
                          ("platform_error", "vLLM's platform detection raises"),
                          ("triton_error", "importing vllm.triton_utils fails")):
            if real.get(key):
                return "import-fails", "%s: %s" % (what, first_line(real[key].get("error")))
        platform = real.get("platform")
        if platform == "UnspecifiedPlatform":
            kind = "ROCm" if self.vendor == "amd" else "CUDA"
            why = said("vllm.platforms", kind + " platform is not available because") or said(
                "vllm.platforms", "No platform detected")
            nvml = self.cuda_info.get("nvml_error") or (
                self.cuda_info.get("nvml_init_text") if self.cuda_info.get("nvml_init") else None)
            return "import-fails", (
                "vLLM finds no platform (UnspecifiedPlatform): %s%s; its engine raises "
                "RuntimeError: Failed to infer device type" % (
                    why or "no plugin activated", " (NVML, as the probe loads it: %s)" % (
                        first_line(nvml)) if nvml and kind == "CUDA" else ""))
        if platform and "Cpu" in platform:
            why = said("vllm.platforms", "Confirmed CPU platform") or platform
            return "cpu", "vLLM selects its CPU platform: %s" % why
        if real.get("has_triton") is False:
            why = said("vllm.triton_utils", "Disabling Triton") or said(
                "vllm.triton_utils", "Triton not installed")
            return ("no-triton" if self.triton_missing else "triton-disabled",
                    "vLLM (%s) sets HAS_TRITON = False: %s" % (platform, why or "no reason logged"))
        if verdict == "gpu":
            return "triton", "vLLM (%s) uses Triton on the GPU (HAS_TRITON)" % platform
        return "fails-at-kernel", "vLLM (%s) enables Triton (HAS_TRITON), the first kernel " \
            "fails: %s" % (platform, label or "Triton verdict %s" % verdict)

    def vendored_outcomes(self, out, active, verdict, label):
        for item in (self.stages.get("vendored") or {}).get("detections") or []:
            fw = item.get("framework")
            catches = CATCHES.get(fw, "?")
            if item.get("raised"):
                outcome, detail = "import-fails", (
                    "its copy of FLA's detection (catches %s) lets %s through: importing its "
                    "FLA ops fails" % (catches, first_line(item["raised"])))
            elif item.get("error"):
                outcome, detail = "unknown", "its copy of FLA's detection: %s" % item["error"]
            elif item.get("backend") == "cpu":
                outcome = "cpu-fallback"
                detail = "its copy of FLA's detection (catches %s) says cpu%s" % (
                    catches, ": " + first_line(item["warnings"][0]) if item.get("warnings")
                    else ", and logs nothing")
            else:
                outcome, detail = "gpu", "its copy of FLA's detection says %s" % item.get(
                    "backend")
            if fw == "vllm" and "vllm" in out:
                vllm = out["vllm"]
                vllm["fla_copy"] = {"outcome": outcome, "detail": detail, "file": item["file"]}
                if outcome != "gpu" and vllm.get("outcome") in ("triton", "fails-at-kernel"):
                    vllm["outcome"], vllm["detail"] = outcome, "vLLM: " + detail
                continue
            out[fw] = {"installed": True, "outcome": outcome, "detail": detail,
                       "file": item["file"]}

    def other_outcomes(self, out, active, verdict, label):
        meta = self.stages.get("meta", {})
        found = self.stages.get("imports") or {}

        def later(what):
            return ("gpu", what) if verdict == "gpu" else (
                "fails-at-kernel", "%s, its first Triton kernel fails: %s" % (
                    what, label or "Triton verdict %s" % verdict))
        for name, label_name in (("xformers", "xformers"), ("liger_kernel", "Liger-Kernel"),
                                 ("mamba_ssm", "mamba-ssm"), ("causal_conv1d", "causal-conv1d")):
            if not meta.get(name + "_dir"):
                continue
            item = found.get(name)
            if item is None:
                outcome, why = "unknown", "its import did not report (the stack stopped first)"
            elif item.get("import_error"):
                outcome, why = "import-fails", "import %s fails: %s" % (
                    name, first_line(item["import_error"].get("error")))
            elif name == "xformers":
                if item.get("_is_triton_available") is False:
                    reason = next((m for m in item.get("log") or [] if "Triton" in m),
                                  None) or next((
                        "%s=%s" % (k, self.env[k]) for k in ("XFORMERS_FORCE_DISABLE_TRITON",)
                        if self.env.get(k, "0") == "1"), None)
                    outcome, why = "triton-off", "_is_triton_available() is False%s" % (
                        ": " + first_line(reason) if reason else " (no CUDA device, or "
                        "capability < 8.0)")
                else:
                    outcome, why = later("_is_triton_available() is True")
                    outcome = "triton" if outcome == "gpu" else outcome
            elif name == "liger_kernel":
                device = item.get("infer_device")
                outcome, why = later("infer_device() = %s" % device) if device == "cuda" else (
                    "cpu-only", "infer_device() = %s: its Triton kernels get no GPU" % device)
            else:
                outcome, why = later("imported (its @triton.jit kernels defined)")
            out[name] = {"installed": True, "outcome": outcome,
                         "detail": "%s: %s" % (label_name, why)}


# --- evaluation/verdict ---------------------------------------------------------------------------

class Evaluation(Findings):

    def run_checks(self):
        meta = self.stages.get("meta", {})
        self.no_gpu = not self.hardware_evidence()
        self.triton_missing = not meta.get("triton_dir")
        self.stack_failed = "meta" not in self.stages
        checks = []
        self.statuses = {}
        self.facts["limits"] = self.node_limits()
        left_out = CUDA_ONLY if self.vendor == "amd" else HIP_ONLY
        for check_id in CHECK_IDS:
            if check_id in left_out:
                continue
            method = check_method(check_id)
            if self.vendor == "amd" and hasattr(self, method + "_hip"):
                method += "_hip"
            try:
                if self.no_gpu and check_id != "gpu_present":
                    result: tuple = ("skip", "not evaluated: no %s GPU on this node" % (
                        "AMD" if self.vendor == "amd" else "NVIDIA"), "", {})
                elif (self.stack_failed and check_id in STACK_DEPENDENT):
                    result = self.stack_error()
                elif (self.triton_missing and check_id in TRITON_DEPENDENT):
                    result = ("skip", "not evaluated: Triton is not installed", "", {})
                else:
                    result = getattr(self, method)()
            except Exception as exc:
                result = ("error", "check failed inside the probe: " + error_text(exc), "",
                          {"exception": error_text(exc)})
            status, summary, fix, evidence = result
            if status == "fail" and not fix:
                fix = self.cause_fix((evidence or {}).get("matches") or check_id)
            self.statuses[check_id] = status
            checks.append({"id": check_id, "status": status, "summary": clip_head(summary, 400),
                           "fix": clip_head(fix, 600), "evidence": bounded(evidence)})
        self.apply_masking(checks)
        return checks

    def unknown_verdict(self, errors, first):
        for check in errors:
            named = (check.get("evidence") or {}).get("matches")
            if named in LIMIT_CAUSES:
                return {"verdict": "unknown", "backend": None, "cause": named,
                        "fix": "%s: %s" % (self.cause_label(named), check["fix"] or (
                            self.cause_fix(named)))}
        return {"verdict": "unknown", "backend": None, "cause": first["id"], "fix": ""}

    def apply_masking(self, checks):
        stale = next(c for c in checks if c["id"] == "stale_cache_masks_compiler")
        if stale["status"] != "warn":
            return
        for check in checks:
            masked = check["id"] in MASKABLE or (
                check["id"] == "triton_own_path"
                and (check["evidence"] or {}).get("matches") in TOOLCHAIN_CAUSES | {None})
            if masked and check["status"] == "fail":
                check["status"] = "warn"
                check["summary"] = clip_head(
                    check["summary"] + " (hidden by the warm Triton cache)", 440)

    def verdict(self, checks):
        by_id = {c["id"]: c for c in checks}
        fails = [c for c in checks if c["status"] == "fail"]
        errors = [c for c in checks if c["status"] == "error"]
        warns = [c for c in checks if c["status"] == "warn"]
        target = self.stages.get("target") or {}
        backend = (target.get("target") or {}).get("backend") if target.get("ok") else None
        if self.no_gpu:
            triton = {"verdict": "no-gpu", "backend": None, "cause": None, "fix": ""}
        elif self.triton_missing and not self.stack_failed:
            check = by_id["triton_installed"]
            triton = {"verdict": "not-installed", "backend": None, "cause": "triton_installed",
                      "fix": check["fix"] or self.cause_fix("triton_installed")}
        elif any(c["id"] not in NODE_ONLY for c in fails):
            first = next(c for c in fails if c["id"] not in NODE_ONLY)
            cause = first["id"]
            named = (first["evidence"] or {}).get("matches")
            told = ((first["evidence"] or {}).get("object") or {}).get("check_passed")
            if named and (by_id.get(named, {}).get("status") != "pass" or told):
                cause = named
            fix = first["fix"] or self.cause_fix(cause)
            triton = {"verdict": "cpu-fallback", "backend": None, "cause": cause,
                      "fix": "%s: %s" % (self.cause_label(cause), fix) if fix else ""}
        elif by_id["stale_cache_masks_compiler"]["status"] == "warn":
            stale = by_id["stale_cache_masks_compiler"]
            triton = {"verdict": "gpu", "backend": "hip" if self.vendor == "amd" else "cuda",
                      "cause": "stale_cache_masks_compiler",
                      "fix": "%s: %s" % (self.cause_label("stale_cache_masks_compiler"),
                                         stale["fix"] or self.cause_fix(stale["id"]))}
        elif target.get("ok") and (by_id.get("triton_own_path") or {}).get("status") != "error":
            triton = {"verdict": "gpu", "backend": backend, "cause": None, "fix": ""}
        else:
            triton = self.unknown_verdict(errors, errors[0] if errors else by_id["triton_target"])
        if fails:
            status = "fail"
            if triton["verdict"] == "cpu-fallback":
                reason = "Triton cpu-fallback: " + next(
                    c for c in fails if c["id"] not in NODE_ONLY)["summary"]
            else:
                reason = fails[0]["summary"]
        elif errors or triton["verdict"] == "unknown":
            status = "error"
            reason = (errors[0]["summary"] if errors else "Triton verdict unknown")
        elif warns:
            status = "warn"
            reason = warns[0]["summary"]
        else:
            status = "ok"
            reason = "Triton %s" % triton["verdict"] + (" (%s)" % backend if backend else "")
        return triton, status, clip_head(reason, 400)


# --- core/assembly --------------------------------------------------------------------------------

class Probe(
        Gather,
        DriverChecks,
        PackageChecks,
        ToolchainChecks,
        LoaderChecks,
        CacheChecks,
        TritonChecks,
        FlaChecks,
        HipChecks,
        GpuStateChecks,
        Frameworks,
        TorchChecks,
        WorkloadChecks,
        Evaluation,
):
    """Gathers facts concurrently, then evaluates every check in causal order. Its state is
    ProbeState's (core/state.py); each base is a class over it, a subclass of the classes
    whose methods it calls (a subclass before its bases here)."""


# --- main -----------------------------------------------------------------------------------------

PROBE_SCHEMA = "fleetcheck.probe/1"

PROBE_VERSION = "1"


def parse_args(argv):
    deep, deadline, python = False, None, None
    items = list(argv)
    while items:
        item = items.pop(0)
        if item == "--deep":
            deep = True
        elif item in ("--deadline", "--python"):
            if not items:
                raise ValueError("%s needs a value" % item)
            value = items.pop(0)
            if item == "--deadline":
                deadline = float(value)
                if not deadline > 0:
                    raise ValueError("--deadline must be > 0")
            else:
                python = value
        elif item.startswith("--deadline="):
            deadline = float(item.split("=", 1)[1])
        elif item.startswith("--python="):
            python = item.split("=", 1)[1]
        else:
            raise ValueError("unknown argument %r" % item)
    if deadline is None:
        deadline = 175.0 if deep else 55.0
    return deep, deadline, python


LEAN_LOADER = ("import marshal,os,sys;f=int(sys.argv[1]);t=float(sys.argv[2]);del sys.argv[1:3];"
               "h=os.fdopen(f,'rb');c=marshal.loads(h.read());h.close();sys.argv[0]='-';"
               "__file__='<stdin>';" + RESTARTED + "=t;del f,t,h;exec(c)")


def restart_lean(argv, started, signs):
    if __name__ != "__main__" or RESTARTED in globals():
        return
    memfd = getattr(os, "memfd_create", None)  # Python 3.8+, Linux
    flags = getattr(subprocess, "_args_from_interpreter_flags", None)
    exe = sys.executable
    if memfd is None or flags is None or not exe or not any(signs[3:]):
        return
    frame = sys._getframe()  # up to the frame running this module's own code
    while not (frame.f_code.co_name == "<module>" and frame.f_globals is globals()):
        back = frame.f_back
        if back is None:
            return
        frame = back
    fd = None
    try:
        if not os.path.samefile(exe, "/proc/self/exe"):
            return  # another interpreter's marshal would not load
        import marshal
        data = marshal.dumps(frame.f_code)
        fd = memfd("fleetcheck-probe", 0)  # inherited by the exec, gone once read
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.lseek(fd, 0, os.SEEK_SET)
        sys.stdout.flush()
        sys.stderr.flush()
        os.execv(exe, [exe, *flags(), "-c", LEAN_LOADER, str(fd), repr(started), *argv])
    except (OSError, ValueError):
        if fd is not None:
            os.close(fd)


def failure_document(message, deep, started):
    return {
        "schema": PROBE_SCHEMA, "probe_version": PROBE_VERSION,
        "duration_s": round(time.monotonic() - started, 3), "deep": deep, "facts": {},
        "checks": [{"id": check_id, "status": "error", "summary": clip(message, 400), "fix": "",
                    "evidence": {}} for check_id in CHECK_IDS],
        "triton": {"verdict": "unknown", "backend": None, "cause": None, "fix": ""},
        "status": "error", "reason": clip("probe error: " + message, 400),
    }


EXIT_CODES = {"ok": 0, "warn": 0, "fail": 1, "error": 3}


def main(argv):
    started = globals().get(RESTARTED) or time.monotonic()
    deep = "--deep" in argv
    tmp = probe = None
    try:
        deep, seconds, python = parse_args(argv)
        signs = gpu_signs()
        restart_lean(argv, started, signs)
        for signum in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, on_terminate)
        deadline = Deadline(seconds, started)
        tmp = tempfile.mkdtemp(prefix="fleetcheck-probe-")
        probe = Probe(deep, deadline, python, tmp)
        probe.gather(signs)
        checks = probe.run_checks()
        triton, status, reason = probe.verdict(checks)
        probe.facts["frameworks"] = probe.frameworks(checks, triton)
        document = {
            "schema": PROBE_SCHEMA, "probe_version": PROBE_VERSION,
            "duration_s": round(time.monotonic() - started, 3), "deep": deep,
            "facts": bounded(probe.facts), "checks": checks, "triton": triton,
            "status": status, "reason": reason,
        }
    except BaseException as exc:  # the global guard: a JSON document, never a traceback
        document = failure_document(error_text(exc), deep, started)
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        kill_live()
        if probe is not None:
            try:
                probe.remove_workload_dirs()
            except Exception:
                pass
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    text = json.dumps(document, sort_keys=False, separators=(",", ":"))
    sys.stdout.write(text + "\n")
    sys.stdout.flush()
    return EXIT_CODES.get(document["status"], 3)


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stderr.flush()
    os._exit(code)
