"""The --deep end-to-end check: a Triton kernel on every GPU, its result checked
(stages.DEEP_SCRIPT). Written to a real .py file, since @triton.jit reads the source. Sent after
prelude.py."""

from fleetcheck.probe.parts.scripts.prelude import emit, err

# ---- sent as is: everything below this line is the script ----
import os, sys, time
try:
    import torch
    import triton
    import triton.language as tl
    # Started beside the per-GPU state's read; no context of ours before that read is done
    # (the probe makes argv[1] then), so that ours is never counted as another's.
    waited = time.time()
    while len(sys.argv) > 1 and not os.path.exists(sys.argv[1]) and time.time() - waited < 20:
        time.sleep(0.01)
    # Each release's own way (3.x: driver.active; 2.x: the module's driver itself).
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
            # Arithmetic, not a fill: a zero-fill may be a memset that proves nothing.
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
