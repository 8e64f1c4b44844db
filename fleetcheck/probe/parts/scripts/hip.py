"""The HIP runtime as Triton's AMD backend finds and loads it (stages.HIP_SCRIPT).

Run in the workload interpreter with the workload's environment (site-packages, LD_LIBRARY_PATH,
ROCM_PATH are what Triton searches), in a subprocess bounded by a timeout. It replays
`_get_path_to_hip_runtime_dylib()` of third_party/amd/backend/driver.py (3.6 and 3.9 search the
same places in the same order) with its exact errors, then loads the library it picked with
ctypes and asks what Triton's driver.c and torch ask: versions, device count, names. One JSON
line on stdout.
"""

# ---- sent as is: everything below this line is the script ----
import ctypes, json, os, subprocess
paths = []
out = {"search": paths, "path": None}
lib_name = "libamdhip64.so"
sysroot = os.environ.get("FLEETCHECK_SYSROOT") or "/"
ldconfig = "/sbin/ldconfig" if sysroot == "/" else sysroot.rstrip("/") + "/sbin/ldconfig"
def package_dir(name):
    try:
        import importlib.util
        spec = importlib.util.find_spec(name)
    except Exception:
        return None
    locs = list(spec.submodule_search_locations or []) if spec else []
    return locs[0] if locs else None
torch_dir = package_dir("torch")
def found(path, how):
    out["path"], out["how"] = path, how
def locate():
    env_path = os.environ.get("TRITON_LIBHIP_PATH")
    if env_path:
        if os.path.basename(env_path).startswith(lib_name) and os.path.isfile(env_path):
            return found(env_path, "TRITON_LIBHIP_PATH")
        out["error"] = ("RuntimeError: TRITON_LIBHIP_PATH '%s' does not point to a valid %s"
                        % (env_path, lib_name))
        out["row"] = "libhip_path_invalid"
        return None
    try:
        import rocm_sdk
        return found(str(rocm_sdk.find_libraries("amdhip64")[0]), "rocm_sdk (TheRock)")
    except Exception:
        pass
    # In a workload that imported torch first, Triton finds torch's libamdhip64 already mapped.
    bundled = os.path.join(torch_dir, "lib", lib_name) if torch_dir else ""
    if bundled and os.path.exists(bundled):
        return found(bundled, "mapped by torch")
    triton_dir = package_dir("triton")
    if triton_dir:
        local = os.path.join(triton_dir, "backends", "amd", "lib", lib_name)
        if os.path.exists(local):
            return found(local, "Triton's backend")
        paths.append(local)
    import site
    site_packages = site.getsitepackages()
    if site.ENABLE_USER_SITE:
        site_packages = [site.getusersitepackages(), *site_packages]
    for path in site_packages:
        path = os.path.join(path, "torch", "lib", lib_name)
        if os.path.exists(path):
            return found(path, "site-packages torch")
        paths.append(path)
    for d in (os.getenv("LD_LIBRARY_PATH") or "").split(":") if os.getenv("LD_LIBRARY_PATH") \
            else []:
        f = os.path.join(d, lib_name)
        if os.path.exists(f):
            return found(f, "LD_LIBRARY_PATH")
        paths.append(f)
    for var, how in (("HIP_PATH", "HIP_PATH"),):
        if os.getenv(var):
            f = os.path.join(os.getenv(var), "lib", lib_name)
            if os.path.exists(f):
                return found(f, how)
            paths.append(f)
    try:
        root = subprocess.check_output(["hipconfig", "--path"], stderr=subprocess.DEVNULL,
                                       timeout=10).decode().strip()
        if root:
            f = os.path.join(root, "lib", lib_name)
            if os.path.exists(f):
                return found(f, "hipconfig --path")
            paths.append(f)
    except (subprocess.CalledProcessError, OSError, subprocess.TimeoutExpired):
        pass
    if os.getenv("ROCM_PATH"):
        f = os.path.join(os.getenv("ROCM_PATH"), "lib", lib_name)
        if os.path.exists(f):
            return found(f, "ROCM_PATH")
        paths.append(f)
    try:
        libs = subprocess.check_output([ldconfig, "-p"], timeout=10).decode(errors="ignore")
    except FileNotFoundError:
        out["error"] = ("FileNotFoundError: [Errno 2] No such file or directory: "
                        "'/sbin/ldconfig'")
        out["row"] = "libamdhip64_not_found"
        return None
    except Exception as e:
        out["ldconfig_error"] = (type(e).__name__ + ": " + str(e))[-1000:]
        libs = ""
    locs = [line.split()[-1] for line in libs.splitlines() if line.strip().endswith(lib_name)]
    out["ldconfig"] = locs
    for loc in locs:
        if os.path.exists(loc):
            return found(loc, "ldconfig -p")
        paths.append(loc)
    common = os.path.join("/opt/rocm/lib/", lib_name)
    if os.path.exists(common):
        return found(common, "/opt/rocm/lib")
    paths.append(common)
    out["error"] = "RuntimeError: cannot locate %s after attempted paths %s" % (lib_name, paths)
    out["row"] = "libamdhip64_not_found"
    return None
locate()
if out["path"]:
    out["real"] = os.path.realpath(out["path"])
    try:
        lib = ctypes.CDLL(out["path"])
    except OSError as e:
        out["load_error"] = str(e)[:1000]
        lib = None
    if lib is not None:
        def name(rc):
            try:
                f = lib.hipGetErrorName
                f.restype = ctypes.c_char_p
                value = f(rc)
                return value.decode() if value else None
            except Exception:
                return None
        for fn in ("hipDriverGetVersion", "hipRuntimeGetVersion"):
            v = ctypes.c_int(0)
            try:
                rc = getattr(lib, fn)(ctypes.byref(v))
                out[fn] = v.value if rc == 0 else None
            except AttributeError:
                out[fn] = None
        n = ctypes.c_int(0)
        rc = lib.hipGetDeviceCount(ctypes.byref(n))
        out["count_rc"] = rc
        out["count_name"] = name(rc)
        out["count"] = n.value if rc == 0 else 0
        devices = []
        for i in range(out["count"]):
            info = {"index": i}
            buf = ctypes.create_string_buffer(256)
            if lib.hipDeviceGetName(buf, 256, i) == 0:
                info["name"] = buf.value.decode("utf-8", "replace")
            mem = ctypes.c_size_t(0)
            if lib.hipDeviceTotalMem(ctypes.byref(mem), i) == 0:
                info["memory_mib"] = mem.value // (1 << 20)
            devices.append(info)
        out["devices"] = devices
print(json.dumps(out))
