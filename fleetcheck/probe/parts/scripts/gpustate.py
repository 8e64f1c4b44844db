"""Each GPU's state through NVML (ctypes), run with `-I` in a subprocess before any stage of the
probe creates a CUDA context (stages.GPUSTATE_SCRIPT): memory, compute processes, persistence
and compute mode, the memory-health counters. NVML creates no context of its own."""

# ---- sent as is: everything below this line is the script ----
import ctypes
def gpu_state():
    """Each GPU's state through NVML (a dict, JSON-ready)."""
    out = {"source": "nvml"}
    try:
        nvml = ctypes.CDLL("libnvidia-ml.so.1")
    except OSError as e:
        out["error"] = "libnvidia-ml.so.1: " + str(e)[:500]
        return out
    NOT_AVAILABLE = 0xFFFFFFFFFFFFFFFF
    class Memory(ctypes.Structure):
        _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong),
                    ("used", ctypes.c_ulonglong)]
    class MemoryV2(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint), ("total", ctypes.c_ulonglong),
                    ("reserved", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong),
                    ("used", ctypes.c_ulonglong)]
    class ProcessV2(ctypes.Structure):
        _fields_ = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong),
                    ("gpuInstanceId", ctypes.c_uint), ("computeInstanceId", ctypes.c_uint)]
    class ProcessV1(ctypes.Structure):
        _fields_ = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong)]
    def call(name, *args):
        """NVML's return code of `name`, or None where this libnvidia-ml lacks it."""
        fn = getattr(nvml, name, None)
        return None if fn is None else fn(*args)
    def processes(handle):
        """[(pid, bytes or None)], or an error text: the newest entry point this NVML has."""
        for name, kind in (("nvmlDeviceGetComputeRunningProcesses_v3", ProcessV2),
                           ("nvmlDeviceGetComputeRunningProcesses_v2", ProcessV2),
                           ("nvmlDeviceGetComputeRunningProcesses", ProcessV1)):
            if getattr(nvml, name, None) is None:
                continue
            size = 64
            for _ in range(3):
                count = ctypes.c_uint(size)
                buf = (kind * size)()
                rc = call(name, handle, ctypes.byref(count), buf)
                if rc == 7:  # NVML_ERROR_INSUFFICIENT_SIZE: count says how many there are
                    size = count.value + 16
                    continue
                if rc != 0:
                    return "%s: %s" % (name, text(rc))
                return [(buf[i].pid, None if buf[i].usedGpuMemory == NOT_AVAILABLE
                         else buf[i].usedGpuMemory) for i in range(count.value)]
            return "%s: the list kept growing" % name
        return "no nvmlDeviceGetComputeRunningProcesses"
    def text(rc):
        try:
            return (nvml.nvmlErrorString(rc) or b"").decode("utf-8", "replace") or "rc %d" % rc
        except Exception:
            return "rc %d" % rc
    def uint(name, handle):
        value = ctypes.c_uint(0)
        rc = call(name, handle, ctypes.byref(value))
        return value.value if rc == 0 else None
    try:
        nvml.nvmlErrorString.restype = ctypes.c_char_p
        rc = nvml.nvmlInit_v2()
        if rc != 0:
            out["error"] = "nvmlInit_v2: " + text(rc)
            out["init"] = rc
            return out
        count = ctypes.c_uint(0)
        rc = nvml.nvmlDeviceGetCount_v2(ctypes.byref(count))
        if rc != 0:
            out["error"] = "nvmlDeviceGetCount_v2: " + text(rc)
        gpus = []
        for i in range(count.value if rc == 0 else 0):
            gpu = {"index": i}
            gpus.append(gpu)
            handle = ctypes.c_void_p()
            hrc = nvml.nvmlDeviceGetHandleByIndex_v2(i, ctypes.byref(handle))
            if hrc != 0:
                gpu["error"] = "nvmlDeviceGetHandleByIndex_v2: " + text(hrc)
                continue
            buf = ctypes.create_string_buffer(96)
            if call("nvmlDeviceGetUUID", handle, buf, 96) == 0:
                gpu["uuid"] = buf.value.decode("utf-8", "replace")
            memory = MemoryV2(version=ctypes.sizeof(MemoryV2) | (2 << 24))
            if call("nvmlDeviceGetMemoryInfo_v2", handle, ctypes.byref(memory)) == 0:
                gpu["memory"] = {"total": memory.total, "used": memory.used, "free": memory.free,
                                 "reserved": memory.reserved}
            else:
                memory1 = Memory()
                mrc = call("nvmlDeviceGetMemoryInfo", handle, ctypes.byref(memory1))
                if mrc == 0:
                    gpu["memory"] = {"total": memory1.total, "used": memory1.used,
                                     "free": memory1.free}
                else:
                    gpu["memory_error"] = "nvmlDeviceGetMemoryInfo: " + (
                        text(mrc) if mrc is not None else "missing")
            procs = processes(handle)
            if isinstance(procs, str):
                gpu["processes_error"] = procs
            else:
                gpu["processes"] = [{"pid": pid, "used": used} for pid, used in procs]
            gpu["persistence_mode"] = uint("nvmlDeviceGetPersistenceMode", handle)
            gpu["compute_mode"] = uint("nvmlDeviceGetComputeMode", handle)
            health = {}
            # Row remapping (Ampere and later): pending needs a GPU reset; a failure, service.
            corr, unc, pending, failed = (ctypes.c_uint(0) for _ in range(4))
            if call("nvmlDeviceGetRemappedRows", handle, ctypes.byref(corr), ctypes.byref(unc),
                    ctypes.byref(pending), ctypes.byref(failed)) == 0:
                health["remapped_rows"] = {"correctable": corr.value, "uncorrectable": unc.value,
                                           "pending": bool(pending.value),
                                           "failure": bool(failed.value)}
            # Page retirement (before Ampere): pages retired, and whether some wait for a reboot.
            retired = {}
            for cause, key in ((0, "single_bit"), (1, "double_bit")):
                pages = ctypes.c_uint(0)
                prc = call("nvmlDeviceGetRetiredPages_v2", handle, cause, ctypes.byref(pages), None,
                           None)
                if prc is None:
                    prc = call("nvmlDeviceGetRetiredPages", handle, cause, ctypes.byref(pages),
                               None)
                if prc in (0, 7):  # 7: INSUFFICIENT_SIZE with a NULL buffer, pages has the count
                    retired[key] = pages.value
            if retired:
                health["retired_pages"] = retired
            pend = uint("nvmlDeviceGetRetiredPagesPendingStatus", handle)
            if pend is not None:
                health["retired_pages_pending"] = bool(pend)
            ecc = ctypes.c_ulonglong(0)
            # NVML_MEMORY_ERROR_TYPE_UNCORRECTED (1), NVML_VOLATILE_ECC (0): since the last boot.
            if call("nvmlDeviceGetTotalEccErrors", handle, 1, 0, ctypes.byref(ecc)) == 0:
                health["ecc_uncorrected_volatile"] = ecc.value
            gpu["health"] = health
        out["gpus"] = gpus
        nvml.nvmlShutdown()
    except Exception as e:
        out["error"] = (type(e).__name__ + ": " + str(e))[:500]
    return out
