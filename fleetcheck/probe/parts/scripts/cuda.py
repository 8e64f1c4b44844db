"""The driver layer through ctypes, run with `-I` in a subprocess (stages.CUDA_SCRIPT): a hanging
cuInit is bounded by a timeout, and the probe never initialises CUDA before forking."""

# ---- sent as is: everything below this line is the script ----
import ctypes
def libcuda_facts():
    """The driver layer through ctypes (a dict, JSON-ready)."""
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
    # NVML, as nvidia-smi and vLLM's platform detection (pynvml.nvmlInit) reach it: its load, its
    # init (999 "Unknown Error" when the device cgroup revoked access), each GPU's compute mode.
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
    # A GPU in exclusive-process (3) or prohibited (2) mode: can this process have a context?
    # (46 CUDA_ERROR_DEVICE_UNAVAILABLE: another process holds it). Default-mode GPUs are not
    # touched: a context costs time and memory.
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
