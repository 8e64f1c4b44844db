"""Environment variables that change what the workload's kernels do, read as each library does.

Read from the sources: Triton 3.6-3.9 `knobs.py` (`env_bool` is `getenv_bool`: on/true/1, any
case), torch 2.11 `_inductor/config.py`, `_dynamo/config.py` and `utils/_triton.py`, vLLM 0.33
`envs.py` and `platforms/__init__.py`, xformers 0.0.35 `__init__.py`, fla-core 0.6
`utils/env.py`. `moves` (the workload will not run on the GPU: a cause) or `slows` (it runs,
slower or differently: a warning), per variable, with the library that reads it.
"""


def env_on(value):
    """Triton's getenv_bool and most `== "1"` tests: on, true or 1 (any case)."""
    return (value or "").strip().lower() in ("1", "true", "on")


def env_one(value):
    """`os.environ.get(NAME, "0") == "1"` (torch, xformers, vLLM, FLA)."""
    return (value or "").strip() == "1"


def env_set(value):
    return bool((value or "").strip())


#: (variable, test, moves|slows, library, what it does; {v} is the value). Where a library is
#: not installed on the node, its variables are not reported.
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
    # Triton's knobs that make it run slower or differently.
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
    """[{variable, value, effect: moves|slows, library, text}] for the variables set here.

    installed: the libraries present ({"triton", "torch", "inductor", "vllm", "xformers",
    "fla"}); a variable of a library the node does not have changes nothing.
    """
    found = []
    for name, test, effect, library, text in ENV_EFFECTS:
        value = env.get(name)
        if value is None or library not in installed or not test(value):
            continue
        found.append({"variable": name, "value": value, "effect": effect, "library": library,
                      "text": text.replace("{v}", value)})
    return found
