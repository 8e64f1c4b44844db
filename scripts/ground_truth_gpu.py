#!/usr/bin/env python3
"""Ground truth as the workload sees it, beside the probe (scripts/validate_diag_gpu.sh).

    python3 scripts/ground_truth_gpu.py triton|fla|fla_layers|compile|vllm|imports  # JSON

triton: the workload's own get_current_target() and one kernel over 1M elements (the second
launch timed); fla: `import fla.utils` with its warnings and device_platform; fla_layers:
`import fla.layers` (what a model imports: every kernel module); compile: a torch.compile'd
function on CUDA, compiled and run once (its Triton kernel built in inductor's cache); vllm:
vLLM's `current_platform` and `HAS_TRITON`; imports: xformers' `_is_triton_available()`,
Liger-Kernel's `infer_device()`, `import mamba_ssm` and `import causal_conv1d`. A real .py
file: @triton.jit reads the source.
"""
import glob
import json
import os
import sys
import time
import warnings

mode = sys.argv[1]
out = {"mode": mode}
def err(e):
    return (type(e).__name__ + ": " + str(e))[-1500:]
t0 = time.time()
if mode == "fla":
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            import fla.utils as u
            out["device_platform"] = getattr(u, "device_platform", None)
        except BaseException as e:  # noqa: BLE001 - whatever the workload would meet
            import traceback
            out["error"] = err(e)
            out["where"] = [line.strip() for line in traceback.format_exc().splitlines()
                            if line.strip().startswith("File ")][-6:]
    out["warnings"] = sorted({str(w.message)[:200] for w in caught})[:5]
elif mode == "fla_layers":
    try:
        import fla.layers  # noqa: F401
        out["ok"] = True
    except BaseException as e:  # noqa: BLE001 - whatever the workload would meet
        out["error"] = err(e)
elif mode == "vllm":
    try:
        from vllm.platforms import current_platform
        out["platform"] = type(current_platform).__name__
        from vllm.triton_utils.importing import HAS_TRITON
        out["has_triton"] = bool(HAS_TRITON)
    except BaseException as e:  # noqa: BLE001 - whatever the workload would meet
        out["error"] = err(e)
elif mode == "imports":
    for name in ("xformers", "liger_kernel", "mamba_ssm", "causal_conv1d"):
        try:
            module = __import__(name)
            if name == "xformers":
                out[name] = {"_is_triton_available": module._is_triton_available()}
            elif name == "liger_kernel":
                from liger_kernel.utils import infer_device
                out[name] = {"infer_device": infer_device()}
            else:
                out[name] = {"imported": True}
        except BaseException as e:  # noqa: BLE001 - whatever the workload would meet
            out[name] = {"error": err(e)}
elif mode == "compile":
    import torch
    try:
        f = torch.compile(lambda a: a * 2 + 1)
        x = torch.arange(1024, device="cuda", dtype=torch.float32)
        out["ok"] = bool((f(x) == x * 2 + 1).all())
    except BaseException as e:  # noqa: BLE001 - whatever the workload would meet
        out["error"] = err(e)
    try:  # what it built: inductor's generated Triton kernels in its cache dir
        from torch._inductor.runtime.cache_dir_utils import cache_dir
        out["inductor_cache"] = cache_dir()
        out["kernel_sources"] = len(glob.glob(os.path.join(cache_dir(), "**", "*.py"),
                                              recursive=True))
    except BaseException as e:  # noqa: BLE001 - whatever the workload would meet
        out["cache_error"] = err(e)
else:
    import torch
    import triton
    import triton.language as tl

    try:
        out["target"] = str(triton.runtime.driver.active.get_current_target())
    except BaseException as e:  # noqa: BLE001 - whatever the workload would meet
        out["target_error"] = err(e)

    @triton.jit
    def add_one(X, Y, N, B: tl.constexpr):
        o = tl.program_id(0) * B + tl.arange(0, B)
        m = o < N
        tl.store(Y + o, tl.load(X + o, mask=m) + 1, mask=m)
    try:
        n = 1 << 20
        x = torch.arange(n, device="cuda", dtype=torch.float32)
        y = torch.empty_like(x)
        add_one[(n // 1024,)](x, y, n, B=1024)
        torch.cuda.synchronize()
        t1 = time.time()
        add_one[(n // 1024,)](x, y, n, B=1024)
        torch.cuda.synchronize()
        out["second_launch_s"] = round(time.time() - t1, 6)
        out["kernel_ok"] = bool((y == x + 1).all())
    except BaseException as e:  # noqa: BLE001 - whatever the workload would meet
        out["kernel_error"] = err(e)
out["seconds"] = round(time.time() - t0, 2)
print(json.dumps(out))
