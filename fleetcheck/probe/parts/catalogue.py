"""Every cause as one record: id, label, vendor, the messages and errnos that name it, its fix.

The probe's tables (CHECK_IDS, CUDA_ONLY, HIP_ONLY, the labels, the message rules), the host's
catalogue (fleetcheck/checks.py), the classifier and docs/checks.md's table of causes are all
derived from CAUSES; adding a cause is one record here and its tests.
"""

import collections
import re

#: One cause. `fix` is a template filled with the node's own values (fill_fix): {python},
#: {pip}, {install}, {pkg_cc}, {pkg_libc}, {pkg_python}, {cache_dir}, {tmp_dir}, {triton},
#: {torch}, {libcuda_dir}, and for a cause named from an object or a limit {path}, {target},
#: {component}, {owner}, {uid}, {mount}, {limit}, {value}, {library}, {missing}, {dists}.
#: check: the probe runs a check of this id (CHECK_IDS, in this tuple's order: causal order).
#: texts: regexes of the messages that name it (first record, then first text, wins).
#: errnos: errno names that name it whatever the object. repair: what `fleetcheck fix` does
#: about it ("packages", "ldcache", "symlink", "host": the host's admin; None: printed only).
Cause = collections.namedtuple(
    "Cause", "id label fix vendor check amd_label texts errnos repair",
    defaults=(None, False, None, (), (), None))

#: How to find and stop what holds a GPU (checks_gpustate.py's HOLDER_FIX, filled there).
_HOLDER_FIX = ("stop what holds it before the job: nvidia-smi --query-compute-apps=pid,"
               "used_memory --format=csv lists the processes, fuser -v /dev/nvidia* who has "
               "the GPUs open; in a container, run these on the host")

_TRITON_REINSTALL = ("{pip} install --force-reinstall --no-deps triton=={triton} "
                     "(the wheel torch {torch} pins)")

#: Every cause: the checks in causal order (the first failing one is the root cause), and the
#: causes only a message, an errno, an object or a limit names, where their texts are tried.
CAUSES = (
    Cause("gpu_present", "no GPU visible", "load the GPU driver; pass the GPU into the "
          "container (docker --gpus all)",
          check=True, repair="host"),
    Cause("dev_nodes_missing", "GPU device nodes unusable", "pass /dev/nvidia* "
          "into the container (docker --gpus all)", check=True, repair="host"),
    Cause("cgroup_devices_revoked", "GPU access revoked under the running container",
          "restart the container; nvidia-ctk system "
          "create-dev-char-symlinks --create-all", "nvidia", True, repair="host"),
    Cause("fabric_manager_not_ready", "NVSwitch fabric not ready (fabric manager)",
          "systemctl enable --now nvidia-fabricmanager (of "
          "the driver's version)", "nvidia", True,
          texts=(r"Error 802|system not yet initialized|SYSTEM_NOT_READY",), repair="host"),
    Cause("cuda_compat_on_unsupported_gpu", "CUDA forward-compat libcuda on unsupported hardware",
          "take the cuda compat dir off LD_LIBRARY_PATH and "
          "ld.so.conf; run ldconfig", "nvidia", True,
          texts=(r"Error 804|forward compatibility was attempted",), repair="ldcache"),
    Cause("libcuda_stub_shadowing", "the link-time stub libcuda is loaded",
          "take the stubs dir off LD_LIBRARY_PATH and ld.so.conf; run "
          "ldconfig", "nvidia", True, texts=(r"driver is a stub library|STUB_LIBRARY",),
          repair="ldcache"),
    Cause("driver_userspace_mismatch", "driver library/kernel module mismatch",
          "install the driver userspace of the kernel module's "
          "version, or reboot", check=True, amd_label="ROCm userspace does not match the amdgpu "
          "driver", repair="host"),
    Cause("zero_active_drivers", "CUDA driver does not initialise", "install the "
          "driver userspace (libcuda.so.1), pass the GPUs in, fix CUDA_VISIBLE_DEVICES", check=True,
          amd_label="HIP runtime finds no GPU",
          texts=(r"libcuda\.so\.1: cannot open shared object file",
                 r"\b0 active drivers|no ROCm-capable device is detected"), repair="host"),
    Cause("gpu_exclusive_busy", "GPU in exclusive-process mode, held by another process",
          "nvidia-smi -i N -c DEFAULT on the host, or "
          "wait for the holder", "nvidia", True, repair="host"),
    Cause("driver_too_old", "driver too old for torch's CUDA", "upgrade the driver, or {pip} "
          "install a torch of the driver's CUDA", "nvidia", True,
          texts=(r"undefined symbol: cu[A-Z]\w*",), repair="host"),
    Cause("torch_install_broken", "the torch installation is incomplete",
          "reinstall torch: {pip} install --force-reinstall --no-deps torch=={torch}",
          check=True, texts=(r"No module named .torch\.",)),
    Cause("torch_cuda", "PyTorch does not see the GPU", "{pip} install a CUDA (or ROCm) "
          "build of torch", check=True),
    Cause("torch_lacks_arch", "PyTorch not built for this GPU", "{pip} install "
          "--upgrade torch (a build for this GPU)", check=True),
    Cause("gpu_arch_unsupported", "GPU too old for Triton", "use a GPU of capability >= "
          "7.0", check=True,
          amd_label="gfx arch not supported by Triton", repair="host"),
    Cause("triton_installed", "Triton installation", "keep one Triton distribution: {pip} "
          "uninstall -y {dists}, then {pip} install triton=={triton}", check=True),
    Cause("triton_install_broken", "the Triton installation is incomplete", _TRITON_REINSTALL,
          check=True, texts=(r"No module named .triton[\w.]*|cannot import name .* from "
                             r".triton",)),
    Cause("triton_2x", "Triton 2.x", "upgrade to Triton >= 3.3 with torch >= 2.7: {pip} "
          "install --upgrade torch triton", check=True, texts=(r"no attribute 'active'",)),
    Cause("triton_backends", "Triton's backend selection fails", _TRITON_REINSTALL, check=True),
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
          check=True),
    Cause("no_c_compiler", "no C compiler", "{install} {pkg_cc}, or set CC", check=True,
          texts=(r"Failed to find C compiler",), repair="packages"),
    Cause("compiler_incomplete", "the C compiler is missing its own parts (cc1, collect2)",
          "{install} --reinstall {pkg_cc} "
          "cpp (cc1), or set CC",
          texts=(r"cannot execute .(cc1|cc1plus|collect2).|error trying to exec .cc1."
                 r"|\bcc1: not found",), repair="packages"),
    Cause("no_linker", "no linker", "{install} binutils", check=True,
          texts=(r"cannot find .ld.|\"ld\" doesn't exist|cannot execute .ld."
                 r"|error trying to exec .ld.",
                 r"cannot execute .as.|\"as\" doesn't exist|error trying to exec .as."),
          repair="packages"),
    Cause("libc_crt_missing", "libc's startup files (crti.o, crt1.o) missing",
          "{install} {pkg_libc}", texts=(r"cannot find (crt[\w]*\.o|-lc\b)",),
          repair="packages"),
    Cause("compiler_killed", "the C compiler was killed (out of memory)", "raise the job's "
          "memory limit (memory.max, ulimit -v)",
          texts=(r"Killed signal terminated program|out of memory "
                                     r"allocating|virtual memory exhausted|internal compiler "
                                     r"error: (Killed|Segmentation fault) signal",)),
    Cause("cc_rejects_flags", "the C compiler rejects Triton's flags", "set CC to "
          "gcc or clang (export CC=/usr/bin/gcc)",
          texts=(r"unrecognized command[- ]line option|bad value .* for .-m[\w-]+=. switch"
                 r"|unknown argument: |unsupported option",)),
    Cause("include_dir_unreadable", "an include dir is unreadable for the workload's user",
          "chmod o+rx {path} and its "
          "parents",
          texts=(r"(error|fatal error): (\S+): Permission denied",)),
    Cause("libc_headers_missing", "no libc headers", "{install} {pkg_libc}", check=True,
          texts=(r"fatal error: (?!.?Python\.h).?[\w./-]+\.h.?(: No such file| file not found)",
                 r"\b(stdio|dlfcn|stdlib|string|limits|stddef|features)\.h\b"
                 r"|no include path in which"), repair="packages"),
    Cause("python_headers_missing", "no Python headers", "{install} {pkg_python} (headers "
          "for {python})", check=True, texts=(r"\bPython\.h\b",), repair="packages"),
    Cause("ldconfig_binary_missing", "no /sbin/ldconfig", "set TRITON_LIBCUDA_PATH="
          "{libcuda_dir}, or {install} libc-bin", "nvidia", True, repair="packages"),
    Cause("ld_so_cache_missing", "no linker cache (/etc/ld.so.cache)", "run /sbin/ldconfig as "
          "root (writes /etc/ld.so.cache), or set TRITON_LIBCUDA_PATH={libcuda_dir}",
          "nvidia", texts=(r"Can't open cache file|ld\.so\.cache"
                          r"|ldconfig', '-p'\]' returned non-zero",),
          repair="ldcache"),
    Cause("libcuda_not_in_ldcache", "libcuda.so.1 not in the linker cache", "run ldconfig (an "
          "/etc/ld.so.conf.d entry for {libcuda_dir}), or set TRITON_LIBCUDA_PATH="
          "{libcuda_dir}", "nvidia", True,
          texts=(r"libcuda\.so cannot found", r"cannot find -l:?libcuda\.so\.1"),
          repair="ldcache"),
    Cause("ldcache_stale_libcuda_entry", "stale libcuda.so.1 entry in the linker cache",
          "run ldconfig as root, or set "
          "TRITON_LIBCUDA_PATH={libcuda_dir}", "nvidia", True,
          texts=(r"Possible files are located at",), repair="ldcache"),
    Cause("libcuda_unversioned_missing", "no unversioned libcuda.so", "ln -s libcuda.so.1 "
          "{libcuda_dir}/libcuda.so (or upgrade to Triton >= 3.6)", "nvidia", True,
          texts=(r"cannot find -lcuda\b",), repair="symlink"),
    Cause("libhip_path_invalid", "TRITON_LIBHIP_PATH invalid", "point TRITON_LIBHIP_PATH at "
          "/opt/rocm/lib/libamdhip64.so, or unset it", "amd", True,
          texts=(r"TRITON_LIBHIP_PATH '.*' does not point to a valid",)),
    Cause("libamdhip64_not_found", "libamdhip64.so not found", "export TRITON_LIBHIP_PATH="
          "{library} in the workload's environment (Triton {triton}'s own search does not "
          "reach it), or install ROCm's HIP runtime ({install} hip-runtime-amd)", "amd", True,
          texts=(r"cannot (locate|open) libamdhip64\.so",), repair="packages"),
    Cause("libamdhip64_other_rocm", "libamdhip64 from another ROCm than torch's",
          "point TRITON_LIBHIP_PATH at "
          "torch's ROCm", "amd", True,
          texts=(r"libamdhip64 version .* is not supported|refusing to mix ROCm installations",)),
    Cause("cache_dir_unwritable", "Triton cache not writable", "make {cache_dir} writable by "
          "the workload's user (chown), or export TRITON_CACHE_DIR=/tmp/triton_$USER",
          check=True),
    Cause("cache_entry_foreign_owner", "Triton cache entries owned by another user",
          "remove the entries another user left in {cache_dir} (a run as root, e.g. with "
          "sudo -E): sudo rm -rf <the entries named>; or give them back: sudo chown -R "
          "<the workload's user> {cache_dir}", check=True),
    Cause("cache_entry_unreadable", "Triton cache entries unreadable", "chmod -R u+rwX "
          "<the entries named> under {cache_dir} (or remove them)", check=True),
    Cause("cache_entry_corrupt", "a damaged Triton cache entry", "rm -r {component} (Triton "
          "rebuilds it), or the whole cache: rm -r {cache_dir}", check=True,
          texts=(r"file too short|invalid ELF header",)),
    Cause("cache_dir_noexec", "Triton cache on a noexec mount", "export TRITON_CACHE_DIR=<a "
          "dir on an exec mount>, or remount {mount} without noexec", check=True),
    Cause("cache_on_network_fs", "Triton cache on a network file system", "export "
          "TRITON_CACHE_DIR=<a node-local dir> (e.g. /tmp/triton_$USER)", check=True),
    Cause("cache_dir_full", "Triton cache full", "free space on {mount} (it holds {cache_dir}), "
          "or export TRITON_CACHE_DIR=<a dir with space>", check=True),
    Cause("tmp_dir_unusable", "temp dir unusable for Triton's build", "export TMPDIR=<a "
          "writable dir with space> (now {tmp_dir})", check=True,
          texts=(r"No usable temporary directory found|IO failure on output stream"
                 r"|cannot open output file .*: (Permission denied|Read-only file system)",)),
    Cause("ptxas_missing", "bundled ptxas missing", _TRITON_REINSTALL, "nvidia", True,
          texts=(r"Cannot find ptxas",)),
    Cause("ptxas_override_unparsed", "TRITON_PTXAS_PATH unusable", "unset TRITON_PTXAS_PATH "
          "and upgrade Triton instead", "nvidia", True, texts=(r"Triton only support CUDA",)),
    Cause("triton_too_old_for_gpu", "Triton too old for this GPU", "upgrade: {pip} install "
          "--upgrade torch triton (Triton >= 3.3; >= 3.6 for sm_121)", "nvidia", True,
          texts=(r"for option 'gpu-name'|is not a recognized processor",)),
    Cause("driver_too_old_for_bundled_ptxas", "driver older than Triton's ptxas", "upgrade the "
          "driver, or set TRITON_PTXAS_PATH to an older ptxas",
          "nvidia", True, texts=(r"device kernel image is invalid",), repair="host"),
    Cause("triton_target", "get_current_target() fails", "run {python} -c 'import triton; "
          "triton.runtime.driver.active.get_current_target()' and fix what it prints", check=True),
    Cause("triton_own_path", "get_current_target() fails where the workload builds",
          "run {python} -c 'import triton; "
          "triton.runtime.driver.active.get_current_target()' as the workload's user, with "
          "its TRITON_CACHE_DIR and TMPDIR, and fix what it prints", check=True),
    Cause("stale_cache_masks_compiler", "works only thanks to a warm cache", "{install} "
          "{pkg_cc}: kernels with a new signature still compile a launcher", check=True),
    Cause("triton_kernel", "Triton kernel does not run", "run a @triton.jit kernel with "
          "{python}; fix what it prints", check=True),
    Cause("blackwell_no_allocator", "FLA registers no allocator on Blackwell", "{pip} "
          "install --upgrade flash-linear-attention",
          "nvidia", True, texts=(r"no allocator was set",)),
    Cause("fla_fallback_hidden", "flash-linear-attention falls back to CPU", "{pip} install "
          "--upgrade flash-linear-attention",
          check=True),
    Cause("fla_import_fails", "flash-linear-attention cannot be imported", "{pip} install "
          "--force-reinstall flash-linear-attention"),
    Cause("workload_env", "the environment moves the kernels off the GPU", "unset the "
          "variable named", check=True),
    Cause("inductor_ready", "torch.compile fails before Triton", "set USER, "
          "or export TORCHINDUCTOR_CACHE_DIR=<a writable dir>", check=True),
    # The GPUs' state before a job (facts_gpustate.py, checks_gpustate.py): they fail or warn
    # the node under a playbook, never Triton's verdict.
    Cause("gpu_memory_in_use", "GPU memory already in use", _HOLDER_FIX, check=True,
          repair="host"),
    Cause("gpu_foreign_processes", "another process on the GPU", _HOLDER_FIX, check=True,
          repair="host"),
    Cause("gpu_memory_health", "GPU memory repair pending or failed", "drain the node and "
          "reset the GPU (nvidia-smi -r -i N, no process on it) or reboot, so that pending row "
          "remaps or page retirements take effect; a failed remap: replace the GPU",
          "nvidia", True, repair="host"),
    Cause("gpu_missing_for_cuda", "a GPU the driver lists that CUDA cannot open", "check "
          "CUDA_VISIBLE_DEVICES and the container's device list against nvidia-smi -L; a GPU "
          "that has fallen off the bus needs a reset or reboot", "nvidia", True, repair="host"),
    Cause("gpu_persistence_mode", "persistence mode off", "nvidia-smi -pm 1 (or enable "
          "nvidia-persistenced) on the host", "nvidia", True, repair="host"),
    Cause("gpu_xid_events", "critical Xid events in the kernel log", "drain the node, run "
          "dmesg | grep -i xid and look each Xid up in NVIDIA's Xid catalogue: most critical "
          "ones need a GPU reset (nvidia-smi -r -i N) or a reboot", "nvidia", True,
          repair="host"),
    # Named from a message, an errno, the object it names or the limit that explains it.
    Cause("glibc_too_old", "glibc too old for this Triton", "a newer OS "
          "image, or {pip} install an older triton",
          texts=(r"version .GLIBC_[\d.]+. not found",)),
    Cause("shared_library_missing", "a shared library is missing", "install the package of "
          "{library}, or add its dir to LD_LIBRARY_PATH",
          texts=(r"cannot open shared object file",)),
    # A limit: its value and where it comes from ({source}: Slurm, a container, a systemd
    # unit, the login's limits.conf) and how to raise it there ({how}), from objects.py.
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

#: Every check id, in causal order (fleetcheck/checks.py has the same; a test compares them).
CHECK_IDS = tuple(c.id for c in CAUSES if c.check)

#: Checks of NVIDIA's stack only (libcuda, ptxas, NVSwitch): an AMD node's document leaves them out.
CUDA_ONLY = frozenset(c.id for c in CAUSES if c.check and c.vendor == "nvidia")

#: Checks of Triton's HIP backend only (libamdhip64): a node without an AMD GPU leaves them out.
HIP_ONLY = frozenset(c.id for c in CAUSES if c.check and c.vendor == "amd")

#: Short names of the causes (the verdict's fix starts with one); the AMD wording of some.
CAUSE_LABELS = dict((c.id, c.label) for c in CAUSES if c.id != "gpu_present")
HIP_CAUSE_LABELS = dict((c.id, c.amd_label) for c in CAUSES if c.amd_label)

#: (regex, cause id) for every message a record names, in record order.
MESSAGE_RULES = tuple((text, c.id) for c in CAUSES for text in c.texts)

#: errno name -> the cause it names whatever its object.
ERRNO_RULES = dict((name, c.id) for c in CAUSES for name in c.errnos)


class _Filled(dict):
    def __missing__(self, key):
        return "<%s>" % key


def fill_fix(cause_id, context):
    """The cause's fix with the node's values (an unknown one stays as <name>)."""
    cause = CAUSES_BY_ID.get(cause_id)
    if cause is None:
        return ""
    values = _Filled((k, v) for k, v in (context or {}).items() if v not in (None, ""))
    return re.sub(r"\s+", " ", cause.fix.format_map(values)).strip()


def cause_label(cause_id, vendor=None):
    """The short name of a cause, in the node's vendor's terms."""
    cause = CAUSES_BY_ID.get(cause_id)
    if cause is None:
        return cause_id
    return cause.amd_label if vendor == "amd" and cause.amd_label else cause.label


#: The GPUs' state before a job: they fail or warn the node under a playbook, never Triton's
#: verdict.
GPU_STATE_IDS = frozenset({"gpu_memory_in_use", "gpu_foreign_processes", "gpu_memory_health",
                           "gpu_missing_for_cuda", "gpu_persistence_mode", "gpu_xid_events"})
