"""The bare kernel script: what `--deep` is measured against (scripts/validate_gpu.sh,
bench/probe_profile_gpu.sh). The workload's own first Triton kernel on every GPU, nothing else:
import torch and Triton, the current target, a one-line @triton.jit kernel compiled and run
(a real .py file: @triton.jit reads the source)."""
import torch
import triton
import triton.language as tl

print(triton.runtime.driver.active.get_current_target())


@triton.jit
def k(X, Y, N, B: tl.constexpr):
    o = tl.arange(0, B)
    m = o < N
    tl.store(Y + o, tl.load(X + o, mask=m) + 1, mask=m)


for d in range(torch.cuda.device_count()):
    x = torch.zeros(64, device=f"cuda:{d}")
    y = torch.empty_like(x)
    with torch.cuda.device(d):
        k[(1,)](x, y, 64, B=64)
    assert bool((y == 1).all())
