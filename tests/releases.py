"""Fake nodes whose Triton is a real release's Python code: the version matrix's nodes.

scripts/fetch_test_wheels.py keeps, of every Triton release in its RELEASES, the Python files,
the C sources, the headers those include and the dist-info, read out of the wheel on PyPI and
checked against its RECORD, in a cache outside the checkout (`RELEASE_CACHE`: the same
$FLEETCHECK_TEST_CACHE, else ${XDG_CACHE_HOME:-$HOME/.cache}/fleetcheck-test). A node built
here (`make_release_node`) is one of tests/nodeenv.py's (stub torch, stub libcuda.so.1 or
libamdhip64, a sysroot, a PATH) whose `triton` package IS the release: its own runtime/driver.py,
backends (3.x) or runtime/backends/*.c (2.x), runtime/build.py or common/build.py,
runtime/cache.py, knobs.py where it has one, and its dist-info. Stood in for are only:

- the native extension, triton/_C/libtriton (`LIBTRITON`: a package answering what import
  needs, its submodules too; 2.x's `triton._C.libtriton.triton`), and a placeholder
  triton/_C/libtriton.so (2.1's jit hashes its bytes at import);
- the bundled ptxas binaries, at the paths the release's RECORD lists (nodeenv's PTXAS script);
- the release's literal `/sbin/ldconfig` (2.2 and later), which reads the node's under
  FLEETCHECK_SYSROOT as the probe does (2.1 runs `ldconfig` from PATH: the node's PATH has it);
- numpy (2.3's interpreter imports it at import), a stub package like the stub torch, and
  setuptools (2.x-3.2's build imports it, and calls it only after a compiler run check_call
  would have raised on: `SETUPTOOLS`).

The RECORD a node gets lists the rows of the files it has (the release's own rows), not the
binaries it lacks. Real gcc compiles the release's real driver.c (2.x: cuda.c) with its shipped
headers; the stub libcuda exports every cu* symbol that source links to, found by compiling it
(`gcc -c`, `nm -u`), and the stub libamdhip64 every hip* symbol the AMD driver.c resolves (its
HIP_SYMBOL_LIST), with hipGetDeviceProperties filling the struct that driver.c reads
(hipDeviceProp_tR0000 in 3.0-3.4) from the release's own hip headers.

Built once per process and shared by its nodes (tests/nodeenv.py's cache folder): the
release's prepared tree (a copy of the fetched files and their bytecode, compiled by the fetch;
the few changed files compiled once here), to which each node's files are hard links, and its
symbol lists. Nothing is downloaded: a release not fetched is a `MissingRelease` whose text
names the fetch command.
"""

from __future__ import annotations

import csv
import functools
import importlib.util
import io
import json
import os
import py_compile
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from types import ModuleType

from tests.nodeenv import (
    GCC,
    LIBAMDHIP64_C,
    LIBAMDHIP64_PROPS_C,
    LIBCUDA_C,
    PTXAS,
    NodeEnv,
    _cache_folder,
    _publish,
    _write,
    make_amd_node,
    make_node,
    python_include,
    run_probe,
)

ROOT = Path(__file__).resolve().parents[1]
FETCH_SCRIPT = ROOT / "scripts" / "fetch_test_wheels.py"
FETCH_COMMAND = ".venv/bin/python scripts/fetch_test_wheels.py --releases-only"


@functools.cache
def _fetch_module() -> ModuleType:
    """scripts/fetch_test_wheels.py, for its RELEASES and release_cache() (one definition)."""
    spec = importlib.util.spec_from_file_location("fleetcheck_fetch_test_wheels", FETCH_SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


RELEASE_CACHE: Path = _fetch_module().release_cache()


class MissingRelease(Exception):
    """A release the set-up has not fetched (the tests never download)."""


@dataclass(frozen=True)
class Release:
    dist: str
    version: str
    wheel: str
    record_sha: str

    @property
    def key(self) -> tuple[int, int]:
        major, minor = self.version.split(".")[:2]
        return int(major), int(minor)

    @property
    def fetched(self) -> Path:
        return RELEASE_CACHE / f"{self.dist}-{self.version}"

    def __str__(self) -> str:
        return f"{self.dist} {self.version}"

    def check(self) -> None:
        """Raise MissingRelease unless the set-up fetched this release as
        scripts/fetch_test_wheels.py now keeps it (its stamp: the wheel, its RECORD's hash,
        the layout)."""
        stamp = _fetch_module().release_stamp(self.wheel, self.record_sha)
        try:
            fetched = (self.fetched / ".complete").read_text(encoding="utf-8")
        except OSError:
            fetched = ""
        if not fetched.startswith(stamp):
            raise MissingRelease(
                f"{self} is not fetched into {self.fetched}"
                + (" (an older layout)" if fetched else "")
                + f": run `{FETCH_COMMAND}` (the test set-up, scripts/test.sh, runs it; "
                "$FLEETCHECK_TEST_CACHE names another cache)")


RELEASES: tuple[Release, ...] = tuple(Release(*spec) for spec in _fetch_module().RELEASES)


def release(version: str) -> Release:
    return next(r for r in RELEASES if r.version == version)


#: The torch each Triton minor release is pinned by (torch's own `Requires-Dist: triton==`),
#: with the CUDA of its CUDA build and the HIP of its ROCm build. Later Tritons: the suite's.
TORCH_FOR = {(2, 1): ("2.1.2", "12.1", "5.6.31061"), (2, 2): ("2.2.2", "12.1", "5.7.31921"),
             (2, 3): ("2.3.1", "12.1", "6.0.32830"), (3, 0): ("2.4.1", "12.4", "6.1.40091"),
             (3, 1): ("2.5.1", "12.4", "6.2.41133"), (3, 2): ("2.6.0", "12.6", "6.2.41134"),
             (3, 3): ("2.7.1", "12.8", "6.3.42131"), (3, 4): ("2.8.0", "12.8", "6.4.43482"),
             (3, 5): ("2.9.1", "12.8", "6.4.43482"), (3, 6): ("2.10.0", "13.0", "7.1.25424")}
_NEWEST = ("2.11.0", "13.0", "7.1.25424")


def torch_cuda(rel: Release) -> tuple[str, str]:
    """(torch's version, its CUDA) for a node of this release."""
    version, cuda, _ = TORCH_FOR.get(rel.key, _NEWEST)
    return f"{version}+cu{cuda.replace('.', '')}", cuda


def torch_rocm(rel: Release) -> tuple[str, str]:
    """(torch's version, its HIP: the libamdhip64 it bundles) for a ROCm node."""
    version, _, hip = TORCH_FOR.get(rel.key, _NEWEST)
    rocm = ".".join(hip.split(".")[:2])
    if hip == "6.2.41134":
        rocm = "6.2.4"
    return f"{version}+rocm{rocm}", hip


LIBTRITON = '''"""Stand-in for triton/_C/libtriton, the native extension (tests/releases.py).

getenv/getenv_bool as the extension's (knobs.py reads them); anything else a stub object of
_fleetcheck_stub_api; its submodules (2.x: libtriton.triton, 3.x: ir, passes...) likewise.
"""
import importlib.abc, importlib.machinery, os, sys, types
import _fleetcheck_stub_api

def getenv(key, default=None):
    value = os.environ.get(key)
    return default if value is None else value

def getenv_bool(key, default=False):
    value = os.environ.get(key)
    return default if value is None else value.strip().lower() in ("1", "true", "on")

class _Submodules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path=None, target=None):
        if name.startswith(__name__ + "."):
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None
    def create_module(self, spec):
        module = types.ModuleType(spec.name)
        module.__path__ = []
        module.__getattr__ = _fleetcheck_stub_api.module_getattr(spec.name)
        return module
    def exec_module(self, module):
        pass

sys.meta_path.append(_Submodules())
__getattr__ = _fleetcheck_stub_api.module_getattr(__name__)
'''

#: The bytes in place of the extension's .so (read, never loaded: the package above wins).
LIBTRITON_SO = b"fleetcheck stand-in for triton's native extension (tests/releases.py)\n"

NUMPY = ("import _fleetcheck_stub_api\n_fleetcheck_stub_api.install(__name__)\n"
         "__getattr__ = _fleetcheck_stub_api.module_getattr(__name__)\n")

SETUPTOOLS = '''"""Stub setuptools (tests/releases.py).

Triton 2.x-3.2's build imports it at module level (0.25 s of each import of Triton) and calls it
only where `subprocess.check_call` returned nonzero, which it never does (it raises)."""
def _unreachable(*args, **kwargs):
    raise RuntimeError("fleetcheck's stub setuptools was called")
Extension = setup = _unreachable
'''

#: The release's `/sbin/ldconfig` call, and the same call reading the node's ldconfig.
LDCONFIG_CALL = '["/sbin/ldconfig", "-p"]'
NODE_LDCONFIG_CALL = ('[os.path.join(os.environ.get("FLEETCHECK_SYSROOT") or "/", '
                      '"sbin/ldconfig"), "-p"]')


def _link_tree(source: Path, target: Path) -> None:
    """`source` under `target` as hard links (copies where links cannot be made)."""
    def link(src: str, dst: str) -> None:
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)
    shutil.copytree(source, target, copy_function=link, dirs_exist_ok=True)


def prepared(rel: Release) -> Path:
    """This process's tree of the release (`triton/` and its dist-info), once: the fetched
    files copied, the stand-ins added, the changed files compiled; nodes link to it."""
    rel.check()
    folder = _cache_folder() / f"release-{rel.dist}-{rel.version}"
    if folder.is_dir():
        return folder
    making = folder.with_name(f"{folder.name}.{os.getpid()}.tmp")
    shutil.rmtree(making, ignore_errors=True)
    making.mkdir(parents=True)
    for entry in rel.fetched.iterdir():
        if entry.is_dir():  # copied: a test's write into its node stays in this process
            shutil.copytree(entry, making / entry.name)
    triton = making / "triton"
    for path in triton.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        if LDCONFIG_CALL in text:
            path.write_text(text.replace(LDCONFIG_CALL, NODE_LDCONFIG_CALL), encoding="utf-8")
            py_compile.compile(str(path), doraise=True)
    stand_in = _write(triton / "_C/libtriton/__init__.py", LIBTRITON)
    py_compile.compile(str(stand_in), doraise=True)
    (triton / "_C/libtriton.so").write_bytes(LIBTRITON_SO)
    [info] = making.glob("*.dist-info")
    record = (info / "RECORD").read_text(encoding="utf-8")
    for name in [row[0] for row in csv.reader(io.StringIO(record)) if row]:
        if re.search(r"/bin/ptxas[^/]*$", name):
            _write(making / name, PTXAS.format(v="12.8"), 0o755)
    # The release's own rows, for the files the node has.
    kept = io.StringIO()
    writer = csv.writer(kept, lineterminator="\n")
    for row in csv.reader(io.StringIO(record)):
        if row and (row[0] == f"{info.name}/RECORD" or (making / row[0]).exists()):
            writer.writerow(row)
    (info / "RECORD").write_text(kept.getvalue(), encoding="utf-8")
    _publish(making, folder)
    return folder


def install_release(site: Path, rel: Release) -> None:
    """The release into a node's site-packages (hard links to this process's tree: a test
    may remove files from its node, never write into them)."""
    _link_tree(prepared(rel), site)
    _write(site / "numpy/__init__.py", NUMPY)
    _write(site / "setuptools/__init__.py", SETUPTOOLS)


def _nvidia_source(rel: Release) -> Path:
    """The C source of the release's CUDA driver module (3.x backends/nvidia/driver.c, 2.x
    runtime/backends/cuda.c)."""
    triton = prepared(rel) / "triton"
    for candidate in ("backends/nvidia/driver.c", "runtime/backends/cuda.c"):
        if (triton / candidate).is_file():
            return triton / candidate
    raise AssertionError(f"{rel}: no CUDA driver source")


def amd_driver(rel: Release) -> Path | None:
    path = prepared(rel) / "triton/backends/amd/driver.c"
    return path if path.is_file() else None


@functools.cache
def libcuda_imports(rel: Release) -> tuple[str, ...]:
    """The cu* symbols the release's CUDA driver source links to: compiled as its build
    compiles it (the release's include dir of cuda.h, Python's), the undefined cu* names of
    the object."""
    found = _cache_folder() / f"imports-{rel.dist}-{rel.version}.json"
    if found.is_file():  # another process sharing the builds found them (share_builds)
        return tuple(json.loads(found.read_text()))
    source = _nvidia_source(rel)
    includes = sorted(str(p.parent) for p in (prepared(rel) / "triton").rglob("cuda.h"))
    obj = _cache_folder() / f"imports-{rel.version}.{os.getpid()}.o"
    subprocess.run([GCC, "-c", str(source), "-o", str(obj), *(f"-I{d}" for d in includes),
                    f"-I{python_include()}"], check=True, capture_output=True)
    listed = subprocess.run(["nm", "-u", str(obj)], check=True, capture_output=True,
                            text=True).stdout
    obj.unlink()
    names = {line.split()[-1] for line in listed.splitlines() if line.strip()}
    imports = tuple(sorted(n for n in names if re.match(r"cu[A-Z]", n)))
    made = found.with_name(f"{found.name}.{os.getpid()}")
    made.write_text(json.dumps(imports))
    os.replace(made, found)
    return imports


def _defined(c_text: str) -> set[str]:
    return set(re.findall(r"^[A-Za-z_][\w \t\*]*?\b(\w+)\s*\([^;{]*\)\s*\{", c_text, re.M))


def libcuda_extra(rel: Release) -> str:
    """The stub libcuda's definitions of the release's imports LIBCUDA_C lacks: each
    answers CUDA_ERROR_NOT_SUPPORTED (no test calls them: loading needs them defined)."""
    missing = [n for n in libcuda_imports(rel) if n not in _defined(LIBCUDA_C)]
    return "".join(f"int {name}(void) {{ return 801; }}\n" for name in missing)


def hip_symbols(rel: Release) -> tuple[str, ...]:
    """What the release's AMD driver.c resolves in libamdhip64 (its HIP_SYMBOL_LIST)."""
    driver = amd_driver(rel)
    assert driver is not None, f"{rel} has no AMD backend"
    return tuple(sorted(set(re.findall(r"FOR_EACH_(?:ERR|STR)_FN\(\s*(hip\w+)",
                                       driver.read_text(encoding="utf-8")))))


#: hipGetDeviceProperties as ROCm's libamdhip64 exports it by that name: the 5.x struct
#: (hipDeviceProp_tR0000), which driver.c of 3.0-3.4 reads; the stub's other unit defines
#: hipGetDevicePropertiesR0600 (the headers rename the call to it).
PROPS_R0000_C = r"""
#define __HIP_PLATFORM_AMD__
#include <string.h>
#include <hip/hip_runtime_api.h>
#include <hip/hip_deprecated.h>
#undef hipGetDeviceProperties
hipError_t hipGetDeviceProperties(hipDeviceProp_tR0000 *p, int d) {
    if (COUNT_RC) return (hipError_t)COUNT_RC;
    if (d >= COUNT) return hipErrorInvalidDevice;
    memset(p, 0, sizeof *p);
    strncpy(p->name, NAME, sizeof p->name - 1);
    strncpy(p->gcnArchName, GCN_ARCH, sizeof p->gcnArchName - 1);
    p->warpSize = 64; p->sharedMemPerBlock = 65536; p->regsPerBlock = 512;
    p->multiProcessorCount = 304; p->clockRate = 2100000; p->memoryClockRate = 1300000;
    p->memoryBusWidth = 8192; p->maxThreadsPerMultiProcessor = 2048;
    return hipSuccess; }
"""


def libhip_extra(rel: Release) -> str:
    """The stub libamdhip64's extra unit for the release's AMD driver.c."""
    driver = amd_driver(rel)
    assert driver is not None
    text = driver.read_text(encoding="utf-8")
    # LIBAMDHIP64_PROPS_C's hipGetDeviceProperties is hipGetDevicePropertiesR0600 under the
    # headers' macro: what hipGetProcAddress (3.5+) answers for the name.
    defined = _defined(LIBAMDHIP64_C) | _defined(LIBAMDHIP64_PROPS_C)
    extra = "".join(f"int {name}(void) {{ return 801; }}\n" for name in hip_symbols(rel)
                    if name not in defined)
    if "hipDeviceProp_tR0000" in text:
        extra = PROPS_R0000_C + extra
    return extra


SITES = ("pythonpath", "venv", "user")


def _base_python() -> str:
    """The interpreter the suite's venv was made from (not a venv: its user site is on)."""
    return os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)


def _place(node: NodeEnv, where: str) -> NodeEnv:
    """The node's site-packages where `where` says: on PYTHONPATH (the suite's nodes), the
    site-packages of a venv of its own, or the user site (pip install --user, PYTHONUSERBASE)
    of an interpreter that is no venv."""
    if where == "pythonpath":
        return node
    env = dict(node.env)
    env.pop("PYTHONPATH", None)
    base = _base_python()
    tag = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    if where == "venv":
        venv = node.root / "venv"
        (venv / "bin").mkdir(parents=True)
        (venv / "bin" / "python").symlink_to(base)
        _write(venv / "pyvenv.cfg", f"home = {os.path.dirname(base)}\n"
               "include-system-site-packages = false\n"
               f"version = {'.'.join(map(str, sys.version_info[:3]))}\n")
        (venv / "lib" / tag).mkdir(parents=True)
        (venv / "lib" / tag / "site-packages").symlink_to(node.site)
        return replace(node, env=env, python=str(venv / "bin" / "python"))
    if where == "user":
        user = node.root / "userbase"
        (user / "lib" / tag).mkdir(parents=True)
        (user / "lib" / tag / "site-packages").symlink_to(node.site)
        env["PYTHONUSERBASE"] = str(user)
        return replace(node, env=env, python=base)
    raise ValueError(f"where must be one of {SITES}")


def make_release_node(root: Path, rel: Release, *, amd: bool = False, site: str = "pythonpath",
                      **options: object) -> NodeEnv:
    """A fake node (tests/nodeenv.py: make_node, or make_amd_node with amd=True) whose Triton
    is the release; `options` go to that builder (compiler=False, cc_env=..., mode=...)."""
    rel.check()
    if amd:
        torch, hip = torch_rocm(rel)
        include = prepared(rel) / "triton/backends/amd/include"
        node = make_amd_node(root, torch=torch, hip_version=hip, torch_hip=f"{hip}-a8dbc0c19",
                             hip_include=include,
                             libhip_extra=libhip_extra(rel), triton=None,
                             **options)  # type: ignore[arg-type]
    else:
        torch, cuda = torch_cuda(rel)
        node = make_node(root, triton=None, torch=torch, torch_cuda=cuda,
                         libcuda_extra=libcuda_extra(rel), **options)  # type: ignore[arg-type]
    install_release(node.site, rel)
    ldconfig = node.sysroot / "sbin/ldconfig"
    if not (node.bindir / "ldconfig").exists():
        # /sbin on the PATH, as for root: 2.1's build runs `ldconfig -p` from PATH.
        (node.bindir / "ldconfig").symlink_to(ldconfig)
    return _place(node, site)


#: The workload's first step with Triton, as the release's own code takes it; one line
#: "TRUTH {json}" on stdout: ok, the step, the target's backend, or the error it raised.
TRUTH = r'''
import json, subprocess, sys
out = {"ok": False, "step": "import triton"}
try:
    import triton
    driver = triton.runtime.driver
    if type(driver).__name__ == "LazyProxy":
        # 2.x: runtime/driver.py's `driver` is a LazyProxy of initialize_driver() (no
        # .active, no get_current_target() before 2.3); a kernel's first launch reads
        # driver.utils, whose CudaUtils/HIPUtils builds the driver's utils module with
        # common/build.py's _build through runtime/cache.py.
        out["step"] = "driver.utils"
        driver.utils
        name = type(driver._obj).__name__
        out["backend"] = {"CudaDriver": "cuda", "HIPDriver": "hip"}.get(name)
        if out["backend"] is None:
            raise RuntimeError("initialize_driver() chose %s" % name)
    else:
        # 3.x: runtime/driver.py's DriverConfig: get_current_target() creates the active
        # backend's driver, which builds its utils module with its own build and cache code.
        out["step"] = "driver.active.get_current_target()"
        out["backend"] = driver.active.get_current_target().backend
    out["ok"] = True
except BaseException as e:
    out["error"] = "%s: %s" % (type(e).__name__, e)
    out["type"] = type(e).__name__
    out["filename"] = getattr(e, "filename", None)
    out["compiler"] = (isinstance(e, subprocess.CalledProcessError)
                       or "Failed to find C compiler" in str(e))
sys.stdout.write("TRUTH " + json.dumps(out) + "\n")
'''


@dataclass(frozen=True)
class Truth:
    """What the release's own code did on the node."""

    ok: bool
    step: str
    backend: str | None
    error: str
    type: str
    filename: str | None
    compiler: bool
    stderr: str


def truth(node: NodeEnv, env: dict[str, str] | None = None) -> Truth:
    """The workload's first step (TRUTH) in the node's interpreter and environment."""
    done = subprocess.run([node.python, "-c", TRUTH], env={**node.env, **(env or {})},
                          capture_output=True, text=True, timeout=120, cwd=node.root)
    lines = [line for line in done.stdout.splitlines() if line.startswith("TRUTH ")]
    assert lines, f"the workload's interpreter failed: {done.stderr[-2000:]}"
    got = json.loads(lines[-1][len("TRUTH "):])
    return Truth(ok=got["ok"], step=got["step"], backend=got.get("backend"),
                 error=got.get("error", ""), type=got.get("type", ""),
                 filename=got.get("filename"), compiler=bool(got.get("compiler")),
                 stderr=done.stderr[-4000:])


def probe(node: NodeEnv) -> dict[str, object]:
    """The probe on the node: its JSON document."""
    _, doc, _ = run_probe(node, timeout=180)
    return doc
