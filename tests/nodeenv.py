"""Fake node environments for the probe: a sysroot, a PATH, a stub libcuda and stub packages.

Only what cannot exist on a CI machine is faked (the GPU and its driver, torch and Triton
wheels), and the fakes speak the real texts of Triton's failures (docs/checks.md lists them):
the stub Triton looks for the compiler exactly as Triton does (CC, else gcc, else clang on PATH),
really compiles its `cuda_utils` stub with it (so a missing linker or header fails for real),
runs `/sbin/ldconfig -p` (under FLEETCHECK_SYSROOT) to find libcuda, and honours
TRITON_CACHE_DIR / TRITON_HOME / HOME, so a warm cache hides a missing compiler as it does for
real. Usable outside pytest::

    node = make_node(tmp_dir / "node", compiler=False)
    subprocess.run([node.python, "-"], input=probe_source(), env=node.env, ...)
"""

from __future__ import annotations

import atexit
import compileall
import hashlib
import importlib.util
import json
import marshal
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

GCC = shutil.which("gcc") or "/usr/bin/gcc"
#: What a healthy node's PATH holds besides the compiler.
BINUTILS = ("as", "ld")
#: The key the stub Triton files its cuda_utils stub under in a cache dir.
STUB_KEY = "fleetcheck-stub-cuda-utils"
DEFAULT_ARCH = ("sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120")
GPU_MODES = (True, False, "no-dev-nodes", "no-uvm", "mismatch", "no-libcuda", "proc-only")

#: The stub libraries this process compiled, one per configuration (see `_compiled`).
_STUB_CACHE: list[Path] = []


def _cache_folder() -> Path:
    """This process's folder of things built once and shared by its nodes (removed at exit),
    or the one `share_builds` named."""
    if not _STUB_CACHE:
        folder = Path(tempfile.mkdtemp(prefix="fleetcheck-stub-libs-"))
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        _STUB_CACHE.append(folder)
    return _STUB_CACHE[0]


def share_builds(folder: Path) -> None:
    """Build once for the processes that name the same `folder` (the pytest-xdist workers of
    one run: tests/conftest.py), not once in each: the stub libraries, Triton's backends, the
    releases' trees. Each build is published whole (made under a name of this process's, then
    renamed into place), so a process sees another's complete or not at all; call before any
    node is made."""
    folder.mkdir(parents=True, exist_ok=True)
    _STUB_CACHE[:] = [folder]


def _publish(made: Path, final: Path) -> None:
    """`made` (this process's, complete) renamed to `final`; where another process published
    `final` first, that one stays and `made` goes."""
    try:
        made.rename(final)  # a folder: refused where `final` is one already (not empty)
    except OSError:
        if not final.exists():
            raise
        if made.is_dir():
            shutil.rmtree(made, ignore_errors=True)
        else:
            made.unlink(missing_ok=True)


def _compiled(configuration: object, target: Path, build: Callable[[], None]) -> None:
    """`build()` writes `target`; once per `configuration` in this process (or the processes
    sharing its builds), later nodes get a copy of that build (gcc takes ~0.25 s a library,
    and a run's nodes share few configurations). The cache keeps its own copy: a test that
    changes its node's library leaves the next node's alone."""
    key = hashlib.sha256(json.dumps(configuration, sort_keys=True).encode()).hexdigest()
    cached = _cache_folder() / key
    if cached.exists():
        shutil.copy2(cached, target)
    else:
        build()
        made = cached.with_name(f"{key}.{os.getpid()}")
        shutil.copy2(target, made)
        os.replace(made, cached)

#: Real files of released wheels (scripts/fetch_test_wheels.py): Triton 3.9's backends (their
#: discovery and each driver's is_active()) and vLLM 0.33.0's platform and Triton detection.
TEST_WHEELS = Path(__file__).resolve().parents[1] / ".test-wheels"
TRITON_BACKENDS = TEST_WHEELS / "triton-3.9.0" / "triton" / "backends"
VLLM_FILES = TEST_WHEELS / "vllm-0.33.0"

#: An extra backend package's driver (a CPU backend, a vendor shim): active whatever the GPU.
EXTRA_BACKEND = {
    "compiler.py": "from triton.backends.compiler import BaseBackend\n"
                   "class ExtraBackend(BaseBackend):\n"
                   "    supports_target = staticmethod(lambda target: False)\n"
                   "    hash = parse_options = add_stages = load_dialects = get_module_map = "
                   "lambda *a: None\n",
    "driver.py": "from triton.backends.driver import DriverBase\n"
                 "class ExtraDriver(DriverBase):\n"
                 "    is_active = staticmethod(lambda: True)\n"
                 "    map_python_to_cpp_type = get_current_target = get_active_torch_device = "
                 "get_benchmarker = lambda *a: None\n",
}


@dataclass(frozen=True)
class NodeEnv:
    """A built fake node: run `python` (the real interpreter) with `env` to probe it."""

    env: dict[str, str]
    sysroot: Path
    python: str
    root: Path
    home: Path
    bindir: Path
    site: Path


def python_include() -> str:
    """The include dir as Triton computes it (posix_local mapped to posix_prefix)."""
    getter = getattr(sysconfig, "get_default_scheme", None)
    scheme = getter() if getter else sysconfig._get_default_scheme()  # type: ignore[attr-defined]
    if scheme == "posix_local":
        scheme = "posix_prefix"
    return sysconfig.get_paths(scheme=scheme)["include"]


def _write(path: Path, text: str, mode: int | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    if mode is not None:
        path.chmod(mode)
    return path


LIBCUDA_C = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stddef.h>
#include <sys/stat.h>
#include <pthread.h>
#include <unistd.h>
#ifndef INIT_THREADS
#define INIT_THREADS 0
#endif
static int init_state = -1;
static void *driver_thread(void *arg) { (void)arg; for (;;) pause(); return NULL; }
/* As the real driver does when a process initialises it (seen after a probe on an H100,
   driver 580): its JIT cache dir, CUDA_CACHE_PATH or ~/.nv/ComputeCache, is created; and it
   starts INIT_THREADS threads of its own, once per process: where the job's process limit
   refuses one, CUDA_ERROR_OPERATING_SYSTEM (304), as the H100 answered under ulimit -u. */
int cuInit(unsigned int flags) {
    char path[4096];
    const char *cache = getenv("CUDA_CACHE_PATH"), *home = getenv("HOME");
    int i;
    pthread_t thread;
    (void)flags;
    if (cache && *cache) {
        mkdir(cache, 0700);
    } else if (home && *home) {
        snprintf(path, sizeof path, "%s/.nv", home);
        mkdir(path, 0700);
        snprintf(path, sizeof path, "%s/.nv/ComputeCache", home);
        mkdir(path, 0700);
    }
    if (init_state >= 0)
        return init_state;
    init_state = INIT_RC;
    for (i = 0; init_state == 0 && i < INIT_THREADS; i++) {
        if (pthread_create(&thread, NULL, driver_thread, NULL) != 0)
            init_state = 304;
        else
            pthread_detach(thread);
    }
    return init_state;
}
int cuDriverGetVersion(int *v) { *v = DRIVER_VERSION; return 0; }
int cuDeviceGetCount(int *n) { if (INIT_RC || init_state > 0) return 3; *n = COUNT; return 0; }
int cuDeviceGet(int *d, int i) { if (i >= COUNT) return 101; *d = i; return 0; }
int cuDeviceGetName(char *buf, int len, int d) {
    (void)d; strncpy(buf, NAME, (size_t)len - 1); buf[len - 1] = 0; return 0; }
int cuDeviceGetAttribute(int *v, int attr, int d) {
    (void)d; if (attr == 75) { *v = CC_MAJOR; return 0; }
    if (attr == 76) { *v = CC_MINOR; return 0; } return 1; }
int cuDeviceTotalMem_v2(size_t *bytes, int d) { (void)d; *bytes = (size_t)MEM_MIB << 20; return 0; }
int cuDevicePrimaryCtxRetain(void **ctx, int d) { (void)d; *ctx = (void *)0; return CTX_RC; }
int cuDevicePrimaryCtxRelease(int d) { (void)d; return 0; }
int cuGetErrorName(int rc, const char **s) {
    switch (rc) {
    case 34: *s = "CUDA_ERROR_STUB_LIBRARY"; return 0;
    case 46: *s = "CUDA_ERROR_DEVICE_UNAVAILABLE"; return 0;
    case 100: *s = "CUDA_ERROR_NO_DEVICE"; return 0;
    case 802: *s = "CUDA_ERROR_SYSTEM_NOT_READY"; return 0;
    case 804: *s = "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE"; return 0;
    case 803: *s = "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH"; return 0;
    case 999: *s = "CUDA_ERROR_UNKNOWN"; return 0;
    default: *s = "CUDA_ERROR_OTHER"; return 0; } }
"""


NVML_C = r"""
static const char *texts[] = {"Success", "Unknown Error"};
int nvmlInit_v2(void) { return NVML_RC; }
int nvmlInitWithFlags(unsigned int flags) { (void)flags; return NVML_RC; }
int nvmlDeviceGetCount_v2(unsigned int *n) { *n = COUNT; return 0; }
int nvmlShutdown(void) { return 0; }
const char *nvmlErrorString(int rc) { return rc == 999 ? texts[1] : texts[0]; }
int nvmlDeviceGetHandleByIndex_v2(unsigned int i, void **h) {
    *h = (void *)(long)(i + 1); return 0; }
int nvmlDeviceGetComputeMode(void *h, int *mode) { (void)h; *mode = COMPUTE_MODE; return 0; }
"""

#: Each GPU's state as NVML reports it (scripts/gpustate.py reads it), set at run time by the
#: node's FLEETCHECK_STUB_GPU_STATE (`gpu_state_env`): one record per GPU, `;` between them,
#: `USED_MIB,PERSISTENCE,REMAP_PENDING,REMAP_FAILURE,ECC_UNCORRECTED[,PID:MIB...]` (a PID
#: without `:MIB` has its memory not available, as NVML says in containers; the PID `parent`
#: is the pid of the caller's parent: the probe, whose stage reads NVML). Unset: every GPU
#: idle, persistence mode on, healthy.
NVML_STATE_C = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
typedef struct { unsigned long long total, free, used; } mem1_t;
typedef struct { unsigned int version; unsigned long long total, reserved, free, used; } mem2_t;
typedef struct { unsigned int pid; unsigned long long used; unsigned int gi, ci; } proc_t;
struct state { unsigned long long used_mib, ecc; int persist, pending, failure, nprocs;
               unsigned int pids[8]; unsigned long long proc_mib[8]; };
static void state_of(void *h, struct state *s) {
    unsigned int i = (unsigned int)((long)h - 1), k;
    const char *rec = getenv("FLEETCHECK_STUB_GPU_STATE");
    char buf[512], *tok, *save = 0;
    size_t n;
    int field = 0;
    memset(s, 0, sizeof *s);
    s->persist = 1;
    for (k = 0; k < i && rec; k++) { rec = strchr(rec, ';'); if (rec) rec++; }
    if (!rec || !*rec || *rec == ';') return;
    n = strcspn(rec, ";");
    if (n >= sizeof buf) n = sizeof buf - 1;
    memcpy(buf, rec, n); buf[n] = 0;
    for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(0, ",", &save), field++) {
        switch (field) {
        case 0: s->used_mib = strtoull(tok, 0, 10); break;
        case 1: s->persist = atoi(tok); break;
        case 2: s->pending = atoi(tok); break;
        case 3: s->failure = atoi(tok); break;
        case 4: s->ecc = strtoull(tok, 0, 10); break;
        default:
            if (s->nprocs < 8) {
                char *colon = strchr(tok, ':');
                /* "parent": the pid of the process that runs NVML's caller (the probe) */
                s->pids[s->nprocs] = strncmp(tok, "parent", 6) == 0 ? (unsigned int)getppid()
                                     : (unsigned int)strtoul(tok, 0, 10);
                s->proc_mib[s->nprocs] = colon ? strtoull(colon + 1, 0, 10) : ~0ULL;
                s->nprocs++;
            }
        }
    }
}
int nvmlDeviceGetUUID(void *h, char *uuid, unsigned int len) {
    snprintf(uuid, len, "GPU-%08d-fake", (int)((long)h - 1)); return 0; }
int nvmlDeviceGetMemoryInfo_v2(void *h, mem2_t *m) {
    struct state s; state_of(h, &s);
    m->total = (unsigned long long)MEM_MIB << 20; m->reserved = 0;
    m->used = s.used_mib << 20; m->free = m->total - m->used; return 0; }
int nvmlDeviceGetMemoryInfo(void *h, mem1_t *m) {
    struct state s; state_of(h, &s);
    m->total = (unsigned long long)MEM_MIB << 20;
    m->used = s.used_mib << 20; m->free = m->total - m->used; return 0; }
int nvmlDeviceGetComputeRunningProcesses_v3(void *h, unsigned int *count, proc_t *infos) {
    struct state s; int k; state_of(h, &s);
    if (*count < (unsigned int)s.nprocs) { *count = (unsigned int)s.nprocs; return 7; }
    for (k = 0; k < s.nprocs; k++) {
        infos[k].pid = s.pids[k];
        infos[k].used = s.proc_mib[k] == ~0ULL ? ~0ULL : s.proc_mib[k] << 20;
        infos[k].gi = infos[k].ci = 0xFFFFFFFF;
    }
    *count = (unsigned int)s.nprocs; return 0; }
int nvmlDeviceGetPersistenceMode(void *h, int *mode) {
    struct state s; state_of(h, &s); *mode = s.persist; return 0; }
int nvmlDeviceGetRemappedRows(void *h, unsigned int *corr, unsigned int *unc,
                              unsigned int *pending, unsigned int *failure) {
    struct state s; state_of(h, &s);
    *corr = 0; *unc = (unsigned int)(s.pending || s.failure);
    *pending = (unsigned int)s.pending; *failure = (unsigned int)s.failure; return 0; }
int nvmlDeviceGetTotalEccErrors(void *h, int type, int counter, unsigned long long *n) {
    struct state s; state_of(h, &s);
    *n = (type == 1 && counter == 0) ? s.ecc : 0; return 0; }
"""


def gpu_state_env(*gpus: tuple[int, ...] | str) -> dict[str, str]:
    """The node env that makes the stub NVML report these GPUs' state (NVML_STATE_C's records):
    each a string record, or (used_mib, persistence, pending, failure, ecc, *"PID:MIB")."""
    records = [g if isinstance(g, str) else ",".join(str(v) for v in g) for g in gpus]
    return {"FLEETCHECK_STUB_GPU_STATE": ";".join(records)}


def build_nvml(where: Path, *, version: str, nvml_rc: int, compute_mode: int,
               count: int = 1, memory_mib: int = 143771) -> Path:
    """A stub libnvidia-ml.so.<version> (soname libnvidia-ml.so.1)."""
    target = where / f"libnvidia-ml.so.{version}"

    def build() -> None:
        source = _write(where / "nvml_stub.c", NVML_C + NVML_STATE_C)
        subprocess.run([GCC, str(source), "-shared", "-fPIC", "-Wl,-soname,libnvidia-ml.so.1",
                        "-o", str(target), f"-DNVML_RC={nvml_rc}",
                        f"-DCOMPUTE_MODE={compute_mode}", f"-DCOUNT={count}",
                        f"-DMEM_MIB={memory_mib}"], check=True)
        source.unlink()

    where.mkdir(parents=True, exist_ok=True)
    _compiled(["nvml", target.name, nvml_rc, compute_mode, count, memory_mib], target, build)
    (where / "libnvidia-ml.so.1").symlink_to(target.name)
    return target


def build_libcuda(where: Path, *, version: str, init_rc: int, driver_version: int, count: int,
                  name: str, cc: str, memory_mib: int, ctx_rc: int = 0, extra: str = "",
                  init_threads: int = 0) -> Path:
    """A stub libcuda.so.<version> (soname libcuda.so.1), compiled once per configuration.

    extra: more C compiled into it (tests/releases.py: the entry points a release's driver.c
    links to that LIBCUDA_C does not define). init_threads: the threads its cuInit starts."""
    major, minor = cc.split(".")
    defines = {"INIT_RC": init_rc, "DRIVER_VERSION": driver_version, "COUNT": count,
               "NAME": json.dumps(name), "CC_MAJOR": major, "CC_MINOR": minor,
               "MEM_MIB": memory_mib, "CTX_RC": ctx_rc, "INIT_THREADS": init_threads}
    target = where / f"libcuda.so.{version}"
    where.mkdir(parents=True, exist_ok=True)

    def build() -> None:
        source = _write(where / "libcuda_stub.c", LIBCUDA_C + extra)
        argv = [GCC, str(source), "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o",
                str(target)] + [f"-D{k}={v}" for k, v in defines.items()]
        subprocess.run(argv, check=True)
        source.unlink()

    _compiled(["libcuda", version, defines, *([extra] if extra else [])], target, build)
    return target


def _sysroot(root: Path, *, gpu: object, gpus: int, name: str, driver: str, container: str | None,
             dev_modes: dict[str, int], ldconfig: bool, ld_entries: list[tuple[str, str]],
             mounts: list[tuple[str, str, str]], nvswitches: int = 0,
             os_release: str | None = None) -> None:
    has_proc = gpu is not False
    if has_proc:
        _write(root / "proc/driver/nvidia/version",
               f"NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  {driver}  Release Build"
               "  (dvs-builder@U22-I3-AE18-23-3)  Thu Oct  2 21:26:33 UTC 2025\n"
               "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14+deb12u1)\n")
        for index in range(gpus):
            bus = f"0000:{0x18 + index:02x}:00.0"
            _write(root / f"proc/driver/nvidia/gpus/{bus}/information",
                   f"Model: \t\t {name}\nIRQ:   \t\t 0\nGPU UUID: \t GPU-{index:08d}-fake\n"
                   f"Video BIOS: \t 96.00.af.00.01\nBus Type: \t PCIe\nDMA Size: \t 52 bits\n"
                   f"DMA Mask: \t 0xfffffffffffff\nBus Location: \t {bus}\n"
                   f"Device Minor: \t {index}\nGPU Excluded:\t No\n")
    _write(root / "proc/devices", "Character devices:\n  1 mem\n195 nvidia\n"
           "195 nvidiactl\n507 nvidia-uvm\n510 nvidia-caps\n")
    _write(root / "proc/meminfo", "MemTotal:       131072000 kB\nMemFree:        1000 kB\n")
    lines = [f"{20 + i} 1 0:{20 + i} / {point} {options} shared:1 - {fstype} {source} rw"
             for i, (point, options, fstype, source) in enumerate(
                 [("/", "rw,relatime", "ext4", "/dev/vda0"),
                  *((p, o, t, f"/dev/vda{n + 1}" if t == "ext4" else "fs01:/export/home")
                    for n, (p, o, t) in enumerate(mounts))])]
    for index in range(nvswitches):
        (root / f"proc/driver/nvidia-nvswitch/devices/0000:{0x05 + index:02x}:00.0").mkdir(
            parents=True, exist_ok=True)
    if container == "lxc":
        lines.append("90 20 0:90 /proc/cpuinfo /proc/cpuinfo rw,nosuid,nodev,relatime - "
                     "fuse.lxcfs lxcfs rw,user_id=0,group_id=0,allow_other")
        _write(root / "proc/1/environ", "container=lxc\0PATH=/usr/sbin:/usr/bin\0")
    elif container == "docker":  # the signs dockerd leaves (moby: /.dockerenv, cgroup path)
        _write(root / ".dockerenv", "")
        _write(root / "proc/self/cgroup", "0::/docker/" + "ab" * 32 + "\n")
    elif container == "podman":  # podman's: /run/.containerenv, container= in PID 1's env
        _write(root / "run/.containerenv", 'engine="podman-4.3.1"\n')
        _write(root / "proc/1/environ", "container=podman\0PATH=/usr/sbin:/usr/bin\0")
    _write(root / "proc/self/mountinfo", "\n".join(lines) + "\n")
    (root / "dev").mkdir(parents=True, exist_ok=True)
    for node, mode in dev_modes.items():
        path = _write(root / "dev" / node, "")
        path.chmod(mode)
    debian = ('PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nNAME="Debian GNU/Linux"\n'
              'VERSION_ID="12"\nID=debian\n')
    _write(root / "etc/os-release", os_release or debian)
    if ldconfig:
        body = "".join(f"echo '\t{n} (libc6,x86-64) => {p}'\n" for n, p in ld_entries)
        _write(root / "sbin/ldconfig",
               f"#!/bin/sh\necho '{len(ld_entries) + 812} libs found in cache "
               "`/etc/ld.so.cache'\"'\"\n" + body, 0o755)


def _nvidia_smi(bindir: Path, *, gpu: object, gpus: int, name: str, cc: str, memory_mib: int,
                driver: str) -> None:
    if gpu in ("mismatch",):
        body = ("echo 'Failed to initialize NVML: Driver/library version mismatch'\n"
                "echo 'NVML library version: 575.57'\nexit 18\n")
    elif gpu in ("no-dev-nodes", "proc-only", "no-libcuda"):
        body = ("echo \"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA "
                "driver. Make sure that the latest NVIDIA driver is installed and running.\"\n"
                "exit 9\n")
    else:
        rows = "".join(f"echo '{i}, {name}, GPU-{i:08d}-fake, {memory_mib}, {cc}, {driver}'\n"
                       for i in range(gpus))
        body = 'case "$*" in *--query-gpu=*) ;; *) echo "usage"; exit 2;; esac\n' + rows
    _write(bindir / "nvidia-smi", "#!/bin/sh\n" + body, 0o755)


def _compiler(bindir: Path, *, compiler: bool, linker: bool, python_headers: bool,
              libc_headers: bool, empty: Path) -> None:
    if linker:
        for tool in BINUTILS:
            found = shutil.which(tool)
            if found:
                (bindir / tool).symlink_to(found)
    if not compiler:
        return
    if python_headers and libc_headers:
        (bindir / "gcc").symlink_to(GCC)
        return
    # A gcc that lost the interpreter's headers (the -I is dropped, as if python3.X-dev were
    # absent) or the libc headers (an empty sysroot, as if libc6-dev were absent).
    lines = ["#!/bin/sh"]
    if not python_headers:
        lines += ['for a do shift',
                  f'  case "$a" in -I{python_include()}) ;; *) set -- "$@" "$a";; esac',
                  'done']
    extra = "" if libc_headers else f" --sysroot={empty}"
    lines.append(f'exec {GCC}{extra} "$@"')
    _write(bindir / "gcc", "\n".join(lines) + "\n", 0o755)


TORCH_INIT = r'''
"""Stub torch: the attributes the probe reads, and just enough tensor for the --deep kernel."""
import contextlib, time
import _fleetcheck_stub_api
_fleetcheck_stub_api.install(__name__)
from . import version
from . import cuda
__version__ = version.__version__
float32 = "float32"
_CONFIG = CONFIG_JSON
if _CONFIG["import_sleep"]:
    time.sleep(_CONFIG["import_sleep"])
if _CONFIG.get("pool_threads"):
    # The thread pools of torch's import (OpenMP's, its own): a pool takes the threads it gets.
    import threading
    _pool = threading.Event()
    for _ in range(_CONFIG["pool_threads"]):
        try:
            threading.Thread(target=_pool.wait, daemon=True).start()
        except RuntimeError:  # can't start new thread
            break

class Tensor:
    def __init__(self, data, device):
        self.data, self.device = list(data), device
    def __add__(self, other):
        return Tensor([v + other for v in self.data], self.device)
    def __eq__(self, other):
        return Tensor([a == b for a, b in zip(self.data, other.data)], self.device)
    def all(self):
        return all(self.data)
    def __bool__(self):
        return bool(all(self.data))

def _device_ok(device):
    if not cuda.is_available():
        raise RuntimeError("No CUDA GPUs are available")
    if _CONFIG["broken_gpu"] is not None and device == "cuda:%d" % _CONFIG["broken_gpu"]:
        raise RuntimeError("CUDA error: uncorrectable ECC error encountered")
    return device

def arange(n, device="cpu", dtype=None):
    return Tensor([float(i) for i in range(n)], _device_ok(device))

def empty_like(t):
    return Tensor([0.0] * len(t.data), t.device)

class xpu:
    """A CUDA or ROCm build's torch.xpu: no Intel GPU."""
    is_available = staticmethod(lambda: False)
    device_count = staticmethod(lambda: 0)

# Last: `from . import version` above must find the submodule, not a placeholder.
__getattr__ = _fleetcheck_stub_api.module_getattr(__name__)
'''

TORCH_CUDA = r'''
"""Stub torch.cuda, answering as the real one does on the configured node."""
import contextlib, json, warnings
_CONFIG = CONFIG_JSON
def _init_rc():
    # Where configured, the node's libcuda initialised as torch's cudaGetDeviceCount() does.
    if not (_CONFIG["available"] and _CONFIG.get("cuinit")):
        return 0
    import ctypes
    return ctypes.CDLL(_CONFIG["cuinit"]).cuInit(0)
def is_available():
    if _CONFIG["warning"]:
        warnings.warn(_CONFIG["warning"], UserWarning)
    rc = _init_rc()
    if rc:
        warnings.warn("CUDA initialization: Unexpected error from cudaGetDeviceCount(). Did "
                      "you run some cuda functions before calling NumCudaDevices() that "
                      "might have already set an error? Error %d: OS call failed or "
                      "operation not supported on this OS" % rc, UserWarning)
        return False
    return _CONFIG["available"]
def device_count():
    return _CONFIG["count"] if _CONFIG["available"] and not _init_rc() else 0
def get_arch_list():
    return list(_CONFIG["arch"]) if _CONFIG["available"] else []
def get_device_capability(index=0):
    return tuple(_CONFIG["cc"])
def get_device_name(index=0):
    return _CONFIG["name"]
def current_device():
    return 0
def synchronize(index=None):
    return None
@contextlib.contextmanager
def device(index):
    yield
import _fleetcheck_stub_api
__getattr__ = _fleetcheck_stub_api.module_getattr(__name__)
'''

TRITON_DRIVER = r'''
"""Stub triton.runtime.driver: CudaUtils builds its stub with cc exactly as Triton does."""
import os, shutil, subprocess, sys, sysconfig, tempfile
from triton import _CONFIG

SYSROOT = os.environ.get("FLEETCHECK_SYSROOT") or "/"
LDCONFIG = "/sbin/ldconfig" if SYSROOT == "/" else SYSROOT.rstrip("/") + "/sbin/ldconfig"
SOURCE = "#include <stdio.h>\n#include <dlfcn.h>\n#include <Python.h>\nint f(void){return 0;}\n"

def libcuda_dirs():
    env_path = os.environ.get("TRITON_LIBCUDA_PATH")
    if env_path:
        return [env_path]
    libs = subprocess.check_output([LDCONFIG, "-p"]).decode(errors="ignore")
    locs = [line.split()[-1] for line in libs.splitlines() if "libcuda.so.1" in line]
    dirs = [os.path.dirname(loc) for loc in locs]
    env_ld_library_path = os.getenv("LD_LIBRARY_PATH")
    if env_ld_library_path and not dirs:
        dirs = [d for d in env_ld_library_path.split(":")
                if os.path.exists(os.path.join(d, "libcuda.so.1"))]
    msg = "libcuda.so cannot found!\n"
    if locs:
        msg += "Possible files are located at %s." % str(locs)
        msg += "Please create a symlink of libcuda.so to any of the files."
    else:
        msg += 'Please make sure GPU is set up and then run "/sbin/ldconfig"'
        msg += " (requires sudo) to refresh the linker cache."
    assert any(os.path.exists(os.path.join(p, "libcuda.so.1")) for p in dirs), msg
    return dirs

def cache_dir():
    if os.environ.get("TRITON_CACHE_DIR"):
        return os.environ["TRITON_CACHE_DIR"]
    home = os.environ.get("TRITON_HOME") or os.path.expanduser("~/")
    return os.path.join(home, ".triton", "cache")

def noexec(path):
    try:
        with open(SYSROOT.rstrip("/") + "/proc/self/mountinfo") as f:
            lines = f.read().splitlines()
    except OSError:
        return False
    best = ("", "")
    for line in lines:
        fields = line.split()
        point = fields[4]
        inside = path == point or path.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best[0]):
            best = (point, fields[5])
    return "noexec" in best[1].split(",")

def find_cc():
    cc = os.environ.get("CC")
    if cc is None:
        clang = shutil.which("clang")
        gcc = shutil.which("gcc")
        cc = gcc if gcc is not None else clang
        if cc is None:
            if tuple(_CONFIG["version"][:2]) <= (3, 3):
                raise RuntimeError("Failed to find C compiler. Please specify via CC "
                                   "environment variable.")
            raise RuntimeError("Failed to find C compiler. Please specify via CC environment "
                               "variable or set triton.knobs.build.impl.")
    return cc

def put(so_dir, name, built):
    """FileCacheManager.put of Triton 3.x: a tmp.pid_* dir in the key dir, write, replace."""
    import uuid
    os.makedirs(so_dir, exist_ok=True)
    temp_dir = os.path.join(so_dir, "tmp.pid_%d_%s" % (os.getpid(), uuid.uuid4()))
    os.makedirs(temp_dir, exist_ok=True)
    temp_path = os.path.join(temp_dir, name)
    with open(built, "rb") as f:
        data = f.read()
    with open(temp_path, "wb") as f:
        f.write(data)
    os.replace(temp_path, os.path.join(so_dir, name))
    os.removedirs(temp_dir)

def build_stub(so_dir):
    dirs = libcuda_dirs()
    so = os.path.join(so_dir, "cuda_utils.so")
    if os.path.exists(so):
        other = _CONFIG["concurrent_write"]
        if other and not os.path.exists(other):
            # Another job on the node fills the user's cache while this one loads from it.
            os.makedirs(os.path.dirname(other), exist_ok=True)
            with open(other, "w") as f:
                f.write("written by another job\n")
        if noexec(os.path.realpath(so)):  # dlopen maps the link's target
            raise ImportError(so + ": failed to map segment from shared object")
        return so
    cc = find_cc()
    scheme = sysconfig.get_default_scheme() if hasattr(sysconfig, "get_default_scheme") \
        else sysconfig._get_default_scheme()
    if scheme == "posix_local":
        scheme = "posix_prefix"
    include = sysconfig.get_paths(scheme=scheme)["include"]
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "cuda_utils.c")
        with open(src, "w") as f:
            f.write(SOURCE)
        out = os.path.join(tmp, "cuda_utils.so")
        lib = "-l:libcuda.so.1" if tuple(_CONFIG["version"][:2]) >= (3, 6) else "-lcuda"
        cmd = [cc, src, "-O3", "-shared", "-fPIC", "-Wno-psabi", "-o", out, lib]
        cmd += ["-L" + d for d in dirs] + ["-I" + tmp, "-I" + include]
        subprocess.check_call(cmd, stdout=subprocess.DEVNULL)
        put(so_dir, "cuda_utils.so", out)
    if noexec(os.path.realpath(so)):
        raise ImportError(so + ": failed to map segment from shared object")
    return so

class GPUTarget:
    def __init__(self, backend, arch, warp_size):
        self.backend, self.arch, self.warp_size = backend, arch, warp_size
    def __repr__(self):
        return "GPUTarget(backend=%r, arch=%r, warp_size=%r)" % (self.backend, self.arch,
                                                                 self.warp_size)

class CudaDriver:
    @staticmethod
    def is_active():
        try:
            import torch
            return torch.cuda.is_available() and (torch.version.hip is None)
        except ImportError:
            return False
    def __init__(self):
        if _CONFIG["error"]:
            raise RuntimeError(_CONFIG["error"])
        build_stub(os.path.join(cache_dir(), _CONFIG["stub_key"]))
        self.utils = self
    def build_launcher(self, so_dir):
        return build_stub(so_dir)
    def get_device_properties(self, index):
        # What the real cuda_utils answers on an H200 (FLA asks at import).
        return {"max_shared_mem": 232448, "max_num_regs": 65536, "multiprocessor_count": 132,
                "warpSize": 32, "sm_clock_rate": 1980000, "mem_clock_rate": 3201000,
                "mem_bus_width": 6144}
    def get_current_target(self):
        import torch
        major, minor = torch.cuda.get_device_capability()
        return GPUTarget("cuda", major * 10 + minor, 32)

class DriverConfig:
    def __init__(self):
        self._default = None
        self._active = None
    @property
    def default(self):
        if self._default is None:
            from .hip_driver import HIPDriver
            active = [d for d in (CudaDriver, HIPDriver) if d.is_active()]
            if len(active) != 1:
                raise RuntimeError("%d active drivers (%s). There should only be one."
                                   % (len(active), active))
            self._default = active[0]()
        return self._default
    @property
    def active(self):
        if self._active is None:
            self._active = self.default
        return self._active

class LazyProxy:
    """Triton 2.x's runtime/driver.py: the module's `driver` is a LazyProxy of the driver
    itself (no `.active`); 2.2-2.3's driver has get_current_target() (a tuple), 2.1's none."""
    def __init__(self, init_fn):
        self._init_fn = init_fn
        self._obj = None
    def _initialize_obj(self):
        if self._obj is None:
            self._obj = self._init_fn()
    def __getattr__(self, name):
        self._initialize_obj()
        return getattr(self._obj, name)

class CudaDriver2(CudaDriver):
    def get_current_target(self):
        import torch
        major, minor = torch.cuda.get_device_capability()
        return ("cuda", major * 10 + minor)

if _CONFIG["version"][:2] == [2, 1]:
    del CudaDriver2.get_current_target, CudaDriver.get_current_target

driver = DriverConfig() if _CONFIG["version"][0] >= 3 else LazyProxy(CudaDriver2)
'''

TRITON_HIP_DRIVER = r'''
"""Stub of Triton's AMD backend driver (third_party/amd/backend/driver.py, 3.6 and 3.9).

_get_path_to_hip_runtime_dylib() is Triton's, word for word but for /sbin/ldconfig (under
FLEETCHECK_SYSROOT) and the mapped-library lookup (amd.find_loaded_library in C++: read from
/proc/self/maps here); HIPUtils compiles its hip_utils stub with cc as Triton compiles driver.c,
dlopens the library and checks its version as driver.c's checkDriverVersion() does, and reports
hipGetDeviceCount's error as gpuAssert() does.
"""
import ctypes, functools, os, subprocess, tempfile, shutil
from pathlib import Path
from triton import _CONFIG
from .driver import LDCONFIG, SOURCE, GPUTarget, cache_dir, find_cc, noexec

def _find_already_mmapped_dylib_on_linux(lib_name):
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split()[-1]
                if os.path.basename(path).startswith(lib_name):
                    return path
    except OSError:
        pass
    return None

@functools.lru_cache()
def _get_path_to_hip_runtime_dylib():
    lib_name = "libamdhip64.so"
    env_libhip_path = os.environ.get("TRITON_LIBHIP_PATH")
    if env_libhip_path:
        if Path(env_libhip_path).name.startswith(lib_name) and os.path.isfile(env_libhip_path):
            return env_libhip_path
        raise RuntimeError(f"TRITON_LIBHIP_PATH '{env_libhip_path}' does not point to a "
                           f"valid {lib_name}")
    mmapped_path = _find_already_mmapped_dylib_on_linux(lib_name)
    if mmapped_path:
        if os.path.exists(mmapped_path):
            return mmapped_path
        raise RuntimeError(f"memory mapped '{mmapped_path}' in process does not point to a "
                           f"valid {lib_name}")
    paths = []
    local_lib = os.path.join(os.path.dirname(os.path.dirname(__file__)), "backends", "amd",
                             "lib", lib_name)
    if os.path.exists(local_lib):
        return local_lib
    paths.append(local_lib)
    import site
    site_packages = site.getsitepackages()
    user_site = site.getusersitepackages()
    if site.ENABLE_USER_SITE:
        site_packages = [user_site] + site_packages
    for path in site_packages:
        path = os.path.join(path, "torch", "lib", lib_name)
        if os.path.exists(path):
            return path
        paths.append(path)
    env_ld_library_path = os.getenv("LD_LIBRARY_PATH")
    if env_ld_library_path:
        for d in env_ld_library_path.split(":"):
            f = os.path.join(d, lib_name)
            if os.path.exists(f):
                return f
            paths.append(f)
    env_hip_path = os.getenv("HIP_PATH")
    if env_hip_path:
        hip_lib_path = os.path.join(env_hip_path, "lib", lib_name)
        if os.path.exists(hip_lib_path):
            return hip_lib_path
        paths.append(hip_lib_path)
    try:
        hip_root = subprocess.check_output(["hipconfig", "--path"]).decode().strip()
        if hip_root:
            hip_lib_path = os.path.join(hip_root, "lib", lib_name)
            if os.path.exists(hip_lib_path):
                return hip_lib_path
            paths.append(hip_lib_path)
    except (subprocess.CalledProcessError, FileNotFoundError):
        pass
    env_rocm_path = os.getenv("ROCM_PATH")
    if env_rocm_path:
        rocm_lib_path = os.path.join(env_rocm_path, "lib", lib_name)
        if os.path.exists(rocm_lib_path):
            return rocm_lib_path
        paths.append(rocm_lib_path)
    libs = subprocess.check_output([LDCONFIG, "-p"]).decode(errors="ignore")
    locs = [line.split()[-1] for line in libs.splitlines() if line.strip().endswith(lib_name)]
    for loc in locs:
        if os.path.exists(loc):
            return loc
        paths.append(loc)
    common_install_path = os.path.join('/opt/rocm/lib/', lib_name)
    if os.path.exists(common_install_path):
        return common_install_path
    paths.append(common_install_path)
    raise RuntimeError(f"cannot locate {lib_name} after attempted paths {paths}")

def build_hip_stub(so_dir):
    so = os.path.join(so_dir, "hip_utils.so")
    if os.path.exists(so):
        if noexec(os.path.realpath(so)):
            raise ImportError(so + ": failed to map segment from shared object")
        return so
    cc = find_cc()
    import sysconfig
    scheme = sysconfig.get_default_scheme() if hasattr(sysconfig, "get_default_scheme") \
        else sysconfig._get_default_scheme()
    if scheme == "posix_local":
        scheme = "posix_prefix"
    include = sysconfig.get_paths(scheme=scheme)["include"]
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "hip_utils.c")
        with open(src, "w") as f:
            f.write(SOURCE)
        out = os.path.join(tmp, "hip_utils.so")
        subprocess.check_call([cc, src, "-O3", "-shared", "-fPIC", "-Wno-psabi", "-o", out,
                               "-I" + tmp, "-I" + include], stdout=subprocess.DEVNULL)
        os.makedirs(so_dir, exist_ok=True)
        shutil.copy(out, so)
    if noexec(os.path.realpath(so)):
        raise ImportError(so + ": failed to map segment from shared object")
    return so

class HIPUtils:
    def __init__(self):
        libhip_path = _get_path_to_hip_runtime_dylib()
        build_hip_stub(os.path.join(cache_dir(), _CONFIG["stub_key"] + "-hip"))
        try:
            self.lib = ctypes.CDLL(libhip_path)
        except OSError:
            raise RuntimeError("cannot open libamdhip64.so")
        v = ctypes.c_int(-1)
        self.lib.hipDriverGetVersion(ctypes.byref(v))
        if v.value // 10000000 < 6:
            raise RuntimeError("libamdhip64 version %d.%d.%d is not supported! Required major "
                               "version is >=6." % (v.value // 10000000,
                                                    v.value % 10000000 // 100000,
                                                    v.value % 100000))
    def get_device_properties(self, device):
        n = ctypes.c_int(0)
        rc = self.lib.hipGetDeviceCount(ctypes.byref(n))
        if rc == 0 and device >= n.value:
            rc = 101
        if rc:
            self.lib.hipGetErrorString.restype = ctypes.c_char_p
            raise RuntimeError("Triton Error [HIP]:  Code: %d, Messsage: %s" % (
                rc, self.lib.hipGetErrorString(rc).decode()))
        import torch
        return {"arch": torch.cuda.get_device_properties(device).gcnArchName, "warpSize": 64,
                "max_shared_mem": 65536, "multiprocessor_count": 304}

class HIPDriver:
    @staticmethod
    def is_active():
        try:
            import torch
            return torch.cuda.is_available() and (torch.version.hip is not None)
        except ImportError:
            return False
    def __init__(self):
        if _CONFIG["error"]:
            raise RuntimeError(_CONFIG["error"])
        self.utils = HIPUtils()
    def build_launcher(self, so_dir):
        return build_hip_stub(so_dir)
    def get_current_target(self):
        import torch
        props = self.utils.get_device_properties(torch.cuda.current_device())
        return GPUTarget("hip", props["arch"].split(":")[0], props["warpSize"])
'''

STUB_API = r'''
"""The rest of a stub package's API, for libraries that only touch it at import (FLA).

Decorators (autotune, heuristics, compile...) return the function, base classes are `object`,
and any submodule the stub lacks imports as an empty module of the same kind. Only what the
probe and the suite look at behaves like the real library; this keeps the real FLA wheels
importable over the stub torch/triton.
"""
import importlib.abc, importlib.machinery, sys, types

class Anything:
    def __init__(self, name):
        self._name = name
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return Anything(self._name + "." + name)
    def __call__(self, *args, **kwargs):
        if len(args) == 1 and callable(args[0]) and not kwargs:
            return args[0]
        return Anything(self._name + "()")
    def __mro_entries__(self, bases):
        return (object,)
    def __getitem__(self, key):
        return self
    def __iter__(self):
        return iter(())
    def __or__(self, other):
        return self
    __ror__ = __or__
    def __repr__(self):
        return "<stub %s>" % self._name

def module_getattr(module_name):
    def __getattr__(name):
        if name.startswith("__"):
            raise AttributeError(name)
        return Anything(module_name + "." + name)
    return __getattr__

class Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, roots):
        self.roots = roots
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in self.roots and "." in name:
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None
    def create_module(self, spec):
        module = types.ModuleType(spec.name)
        module.__path__ = []
        module.__getattr__ = module_getattr(spec.name)
        return module
    def exec_module(self, module):
        pass

def install(root):
    for finder in sys.meta_path:
        if isinstance(finder, Finder):
            finder.roots.add(root)
            return
    sys.meta_path.append(Finder({root}))
'''

TRITON_INIT = r'''
"""Stub triton: the version, the driver, and a jit whose launch plays the GPU."""
_CONFIG = CONFIG_JSON
__version__ = _CONFIG["version_text"]
import _fleetcheck_stub_api
_fleetcheck_stub_api.install(__name__)
from . import runtime, language

class _Kernel:
    def __init__(self, fn):
        self.fn = fn
    def __getitem__(self, grid):
        def launch(x, y, n, **meta):
            # Triton <= 3.6 compiles a launcher per new signature: it needs the compiler too.
            from .runtime.driver import cache_dir, driver
            import os
            so = driver.active.build_launcher(os.path.join(
                cache_dir(), "launcher-" + self.fn.__name__))
            if _CONFIG["kernel_sleep"]:
                # A kernel that takes its time: its launcher must still be where it was built
                # when it is loaded (dlopen's words where it is gone).
                __import__("time").sleep(_CONFIG["kernel_sleep"])
                if not os.path.exists(so):
                    raise ImportError(so + ": cannot open shared object file: "
                                      "No such file or directory")
            y.data = [v + 1 for v in x.data[:n]]
        return launch

def jit(fn=None, **options):
    # @triton.jit and @triton.jit(do_not_specialize=..., ...), as libraries write them.
    return _Kernel(fn) if fn is not None else _Kernel

class Config:
    """triton.Config: libraries read its fields at import (mamba-ssm prunes on num_warps)."""
    def __init__(self, kwargs=None, num_warps=4, num_stages=3, num_ctas=1, **rest):
        self.kwargs, self.num_warps, self.num_stages = dict(kwargs or {}), num_warps, num_stages
        self.num_ctas = num_ctas

__getattr__ = _fleetcheck_stub_api.module_getattr(__name__)
'''

PTXAS = """#!/bin/sh
echo "ptxas: NVIDIA (R) Ptx optimizing assembler"
echo "Copyright (c) 2005-2025 NVIDIA Corporation"
echo "Built on Fri_Feb_21_20:22:20_PST_2025"
echo "Cuda compilation tools, release {v}, V{v}.93"
echo "Build cuda_{v}.r{v}/compiler.35583870_0"
"""

FLA_UTILS = r'''
"""Stub fla.utils: the device detection of flash-linear-attention, as in fla/utils/_device.py."""
import warnings
import triton

def _cpu_device_warning():
    warnings.warn("Triton is not supported on current platform, roll back to CPU.", stacklevel=1)

def get_available_device():
    try:
        return triton.runtime.driver.active.get_current_target().backend
    except Exception:
        _cpu_device_warning()
        return "cpu"

device = get_available_device()
device_platform = "cuda" if device == "cuda" else device
IS_NVIDIA_BLACKWELL = False
'''


def top_level_function(source: str, name: str) -> str | None:
    """The text of the module-level `def NAME` of `source`, from `def` to the end of its last
    statement: what `ast.get_source_segment` gives for its FunctionDef; None if it has none.

    Read with `tokenize`, not `ast.parse`: CPython 3.11 before 3.11.8 (Debian 12 has 3.11.2)
    keeps the AST constructor's recursion count in one variable of the interpreter, so an
    `ast.parse` whose construction runs another one (a finalizer that the garbage collector
    runs meanwhile formats a traceback, which 3.11 does with ast.parse; or another thread's,
    the GIL passing during that collection) fails with "SystemError: AST constructor recursion
    depth mismatch" (CPython gh-106905). Whether it does depends on what earlier tests left for
    the collector; this does not."""
    import io
    import tokenize
    skipped = {tokenize.NEWLINE, tokenize.NL, tokenize.COMMENT, tokenize.INDENT,
               tokenize.DEDENT, tokenize.ENDMARKER}
    start: tuple[int, int] | None = None
    end = (0, 0)
    level = 0   # the INDENTs open inside the function
    header_ended = False   # its `def` line(s) read: a body on lines of its own or none follows
    previous: tokenize.TokenInfo | None = None
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if start is None:
            if (token.type == tokenize.NAME and token.string == name and previous is not None
                    and previous.type == tokenize.NAME and previous.string == "def"
                    and previous.start[1] == 0):
                start = previous.start
            if token.type not in (tokenize.NL, tokenize.COMMENT):
                previous = token
            continue
        if token.type in (tokenize.NL, tokenize.COMMENT):
            continue
        if header_ended and level == 0 and token.type != tokenize.INDENT:
            break  # `def f(): statement`, all on its def line
        if token.type == tokenize.INDENT:
            level += 1
        elif token.type == tokenize.DEDENT:
            level -= 1
            if level == 0:
                break
        elif token.type == tokenize.NEWLINE and level == 0:
            header_ended = True
        if token.type not in skipped:
            end = token.end
    if start is None:
        return None
    lines = io.StringIO(source).readlines()[start[0] - 1:end[0]]  # tokenize's lines
    lines[-1] = lines[-1][:end[1]]
    lines[0] = lines[0][start[1]:]
    return "".join(lines)


#: `_real_create_driver`'s texts by version: a worker reads each release's file once.
_CREATE_DRIVERS: dict[str, str] = {}


def _real_create_driver(version: str) -> str:
    """The text of `_create_driver()` in that Triton's runtime/driver.py, as released."""
    if version not in _CREATE_DRIVERS:
        path = TEST_WHEELS / f"triton-{version}" / "triton" / "runtime" / "driver.py"
        if not path.is_file():
            raise ValueError(f"triton_driver={version!r}: its runtime/driver.py is not fetched "
                             "(scripts/fetch_test_wheels.py)")
        found = top_level_function(path.read_text(), "_create_driver")
        if found is None:
            raise ValueError(f"{path}: no module-level def _create_driver")
        _CREATE_DRIVERS[version] = found + "\n"
    return _CREATE_DRIVERS[version]


def _install_backends(target: Path) -> None:
    """Triton 3.9's real backends/ into a node: its Python and C files copied (tests edit them
    in their node), its two include/ folders of CUDA and HIP headers (7.9 MB, 201 files that
    nothing in a node reads or writes) hard-linked from one copy per process, so each node
    does not write them again; a copy where a link cannot be made (another file system).

    The Python files come with their __pycache__, as pip installs them: the probe's own run of
    Triton's discovery reads the bytecode instead of compiling 100 KB of source each time. The
    .pyc files name the source's mtime and size, which the copies keep: a test that edits a
    file in its node gets that file compiled from its new source."""
    shared = _cache_folder() / "triton-backends"
    if not shared.is_dir():
        making = shared.with_name(f"{shared.name}.{os.getpid()}.tmp")
        shutil.rmtree(making, ignore_errors=True)
        shutil.copytree(TRITON_BACKENDS, making)
        compileall.compile_dir(making, quiet=1)
        _publish(making, shared)

    def link(source: str, destination: str) -> None:
        if "include" in Path(source).relative_to(shared).parts:
            try:
                os.link(source, destination)
                return
            except OSError:
                pass
        shutil.copy2(source, destination)

    shutil.copytree(shared, target, dirs_exist_ok=True, copy_function=link)


#: The bytecode of each stub module's source text, compiled once per process (`_precompiled`).
_STUB_BYTECODE: dict[bytes, bytes] = {}
#: The mtime a node's stub modules are written with, which their .pyc files name (a fixed one in
#: the past: a test that edits a stub in its node gives it a new mtime, and Python compiles the
#: new source instead of the stale .pyc, even within the same second and at the same size).
STUB_MTIME = 1_600_000_000


def _precompiled(paths: list[Path]) -> None:
    """The stub modules `paths` with their __pycache__ .pyc, as pip installs a package: each
    source compiled once per process, not by the first interpreter that imports it on each
    node (10 ms of every healthy node's first probe). The same .pyc Python would write: the
    timestamp form, naming STUB_MTIME and the source's size."""
    for path in paths:
        data = path.read_bytes()
        key = hashlib.sha256(data).digest()
        code = _STUB_BYTECODE.get(key)
        if code is None:
            code = marshal.dumps(compile(data, str(path), "exec", dont_inherit=True))
            _STUB_BYTECODE[key] = code
        os.utime(path, (STUB_MTIME, STUB_MTIME))
        pyc = Path(importlib.util.cache_from_source(str(path)))
        pyc.parent.mkdir(exist_ok=True)
        pyc.write_bytes(importlib.util.MAGIC_NUMBER + b"\0\0\0\0"
                        + STUB_MTIME.to_bytes(4, "little")
                        + (len(data) & 0xFFFFFFFF).to_bytes(4, "little") + code)


def _dist(site: Path, name: str, version: str, package: str) -> None:
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    _write(info / "METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\n")
    _write(info / "RECORD", f"{package}/__init__.py,,\n")


def _packages(site: Path, *, torch: str | None, torch_cuda: str | None, torch_arch: tuple[str, ...],
              torch_config: dict[str, object], triton: str | None, triton_error: str | None,
              ptxas: str | None, ptxas_blackwell: str | None, extra_triton_dist: str | None,
              fla: str | None, concurrent_write: Path | None, vllm: str | None = None,
              kernel_sleep: float = 0.0,
              extra_backend: str | None = None, triton_backends: bool = True,
              triton_driver: str = "3.9.0") -> None:
    _write(site / "_fleetcheck_stub_api.py", STUB_API)
    if torch:
        cuda_line = f"cuda: Optional[str] = {torch_cuda!r}" if torch_cuda else \
            "cuda: Optional[str] = None"
        _write(site / "torch/version.py", "from typing import Optional\n"
               f"__version__ = {torch!r}\n{cuda_line}\nhip = None\n")
        _write(site / "torch/__init__.py", TORCH_INIT.replace(
            "CONFIG_JSON", repr({"import_sleep": torch_config["import_sleep"],
                                 "broken_gpu": torch_config["broken_gpu"],
                                 "pool_threads": torch_config["pool_threads"]})))
        config = dict(torch_config, arch=list(torch_arch))
        _write(site / "torch/cuda.py", TORCH_CUDA.replace("CONFIG_JSON", repr(config)))
        _dist(site, "torch", torch.split("+")[0], "torch")
        # torch >= 2.0 ships inductor (torch.compile's backend) as torch/_inductor.
        _write(site / "torch/_inductor/__init__.py", "from . import config\n")
        # Its config module holds a `_config` dict (vLLM's env_override adds entries to it).
        _write(site / "torch/_inductor/config.py", "import _fleetcheck_stub_api\n_config = {}\n"
               "__getattr__ = _fleetcheck_stub_api.module_getattr(__name__)\n")
    if triton:
        parts = [int(p) for p in triton.split(".")[:3]]
        config = {"version": parts, "version_text": triton, "error": triton_error,
                  "stub_key": STUB_KEY, "kernel_sleep": kernel_sleep,
                  "concurrent_write": str(concurrent_write) if concurrent_write else None}
        _write(site / "triton/__init__.py", TRITON_INIT.replace("CONFIG_JSON", repr(config)))
        _write(site / "triton/runtime/__init__.py", "from .driver import driver\n")
        _write(site / "triton/runtime/driver.py", TRITON_DRIVER)
        _write(site / "triton/runtime/hip_driver.py", TRITON_HIP_DRIVER)
        _write(site / "triton/language/__init__.py",
               "class constexpr:\n    pass\n\ndef arange(a, b):\n    return range(a, b)\n")
        bindir = site / ("triton/backends/nvidia/bin" if parts[0] >= 3 else
                         "triton/third_party/cuda/bin")
        bindir.mkdir(parents=True, exist_ok=True)
        if ptxas:
            _write(bindir / "ptxas", PTXAS.format(v=ptxas), 0o755)
        if ptxas_blackwell:
            _write(bindir / "ptxas-blackwell", PTXAS.format(v=ptxas_blackwell), 0o755)
        _dist(site, "triton", triton, "triton")
        if triton_backends and TRITON_BACKENDS.is_dir() and parts[0] >= 3:
            # Triton 3.4+ finds its backends through the entry points (3.0-3.3: its folders).
            _install_backends(site / "triton/backends")
            # The stub's driver stays its own; the _create_driver() of Triton `triton_driver`
            # (the selection the probe runs from the installed runtime/driver.py) is appended
            # as released.
            stub = site / "triton/runtime/driver.py"
            head, _, rest = stub.read_text().partition("\n")  # the docstring's line first
            stub.write_text(head + "\nfrom __future__ import annotations\n" + rest + "\n\n"
                            + _real_create_driver(triton_driver))
            _write(site / f"triton-{triton}.dist-info/entry_points.txt",
                   "[triton.backends]\namd = triton.backends.amd\n"
                   "nvidia = triton.backends.nvidia\n")
        if extra_backend:
            for name, text in EXTRA_BACKEND.items():
                _write(site / f"triton/backends/{extra_backend}/{name}", text)
            _write(site / f"triton/backends/{extra_backend}/__init__.py", "")
            info = site / f"triton_{extra_backend}_backend-1.0.dist-info"
            _write(info / "METADATA", "Metadata-Version: 2.1\nName: "
                   f"triton-{extra_backend}-backend\nVersion: 1.0\n\n")
            _write(info / "RECORD", f"triton/backends/{extra_backend}/__init__.py,,\n")
            _write(info / "entry_points.txt",
                   f"[triton.backends]\n{extra_backend} = triton.backends.{extra_backend}\n")
        if extra_triton_dist:
            name, version = extra_triton_dist.split()
            _dist(site, name, version, "triton")
    if vllm:
        # vLLM 0.33.0's real files; the compiled extension its CUDA platform imports is the one
        # stand-in (an empty module, as the loaded .so is to Python).
        if vllm != "0.33.0" or not VLLM_FILES.is_dir():
            raise ValueError(f"vllm={vllm!r}: only 0.33.0's files are fetched "
                             "(scripts/fetch_test_wheels.py)")
        shutil.copytree(VLLM_FILES, site, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns(".complete"))
        _write(site / "vllm/_C_stable_libtorch.py", "")
    if fla:
        _write(site / "fla/__init__.py", f"__version__ = {fla!r}\nimport fla.utils\n")
        _write(site / "fla/utils.py", FLA_UTILS)
        _dist(site, "flash-linear-attention", fla, "fla")
    # The stubs written above (Triton's real backends come with their own bytecode, vLLM's
    # real files as fetched).
    stubs = [site / "_fleetcheck_stub_api.py"]
    for package in ("torch", "triton", "fla"):
        stubs += [path for path in sorted((site / package).rglob("*.py"))
                  if "backends" not in path.relative_to(site).parts]
    _precompiled(stubs)


def make_node(
    root: Path | str,
    *,
    gpu: object = True,
    gpus: int = 1,
    gpu_name: str = "NVIDIA H200",
    compute_capability: str = "9.0",
    memory_mib: int = 143771,
    driver: str = "580.95.05",
    libcuda_version: str | None = None,
    cuda_driver_version: int = 13000,
    container: str | None = None,
    dev_modes: dict[str, int] | None = None,
    compiler: bool = True,
    cc_env: str | None = None,
    linker: bool = True,
    libc_headers: bool = True,
    python_headers: bool = True,
    ldconfig: bool = True,
    ldcache_has_libcuda: bool = True,
    os_release: str | None = None,
    libcuda_unversioned: bool = True,
    torch: str | None = "2.11.0+cu130",
    torch_cuda: str | None = "13.0",
    torch_arch: tuple[str, ...] = DEFAULT_ARCH,
    torch_import_sleep: float = 0.0,
    broken_gpu: int | None = None,
    triton: str | None = "3.6.0",
    triton_error: str | None = None,
    ptxas: str | None = "12.8",
    ptxas_blackwell: str | None = "12.9",
    extra_triton_dist: str | None = None,
    fla: str | None = None,
    warm_cache: bool = False,
    cache: str = "ok",
    concurrent_write: Path | None = None,
    kernel_sleep: float = 0.0,
    torch_threads: int = 0,
    driver_threads: int = 0,
    env: dict[str, str] | None = None,
    init_rc: int | None = None,
    libcuda_subdir: str = "",
    ldcache_libcuda: str | None = None,
    nvswitches: int = 0,
    cache_fstype: str | None = None,
    vllm: str | None = None,
    cxx: bool = False,
    nvml: bool = True,
    nvml_rc: int = 0,
    compute_mode: int = 0,
    ctx_rc: int = 0,
    smi_error: str | None = None,
    extra_backend: str | None = None,
    triton_backends: bool = True,
    triton_driver: str = "3.9.0",
    cuda_missing: int = 0,
    libcuda_extra: str = "",
) -> NodeEnv:
    """Build a fake node under `root`.

    gpu: True (healthy), False (no NVIDIA GPU at all), "no-dev-nodes" (GPU in
    /proc/driver/nvidia/gpus, no /dev/nvidia* - the LXC case), "no-uvm" (/dev/nvidia-uvm not
    passed through), "mismatch" (libcuda of another version than the kernel module),
    "no-libcuda" (driver userspace absent), "proc-only" (nothing but /proc/driver/nvidia).
    cache: "ok", "unwritable" (TRITON_CACHE_DIR below a regular file) or "noexec".
    init_rc: what the stub libcuda's cuInit returns (802 fabric not ready, 804 compat, 34 stub).
    libcuda_subdir: where under lib/ the driver library lives (e.g. "cuda/compat/lib").
    ldcache_libcuda: the only libcuda.so.1 path `ldconfig -p` lists (a stale one).
    nvswitches: NVSwitch devices under /proc/driver/nvidia-nvswitch/devices (HGX boards).
    cache_fstype: the file-system type of the Triton cache's mount (e.g. "nfs4").
    vllm: "0.33.0" installs vLLM 0.33.0's real detection files (the probe imports them).
    extra_backend: a backend package of another distribution whose driver is always active.
    triton_backends: Triton 3.9's real backends/ (discovery, drivers) in the stub Triton (they
    need Python >= 3.10).
    triton_driver: whose released `_create_driver()` the stub's runtime/driver.py carries:
    "3.9.0" (reads TRITON_DEFAULT_BACKEND) or "3.6.0" (does not).
    cxx: put g++ on PATH (inductor's C++ compiler for its CPU/cpp-wrapper path).
    nvml: a stub libnvidia-ml.so.1 beside libcuda (nvml_rc: what nvmlInit_v2 returns, 999 for
    'Unknown Error'; compute_mode: each GPU's, 3 Exclusive_Process; ctx_rc: what
    cuDevicePrimaryCtxRetain returns, 46 when another process holds the GPU).
    smi_error: the one line nvidia-smi prints instead of the GPUs (exit 255).
    os_release: the text of /etc/os-release (default: Debian 12).
    broken_gpu: the index of a GPU on which every tensor operation fails (an ECC error).
    concurrent_write: a file "another job" writes (once) whenever the stub Triton loads its stub
    from a cache - a job filling the user's cache while the probe reads it.
    kernel_sleep: seconds a kernel launch (the --deep kernel's) takes after its launcher is
    built; then it fails as dlopen would where the launcher was removed meanwhile.
    torch_threads: the threads the stub torch's import starts (its pools: as many as it can).
    driver_threads: the threads the stub libcuda's cuInit starts (304 where one is refused);
    the stub torch's is_available() then initialises the node's libcuda, as torch does.
    cuda_missing: GPUs the driver (NVML, nvidia-smi, /proc/driver/nvidia) lists that CUDA
    cannot open (libcuda counts that many fewer). Each GPU's NVML state: `gpu_state_env`.
    libcuda_extra: more C in the stub libcuda (build_libcuda's extra).
    """
    if gpu not in GPU_MODES:
        raise ValueError(f"gpu must be one of {GPU_MODES}")
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    sysroot, bindir, site = root / "sysroot", root / "bin", root / "site"
    home, libdir, empty = root / "home", root / "lib" / libcuda_subdir, root / "empty"
    for path in (sysroot, bindir, site, home, libdir, empty):
        path.mkdir(parents=True, exist_ok=True)

    major, minor = (int(p) for p in compute_capability.split("."))
    libcuda_version = libcuda_version or ("575.57.08" if gpu == "mismatch" else driver)
    if init_rc is None:
        init_rc = {"no-dev-nodes": 100, "no-uvm": 999, "mismatch": 803}.get(str(gpu), 0)
    has_libcuda = gpu not in (False, "no-libcuda", "proc-only")
    too_old = cuda_driver_version // 1000 < int((torch_cuda or "0").split(".")[0])
    available = gpu is True and bool(torch_cuda) and not too_old and init_rc == 0
    warning = ""
    if torch_cuda and gpu is not False and not available:
        if too_old:
            warning = ("CUDA initialization: The NVIDIA driver on your system is too old "
                       f"(found version {cuda_driver_version}). Please update your GPU driver.")
        else:
            code = {100: "100: no CUDA-capable device is detected", 803: "803: system has "
                    "unsupported display driver / cuda driver combination",
                    802: "802: system not yet initialized",
                    804: "804: forward compatibility was attempted on non supported HW",
                    34: "34: CUDA driver is a stub library"}.get(
                        init_rc, "30: unknown error")
            warning = ("CUDA initialization: Unexpected error from cudaGetDeviceCount(). Did you "
                       "run some cuda functions before calling NumCudaDevices() that might have "
                       f"already set an error? Error {code}")

    if dev_modes is None:
        dev_modes = {}
        if gpu in (True, "no-uvm", "mismatch", "no-libcuda"):
            dev_modes = {"nvidiactl": 0o666, "nvidia-uvm": 0o666, "nvidia-uvm-tools": 0o666}
            dev_modes.update({f"nvidia{i}": 0o666 for i in range(gpus)})
            if gpu == "no-uvm":
                dev_modes.pop("nvidia-uvm")
                dev_modes.pop("nvidia-uvm-tools")

    node_env = {"PATH": str(bindir), "HOME": str(home), "FLEETCHECK_SYSROOT": str(sysroot),
                "PYTHONPATH": str(site), "LANG": "C.UTF-8"}
    ld_entries: list[tuple[str, str]] = [("libc.so.6", "/lib/x86_64-linux-gnu/libc.so.6")]
    if has_libcuda:
        lib = build_libcuda(libdir, version=libcuda_version, init_rc=init_rc,
                            driver_version=cuda_driver_version, count=gpus - cuda_missing,
                            name=gpu_name,
                            cc=compute_capability, memory_mib=memory_mib, ctx_rc=ctx_rc,
                            extra=libcuda_extra, init_threads=driver_threads)
        if nvml:
            build_nvml(libdir, version=libcuda_version, nvml_rc=nvml_rc,
                       compute_mode=compute_mode, count=gpus, memory_mib=memory_mib)
        (libdir / "libcuda.so.1").symlink_to(lib.name)
        if libcuda_unversioned:
            (libdir / "libcuda.so").symlink_to("libcuda.so.1")
        if ldcache_libcuda:
            ld_entries.append(("libcuda.so.1", ldcache_libcuda))
            node_env["LD_LIBRARY_PATH"] = str(libdir)
        elif ldcache_has_libcuda:
            ld_entries.append(("libcuda.so.1", str(libdir / "libcuda.so.1")))
            if libcuda_unversioned:
                ld_entries.append(("libcuda.so", str(libdir / "libcuda.so")))
            node_env["LD_LIBRARY_PATH"] = str(libdir)
        else:
            # The loader still finds libcuda (as from a default dir on a real node), but
            # neither ldconfig -p nor LD_LIBRARY_PATH shows it to Triton.
            node_env["LD_PRELOAD"] = str(libdir / "libcuda.so.1")

    mounts: list[tuple[str, str, str]] = []
    if cache == "noexec":
        (home / ".triton").mkdir()
        mounts.append((str(home / ".triton"), "rw,nosuid,nodev,noexec,relatime", "ext4"))
    if cache_fstype:
        (home / ".triton").mkdir(exist_ok=True)
        mounts.append((str(home / ".triton"), "rw,relatime", cache_fstype))
    elif cache == "unwritable":
        _write(root / "not-a-dir", "")
        node_env["TRITON_CACHE_DIR"] = str(root / "not-a-dir" / "cache")
    _sysroot(sysroot, gpu=gpu, gpus=gpus, name=gpu_name, driver=driver, container=container,
             dev_modes=dev_modes, ldconfig=ldconfig, ld_entries=ld_entries, mounts=mounts,
             nvswitches=nvswitches, os_release=os_release)
    if gpu is not False:
        _nvidia_smi(bindir, gpu=gpu, gpus=gpus, name=gpu_name, cc=compute_capability,
                    memory_mib=memory_mib, driver=libcuda_version)
    if smi_error:
        _write(bindir / "nvidia-smi", f"#!/bin/sh\necho {shlex.quote(smi_error)}\nexit 255\n",
               0o755)
    _compiler(bindir, compiler=compiler, linker=linker, python_headers=python_headers,
              libc_headers=libc_headers, empty=empty)
    if cc_env is not None:
        node_env["CC"] = cc_env
    if cxx:
        (bindir / "g++").symlink_to(shutil.which("g++") or GCC)
    torch_config = {"import_sleep": torch_import_sleep, "broken_gpu": broken_gpu,
                    "pool_threads": torch_threads,
                    "cuinit": str(libdir / "libcuda.so.1") if driver_threads and has_libcuda
                    else None,
                    "available": available, "count": gpus,
                    "cc": [major, minor], "name": gpu_name, "warning": warning}
    _packages(site, torch=torch, torch_cuda=torch_cuda, torch_arch=torch_arch,
              torch_config=torch_config, triton=triton, triton_error=triton_error, ptxas=ptxas,
              ptxas_blackwell=ptxas_blackwell, extra_triton_dist=extra_triton_dist, fla=fla,
              concurrent_write=concurrent_write, kernel_sleep=kernel_sleep, vllm=vllm,
              extra_backend=extra_backend,
              triton_backends=triton_backends, triton_driver=triton_driver)
    if warm_cache:
        _write(home / ".triton/cache" / STUB_KEY / "cuda_utils.so", "stub from an earlier run\n")
        _write(home / ".triton/cache" / "launcher-fleetcheck_add_one" / "cuda_utils.so", "stub\n")
    node_env.update(env or {})
    return NodeEnv(env=node_env, sysroot=sysroot, python=sys.executable, root=root, home=home,
                   bindir=bindir, site=site)


#: Runs probe.py as `python - < probe.py` runs it (in __main__, its code named "<stdin>", argv
#: ["-", ARGS...], the source on stdin), from its code object compiled once per interpreter
#: and source: compiling the 330 KB probe is 0.1 s of CPU a run, and the suite runs it
#: hundreds of times. argv: the code cache's path (the source's sha256 in its name), then the
#: probe's args; where the cache cannot be read, the source on stdin is compiled.
PROBE_LOADER = """
import marshal, os, sys, __main__
_cache = sys.argv[1] + "." + sys.implementation.cache_tag
try:
    with open(_cache, "rb") as _f:
        _code = marshal.load(_f)
except (OSError, EOFError, ValueError, TypeError):
    _code = compile(sys.stdin.buffer.read(), "<stdin>", "exec")
    try:  # another user (a workload user's run) cannot write this process's folder
        with open("%s.%d" % (_cache, os.getpid()), "wb") as _f:
            marshal.dump(_code, _f)
        os.replace("%s.%d" % (_cache, os.getpid()), _cache)
    except OSError:
        pass
sys.argv = ["-", *sys.argv[2:]]
for _name in ("marshal", "os", "sys", "_cache", "_f", "_name"):
    __main__.__dict__.pop(_name, None)
exec(_code, __main__.__dict__)
"""


def probe_code() -> tuple[Path, Path]:
    """(probe.py, the path its code objects are cached under in this process's folder)."""
    source = Path(__file__).resolve().parent.parent / "fleetcheck/probe/probe.py"
    digest = hashlib.sha256(source.read_bytes()).hexdigest()[:20]
    return source, _cache_folder() / f"probe-{digest}"


def logging_gcc(node: NodeEnv) -> Path:
    """The node's gcc replaced by one that appends each run's argv to a log (one line a run),
    then runs the real gcc; the log's path."""
    log = node.root / "gcc.log"
    gcc = node.bindir / "gcc"
    gcc.unlink()
    gcc.write_text(f'#!/bin/sh\necho "$*" >> {log}\nexec {GCC} "$@"\n')
    gcc.chmod(0o755)
    return log


def gcc_runs(log: Path) -> list[str]:
    """The runs a logging_gcc logged, one argv line each."""
    return log.read_text().splitlines() if log.exists() else []


def run_probe(node: NodeEnv, *args: str, isolated: bool = False, python: str | None = None,
              timeout: float = 120, prefix: list[str] | None = None,
              ) -> tuple[int, dict[str, object], str]:
    """Run probe.py on the node (source on stdin); (exit code, JSON document, stderr).

    prefix: a command the probe runs under (a private mount namespace, another user...).
    """
    source, code = probe_code()
    argv = list(prefix or []) + [python or node.python] + (["-I"] if isolated else []) + [
        "-c", PROBE_LOADER, str(code), *args]
    done = subprocess.run(argv, input=source.read_bytes(), env=node.env, capture_output=True,
                          timeout=timeout, cwd=node.root)
    lines = done.stdout.decode().splitlines()
    assert len(lines) == 1, done.stdout.decode()[:2000] + done.stderr.decode()[:2000]
    from tests.contracts import validated_json

    return done.returncode, validated_json(lines[0], "probe"), done.stderr.decode()


#: Mounts a small tmpfs at $0 inside a private mount namespace, fills it to the last block
#: (or leaves $1 KiB free), then runs the command after them: `unshare -m sh -c MOUNT DIR KB`.
MOUNT_FULL = ('keep=$PATH; PATH=/usr/sbin:/usr/bin:/sbin:/bin; '
              'mount -t tmpfs -o size=256k tmpfs "$0" && mkdir -p "$0/cache" && '
              'dd if=/dev/zero of="$0/fill" bs=1k 2>/dev/null; '
              'if [ "$1" != 0 ]; then rm -f "$0/fill"; avail=$(df -k --output=avail "$0" | '
              'tail -1); dd if=/dev/zero of="$0/fill" bs=1k count=$((avail - $1)) 2>/dev/null; '
              'fi; shift; PATH=$keep; export PATH; exec "$@"')


def private_tmpfs_prefix(where: Path, free_kib: int = 0) -> list[str] | None:
    """The prefix that runs a command with a full tmpfs at `where` (None: not possible here)."""
    return private_mount_prefix(where, MOUNT_FULL, str(free_kib))


def private_mount_prefix(where: Path, script: str, *args: str) -> list[str] | None:
    """The prefix that runs a command after `sh -c SCRIPT WHERE ARGS...` (which mounts at
    `where`, then execs the command after its arguments) in a private mount namespace; None
    when that is not possible here (tried once with `true`).

    Root uses `unshare -m`; another user a user namespace (`unshare -rm`). Nothing is mounted
    outside the command's own namespace.
    """
    unshare = shutil.which("unshare")
    if not unshare:
        return None
    base = [unshare, "-m", "--propagation", "private"] if os.geteuid() == 0 else [
        unshare, "-rm", "--propagation", "private"]
    prefix = [*base, "/bin/sh", "-c", script, str(where), *args]
    where.mkdir(parents=True, exist_ok=True)
    try:
        tried = subprocess.run([*prefix, "true"], capture_output=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return prefix if tried.returncode == 0 else None


LIBAMDHIP64_C = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>
/* The entry points Triton's driver.c (checkDriverVersion, initSymbolTable) and torch ask
   first, answering as ROCm's libamdhip64 does on the configured node. hipError_t values and
   names are those of hip/hip_runtime_api.h. */
static const char *err_name(int rc) {
    switch (rc) {
    case 0: return "hipSuccess";
    case 3: return "hipErrorNotInitialized";
    case 35: return "hipErrorInsufficientDriver";
    case 100: return "hipErrorNoDevice";
    case 101: return "hipErrorInvalidDevice";
    case 209: return "hipErrorNoBinaryForGpu";
    default: return "hipErrorUnknown"; } }
static const char *err_string(int rc) {
    switch (rc) {
    case 0: return "no error";
    case 3: return "initialization error";
    case 35: return "driver version is insufficient for runtime version";
    case 100: return "no ROCm-capable device is detected";
    case 101: return "invalid device ordinal";
    case 209: return "no kernel image is available for execution on the device";
    default: return "unknown error"; } }
const char *hipGetErrorName(int rc) { return err_name(rc); }
const char *hipGetErrorString(int rc) { return err_string(rc); }
int hipGetLastError(void) { return 0; }
int hipDriverGetVersion(int *v) { *v = HIP_VERSION; return 0; }
int hipRuntimeGetVersion(int *v) { *v = HIP_VERSION; return 0; }
int hipGetDeviceCount(int *n) { if (COUNT_RC) { *n = 0; return COUNT_RC; } *n = COUNT; return 0; }
int hipDeviceGetName(char *buf, int len, int d) {
    if (COUNT_RC) return COUNT_RC; if (d >= COUNT) return 101;
    strncpy(buf, NAME, (size_t)len - 1); buf[len - 1] = 0; return 0; }
int hipDeviceTotalMem(size_t *bytes, int d) {
    if (COUNT_RC) return COUNT_RC; if (d >= COUNT) return 101;
    *bytes = (size_t)MEM_MIB << 20; return 0; }
/* The module and launch entry points driver.c resolves at start (never called by a test):
   hipErrorNotSupported. */
int hipModuleLoadDataEx(void) { return 801; }
int hipModuleUnload(void) { return 801; }
int hipModuleGetFunction(void) { return 801; }
int hipFuncGetAttribute(void) { return 801; }
int hipModuleLaunchKernel(void) { return 801; }
int hipModuleLaunchCooperativeKernel(void) { return 801; }
int hipPointerGetAttribute(void) { return 801; }
/* hipGetProcAddress as ROCm answers it: the symbol of this library, by its versioned name
   where the headers rename it (hipGetDeviceProperties is hipGetDevicePropertiesR0600). */
int hipGetProcAddress(const char *symbol, void **pfn, int version, uint64_t flags, void *status) {
    (void)version; (void)flags; (void)status;
    Dl_info info; void *self; char versioned[256];
    if (!dladdr((void *)hipGetProcAddress, &info)) return 1;
    self = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
    if (!self) return 1;
    *pfn = dlsym(self, symbol);
    if (!*pfn) {
        snprintf(versioned, sizeof versioned, "%sR0600", symbol);
        *pfn = dlsym(self, versioned);
    }
    dlclose(self);
    return *pfn ? 0 : 1; }
"""

#: hipGetDeviceProperties, in a unit of its own compiled with the hip headers Triton's AMD
#: backend bundles (the real hipDeviceProp_t layout), when they are at hand.
LIBAMDHIP64_PROPS_C = r"""
#define __HIP_PLATFORM_AMD__
#include <string.h>
#include <hip/hip_runtime_api.h>
hipError_t hipGetDeviceProperties(hipDeviceProp_t *p, int d) {
    if (COUNT_RC) return (hipError_t)COUNT_RC;
    if (d >= COUNT) return hipErrorInvalidDevice;
    memset(p, 0, sizeof *p);
    strncpy(p->name, NAME, sizeof p->name - 1);
    strncpy(p->gcnArchName, GCN_ARCH, sizeof p->gcnArchName - 1);
    p->warpSize = 64; p->sharedMemPerBlock = 65536; p->regsPerBlock = 512;
    p->multiProcessorCount = 304; p->clockRate = 2100000; p->memoryClockRate = 1300000;
    p->memoryBusWidth = 8192; p->maxThreadsPerMultiProcessor = 2048; p->cooperativeLaunch = 1;
    return hipSuccess; }
"""

#: torch's ROCm 6.4 wheels: PYTORCH_ROCM_ARCH of the download.pytorch.org/whl/rocm6.4 builds.
ROCM_TORCH_ARCH = ("gfx900", "gfx906", "gfx908", "gfx90a", "gfx942", "gfx1030", "gfx1100",
                   "gfx1101", "gfx1102", "gfx1200", "gfx1201")


def build_libamdhip64(where: Path, *, hip_version: str, count_rc: int, count: int, name: str,
                      memory_mib: int, gcn_arch: str = "gfx942:sramecc+:xnack-",
                      hip_include: Path | None = None, extra: str = "") -> Path:
    """A stub libamdhip64.so.<major> (soname libamdhip64.so.<major>) plus its libamdhip64.so.

    hip_include: the hip headers of Triton's AMD backend; with them the library also has
    hipGetDeviceProperties filling the real hipDeviceProp_t, so the real driver.c runs on it.
    extra: one more unit of C, compiled as that one is (tests/releases.py: what a release's
    driver.c resolves that the stub does not define)."""
    major, minor, patch = (int(p) for p in hip_version.split("."))
    defines = {"HIP_VERSION": major * 10000000 + minor * 100000 + patch, "COUNT_RC": count_rc,
               "COUNT": count, "NAME": json.dumps(name), "MEM_MIB": memory_mib,
               "GCN_ARCH": json.dumps(gcn_arch)}
    where.mkdir(parents=True, exist_ok=True)
    target = where / f"libamdhip64.so.{major}.{minor}.{patch}"

    def build() -> None:
        sources = [_write(where / "libamdhip64_stub.c", LIBAMDHIP64_C)]
        flags = []
        if hip_include is not None:
            sources.append(_write(where / "libamdhip64_props.c", LIBAMDHIP64_PROPS_C))
            flags = [f"-I{hip_include}"]
        if extra:
            sources.append(_write(where / "libamdhip64_extra.c", extra))
        subprocess.run([GCC, *map(str, sources), "-shared", "-fPIC",
                        f"-Wl,-soname,libamdhip64.so.{major}", "-o", str(target), "-ldl", *flags]
                       + [f"-D{k}={v}" for k, v in defines.items()], check=True)
        for source in sources:
            source.unlink()

    _compiled(["hip", target.name, defines, str(hip_include), *([extra] if extra else [])],
              target, build)
    (where / f"libamdhip64.so.{major}").symlink_to(target.name)
    (where / "libamdhip64.so").symlink_to(f"libamdhip64.so.{major}")
    return where / "libamdhip64.so"


AMD_MODES = ("ok", "no-dev-nodes", "kfd-eacces", "no-libhip", "libhip-path", "system-rocm",
             "insufficient-driver", "no-device", "cpu-torch")


def make_amd_node(
    root: Path | str,
    *,
    mode: str = "ok",
    gpus: int = 1,
    gpu_name: str = "AMD Instinct MI300X",
    gfx_target_version: int = 90402,
    amdgpu_version: str | None = "6.12.12",
    hip_version: str = "6.4.43482",
    system_hip_version: str = "6.2.41133",
    torch: str | None = "2.9.0+rocm6.4",
    torch_hip: str = "6.4.43482-0f2d60242",
    torch_arch: tuple[str, ...] = ROCM_TORCH_ARCH,
    container: str | None = None,
    env: dict[str, str] | None = None,
    hip_include: Path | None = None,
    libhip_extra: str = "",
    **node_kwargs: object,
) -> NodeEnv:
    """A fake AMD GPU node: KFD topology under /sys, /dev/kfd and /dev/dri/renderD*, amdgpu's
    version, a stub libamdhip64 (torch's bundled copy or a system ROCm's), a stub ROCm torch
    (torch.version.hip) and the stub Triton whose HIP driver finds the library as Triton does.

    mode: "ok"; "no-dev-nodes" (KFD lists the GPUs, /dev/kfd and /dev/dri not passed into the
    container); "kfd-eacces" (/dev/kfd of mode 0600, root's); "no-libhip" (torch bundles no
    libamdhip64 and no ROCm is installed); "libhip-path" (TRITON_LIBHIP_PATH names a missing
    file); "system-rocm" (Triton is pointed at a system ROCm of another version than torch's);
    "insufficient-driver" (hipGetDeviceCount returns 35); "no-device" (100); "cpu-torch" (a
    CPU-only torch). Other keywords go to make_node (compiler=False, fla=..., vllm=...).
    hip_include, libhip_extra: build_libamdhip64's hip_include and extra, for the torch's copy.
    """
    if mode not in AMD_MODES:
        raise ValueError(f"mode must be one of {AMD_MODES}")
    # Without /dev/kfd (or not permitted to open it) ROCr finds no device: hipErrorNoDevice.
    count_rc = {"insufficient-driver": 35, "no-device": 100, "no-dev-nodes": 100,
                "kfd-eacces": 100}.get(mode, 0)
    node = make_node(root, gpu=False, torch=torch, torch_cuda=None, container=container,
                     **node_kwargs)  # type: ignore[arg-type]
    sysroot, site = node.sysroot, node.site
    for index in range(gpus):
        props = {"cpu_cores_count": 0, "simd_count": 1216, "vendor_id": 4098,
                 "device_id": 29876, "gfx_target_version": gfx_target_version,
                 "drm_render_minor": 128 + index, "location_id": 49408 + index}
        _write(sysroot / f"sys/class/kfd/kfd/topology/nodes/{index + 1}/properties",
               "".join(f"{k} {v}\n" for k, v in props.items()))
    _write(sysroot / "sys/class/kfd/kfd/topology/nodes/0/properties",
           "cpu_cores_count 96\nsimd_count 0\ngfx_target_version 0\nvendor_id 0\n")
    (sysroot / "sys/module/amdgpu").mkdir(parents=True, exist_ok=True)
    if amdgpu_version:
        _write(sysroot / "sys/module/amdgpu/version", amdgpu_version + "\n")
    _write(sysroot / "proc/devices", "Character devices:\n  1 mem\n226 drm\n510 kfd\n")
    if mode != "no-dev-nodes":
        _write(sysroot / "dev/kfd", "").chmod(0o600 if mode == "kfd-eacces" else 0o666)
        for index in range(gpus):
            _write(sysroot / f"dev/dri/renderD{128 + index}", "").chmod(0o666)
    node_env = dict(node.env)
    ld_entries = [("libc.so.6", "/lib/x86_64-linux-gnu/libc.so.6")]
    if torch and mode not in ("no-libhip", "cpu-torch"):
        build_libamdhip64(site / "torch/lib", hip_version=hip_version, count_rc=count_rc,
                          count=gpus, name=gpu_name, memory_mib=196592,
                          hip_include=hip_include, extra=libhip_extra)
    if mode == "system-rocm":
        system = build_libamdhip64(node.root / "rocm/lib", hip_version=system_hip_version,
                                   count_rc=count_rc, count=gpus, name=gpu_name,
                                   memory_mib=196592)
        node_env["TRITON_LIBHIP_PATH"] = str(system)
        ld_entries.append(("libamdhip64.so", str(system)))
    if mode == "libhip-path":
        node_env["TRITON_LIBHIP_PATH"] = str(node.root / "rocm/lib/libamdhip64.so")
    ldconfig = sysroot / "sbin/ldconfig"
    if ldconfig.exists():
        body = "".join(f"echo '\t{n} (libc6,x86-64) => {p}'\n" for n, p in ld_entries)
        _write(ldconfig, "#!/bin/sh\necho '813 libs found in cache `/etc/ld.so.cache'\"'\"\n"
               + body, 0o755)
    if torch:
        hip = None if mode == "cpu-torch" else torch_hip
        _write(site / "torch/version.py", "from typing import Optional\n"
               f"__version__ = {torch!r}\ncuda: Optional[str] = None\n"
               f"hip: Optional[str] = {hip!r}\n")
        override = (env or {}).get("HSA_OVERRIDE_GFX_VERSION")
        real = f"gfx{gfx_target_version // 10000}{gfx_target_version // 100 % 100:x}" \
               f"{gfx_target_version % 100:x}"
        arch = real
        if override:
            major, minor, step = (int(p) for p in override.split("."))
            arch = f"gfx{major}{minor:x}{step:x}"
        # "no-libhip": the stub torch maps no libamdhip64, so Triton must search for one.
        available = hip is not None and count_rc == 0
        warning = ""
        if hip is not None and not available:
            # What torch's HIP build prints when hipGetDeviceCount fails.
            code = count_rc or 100
            names = {35: "driver version is insufficient for runtime version",
                     100: "no ROCm-capable device is detected"}
            warning = ("CUDA initialization: Unexpected error from hipGetDeviceCount(). Did you "
                       "run some cuda functions before calling NumHipDevices() that might have "
                       f"already set an error? Error {code}: {names.get(code, 'unknown error')}")
        config = {"warning": warning, "available": available, "count": gpus, "cc": [9, 4],
                  "name": gpu_name, "arch": list(torch_arch), "gcn_arch": arch + ":sramecc+:xnack-",
                  "import_sleep": 0.0, "broken_gpu": None}
        _write(site / "torch/cuda.py", TORCH_CUDA.replace("CONFIG_JSON", repr(config)) + (
            "class _Props:\n    def __init__(self):\n"
            "        self.gcnArchName = _CONFIG['gcn_arch']\n        self.name = _CONFIG['name']\n"
            "def get_device_properties(index=0):\n    return _Props()\n"
            # A ROCm torch links libamdhip64: importing it maps torch/lib's copy.
            "import ctypes as _ctypes, os as _os\n"
            "_lib = _os.path.join(_os.path.dirname(__file__), 'lib', 'libamdhip64.so')\n"
            "if _os.path.exists(_lib):\n    _ctypes.CDLL(_lib)\n"))
    if node_kwargs.get("warm_cache"):
        # What the HIP driver's stub and the kernel's launcher left in the user's cache.
        _write(node.home / ".triton/cache" / f"{STUB_KEY}-hip" / "hip_utils.so", "stub\n")
        _write(node.home / ".triton/cache" / "launcher-fleetcheck_add_one" / "hip_utils.so",
               "stub\n")
    node_env.update(env or {})
    return NodeEnv(env=node_env, sysroot=sysroot, python=node.python, root=node.root,
                   home=node.home, bindir=node.bindir, site=site)


#: The driver's and launchers' modules built as Triton builds them: the stub driver's cuda_utils
#: and each kernel's launcher go through the newest release's runtime/build.py
#: (compile_module_from_src: its cache key, FileCacheManager's get_file/put in
#: runtime/cache.py, the load of the cached module, the rebuild of one that does not load).
REAL_BUILD_DRIVER = r'''

# ---- real build (tests/nodeenv.py, real_triton_build) ----
MODULE_SOURCE = (
    "#include <Python.h>\n#include <dlfcn.h>\n/* %s */\n"
    "static struct PyModuleDef def = {PyModuleDef_HEAD_INIT, \"%s\", NULL, -1, NULL};\n"
    "PyMODINIT_FUNC PyInit_%s(void) { return PyModule_Create(&def); }\n")

def real_module(name, tag):
    from triton.runtime.build import compile_module_from_src
    return compile_module_from_src(MODULE_SOURCE % (tag, name, name), name,
                                   library_dirs=libcuda_dirs(), include_dirs=[],
                                   libraries=["libcuda.so.1"])

def _real_init(self):
    if _CONFIG["error"]:
        raise RuntimeError(_CONFIG["error"])
    self.utils = real_module("cuda_utils", "the driver's utilities")

CudaDriver.__init__ = _real_init
CudaDriver.build_launcher = lambda self, so_dir: real_module(
    "__triton_launcher", "launcher of " + os.path.basename(so_dir))
'''

LIBTRITON = '''"""Stub of triton._C.libtriton's environment readers (knobs.py imports them)."""
import os

def getenv(key, default=None):
    value = os.environ.get(key)
    return default if value is None else value

def getenv_bool(key, default=False):
    value = os.environ.get(key)
    return default if value is None else value.strip().lower() in ("1", "true", "on")

import _fleetcheck_stub_api  # the rest of the extension stays the suite's stub
__getattr__ = _fleetcheck_stub_api.module_getattr(__name__)
'''


def real_triton_build(node: NodeEnv) -> NodeEnv:
    """The node's stub Triton builds its driver module and launchers with the newest release's
    own runtime/build.py, runtime/cache.py and knobs.py (`.test-wheels/triton-3.9.0`): keys,
    cache entries, loads and rebuilds are Triton's; only the GPU behind them is the stub's."""
    real = TEST_WHEELS / "triton-3.9.0" / "triton"
    triton = node.site / "triton"
    for rel in ("knobs.py", "_utils.py", "runtime/cache.py", "runtime/build.py"):
        shutil.copy2(real / rel, triton / rel)
    _write(triton / "_C/__init__.py", "")
    _write(triton / "_C/libtriton/__init__.py", LIBTRITON)  # a package, as the stub was
    init = triton / "__init__.py"
    # Imported by name: the stub's module __getattr__ would answer `from . import knobs`.
    init.write_text(init.read_text() + "\nknobs = __import__('importlib').import_module("
                    "__name__ + '.knobs')\n")
    driver = triton / "runtime/driver.py"
    driver.write_text(driver.read_text() + REAL_BUILD_DRIVER)
    return node


# ---- A node's state as a fix leaves it (tests/probe/test_fixes_proven.py) ----

#: The `--gpu-name` values each CUDA release's ptxas knows (the newest release first that
#: added them): CUDA 11.8 added sm_89/sm_90, 12.0 sm_90a, 12.8 Blackwell's sm_100/101/120,
#: 12.9 sm_103/121, 13.0 sm_110 (sm_101 renamed) and dropped what is older than sm_75.
PTXAS_ARCHS: tuple[tuple[tuple[int, int], tuple[str, ...]], ...] = (
    ((13, 0), ("sm_75", "sm_80", "sm_86", "sm_87", "sm_88", "sm_89", "sm_90", "sm_90a",
               "sm_100", "sm_100a", "sm_103", "sm_103a", "sm_110", "sm_110a", "sm_120",
               "sm_120a", "sm_121", "sm_121a")),
    ((12, 9), ("sm_50", "sm_52", "sm_53", "sm_60", "sm_61", "sm_62", "sm_70", "sm_72", "sm_75",
               "sm_80", "sm_86", "sm_87", "sm_89", "sm_90", "sm_90a", "sm_100", "sm_100a",
               "sm_101", "sm_101a", "sm_103", "sm_103a", "sm_120", "sm_120a", "sm_121",
               "sm_121a")),
    ((12, 8), ("sm_50", "sm_52", "sm_53", "sm_60", "sm_61", "sm_62", "sm_70", "sm_72", "sm_75",
               "sm_80", "sm_86", "sm_87", "sm_89", "sm_90", "sm_90a", "sm_100", "sm_100a",
               "sm_101", "sm_101a", "sm_120", "sm_120a")),
    ((12, 0), ("sm_50", "sm_52", "sm_53", "sm_60", "sm_61", "sm_62", "sm_70", "sm_72", "sm_75",
               "sm_80", "sm_86", "sm_87", "sm_89", "sm_90", "sm_90a")),
    ((11, 8), ("sm_35", "sm_37", "sm_50", "sm_52", "sm_53", "sm_60", "sm_61", "sm_62", "sm_70",
               "sm_72", "sm_75", "sm_80", "sm_86", "sm_87", "sm_89", "sm_90")),
    ((11, 0), ("sm_35", "sm_37", "sm_50", "sm_52", "sm_53", "sm_60", "sm_61", "sm_62", "sm_70",
               "sm_72", "sm_75", "sm_80", "sm_86", "sm_87")),
)

#: A ptxas of one CUDA release that compiles only for the architectures that release knows,
#: with ptxas's own fatal error (exit 255) for any other; `-o FILE` gets an empty cubin.
PTXAS_COMPILING = """#!/bin/sh
for a do
  case "$a" in
    --version) echo "ptxas: NVIDIA (R) Ptx optimizing assembler"
               echo "Cuda compilation tools, release {v}, V{v}.93"; exit 0;;
    --gpu-name=*) arch=${{a#--gpu-name=}};;
  esac
done
case "$arch" in
  {archs}) ;;
  *) echo "ptxas fatal   : Value '$arch' is not defined for option 'gpu-name'" >&2; exit 255;;
esac
out=; prev=
for a do [ "$prev" = -o ] && out=$a; prev=$a; done
[ -n "$out" ] && : > "$out"
exit 0
"""


def write_ptxas(path: Path, version: str) -> Path:
    """A ptxas of CUDA `version` (e.g. "11.7") at `path` that knows only its release's
    architectures (PTXAS_ARCHS): the ptxas a TRITON_PTXAS_PATH override points at."""
    major, minor = (int(p) for p in version.split(".")[:2])
    archs = next(names for release, names in PTXAS_ARCHS if (major, minor) >= release)
    return _write(path, PTXAS_COMPILING.format(v=version, archs="|".join(archs)), 0o755)


#: Appended to the stub triton/__init__.py by `kernels_run_ptxas`: before a kernel's launcher,
#: its PTX goes through ptxas as Triton's backends/nvidia/compiler.py make_cubin() runs it (the
#: ptxas `get_ptxas(arch)` picks: knobs' TRITON_PTXAS_PATH / TRITON_PTXAS_BLACKWELL_PATH, then the
#: bundled one, each kept only where its `--version` answers), and fails as make_cubin() does.
KERNELS_RUN_PTXAS = r'''

# ---- kernels compiled by ptxas (tests/nodeenv.py, kernels_run_ptxas) ----
class PTXASError(RuntimeError):
    """triton.runtime.errors.PTXASError."""

def _fleetcheck_ptxas(capability):
    import os, re, subprocess
    # Triton 3.9 takes the blackwell ptxas from sm_90, 3.5-3.8 from sm_100; older: one ptxas.
    since = 90 if tuple(_CONFIG["version"][:2]) >= (3, 9) else 100
    binary = "ptxas-blackwell" if capability >= since and tuple(_CONFIG["version"][:2]) >= (
        3, 5) else "ptxas"
    key = "TRITON_%s_PATH" % binary.upper().replace("-", "_")
    here = os.path.dirname(os.path.abspath(__file__))
    paths = [os.path.join(here, "backends", "nvidia", "bin", binary)]
    if os.environ.get(key) is not None:
        paths.insert(0, os.environ[key])
    for path in paths:
        try:
            out = subprocess.check_output([path, "--version"], stderr=subprocess.STDOUT)
        except (subprocess.CalledProcessError, FileNotFoundError):
            continue
        if re.search(r".*release (\d+\.\d+).*", out.decode("utf-8"), flags=re.MULTILINE):
            return path
    raise RuntimeError("Cannot find %s" % binary)

def _fleetcheck_make_cubin(capability):
    import os, subprocess, tempfile
    ptxas = _fleetcheck_ptxas(capability)
    arch = "sm_%d%s" % (capability, "a" if capability >= 90 else "")
    with tempfile.NamedTemporaryFile(delete=False, mode="w", suffix=".ptx") as fsrc, \
            tempfile.NamedTemporaryFile(delete=False, mode="r", suffix=".log") as flog:
        fsrc.write("// fleetcheck_add_one\n")
        fsrc.flush()
        cmd = [ptxas, "-lineinfo", "-v", "--regAllocOptLevel=2", "--gpu-name=%s" % arch,
               fsrc.name, "-o", fsrc.name + ".o"]
        try:
            subprocess.run(cmd, check=True, close_fds=False, stderr=flog)
        except subprocess.CalledProcessError as e:
            with open(flog.name) as log_file:
                log = log_file.read()
            error = ("Internal Triton PTX codegen error" if e.returncode == 255
                     else "`ptxas` failed with error code %d" % e.returncode)
            raise PTXASError("%s\n`ptxas` stderr:\n%s\nRepro command: %s\n"
                             % (error, log, " ".join(cmd)))
        finally:
            for name in (fsrc.name, flog.name, fsrc.name + ".o"):
                if os.path.exists(name):
                    os.remove(name)

_fleetcheck_launch = _Kernel.__getitem__

def _fleetcheck_compiled(self, grid):
    launch = _fleetcheck_launch(self, grid)
    def compiled(*args, **meta):
        import torch
        major, minor = torch.cuda.get_device_capability()
        _fleetcheck_make_cubin(major * 10 + minor)
        return launch(*args, **meta)
    return compiled

_Kernel.__getitem__ = _fleetcheck_compiled
'''


def kernels_run_ptxas(node: NodeEnv) -> NodeEnv:
    """The node's stub Triton compiles each kernel's PTX with ptxas before it launches it, as
    Triton does (KERNELS_RUN_PTXAS), and its bundled ptxas binaries know only their release's
    architectures (`write_ptxas`): a ptxas that does not know the GPU fails the kernel."""
    import re

    triton = node.site / "triton"
    init = triton / "__init__.py"
    init.write_text(init.read_text() + KERNELS_RUN_PTXAS)
    for binary in ("ptxas", "ptxas-blackwell"):
        for folder in ("backends/nvidia/bin", "third_party/cuda/bin"):
            path = triton / folder / binary
            found = re.search(r"release (\d+\.\d+)", path.read_text()) if path.is_file() else None
            if found:
                write_ptxas(path, found.group(1))
    return node


def ldconfig_refresh(node: NodeEnv) -> None:
    """`/sbin/ldconfig` run as root on the node: the linker cache rebuilt from the dirs the
    node's /etc/ld.so.conf.d files name, in order, then the default dir (the node's lib/, where
    its driver installed libcuda.so.1): what `ldconfig -p` lists afterwards. A node without its
    /sbin/ldconfig has nothing to run (FileNotFoundError)."""
    ldconfig = node.sysroot / "sbin" / "ldconfig"
    if not ldconfig.is_file():
        raise FileNotFoundError(2, "No such file or directory", str(ldconfig))
    dirs: list[str] = []
    for conf in sorted((node.sysroot / "etc" / "ld.so.conf.d").glob("*.conf")):
        dirs += [line.strip() for line in conf.read_text().splitlines()
                 if line.strip() and not line.lstrip().startswith("#")]
    dirs.append(str(node.root / "lib"))
    entries = [("libc.so.6", "/lib/x86_64-linux-gnu/libc.so.6")]
    for folder in dict.fromkeys(dirs):
        for name in ("libcuda.so.1", "libcuda.so"):
            if (Path(folder) / name).exists():
                entries.append((name, str(Path(folder) / name)))
    body = "".join(f"echo '\t{n} (libc6,x86-64) => {p}'\n" for n, p in entries)
    _write(ldconfig, f"#!/bin/sh\necho '{len(entries) + 812} libs found in cache "
           "`/etc/ld.so.cache'\"'\"\n" + body, 0o755)


def triton_source_checkout(node: NodeEnv, version: str = "3.9.0") -> Path:
    """A Triton source checkout without its build, first on the node's PYTHONPATH (as
    `export PYTHONPATH=~/src/triton/python:$PYTHONPATH` leaves it): the release's Python files
    under src/triton/python/triton, but no triton/_C/libtriton (the extension the build makes),
    no bundled ptxas, no dist-info. It shadows the installed wheel: `import triton` finds it
    first and fails in it. Returns the dir put on PYTHONPATH."""
    python = node.root / "src" / "triton" / "python"
    shutil.copytree(TEST_WHEELS / f"triton-{version}" / "triton", python / "triton",
                    ignore=shutil.ignore_patterns("__pycache__", "include", "bin"))
    node.env["PYTHONPATH"] = os.pathsep.join(
        [str(python), *filter(None, node.env.get("PYTHONPATH", "").split(os.pathsep))])
    return python
