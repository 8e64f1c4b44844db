"""The stage scripts run in subprocesses; their code lives in parts/scripts/*.py."""

from fleetcheck.probe.parts.scripts import stage_script

#: What every helper script starts with: its stage lines behind MARK, exception texts verbatim.
HELPER_PRELUDE = stage_script("prelude")

#: Where the interpreter's Python.h lives, computed as Triton does (posix_local -> posix_prefix).
PY_INCLUDE = stage_script("py_include")

#: Where each FLA release keeps its device detection, newest first (file under fla/, module).
FLA_LAYOUTS = (("utils/hardware.py", "fla.utils.hardware"),  # 0.6
               ("utils/_device.py", "fla.utils._device"),    # 0.5.1 - 0.5.x
               ("utils.py", "fla.utils"))                    # 0.1 - 0.5.0

#: gpu_state(): each GPU's state through NVML; libcuda_facts(): the driver layer through ctypes.
GPU_STATE = stage_script("gpustate")
LIBCUDA = stage_script("cuda")

#: The workload's Python stack, in ONE process of the workload interpreter (import torch is the
#: slow part, so torch facts, Triton's target and FLA share it). argv: fresh cache dir, then the
#: user's TRITON_CACHE_DIR as JSON (null when unset). Python >= 3.8, stdlib + what it inspects.
#: On an NVIDIA node it also reads the per-GPU state and the driver layer (gpustate.py, cuda.py)
#: in a thread of its own while torch imports: one interpreter, one cuInit.
STACK_SCRIPT = (HELPER_PRELUDE + PY_INCLUDE + "FLA_LAYOUTS = %r\n" % (FLA_LAYOUTS,)
                + GPU_STATE + LIBCUDA + stage_script("workload")
                + stage_script("stack"))

#: How the stack is started: `PYTHON -c COMPILED_RUN SCRIPT ARGS...` runs SCRIPT as `-c SCRIPT
#: ARGS...` would (argv[0] "-c", the file name "<string>"), but compiled first: `-c` keeps the
#: script's parse tree until the script ends (4 MB of the stack's 77 KB, through torch's
#: import), compile() lets it go before the script runs.
COMPILED_RUN = "import sys;exec(compile(sys.argv.pop(1),'<string>','exec'))"

#: The driver layer through ctypes, run with `-I` in a subprocess where the stack cannot read it
#: (--deep, or a stack that died first): a hanging cuInit is then bounded by a timeout, and the
#: probe itself never initialises CUDA before forking.
CUDA_SCRIPT = LIBCUDA + "import json\nprint(json.dumps(libcuda_facts()))\n"

#: The HIP runtime as Triton's AMD backend finds it (its search replayed, then ctypes), run in the
#: workload interpreter with the workload's environment: what Triton searches is theirs.
HIP_SCRIPT = stage_script("hip")

#: The workload interpreter's executable, version and include dir.
PYINFO_SCRIPT = PY_INCLUDE + stage_script("pyinfo")

#: The definitive end-to-end check (--deep): a real .py file, since @triton.jit reads the source.
DEEP_SCRIPT = HELPER_PRELUDE + stage_script("deep")

#: Each GPU's state through NVML (memory, compute processes, modes, memory health), run with
#: `-I` before any stage creates a CUDA context, so that the probe's own is never counted.
GPUSTATE_SCRIPT = GPU_STATE + "import json\nprint(json.dumps(gpu_state()))\n"
