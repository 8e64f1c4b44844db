"""The workload's Python stack in ONE process of the workload interpreter (stages.STACK_SCRIPT).

Sent after prelude.py, py_include.py, `FLA_LAYOUTS = ...` and workload.py. argv: the fresh
cache dir, the user's TRITON_CACHE_DIR as JSON (null when unset), "full" or "meta" (package facts
only), then as JSON the workload's own environment (TMPDIR, TEMP, TMP, TRITON_CACHE_DIR...) and
the name of the throw-away subdirectories (`{"env": {...}, "name": ...}`).
"""

import json
import sys
import threading

from fleetcheck.probe.parts.scripts.cuda import libcuda_facts
from fleetcheck.probe.parts.scripts.gpustate import gpu_state
from fleetcheck.probe.parts.scripts.prelude import emit, err
from fleetcheck.probe.parts.scripts.py_include import py_include
from fleetcheck.probe.parts.scripts.workload import (
    COMPILER_RUNS,
    STARTED,
    VENDORED_FLA,
    OwnPath,
    backend_report,
    count_processes,
    current_target,
    detection_function,
    failure_of,
    guarded,
    fla_requirements,
    framework_imports,
    give_back_freed_memory,
    inductor_report,
    knob_report,
    python_tempdir,
    reset_driver,
    run_detection,
    trace_compiler,
    vllm_report,
    reproduce,
    skeleton_proof,
    untrace_compiler,
)
from fleetcheck.probe.parts.stages import FLA_LAYOUTS

# ---- sent as is: everything below this line is the script ----
import os, re, subprocess, time, warnings
count_processes()
fresh = sys.argv[1]
user_cache = json.loads(sys.argv[2])
own_opts = json.loads(sys.argv[4]) if len(sys.argv) > 4 else {}
own_env = own_opts.get("env") or {}
own_name = own_opts.get("name") or ".fleetcheck-probe"
def read_driver():
    # Each GPU's state first, before this process has any context (none comes from importing
    # torch), then the driver layer (cuInit: torch's own is then free).
    emit("gpustate", guarded(gpu_state))
    emit("libcuda", guarded(libcuda_facts))
driver_reader = None
# "after": under a tight process limit the workload's own start first, as the job's would:
# the driver layer's threads and cuInit beside it could take the tasks its own start needs.
driver_after = own_opts.get("driver") == "after"
if own_opts.get("driver") and not driver_after:
    # Beside the imports below: ctypes lets go of the interpreter during each driver call.
    driver_reader = threading.Thread(target=read_driver, daemon=True)
    try:
        driver_reader.start()
    except RuntimeError:  # can't start new thread: the job's process limit counts threads
        driver_reader = None
        read_driver()
import importlib.util, sysconfig
def spec_dir(name):
    try:
        spec = importlib.util.find_spec(name)
    except Exception:
        return None
    if spec is None:
        return None
    locs = list(spec.submodule_search_locations or [])
    return locs[0] if locs else (os.path.dirname(spec.origin) if spec.origin else None)
def spec_dirs(name):
    # Every folder of a package: fla-core and flash-linear-attention both fill fla/ (0.3.2+).
    try:
        spec = importlib.util.find_spec(name)
    except Exception:
        return []
    return list(spec.submodule_search_locations or []) if spec else []
def dist_meta(path):
    text = ""
    for name in ("METADATA", "PKG-INFO"):
        try:
            with open(os.path.join(path, name), encoding="utf-8", errors="replace") as f:
                text = f.read(8192)
            break
        except OSError:
            pass
    found = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key in ("Name", "Version") and key not in found:
            found[key] = value.strip()
        if not line.strip():
            break
    return found
def provides(path, package):
    try:
        with open(os.path.join(path, "RECORD"), encoding="utf-8", errors="replace") as f:
            return any(line.startswith(package + "/__init__.py") for line in f)
    except OSError:
        pass
    try:
        with open(os.path.join(path, "top_level.txt"), encoding="utf-8") as f:
            return package in f.read().split()
    except OSError:
        return True
def distributions(package, prefixes):
    found, seen = [], set()
    for entry in sys.path:
        try:
            real = os.path.realpath(entry or ".")
            names = os.listdir(real)
        except OSError:
            continue
        if real in seen:
            continue
        seen.add(real)
        for name in names:
            low = name.lower()
            if not (low.endswith(".dist-info") or low.endswith(".egg-info")):
                continue
            low = low.replace("-", "_")
            if not any(low.startswith(p) for p in prefixes):
                continue
            path = os.path.join(real, name)
            if not provides(path, package):
                continue
            meta = dist_meta(path)
            found.append({"name": meta.get("Name", name.split("-")[0]),
                          "version": meta.get("Version"), "path": path})
    return found
def ptxas(path):
    # Started now, read by ptxas_done(): the versions of every ptxas run side by side.
    info = {"path": path, "exists": os.path.exists(path), "executable": os.access(path, os.X_OK)}
    if info["executable"]:
        try:
            info["run"] = subprocess.Popen([path, "--version"], stdout=subprocess.PIPE,
                                           stderr=subprocess.STDOUT)
        except Exception as e:
            info["error"] = err(e)
    return info
def ptxas_done(info):
    run = info.pop("run", None)
    if run is not None:
        try:
            out = run.communicate(timeout=10)[0].decode("utf-8", "replace")
            m = re.search(r"release (\d+)\.(\d+)", out)
            info["version"] = m.group(1) + "." + m.group(2) if m else None
            info["output"] = out[-400:]
        except Exception as e:
            run.kill()
            run.wait()
            info["error"] = err(e)
    return info
meta = {"python": {"executable": sys.executable, "include": None,
                   "version": "%d.%d.%d" % sys.version_info[:3]}}
try:
    meta["python"]["include"] = py_include()
except Exception as e:
    meta["python"]["include_error"] = err(e)
meta["triton_dir"] = spec_dir("triton")
def path_entry(package_dir):
    # The sys.path entry a package was found in: what shadows an installed copy, and why.
    for entry in sys.path:
        if package_dir and os.path.realpath(os.path.join(entry or ".", os.path.basename(
                package_dir))) == os.path.realpath(package_dir):
            return entry or os.getcwd()
    return None
meta["triton_entry"] = path_entry(meta["triton_dir"])
meta["triton_dists"] = distributions("triton", ("triton", "pytorch_triton"))
meta["torch_dir"] = spec_dir("torch")
meta["fla_dir"] = spec_dir("fla")
meta["fla_dirs"] = spec_dirs("fla")
meta["vllm_dir"] = spec_dir("vllm")
if meta["vllm_dir"]:
    # vLLM's rocm_platform_plugin() needs amdsmi (vllm/platforms/__init__.py).
    meta["amdsmi_dir"] = spec_dir("amdsmi")
    dists = distributions("vllm", ("vllm",))
    meta["vllm_version"] = dists[0]["version"] if dists else None
for name in ("xformers", "liger_kernel", "sglang", "unsloth_zoo", "mamba_ssm", "causal_conv1d"):
    meta[name + "_dir"] = spec_dir(name)
meta["vendored_fla"] = [
    [fw, os.path.join(meta[pkg + "_dir"], rel)] for fw, pkg, rel in VENDORED_FLA
    if meta.get(pkg + "_dir") and os.path.isfile(os.path.join(meta[pkg + "_dir"], rel))]
meta["inductor"] = bool(meta["torch_dir"]) and os.path.isdir(
    os.path.join(meta["torch_dir"], "_inductor"))
if meta["torch_dir"]:
    try:
        with open(os.path.join(meta["torch_dir"], "version.py"), encoding="utf-8") as f:
            text = f.read(8192)
        m = re.search(r"^__version__\s*(?::[^=]*)?=\s*['\"]([^'\"]+)", text, re.M)
        c = re.search(r"^cuda\s*(?::[^=]*)?=\s*(?:['\"]([^'\"]+)['\"]|None)", text, re.M)
        meta["torch_version"] = m.group(1) if m else None
        meta["torch_cuda"] = c.group(1) if c else None
        h = re.search(r"^hip\s*(?::[^=]*)?=\s*['\"]([^'\"]+)['\"]", text, re.M)
        meta["torch_hip"] = h.group(1) if h else None
    except OSError as e:
        meta["torch_version_error"] = err(e)
if meta["fla_dir"]:
    dists = distributions("fla", ("flash_linear_attention", "fla_core", "fla"))
    meta["fla_version"] = dists[0]["version"] if dists else None
if meta["triton_dir"]:
    base = meta["triton_dir"]
    tools = {}
    for name, rel in (("ptxas", "backends/nvidia/bin/ptxas"),
                      ("ptxas-blackwell", "backends/nvidia/bin/ptxas-blackwell"),
                      ("ptxas-2x", "third_party/cuda/bin/ptxas")):
        p = os.path.join(base, rel)
        if os.path.exists(p) or name == "ptxas":
            tools[name] = ptxas(p)
    for var in ("TRITON_PTXAS_PATH", "TRITON_PTXAS_BLACKWELL_PATH"):
        if os.environ.get(var):
            tools[var] = ptxas(os.environ[var])
    meta["ptxas"] = {name: ptxas_done(info) for name, info in tools.items()}
emit("meta", meta)
if len(sys.argv) > 3 and sys.argv[3] == "meta":
    emit("done", {"processes": STARTED, "compiler_runs": 0})
    sys.exit(0)
trace_compiler()

torch = None
if meta["torch_dir"]:
    data = {"installed": True}
    t0 = time.time()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            import torch
            data["import_s"] = round(time.time() - t0, 3)
            data["version"] = str(torch.__version__)
            data["cuda"] = torch.version.cuda
            data["hip"] = getattr(torch.version, "hip", None)
            data["cuda_available"] = bool(torch.cuda.is_available())
            data["device_count"] = int(torch.cuda.device_count()) if data["cuda_available"] else 0
            data["arch_list"] = list(torch.cuda.get_arch_list()) if data["cuda_available"] else []
        except BaseException as e:
            data["error"] = err(e)
    data["warnings"] = [str(w.message)[:1000] for w in caught][:10]
    emit("torch", data)
    if meta["inductor"] and torch is not None:
        try:
            emit("inductor", inductor_report(meta["torch_dir"], own_env,
                                             python_tempdir(own_env)[0], own_name))
        except BaseException as e:
            emit("inductor", {"error": err(e)})
else:
    emit("torch", {"installed": False})

def mirror_cache(cache):
    # The warm attempt must read the user's cache and never write to it: a job may be using it
    # right now. Triton's cache is <dir>/<key>/<files>; a hit only checks that <key>/<file>
    # exists and loads it, a miss writes <key>/tmp.pid_*/<file> and renames it into <key>/.
    # So the attempt runs on a copy made of real key dirs holding a symlink to each of the
    # user's files: hits read through the links, anything written lands in the copy, which goes
    # with the probe's temp dir (rmtree removes links, never their targets).
    mirror = fresh + "-warm"
    os.mkdir(mirror)
    if own is not None:
        own.throwaway.append(mirror)
    try:
        keys = os.listdir(cache)
    except OSError:
        keys = []
    for key in keys:
        source = os.path.join(cache, key)
        if key.startswith(".fleetcheck-probe"):
            continue  # the probe's own throw-away dirs (this run's, or a concurrent one's)
        try:
            names = os.listdir(source) if os.path.isdir(source) else None
        except OSError:
            names = None
        if names is None:
            continue
        target = os.path.join(mirror, key)
        os.mkdir(target)
        for name in names:
            path = os.path.join(source, name)
            if os.path.isdir(path):
                continue  # a tmp.pid_* dir: another process is writing this entry now
            try:
                os.symlink(os.path.abspath(path), os.path.join(target, name))
            except OSError:
                pass
    return mirror
def target_of(t):
    if isinstance(t, tuple):
        return {"backend": t[0], "arch": t[1] if len(t) > 1 else None, "warp_size": None}
    return {"backend": getattr(t, "backend", None), "arch": getattr(t, "arch", None),
            "warp_size": getattr(t, "warp_size", None)}
def fresh_attempt(data):
    # get_current_target() in the probe's fresh cache dir; when that fails, again through a
    # mirror of the user's cache (does a warm cache hide the failure?).
    os.environ["TRITON_CACHE_DIR"] = fresh
    t0 = time.time()
    for _ in range(2):
        reset_driver(triton)
        first = len(COMPILER_RUNS)
        try:
            data["target"] = target_of(current_target(triton))
            data["ok"] = True
            data["compiler"] = COMPILER_RUNS[first:]
        except BaseException as e:
            failure = failure_of(e)
            if failure.get("probe_step") == "check_call" and untrace_compiler():
                # The compiler runs' tracer's own error: the build proved again without it
                # (Triton puts a module in its cache only once it is built).
                data["instrumentation"] = {"error": failure.get("error"), "step": "check_call",
                                           "what": "the compiler runs' tracer"}
                continue
            data["ok"] = False
            data["error"] = err(e)
            data["failure"] = dict(failure, compiler=COMPILER_RUNS[first:])
        break
    data["seconds"] = round(time.time() - t0, 3)
    data["cache"] = "fresh"
    data["fresh_dir"] = fresh
    failure = data.get("failure") or {}
    if failure.get("errno") and not failure.get("filename"):
        # A bare OSError (a write has no path): the same write, done again, says where.
        failure["where"] = reproduce(failure["errno"], (("cache", fresh), (
            "tmp", os.environ.get("TMPDIR"))), 65536)[0]
    emit("target", data)
    if not data["ok"]:
        warm = {"cache_dir": None}
        if user_cache is None:
            home = os.environ.get("TRITON_HOME") or os.path.expanduser("~/")
            cache = os.path.join(home, ".triton", "cache")
        else:
            cache = user_cache
        warm["cache_dir"] = cache
        if os.path.isdir(cache):
            try:
                os.environ["TRITON_CACHE_DIR"] = mirror_cache(cache)
                warm["target"] = target_of(current_target(triton))
                warm["ok"] = True
            except BaseException as e:
                warm["ok"] = False
                warm["error"] = err(e)
        else:
            warm["ok"] = None
        emit("warm", warm)
    os.environ["TRITON_CACHE_DIR"] = fresh
def skeleton_attempt(data):
    # The workload's own start loaded its existing driver module (a warm cache): a missing
    # compiler, header or library breaks its next build, of its next kernel's launcher. The
    # release's own build of the module's skeleton proves that toolchain (the same compiler,
    # headers, flags and link, the module loaded from a cache dir beside the workload's) at a
    # fraction of the module's compile; where it fails, the real module is built for the
    # exact failure (fresh_attempt).
    where = os.path.join(fresh, "skeleton")
    first = len(COMPILER_RUNS)
    t0 = time.time()
    try:
        os.mkdir(where)
        built = skeleton_proof(triton, where)
    except BaseException:
        built = False
    if built:
        data.update(ok=True, target=own.report.get("target"), compiler=COMPILER_RUNS[first:],
                    cache="skeleton", fresh_dir=where, seconds=round(time.time() - t0, 3))
        emit("target", data)
    return built
triton = None
own = None
if meta["triton_dir"]:
    os.environ["TRITON_CACHE_DIR"] = fresh
    data = {}
    t0 = time.time()
    try:
        import triton
        data["version"] = getattr(triton, "__version__", None)
        data["location"] = os.path.dirname(triton.__file__)
    except BaseException as e:
        triton = None
        data["ok"] = False
        data["error"] = err(e)
        data["failure"] = dict(failure_of(e), compiler=list(COMPILER_RUNS))
        data["seconds"] = round(time.time() - t0, 3)
        data["cache"] = "fresh"
        emit("target", data)
if triton is not None:
    emit("knobs", guarded(knob_report, triton, own_env))
    emit("backends", guarded(backend_report, triton))
    # The workload's own path first: its real get_current_target() through its own cache (its
    # real entries) and temp dirs (throw-away subdirectories, as its Triton and compilers
    # choose them), which FLA and the frameworks' detections below then use too; removed at
    # the end (the probe removes them again if this process dies first: the "own-made" stage
    # names them).
    own = OwnPath(triton, own_env, own_name)
    t0 = time.time()
    try:
        report = own.attempt(target_of)
    except BaseException as e:  # the proof's own step, not Triton's: still the fresh attempt
        report = own.report
        report.update(ok=False, failure=failure_of(e))
    report["seconds"] = round(time.time() - t0, 3)
    emit("own", report)  # now: what follows may hang; finish() completes it below
    if driver_after:
        driver_after = False
        read_driver()
    if own.built_from_nothing():
        # It compiled what get_current_target() needs and loaded no existing entry: that is
        # the fresh-cache proof (a warm cache cannot hide a missing compiler), built once.
        data.update(ok=True, target=report["target"], seconds=report["seconds"], cache="own",
                    cache_dir=report.get("cache_dir"), compiler=own.runs)
        emit("target", data)
    else:
        # It failed, or loaded the workload's existing entries: a fresh cache tells whether
        # Triton builds at all here, and the user's warm cache whether it hides that.
        own.suspend()
        # The fresh cache lives where the workload's own would (a throw-away subdirectory of
        # its cache dir: the same mount, its exec and space), else in the probe's temp dir.
        fresh = own.fresh_dir(fresh)
        # torch's import is at its peak now; the compiler below runs beside what it let go.
        give_back_freed_memory()
        try:
            if not (report.get("ok") and skeleton_attempt(data)):
                fresh_attempt(data)
            if data.get("ok") and data.get("cache") == "fresh":
                built = [os.path.getsize(os.path.join(d, f)) for d, _, names in os.walk(fresh)
                         for f in names if f.endswith(".so")]
                if built:  # a module Triton built, not one a full disk cut short
                    own.size = max(built)
        finally:
            own.resume()
    emit("own", own.finish())

if meta["fla_dir"]:
    # FLA's device detection has moved between releases; import the module that holds it in
    # the installed layout, without fla/__init__.py (which imports every layer and model).
    # FLA swallows the exception and only warns: the warning is raised inside its except
    # block, so sys.exc_info() at that moment is the very exception it threw away.
    data = {"layout": None}
    t0 = time.time()
    if own is None:
        os.environ["TRITON_CACHE_DIR"] = fresh
    else:
        reset_driver(triton)  # FLA decides as the workload's own process would
    swallowed, shown = [], []
    def show(message, category, filename, lineno, file=None, line=None):
        text = str(message)
        if "roll back to CPU" in text:
            shown.append("%s: %s" % (category.__name__, text))
            exc = sys.exc_info()[1]
            if exc is not None:
                swallowed.append(err(exc))
    for rel, module in FLA_LAYOUTS:
        if not any(os.path.isfile(os.path.join(d, rel)) for d in meta["fla_dirs"]):
            continue
        data["layout"] = rel
        data["module"] = module
        break
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = show
        try:
            if "fla" not in sys.modules:
                import types
                pkg = types.ModuleType("fla")
                pkg.__path__ = list(meta["fla_dirs"])
                # fla.utils imports `from fla import __version__` since 0.3 (0.6: decorators.py)
                pkg.__version__ = meta.get("fla_version") or "0"
                sys.modules["fla"] = pkg
            import importlib
            utils = importlib.import_module(data.get("module") or "fla.utils")
            data["device_platform"] = getattr(utils, "device_platform", None)
            data["is_blackwell"] = getattr(utils, "IS_NVIDIA_BLACKWELL", None)
            if data["layout"] is None:
                data["layout"] = "unknown"
        except BaseException as e:
            data["error"] = err(e)
            if data["layout"] is None:
                data["layout"] = "unknown"
    data["warnings"] = shown[:5]
    data["swallowed"] = swallowed[0] if swallowed else None
    try:
        data["unmet"] = fla_requirements()
    except Exception as e:
        data["unmet_error"] = err(e)
    data["seconds"] = round(time.time() - t0, 3)
    emit("fla", data)
if own is not None:
    # The frameworks' own copies of FLA's detection, each run as it is written in the
    # installed release (its own except clause), with the workload's dirs.
    found = []
    for fw, path in meta.get("vendored_fla") or []:
        item = {"framework": fw, "file": path}
        try:
            code = detection_function(path)
            if code is None:
                item["error"] = "no get_available_device() in this release"
            else:
                reset_driver(triton)
                item["backend"], item["warnings"], item["raised"] = run_detection(code, triton)
        except BaseException as e:
            item["error"] = err(e)
        found.append(item)
    emit("vendored", {"detections": found})
    own.clean()
if meta["vllm_dir"]:
    # Last: it imports vLLM as the workload does (seconds), after every other stage reported.
    t0 = time.time()
    try:
        data = vllm_report()
    except BaseException as e:
        data = {"import_error": failure_of(e)}
    data["seconds"] = round(time.time() - t0, 3)
    emit("vllm", data)
if any(meta.get(n + "_dir") for n in ("xformers", "liger_kernel", "mamba_ssm", "causal_conv1d")):
    t0 = time.time()
    try:
        data = framework_imports(meta)
    except BaseException as e:
        data = {"error": failure_of(e)}
    data["seconds"] = round(time.time() - t0, 3)
    emit("imports", data)
if driver_after:  # no workload's own start to wait for
    read_driver()
if driver_reader is not None:
    driver_reader.join(30)  # the driver layer's own cap as a helper of its own
emit("done", {"processes": STARTED, "compiler_runs": len(COMPILER_RUNS)})
