"""fleetcheck probe: run on a node as `python3 - [--deep] [--deadline S] [--python PATH]`.

Standard library only, CPython >= 3.8. Sent over stdin; leaves nothing behind; needs no network
and no root. FLEETCHECK_SYSROOT (default "/") prefixes the reads of /dev, /proc, /sys, /run,
/etc/os-release and the /sbin/ldconfig that Triton runs, so that tests can build a fake node.
Exit code: 0 ok or warn, 1 fail, 3 error or unknown.
"""

# The probe's sources. This docstring is the shipped probe's; `python -m fleetcheck.probe.build`
# joins the parts below, in this order, into the one file fleetcheck/probe/probe.py that is sent
# to nodes (docs/architecture.md, "The probe's sources"). A part may use at import time only what
# the parts before it define; the stage scripts are in scripts/.

#: The parts in build order. A new fact collector or check family is one file and one line here.
PARTS = (
    "base",             # sysroot, text clipping, bounded JSON, versions, the mixins' base
    "catalogue",        # check ids in causal order, cause labels
    "classify",         # Triton error texts -> catalogue rows
    "diagnose",         # a failed step named from the compiler's, loader's or OS's own message
    "spawn",            # the deadline, subprocesses, stage lines
    "stages",           # the stage scripts (scripts/*.py) as the probe sends them
    "facts_system",     # os-release, CPUs, memory
    "facts_where",      # the container the probe runs in
    "facts_nvidia",     # /proc/driver/nvidia, /dev/nvidia*, nvidia-smi, NVSwitch
    "facts_libcuda",    # cuInit error names, ldconfig -p, the libcuda stage
    "facts_amd",        # KFD topology, /dev/kfd and /dev/dri, amdgpu, the HIP stage
    "facts_cache",      # Triton's cache dir, mounts, network file systems
    "facts_env",        # environment variables that move or slow the kernels
    "facts_toolchain",  # workload interpreter, C compiler, test compile
    "facts_gpustate",   # each GPU's memory, processes, modes, memory health; Xid events
    "gather",           # every fact collected, in one order
    "checks_driver",    # GPU and NVIDIA driver checks
    "checks_torch",     # PyTorch checks
    "checks_toolchain",  # compiler, linker, header checks
    "checks_libcuda",   # loader and linker-cache checks
    "checks_cache",     # cache directory checks
    "checks_triton",    # Triton, ptxas, get_current_target(), warm cache, --deep kernel
    "checks_fla",       # flash-linear-attention checks
    "checks_workload",  # the workload's own dirs, its environment, torch.compile's own path
    "checks_hip",       # AMD GPU and Triton HIP backend checks (libamdhip64, gfx arch)
    "checks_gpustate",  # GPUs held, foreign processes, memory health, missing GPUs, Xids
    "frameworks",       # what FLA, vLLM and inductor will do
    "evaluate",         # checks in causal order, masking, the verdict
    "assembly",         # the Probe class: every mixin above
    "main",             # argv, the JSON document, exit codes
)
