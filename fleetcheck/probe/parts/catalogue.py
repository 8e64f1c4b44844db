"""Every cause as one record: everything fleetcheck knows of it, from its label to its repair.

The probe's tables (CHECK_IDS, CUDA_ONLY, HIP_ONLY, the labels, the message, errno and place
rules, the checks that need the stack, the ones a warm cache hides, the toolchain's causes),
the host's catalogue (fleetcheck/checks.py: titles, report columns, short labels), the repair
planner's choice (fleetcheck/fix/plan.py), the playbook's GPU-state grades
(fleetcheck/judgement/gpustate.py) and docs/checks.md's table of causes are all derived from
CAUSES; adding a cause is one record here, its check method (`check_<id>` in a checks_*.py
part: the probe's build fails without it) and its tests.
"""

import collections
import re

#: One cause. `fix` is a template filled with the node's own values (fill_fix): {python},
#: {pip}, {install}, {pkg_cc}, {pkg_libc}, {pkg_python}, {cache_dir}, {tmp_dir}, {triton},
#: {torch}, {libcuda_dir}, and for a cause named from an object or a limit {path}, {target},
#: {component}, {owner}, {uid}, {mount}, {limit}, {value}, {library}, {missing}, {dists}.
#: vendor: "nvidia" or "amd" for a cause of one vendor's stack only.
#: check: the probe runs a check of this id, the method check_method(id) of the Probe
#: (CHECK_IDS, in this tuple's order: causal order); amd_label: the label on an AMD node.
#: texts: regexes of the messages that name it (first record, then first text, wins).
#: errnos: errno names that name it whatever the object.
#: repair: what `fleetcheck fix` does about it, one of REPAIRS (fix/plan.py acts on it).
#: title, amd_title, column, short: how the host shows a check (its title, on an AMD node,
#: its report column, the short text of a cell it fails); catalogue: a row of the failure
#: catalogue (False: fleetcheck's own check around the rows, which `fleetcheck fix` plans only
#: where no row fails).
#: stack: the check needs the workload's Python stack to have answered. maskable: a warm
#: Triton cache hides a failure of the check. toolchain: a cause of the C toolchain (a warm
#: cache hides it where the workload's own build names it).
#: places: {"cache" or "tmp": errno names ("noexec" for the mount flag)}: an errno in that
#: workload dir names this cause before the object's own.
#: scope: what a failure fails: "triton" (Triton's verdict), "framework" (one framework's own
#: way: the node, not the verdict), "gpu_state" (the GPUs' state before a job: the node under
#: a playbook). graded_by: the playbook key that grades a GPU-state check (gpustate.py).
Cause = collections.namedtuple(
    "Cause", "id label fix vendor check amd_label texts errnos repair title amd_title column "
    "catalogue short stack maskable toolchain places scope graded_by",
    defaults=(None, False, None, (), (), None, None, None, None, True, None, False, False,
              False, None, "triton", None))

#: What `fleetcheck fix` does about a cause, by the record's `repair` (None: printed for the
#: workload's owner): steps it runs on the node, or the repair it prints and for whom.
REPAIRS = {
    "packages": "installs the distribution's packages",
    "ldcache": "lists libcuda's dir in ld.so.conf.d, runs ldconfig",
    "symlink": "links libcuda.so to libcuda.so.1",
    "gpu_access": "prints the node kind's GPU pass-through for the host's admin",
    "host": "prints the fix for the host's admin",
    "cache_dir": "prints a cache dir of the workload user's own",
    None: "prints the fix for the workload's owner",
}

#: How to find and stop what holds a GPU (checks/gpustate.py's HOLDER_FIX, filled there).
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
    # The GPUs' state before a job (facts/gpustate.py, checks/gpustate.py): they fail or warn
    # the node under a playbook, never Triton's verdict.
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
    # Named from a message, an errno, the object it names or the limit that explains it.
    Cause("glibc_too_old", "glibc too old for this Triton", "a newer OS "
          "image, or {pip} install an older triton",
          texts=(r"version .GLIBC_[\d.]+. not found",)),
    Cause("shared_library_missing", "a shared library is missing", "install the package of "
          "{library}, or add its dir to LD_LIBRARY_PATH",
          texts=(r"cannot open shared object file",)),
    # A limit: its value and where it comes from ({source}: Slurm, a container, a systemd
    # unit, the login's limits.conf) and how to raise it there ({how}), from
    # evaluation/objects.py.
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

#: The probe's checks (the records with one), in causal order.
CHECK_RECORDS = tuple(c for c in CAUSES if c.check)

#: Every check id, in causal order (fleetcheck/checks.py derives the host's from the same).
CHECK_IDS = tuple(c.id for c in CHECK_RECORDS)


def check_method(cause_id):
    """The name of the Probe's method that runs a check (the build verifies each exists)."""
    return "check_" + cause_id


#: Checks of NVIDIA's stack only (libcuda, ptxas, NVSwitch): an AMD node's document leaves them out.
CUDA_ONLY = frozenset(c.id for c in CHECK_RECORDS if c.vendor == "nvidia")

#: Checks of Triton's HIP backend only (libamdhip64): a node without an AMD GPU leaves them out.
HIP_ONLY = frozenset(c.id for c in CHECK_RECORDS if c.vendor == "amd")

#: Checks that need the workload's Python stack to have answered at all.
STACK_DEPENDENT = frozenset(c.id for c in CHECK_RECORDS if c.stack)

#: Checks that only matter when Triton is installed: causal order puts them together, from
#: Triton's version up to the frameworks built on it.
TRITON_DEPENDENT = frozenset(CHECK_IDS[CHECK_IDS.index("triton_2x"):CHECK_IDS.index(
    "blackwell_no_allocator")])

#: Checks whose failure a warm cache hides (a cached stub skips cc, headers and the link).
MASKABLE = frozenset(c.id for c in CHECK_RECORDS if c.maskable)

#: Causes of the C toolchain: a warm cache hides them where the workload's own build names one.
TOOLCHAIN_CAUSES = frozenset(c.id for c in CAUSES if c.toolchain)

#: The GPUs' state before a job: they fail or warn the node under a playbook, never Triton's
#: verdict.
GPU_STATE_IDS = frozenset(c.id for c in CHECK_RECORDS if c.scope == "gpu_state")

#: Checks whose failure fails the node but not Triton's verdict (Triton itself runs).
NODE_ONLY = frozenset(c.id for c in CHECK_RECORDS if c.scope != "triton")

#: Short names of the causes (the verdict's fix starts with one); the AMD wording of some.
CAUSE_LABELS = dict((c.id, c.label) for c in CAUSES if c.id != "gpu_present")
HIP_CAUSE_LABELS = dict((c.id, c.amd_label) for c in CAUSES if c.amd_label)

#: (regex, cause id) for every message a record names, in record order.
MESSAGE_RULES = tuple((text, c.id) for c in CAUSES for text in c.texts)

#: errno name -> the cause it names whatever its object.
ERRNO_RULES = dict((name, c.id) for c in CAUSES for name in c.errnos)


def _place_rules():
    rules: dict = {}
    for cause in CAUSES:
        for place, names in (cause.places or {}).items():
            rules.setdefault(place, {}).update((name, cause.id) for name in names)
    return rules


#: place ("cache", "tmp") -> errno name ("noexec": the mount flag) -> the cause of that
#: workload dir it names.
PLACE_RULES = _place_rules()


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
