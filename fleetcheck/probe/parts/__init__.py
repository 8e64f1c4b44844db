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

#: The parts in build order, each after the parts it imports. A part is a module of a stage's
#: folder (core/, facts/, evaluation/, checks/) or catalogue.py and main.py, which the host
#: imports too; the build refuses a file missing here and a line with no file. A new fact
#: collector or check family is one file and one line here.
PARTS = (
    "core/base",             # sysroot, text clipping, bounded JSON, versions
    "catalogue",             # every cause as one record; the check ids in causal order
    "core/spawn",            # the deadline, subprocesses, stage lines
    "core/stages",           # the stage scripts (scripts/*.py) as the probe sends them
    "core/state",            # ProbeState: every attribute the parts share, typed
    "facts/system",          # os-release, CPUs, memory
    "facts/where",           # the container the probe runs in
    "facts/nvidia",          # /proc/driver/nvidia, /dev/nvidia*, nvidia-smi, NVSwitch
    "facts/cache",           # Triton's cache dir, mounts, network file systems
    "facts/env",             # environment variables that move or slow the kernels
    "evaluation/classify",   # messages -> the causes whose records name them
    "evaluation/objects",    # the path an errno names, walked as the user; the process's limits
    "evaluation/diagnose",   # a failed step named from the compiler's, loader's or OS's message
    "evaluation/limits",     # Limits: the job's limits as they explain a failure
    "facts/libcuda",         # cuInit error names, ldconfig -p, the libcuda stage
    "facts/amd",             # KFD topology, /dev/kfd and /dev/dri, amdgpu, the HIP stage
    "facts/toolchain",       # workload interpreter, C compiler, test compile
    "facts/gpustate",        # each GPU's memory, processes, modes, memory health; Xid events
    "facts/gather",          # Gather: every fact collected, in one order
    "facts/ptxas",           # the GPUs' compute capabilities, the ptxas Triton runs for each
    "evaluation/findings",   # Findings: a cause's fix for this node, a failed step named
    "checks/driver",         # GPU and NVIDIA driver checks
    "checks/packages",       # Triton's and torch's installs: RECORD, backend parts, dists
    "checks/torch",          # PyTorch checks
    "checks/toolchain",      # compiler, linker, header checks
    "checks/libcuda",        # loader and linker-cache checks
    "checks/cache",          # cache directory checks
    "checks/triton",         # Triton, ptxas, get_current_target(), warm cache, --deep kernel
    "checks/fla",            # flash-linear-attention checks
    "checks/workload",       # the workload's own dirs, its environment, torch.compile's path
    "checks/hip",            # AMD GPU and Triton HIP backend checks (libamdhip64, gfx arch)
    "checks/gpustate",       # GPUs held, foreign processes, memory health, missing GPUs, Xids
    "evaluation/frameworks",  # what FLA, vLLM and inductor will do
    "evaluation/verdict",    # Evaluation: checks in causal order, masking, the verdict
    "core/assembly",         # the Probe class: the gathering, every check family, the verdict
    "main",                  # argv, the JSON document, exit codes
)
