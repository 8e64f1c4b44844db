#!/usr/bin/env python3
"""Fetch the real library wheels the probe's tests install (once; a cache under .test-wheels/).

One release per distinct layout of flash-linear-attention's device detection (where
`get_available_device()` lives and what `fla.utils` imports); the pure-Python frameworks whose
own detection the probe runs (unsloth-zoo's vendored FLA, Liger-Kernel, einops, xformers'
package files: the probe imports xformers and calls its `_is_triton_available()`); the Python
sources of mamba-ssm and causal-conv1d (source-only releases, each sdist checked by its pinned
sha256); and the newest Triton, of which only the Python files, `driver.c`, its headers and the
dist-info are kept (`.test-wheels/triton-3.9.0/`): the probe's backend-discovery tests import
them, and the toolchain tests compile `driver.c` as Triton does. vLLM's wheel is too large
(336 MB): the files its `HAS_TRITON` and platform detection import are read out of the wheel on
PyPI with HTTP range requests (the zip's directory, then each member), each checked against the
wheel's RECORD, whose own sha256 is pinned here (`.test-wheels/vllm-0.33.0/`); so is Triton
3.6.0's `runtime/driver.py` (its backend selection, `.test-wheels/triton-3.6.0/`). The tests unpack
the wheels over the suite's stub torch/triton; they never download anything themselves.

The version matrix (tests/probe/test_release_matrix.py) runs the real Python code of every
Triton minor release users run (RELEASES): of each, its Python files, its C sources (the
drivers' driver.c, 2.x's runtime/backends/cuda.c and hip.c), the headers those include (read
from the sources, transitively) and its dist-info, read out of the wheel on PyPI with range
requests and each checked against the wheel's RECORD, whose sha256 is pinned here. They are kept
outside the checkout, so that a machine fetches each once (`release_cache()`:
$FLEETCHECK_TEST_CACHE, else ${XDG_CACHE_HOME:-~/.cache}/fleetcheck-test; tests/releases.py
reads the same), with their bytecode compiled by the interpreter that fetched them.
`--no-releases` leaves them out (scripts/test.sh --quick: no quick test reads them),
`--releases-only` fetches only them.

Exit 1 with one line per wheel that could not be fetched.
"""

from __future__ import annotations

import argparse
import base64
import compileall
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / ".test-wheels"

#: (distribution, version, why this one): every wheel is pure Python (py3-none-any).
WHEELS: tuple[tuple[str, str, str], ...] = (
    ("flash-linear-attention", "0.1", "fla/utils.py, catches BaseException"),
    ("flash-linear-attention", "0.3.0", "fla/utils.py, `from fla import __version__` inside"),
    ("flash-linear-attention", "0.4.2", "split into fla-core; fla/utils.py"),
    ("fla-core", "0.4.2", "fla/utils.py in fla-core"),
    ("fla-core", "0.5.0", "fla/utils.py, catches Exception"),
    ("flash-linear-attention", "0.5.2", "split; detection in fla/utils/_device.py"),
    ("fla-core", "0.5.2", "fla/utils/_device.py; _decorators does `from .. import __version__`"),
    ("flash-linear-attention", "0.6.0", "the current release"),
    ("fla-core", "0.6.0", "fla/utils/hardware.py; decorators does `from fla import __version__`"),
    ("unsloth-zoo", "2026.10.9", "its vendored FLA: unsloth_zoo/_vendored/fla/utils/_device.py"),
    ("liger-kernel", "0.8.5", "liger_kernel/utils.py infer_device(): torch.cuda only"),
    ("einops", "0.8.2", "FLA's kernels import it: a node with FLA and without it cannot import"),
)

#: (distribution, version, wheel name glob, what is kept): binary wheels, of which the tests
#: need the Python side only; it is extracted once and the wheel deleted.
EXTRACTED: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("triton", "3.9.0", (".py", ".c", ".h", "entry_points.txt", "METADATA", "RECORD")),
    ("xformers", "0.0.35", ("xformers/__init__.py", "xformers/_cpp_lib.py",
                            "xformers/checkpoint.py", "xformers/version.py", "METADATA",
                            "RECORD")),
)

#: (distribution, version, sdist file, its sha256 on PyPI, package): source-only releases
#: whose Python files are kept (mamba-ssm and causal-conv1d build their CUDA extensions at
#: install; their Triton kernels and imports are in the Python files).
SDISTS: tuple[tuple[str, str, str, str, str], ...] = (
    ("mamba-ssm", "2.3.2.post1", "mamba_ssm-2.3.2.post1.tar.gz",
     "104cc47e9101e5401a675fa2b784f2952b9b037f3b1dd83b5ac544394e95d028", "mamba_ssm"),
    ("causal-conv1d", "1.7.0", "causal_conv1d-1.7.0.tar.gz",
     "3202758494eaa7b597ce1c282dfa188889506bfcb92cad3c407d26736bfcd32b", "causal_conv1d"),
)


#: (distribution, version, wheel file, sha256 of its RECORD, members kept): wheels too large to
#: download, of which a few Python files are read with range requests.
RANGED: tuple[tuple[str, str, str, str, tuple[str, ...]], ...] = (
    ("vllm", "0.33.0", "vllm-0.33.0-cp38-abi3-manylinux_2_28_x86_64.whl",
     "a860951d44545b1b68c2d1484b9a03bbde52f6eae34850a6c22741c60ac386c4", (
         # vllm/triton_utils/importing.py (HAS_TRITON) and what importing it imports at module
         # level: vllm/__init__ (env_override), its logger, envs, and vllm.platforms, whose
         # current_platform runs the platform plugins (cuda, rocm, cpu) and imports the class.
         "vllm/__init__.py", "vllm/_version.py", "vllm/version.py", "vllm/env_override.py",
         "vllm/envs.py", "vllm/logger.py", "vllm/logging_utils/__init__.py",
         "vllm/logging_utils/formatter.py", "vllm/logging_utils/lazy.py",
         "vllm/logging_utils/log_time.py", "vllm/logging_utils/torch_tensor.py",
         "vllm/logging_utils/uvicorn_logging.py", "vllm/platforms/__init__.py",
         "vllm/platforms/interface.py", "vllm/platforms/cuda.py", "vllm/platforms/rocm.py",
         "vllm/platforms/cpu.py", "vllm/plugins/__init__.py", "vllm/third_party/__init__.py",
         "vllm/third_party/pynvml.py", "vllm/triton_utils/__init__.py",
         "vllm/triton_utils/importing.py", "vllm/triton_utils/force_first_config.py",
         "vllm/triton_utils/tensor_descriptor.py", "vllm/utils/__init__.py",
         "vllm/utils/cpu_resource_utils.py", "vllm/utils/import_utils.py",
         "vllm/utils/math_utils.py", "vllm/utils/mem_constants.py",
         "vllm/utils/platform_utils.py", "vllm/utils/torch_version.py", "vllm/v1/__init__.py",
         "vllm/v1/attention/__init__.py", "vllm/v1/attention/backends/__init__.py",
         "vllm/v1/attention/backends/registry.py",
         "vllm/v1/attention/backends/mla/__init__.py",
         "vllm/v1/attention/backends/mla/prefill/__init__.py",
         "vllm/v1/attention/backends/mla/prefill/base.py",
         "vllm/v1/attention/backends/mla/prefill/registry.py",
         "vllm/v1/attention/backends/mla/prefill/selector.py",
         "vllm/third_party/flash_linear_attention/ops/utils.py",
         "vllm-0.33.0.dist-info/METADATA", "vllm-0.33.0.dist-info/entry_points.txt")),
    # Triton 3.6 (the H200's): its _create_driver() does not read TRITON_DEFAULT_BACKEND (3.9's
    # does); the backend tests run it as released (`.test-wheels/triton-3.6.0/`).
    ("triton", "3.6.0",
     "triton-3.6.0-cp312-cp312-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl",
     "4a069206d9c846d0ab6c60be9fce9a4aa5dafd6638800cd0004f20e905e30374", (
         "triton/runtime/driver.py", "triton-3.6.0.dist-info/METADATA")),
)


class RangedWheel(io.RawIOBase):
    """A wheel on the index read by HTTP range requests, in blocks (zipfile seeks and reads)."""

    BLOCK = 1 << 18

    def __init__(self, url: str, size: int) -> None:
        super().__init__()
        if not url.startswith("https://"):
            raise ValueError(f"not an https URL: {url}")
        self.url, self.size, self.pos = url, size, 0
        self.blocks: dict[int, bytes] = {}

    def seekable(self) -> bool:
        return True

    def readable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = 0) -> int:
        base = {0: 0, 1: self.pos, 2: self.size}[whence]
        self.pos = base + offset
        return self.pos

    def block(self, index: int) -> bytes:
        if index not in self.blocks:
            first = index * self.BLOCK
            last = min(first + self.BLOCK, self.size) - 1
            request = urllib.request.Request(  # noqa: S310 (https only: __init__)
                self.url, headers={"Range": f"bytes={first}-{last}"})
            with urllib.request.urlopen(request, timeout=120) as answer:  # noqa: S310
                if answer.status != 206:
                    raise OSError(f"the index answered {answer.status} to a range request")
                self.blocks[index] = answer.read()
        return self.blocks[index]

    def read(self, size: int | None = -1) -> bytes:
        left = self.size - self.pos if size is None or size < 0 else min(
            size, self.size - self.pos)
        out = bytearray()
        while left > 0:
            index, offset = divmod(self.pos, self.BLOCK)
            chunk = self.block(index)[offset:offset + left]
            if not chunk:
                break
            out += chunk
            self.pos += len(chunk)
            left -= len(chunk)
        return bytes(out)


def index_url(dist: str, version: str, filename: str) -> tuple[str, int]:
    """The wheel's URL and size from PyPI's JSON API (the index's own mirror answers alike)."""
    api = f"https://pypi.org/pypi/{dist}/json"
    with urllib.request.urlopen(api, timeout=120) as answer:
        project = json.load(answer)
    for item in (project.get("releases") or {}).get(version) or []:
        if item.get("filename") == filename:
            return urllib.parse.urljoin(api, item["url"]), int(item["size"])
    raise OSError(f"{filename} is not in {api}")


def ranged(dist: str, version: str, filename: str, record_sha: str,
           members: tuple[str, ...]) -> str | None:
    """Members of a large wheel, each checked against the wheel's RECORD (pinned by hash)."""
    target = CACHE / f"{dist}-{version}"
    if (target / ".complete").is_file():
        return None
    try:
        with zipfile.ZipFile(RangedWheel(*index_url(dist, version, filename))) as archive:
            record_name = f"{dist}-{version}.dist-info/RECORD"
            record = archive.read(record_name)
            if hashlib.sha256(record).hexdigest() != record_sha:
                return f"{record_name} does not have the pinned sha256 {record_sha}"
            digests = {}
            for line in record.decode().splitlines():
                name, _, rest = line.partition(",")
                digests[name] = rest.partition(",")[0]
            for name in members:
                data = archive.read(name)
                want = digests.get(name, "")
                got = "sha256=" + base64.urlsafe_b64encode(
                    hashlib.sha256(data).digest()).rstrip(b"=").decode()
                if want and got != want:
                    return f"{name} does not match the wheel's RECORD"
                path = target / name
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(data)
    except (OSError, KeyError, zipfile.BadZipFile, ValueError) as exc:
        return f"{type(exc).__name__}: {exc}"
    (target / ".complete").write_text(filename + "\n")
    return None


#: The version matrix's Triton releases: (distribution, version, wheel file, sha256 of the wheel's
#: RECORD). The newest patch of each minor release users run (2.1 to 3.6) and the newest on
#: PyPI; the CPython 3.11 x86_64 wheels (their Python files are those of every other wheel of
#: the release). pytorch-triton-rocm 3.x is not on PyPI (`pip index versions` lists 2.1.0 as its
#: newest there; PyTorch's own index serves 3.x, which the test set-up cannot reach): the ROCm
#: rows run the AMD backend (triton/backends/amd) that the PyPI wheel of the same Triton ships.
RELEASES: tuple[tuple[str, str, str, str], ...] = (
    ("triton", "2.1.0", "triton-2.1.0-0-cp311-cp311-manylinux2014_x86_64.manylinux_2_17_x86_64.whl",
     "9124bbcef4e8a3ba2140c3f8eea19e6d5d9ebfd02c334b7645440568d7c852b2"),
    ("triton", "2.2.0", "triton-2.2.0-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
     "0bfa2065fd46393480b756e26bb6f2458f84ad7a41f07eaef773c3d48f063941"),
    ("triton", "2.3.1", "triton-2.3.1-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
     "87647800d1a14e3fba4eb14b49dbff144a7b3f4ba4b8c487880b7d71ebf591b1"),
    ("triton", "3.0.0", "triton-3.0.0-1-cp311-cp311-manylinux2014_x86_64.manylinux_2_17_x86_64.whl",
     "838c4c2e3bf6e7fdc79fe22539e43b4ca4564073ce3daf0367bc942a269fb3d4"),
    ("triton", "3.1.0", "triton-3.1.0-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
     "8a8c72917a9eb0ffdb0c39dc4cbf484a3effbde544d59a939b90b3ae953a88ce"),
    ("triton", "3.2.0", "triton-3.2.0-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
     "1132d5bafb7773868e594ca404b335d22936206d5c8fcf585450997bae6bc372"),
    ("triton", "3.3.1", "triton-3.3.1-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl",
     "2671baa0ad2cbd09f9e1201e4527078df357b79029a53fa2131ad64d7e35bcfc"),
    ("triton", "3.4.0", "triton-3.4.0-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl",
     "2d2cd38140b28e7879031fba5c6058cd4b11476ff9cf7358a615bd408ba94e9d"),
    ("triton", "3.5.1", "triton-3.5.1-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl",
     "83dcf6b915420d8fd7088bd35b260d1e78feb17d728c8468fbe241dbbc4538bb"),
    ("triton", "3.6.0", "triton-3.6.0-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl",
     "52aa3e3448b12ad7bb72166a4b66ccffd83ea1bb3758620df9a35896944621dc"),
    ("triton", "3.9.0", "triton-3.9.0-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl",
     "45980cb659cf7d5d536592a24f3a73ef9898831d0518c6f7d500ab4abb7c56a4"),
)
#: Bumped when what is kept of a release changes: an older cache entry is fetched again.
RELEASE_LAYOUT = 1


def release_cache() -> Path:
    """The cache outside the checkout that holds the version matrix's releases (one folder per
    release, `<dist>-<version>/`): $FLEETCHECK_TEST_CACHE, else
    ${XDG_CACHE_HOME:-$HOME/.cache}/fleetcheck-test. tests/releases.py reads the same."""
    explicit = os.environ.get("FLEETCHECK_TEST_CACHE")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".cache"
    return base / "fleetcheck-test"


def release_stamp(filename: str, record_sha: str) -> str:
    """The first lines of a fetched release's .complete (then one line per member kept)."""
    return f"{filename}\n{record_sha}\nlayout {RELEASE_LAYOUT}\n"


INCLUDE = re.compile(rb'^[ \t]*#[ \t]*include[ \t]*[<"]([^>"]+)[>"]', re.MULTILINE)


def kept(name: str) -> bool:
    """A release's member the matrix needs besides the headers: Python files, C sources (the
    drivers), and the dist-info (METADATA, RECORD, entry_points.txt...)."""
    top = name.split("/")[0]
    if top.endswith(".dist-info"):
        return True
    return top == "triton" and name.endswith((".py", ".c"))


def record_digests(record: bytes) -> dict[str, str]:
    digests = {}
    for line in record.decode().splitlines():
        name, _, rest = line.partition(",")
        digests[name] = rest.partition(",")[0]
    return digests


def headers_needed(sources: dict[str, bytes], names: set[str],
                   read: Callable[[str], bytes]) -> set[str]:
    """The headers of the wheel that `sources` include, transitively (each read with `read`):
    an `#include` is looked up beside the including file, then in every include/ folder of
    the wheel (where Triton's build points -I). System headers (not in the wheel) are not
    followed; a conditional include counts (a superset of what one build reads)."""
    include_dirs = sorted({n[:n.index("/include/") + len("/include")] for n in names
                           if "/include/" in n})
    found: set[str] = set()
    todo = list(sources.items())
    while todo:
        name, text = todo.pop()
        for match in INCLUDE.finditer(text):
            wanted = match.group(1).decode("utf-8", "replace")
            for folder in [name.rpartition("/")[0], *include_dirs]:
                path = os.path.normpath(f"{folder}/{wanted}")
                if path in names:
                    if path not in found:
                        found.add(path)
                        todo.append((path, read(path)))
                    break
    return found


def release(dist: str, version: str, filename: str, record_sha: str) -> str | None:
    """A release's Python files, C sources, the headers they include and its dist-info, into
    release_cache(), each member checked against the wheel's RECORD (pinned by hash); then
    compiled to bytecode by this interpreter (once per interpreter)."""
    cache = release_cache()
    target = cache / f"{dist}-{version}"
    done = target / ".complete"
    stamp = release_stamp(filename, record_sha)
    if not (done.is_file() and done.read_text().startswith(stamp)):
        problem = _fetch_release(dist, version, filename, record_sha, target, stamp)
        if problem:
            return problem
    compiled = target / f".compiled-{sys.implementation.cache_tag}"
    if not compiled.is_file():
        compileall.compile_dir(target / "triton", quiet=1)
        compiled.write_text(sys.version + "\n")
    return None


def _fetch_release(dist: str, version: str, filename: str, record_sha: str, target: Path,
                   stamp: str) -> str | None:
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = target.with_name(f".{target.name}.{os.getpid()}")
    shutil.rmtree(scratch, ignore_errors=True)
    try:
        with zipfile.ZipFile(RangedWheel(*index_url(dist, version, filename))) as archive:
            names = set(archive.namelist())
            record_name = next((n for n in names if n.endswith(".dist-info/RECORD")
                                and n.count("/") == 1), None)
            if record_name is None:
                return f"{filename} has no RECORD"
            record = archive.read(record_name)
            if hashlib.sha256(record).hexdigest() != record_sha:
                return f"{record_name} does not have the pinned sha256 {record_sha}"
            digests = record_digests(record)
            fetched: dict[str, bytes] = {}

            def read(name: str) -> bytes:
                data = archive.read(name)
                if name != record_name:
                    want = digests.get(name, "")
                    got = "sha256=" + base64.urlsafe_b64encode(
                        hashlib.sha256(data).digest()).rstrip(b"=").decode()
                    if got != want:
                        raise ValueError(f"{name} does not match the wheel's RECORD")
                fetched[name] = data
                return data

            for name in sorted(n for n in names if kept(n) and not n.endswith("/")):
                read(name)
            sources = {n: d for n, d in fetched.items() if n.endswith(".c")}
            headers_needed(sources, names, read)
    except (OSError, KeyError, zipfile.BadZipFile, ValueError) as exc:
        shutil.rmtree(scratch, ignore_errors=True)
        return f"{type(exc).__name__}: {exc}"
    for name, data in fetched.items():
        if ".." in name.split("/") or name.startswith("/"):
            return f"{filename}: a member outside the wheel: {name}"
        path = scratch / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    (scratch / ".complete").write_text(stamp + "".join(f"{n}\n" for n in sorted(fetched)))
    shutil.rmtree(target, ignore_errors=True)
    scratch.rename(target)
    return None


def wheel_name(dist: str, version: str) -> str:
    return f"{dist.replace('-', '_')}-{version}-py3-none-any.whl"


def download(spec: str, into: Path) -> str | None:
    """pip download one wheel; None, or the line saying why not."""
    done = subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check",
         "--no-deps", "--only-binary=:all:", spec, "-d", str(into)],
        capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines()
        return lines[-1] if lines else "not downloaded"
    return None


def extract(dist: str, version: str, keep: tuple[str, ...]) -> str | None:
    target = CACHE / f"{dist}-{version}"
    done = target / ".complete"
    if done.is_file() and done.read_text().splitlines()[1:] == list(keep):
        return None
    shutil.rmtree(target, ignore_errors=True)
    scratch = CACHE / f".download-{dist}"
    scratch.mkdir(exist_ok=True)
    problem = download(f"{dist}=={version}", scratch)
    if problem:
        return problem
    wheels = sorted(scratch.glob(f"{dist.replace('-', '_')}-{version}-*.whl"))
    if not wheels:
        return "no wheel downloaded"
    with zipfile.ZipFile(wheels[0]) as archive:
        for name in archive.namelist():
            if name.endswith(keep) and ".." not in name.split("/"):
                archive.extract(name, target)
    for wheel in wheels:
        wheel.unlink()
    scratch.rmdir()
    (target / ".complete").write_text("\n".join((wheels[0].name, *keep)) + "\n")
    return None


def sdist(dist: str, version: str, filename: str, sha: str, package: str) -> str | None:
    """The Python files of `package` in a source release, the archive checked by its hash."""
    target = CACHE / f"{dist}-{version}"
    if (target / ".complete").is_file():
        return None
    try:
        url, _ = index_url(dist, version, filename)
        if not url.startswith("https://"):
            return f"not an https URL: {url}"
        with urllib.request.urlopen(url, timeout=120) as answer:  # noqa: S310 (https only)
            data = answer.read()
        if hashlib.sha256(data).hexdigest() != sha:
            return f"{filename} does not have the pinned sha256 {sha}"
        with tarfile.open(fileobj=io.BytesIO(data)) as archive:
            for member in archive.getmembers():
                parts = member.name.split("/")
                if (member.isfile() and len(parts) > 2 and parts[1] == package
                        and member.name.endswith(".py") and ".." not in parts):
                    handle = archive.extractfile(member)
                    if handle is None:
                        continue
                    path = target / "/".join(parts[1:])
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_bytes(handle.read())
    except (OSError, KeyError, tarfile.TarError, ValueError) as exc:
        return f"{type(exc).__name__}: {exc}"
    (target / ".complete").write_text(filename + "\n")
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--no-releases", action="store_true",
                       help="leave out the version matrix's Triton releases")
    which.add_argument("--releases-only", action="store_true",
                       help="fetch only the version matrix's Triton releases")
    args = parser.parse_args(argv)
    failed = []
    if not args.releases_only:
        failed += fetch_wheels()
    if not args.no_releases:
        for dist, version, filename, record_sha in RELEASES:
            problem = release(dist, version, filename, record_sha)
            if problem:
                failed.append(f"{dist}=={version}: {problem}")
    for line in failed:
        print(f"fetch_test_wheels: {line}", file=sys.stderr)
    return 1 if failed else 0


def fetch_wheels() -> list[str]:
    """The wheels, sdists and ranged members under .test-wheels/: the lines of those that
    could not be fetched."""
    CACHE.mkdir(exist_ok=True)
    failed = []
    for dist, version, _ in WHEELS:
        if (CACHE / wheel_name(dist, version)).is_file():
            continue
        problem = download(f"{dist}=={version}", CACHE)
        if problem or not (CACHE / wheel_name(dist, version)).is_file():
            failed.append(f"{dist}=={version}: {problem or 'not downloaded'}")
    for dist, version, keep in EXTRACTED:
        problem = extract(dist, version, keep)
        if problem:
            failed.append(f"{dist}=={version}: {problem}")
    for dist, version, filename, sha, package in SDISTS:
        problem = sdist(dist, version, filename, sha, package)
        if problem:
            failed.append(f"{dist}=={version}: {problem}")
    for dist, version, filename, record_sha, members in RANGED:
        problem = ranged(dist, version, filename, record_sha, members)
        if problem:
            failed.append(f"{dist}=={version}: {problem}")
    return failed


if __name__ == "__main__":
    sys.exit(main())
