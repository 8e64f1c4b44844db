"""Real failure texts of the tools Triton's build runs, made by running those tools.

Each case runs the command Triton 3.9 runs to build its `cuda_utils` module (runtime/build.py:
`[cc, src, -O3, -shared, -fPIC, -Wno-psabi, -o, so, -l:libcuda.so.1, -L..., -I...]`) on Triton's
own `backends/nvidia/driver.c`, with one thing broken (no header, no linker, a full or read-only
temp dir...), or loads a built module the way Triton does
(`importlib.util.spec_from_file_location`), or does the file operation Triton's cache does;
it records what the tool printed.

    python -m tests.probe.toolchain_texts TRITON_DIR OUT.json   # every case (needs root: mounts)

writes the table tests/probe/fixtures/toolchain_texts.json;
`tests/probe/parts/evaluation/test_diagnose.py` checks that every text there is named by the
probe's diagnosis, and re-runs live the cases that need no root (`LIVE`), so a new gcc or
binutils that words a failure differently is noticed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

NOBODY = 65534


def python_include() -> str:
    scheme = sysconfig.get_default_scheme()
    if scheme == "posix_local":
        scheme = "posix_prefix"
    return sysconfig.get_paths(scheme=scheme)["include"]


class Bench:
    """A work dir with Triton's driver.c, a stub libcuda.so.1 and the build's argv."""

    def __init__(self, root: Path, triton_dir: Path) -> None:
        self.root = root
        nvidia = triton_dir / "backends" / "nvidia"
        self.src = root / "src" / "cuda_utils.c"
        self.src.parent.mkdir(parents=True)
        shutil.copy(nvidia / "driver.c", self.src)
        self.lib = root / "lib"
        self.lib.mkdir()
        stub = root / "libcuda_stub.c"
        stub.write_text("int cuInit(unsigned int flags) { (void)flags; return 0; }\n")
        subprocess.run([shutil.which("gcc") or "gcc", str(stub), "-shared", "-fPIC",
                        "-Wl,-soname,libcuda.so.1", "-o", str(self.lib / "libcuda.so.1")],
                       check=True)
        self.include = nvidia / "include"
        self.nvlib = nvidia / "lib"
        self.empty = root / "empty"
        self.empty.mkdir()
        for path in (root, self.src.parent, self.lib, self.empty):
            path.chmod(0o755)
        self.src.chmod(0o644)

    def argv(self, cc: str, out: Path, *, lib: str = "-l:libcuda.so.1", libdirs: bool = True,
             py_include: str | None = None) -> list[str]:
        argv = [cc, str(self.src), "-O3", "-shared", "-fPIC", "-Wno-psabi", "-o", str(out), lib,
                "-L" + str(self.nvlib)]
        if libdirs:
            argv.append("-L" + str(self.lib))
        return [*argv, "-I" + str(self.include), "-I" + str(self.src.parent),
                "-I" + (py_include or python_include())]


def run(argv: list[str], env: dict[str, str] | None = None,
        prefix: list[str] | None = None) -> tuple[int, str]:
    full_env = dict(os.environ, LANG="C", LC_ALL="C")
    full_env.update(env or {})
    done = subprocess.run((prefix or []) + argv, env=full_env, capture_output=True, text=True,
                          timeout=120)
    return done.returncode, done.stderr


def only(bench: Bench, *tools: str) -> str:
    """A PATH dir holding only these tools (links to the real ones)."""
    where = bench.root / ("only-" + "-".join(tools))
    where.mkdir(exist_ok=True)
    for tool in tools:
        found = shutil.which(tool)
        if found and not (where / tool).exists():
            (where / tool).symlink_to(os.path.realpath(found))
    return str(where)


@contextmanager
def tmpfs(path: Path, options: str) -> Iterator[Path]:
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], check=True)
    try:
        yield path
    finally:
        subprocess.run(["umount", str(path)], check=True)


def fill(path: Path) -> None:
    """Fill a file system to its last block (the writes stop at ENOSPC)."""
    fd = os.open(path / "fill", os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError:
        pass
    finally:
        os.close(fd)


def load_module(path: Path) -> str:
    """What Triton's _load_module_from_path raises for this file (or '' when it loads)."""
    code = ("import importlib.util, sys\n"
            "spec = importlib.util.spec_from_file_location('cuda_utils', sys.argv[1])\n"
            "try:\n    m = importlib.util.module_from_spec(spec)\n"
            "    spec.loader.exec_module(m)\n"
            "except BaseException as e:\n    print(type(e).__name__ + ': ' + str(e))\n")
    done = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True,
                          text=True, timeout=60)
    return done.stdout.strip()


def python_op(code: str, *args: str, prefix: list[str] | None = None) -> str:
    """An exception text of a file operation, as the workload's Python reports it."""
    wrapped = ("import os, sys, tempfile\ntry:\n" + "".join("    " + line + "\n"
                                                           for line in code.splitlines())
               + "except BaseException as e:\n    print(type(e).__name__ + ': ' + str(e))\n")
    done = subprocess.run((prefix or []) + ["/usr/bin/python3" if prefix else sys.executable,
                                            "-c", wrapped, *args],
                          capture_output=True, text=True, timeout=60)
    return done.stdout.strip() or done.stderr.strip()


Case = Callable[[Bench], tuple[str, str]]  # -> (the command, what it printed)


def _gcc(bench: Bench, **kwargs: object) -> list[str]:
    return bench.argv(shutil.which("gcc") or "gcc", bench.root / "out.so", **kwargs)  # type: ignore[arg-type]


def case_python_h(bench: Bench) -> tuple[str, str]:
    argv = _gcc(bench, py_include=str(bench.empty))
    return " ".join(argv), run(argv)[1]


def case_libc_headers(bench: Bench) -> tuple[str, str]:
    argv = _gcc(bench)
    argv.insert(1, "--sysroot=" + str(bench.empty))
    return " ".join(argv), run(argv)[1]


def case_no_as(bench: Bench) -> tuple[str, str]:
    argv = _gcc(bench)
    return "PATH=<gcc only> " + " ".join(argv), run(argv, {"PATH": only(bench, "gcc")})[1]


def case_no_ld(bench: Bench) -> tuple[str, str]:
    argv = _gcc(bench)
    return ("PATH=<gcc, as> " + " ".join(argv),
            run(argv, {"PATH": only(bench, "gcc", "as")})[1])


def case_no_libcuda_1(bench: Bench) -> tuple[str, str]:
    argv = _gcc(bench, libdirs=False)
    return " ".join(argv), run(argv)[1]


def case_no_libcuda_unversioned(bench: Bench) -> tuple[str, str]:
    argv = _gcc(bench, lib="-lcuda")
    return " ".join(argv), run(argv)[1]


def case_bad_march(bench: Bench) -> tuple[str, str]:
    argv = _gcc(bench)
    argv.insert(1, "-march=fleetcheck")
    return " ".join(argv), run(argv)[1]


def case_unknown_option(bench: Bench) -> tuple[str, str]:
    argv = _gcc(bench)
    argv.insert(1, "-mfleetcheck")
    return " ".join(argv), run(argv)[1]


def case_cc1_killed(bench: Bench) -> tuple[str, str]:
    # A cc1 the kernel kills, as the OOM killer does under a container's memory limit.
    kill = bench.root / "killed" / "cc1"
    kill.parent.mkdir(exist_ok=True)
    kill.write_text("#!/bin/sh\nkill -9 $$\n")
    kill.chmod(0o755)
    argv = _gcc(bench)
    argv.insert(1, "-B" + str(kill.parent) + "/")
    return " ".join(argv), run(argv)[1]


def case_cc1_out_of_memory(bench: Bench) -> tuple[str, str]:
    argv = _gcc(bench)
    shell = ["sh", "-c", 'ulimit -v 60000; exec "$@"', "sh"]
    return "ulimit -v 60000; " + " ".join(argv), run(argv, prefix=shell)[1]


def case_cc_not_found(bench: Bench) -> tuple[str, str]:
    return "CC=/nonexistent/gcc", python_op(
        "import subprocess\nsubprocess.check_call(['/nonexistent/gcc', '--version'])")


def case_cc_wrong_format(bench: Bench) -> tuple[str, str]:
    junk = bench.root / "not-a-program"
    junk.write_bytes(b"\x7fELF\x01\x01\x01" + b"\0" * 64)
    junk.chmod(0o755)
    return "CC=<an ELF header of another machine>", python_op(
        "import subprocess\nsubprocess.check_call([sys.argv[1], '--version'])", str(junk))


def case_clang_python_h(bench: Bench) -> tuple[str, str]:
    argv = bench.argv("clang", bench.root / "out.so", py_include=str(bench.empty))
    return " ".join(argv), run(argv)[1]


def case_clang_no_ld(bench: Bench) -> tuple[str, str]:
    argv = bench.argv("clang", bench.root / "out.so")
    return "PATH=<clang only> " + " ".join(argv), run(argv, {"PATH": only(bench, "clang")})[1]


def case_clang_no_libcuda(bench: Bench) -> tuple[str, str]:
    argv = bench.argv("clang", bench.root / "out.so", libdirs=False)
    return " ".join(argv), run(argv)[1]


def case_tmp_full(bench: Bench) -> tuple[str, str]:
    with tmpfs(bench.root / "tmpfull", "size=64k") as where:
        fill(where)
        argv = _gcc(bench)
        return "TMPDIR=<full tmpfs> " + " ".join(argv), run(argv, {"TMPDIR": str(where)})[1]


def case_clang_tmp_full(bench: Bench) -> tuple[str, str]:
    with tmpfs(bench.root / "tmpfull", "size=64k") as where:
        fill(where)
        argv = bench.argv("clang", bench.root / "out.so")
        return "TMPDIR=<full tmpfs> " + " ".join(argv), run(argv, {"TMPDIR": str(where)})[1]


def case_output_full(bench: Bench) -> tuple[str, str]:
    with tmpfs(bench.root / "outfull", "size=64k") as where:
        fill(where)
        argv = bench.argv(shutil.which("gcc") or "gcc", where / "cuda_utils.so")
        return "-o <full tmpfs>/cuda_utils.so " + " ".join(argv), run(argv)[1]


def case_output_readonly(bench: Bench) -> tuple[str, str]:
    with tmpfs(bench.root / "outro", "size=1m,ro") as where:
        argv = bench.argv(shutil.which("gcc") or "gcc", where / "cuda_utils.so")
        return "-o <read-only tmpfs>/cuda_utils.so " + " ".join(argv), run(argv)[1]


def case_output_eacces(bench: Bench) -> tuple[str, str]:
    where = bench.root / "root-only"
    where.mkdir()
    where.chmod(0o755)
    argv = bench.argv(shutil.which("gcc") or "gcc", where / "cuda_utils.so",
                      py_include="/usr/include/python3.11")
    prefix = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    return "as nobody, -o <a dir of root's> " + " ".join(argv), run(argv, prefix=prefix)[1]


def _include_eacces(bench: Bench, private: Path, locked: Path) -> tuple[str, str]:
    # The workload runs as a user who cannot read the interpreter's include dir (a pyenv
    # Python under /root, mode 0700, used by another user).
    private.mkdir(parents=True)
    (private / "Python.h").write_text("")
    locked.chmod(0o700)
    out = bench.root / "out"
    out.mkdir()
    out.chmod(0o777)
    argv = bench.argv(shutil.which("gcc") or "gcc", out / "cuda_utils.so",
                      py_include=str(private))
    prefix = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    return f"as nobody, -I <include dir; {locked.name} mode 0700> " + " ".join(argv), run(
        argv, prefix=prefix)[1]


def case_include_parent_eacces(bench: Bench) -> tuple[str, str]:
    home = bench.root / "root-home"
    return _include_eacces(bench, home / "include" / "python3.12", home)


def case_include_eacces(bench: Bench) -> tuple[str, str]:
    private = bench.root / "include" / "python3.12"
    return _include_eacces(bench, private, private)


def case_write_full(bench: Bench) -> tuple[str, str]:
    with tmpfs(bench.root / "cachefull", "size=64k") as where:
        fill(where)
        return "open(<full tmpfs>/x.so, 'wb').write(32 KiB)", python_op(
            "open(os.path.join(sys.argv[1], 'x.so'), 'wb').write(b'0' * 32768)", str(where))


def case_makedirs_eacces(bench: Bench) -> tuple[str, str]:
    where = bench.root / "home-of-root"
    where.mkdir()
    where.chmod(0o755)
    prefix = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    return "as nobody: os.makedirs(<root's dir>/.triton/cache/KEY)", python_op(
        "os.makedirs(os.path.join(sys.argv[1], '.triton', 'cache', 'KEY'), exist_ok=True)",
        str(where), prefix=prefix)


def case_makedirs_readonly(bench: Bench) -> tuple[str, str]:
    with tmpfs(bench.root / "cachero", "size=1m,ro") as where:
        return "os.makedirs(<read-only tmpfs>/cache/KEY)", python_op(
            "os.makedirs(os.path.join(sys.argv[1], 'cache', 'KEY'), exist_ok=True)", str(where))


def case_no_usable_tempdir(bench: Bench) -> tuple[str, str]:
    prefix = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "env",
              "TMPDIR=/nonexistent"]
    where = bench.root / "root-only-cwd"
    where.mkdir()
    where.chmod(0o755)
    return "as nobody, every tempfile candidate unwritable", python_op(
        "tempfile._candidate_tempdir_list = lambda: [sys.argv[1]]\ntempfile.gettempdir()",
        str(where), prefix=prefix)


def case_load_noexec(bench: Bench) -> tuple[str, str]:
    built = bench.root / "built.so"
    run(bench.argv(shutil.which("gcc") or "gcc", built))
    with tmpfs(bench.root / "noexec", "size=4m,noexec") as where:
        shutil.copy(built, where / "cuda_utils.so")
        return "load <noexec tmpfs>/cuda_utils.so", load_module(where / "cuda_utils.so")


def case_load_no_libcuda(bench: Bench) -> tuple[str, str]:
    # Linked against libcuda.so.1 (found at link time through -L), loaded where the dynamic
    # loader finds none: what Triton's dlopen of cuda_utils.so then says.
    src = bench.root / "needs.c"
    src.write_text("int cuInit(unsigned int); int PyInit_cuda_utils(void) { return cuInit(0); }\n")
    built = bench.root / "needs-libcuda.so"
    run([shutil.which("gcc") or "gcc", str(src), "-shared", "-fPIC", "-o", str(built),
         "-L" + str(bench.lib), "-l:libcuda.so.1"])
    return "load a module linked to libcuda.so.1 where the loader finds none", load_module(built)


def case_load_undefined_symbol(bench: Bench) -> tuple[str, str]:
    src = bench.root / "undef.c"
    src.write_text("int cuTensorMapEncodeTiled(int); int PyInit_cuda_utils(void)"
                   " { return cuTensorMapEncodeTiled(0); }\n")
    built = bench.root / "undef.so"
    run([shutil.which("gcc") or "gcc", str(src), "-shared", "-fPIC", "-o", str(built)])
    return "load a module needing a driver function the libcuda lacks", load_module(built)


def case_load_truncated(bench: Bench) -> tuple[str, str]:
    path = bench.root / "truncated.so"
    path.write_bytes(b"\x7fELF")
    return "load a cache entry cut short", load_module(path)


def case_load_not_elf(bench: Bench) -> tuple[str, str]:
    path = bench.root / "garbage.so"
    path.write_bytes(b"not an ELF file " * 64)
    return "load a cache entry that is not ELF", load_module(path)


#: (case, the cause the probe must name, whether it runs without root, where the failing file
#: operation was: the Triton cache, the temp dir, or None when the text says it all).
CASES: tuple[tuple[Case, str, bool, str | None], ...] = (
    (case_python_h, "python_headers_missing", True, None),
    (case_libc_headers, "libc_headers_missing", True, None),
    (case_no_as, "no_linker", True, None),
    (case_no_ld, "no_linker", True, None),
    (case_no_libcuda_1, "libcuda_not_in_ldcache", True, None),
    (case_no_libcuda_unversioned, "libcuda_unversioned_missing", True, None),
    (case_bad_march, "cc_rejects_flags", True, None),
    (case_unknown_option, "cc_rejects_flags", True, None),
    (case_cc1_killed, "compiler_killed", True, None),
    (case_cc1_out_of_memory, "compiler_killed", True, None),
    (case_cc_not_found, "cc_env_invalid", True, None),
    (case_cc_wrong_format, "cc_env_invalid", True, None),
    (case_clang_python_h, "python_headers_missing", False, None),
    (case_clang_no_ld, "no_linker", False, None),
    (case_clang_no_libcuda, "libcuda_not_in_ldcache", False, None),
    (case_tmp_full, "tmp_dir_unusable", False, None),
    (case_clang_tmp_full, "tmp_dir_unusable", False, None),
    (case_output_full, "tmp_dir_unusable", False, None),
    (case_output_readonly, "tmp_dir_unusable", False, None),
    (case_output_eacces, "tmp_dir_unusable", False, None),
    (case_include_parent_eacces, "include_dir_unreadable", False, None),
    (case_include_eacces, "include_dir_unreadable", False, None),
    (case_write_full, "cache_dir_full", False, "cache"),
    (case_makedirs_eacces, "cache_dir_unwritable", False, "cache"),
    (case_makedirs_readonly, "cache_dir_unwritable", False, "cache"),
    (case_no_usable_tempdir, "tmp_dir_unusable", False, "tmp"),
    (case_load_noexec, "cache_dir_noexec", False, None),
    (case_load_no_libcuda, "zero_active_drivers", True, None),
    (case_load_undefined_symbol, "driver_too_old", True, None),
    (case_load_truncated, "cache_entry_corrupt", True, None),
    (case_load_not_elf, "cache_entry_corrupt", True, None),
)

#: The cases a test re-runs with the machine's own tools (gcc, binutils, the loader; no root).
LIVE = tuple((case, cause) for case, cause, unprivileged, _ in CASES if unprivileged)


def produce(case: Case, triton_dir: Path) -> tuple[str, str]:
    """(command, text) of one case; the bench's paths become <bench>, Triton's <triton>."""
    with tempfile.TemporaryDirectory(prefix="fleetcheck-texts-") as tmp:
        root = Path(tmp)
        root.chmod(0o755)
        command, text = case(Bench(root, triton_dir))
        names = ((os.path.realpath(tmp), "<bench>"), (tmp, "<bench>"),
                 (os.path.realpath(triton_dir), "<triton>"), (str(triton_dir), "<triton>"))
        for path, name in names:
            command, text = command.replace(path, name), text.replace(path, name)
        return command, text


def main(argv: list[str]) -> int:
    triton_dir, out = Path(argv[0]), Path(argv[1])
    rows = []
    for case, cause, _, where in CASES:
        command, text = produce(case, triton_dir)
        rows.append({"case": case.__name__[5:], "cause": cause, "where": where,
                     "command": command, "text": text})
    tools = {"gcc": run(["gcc", "--version"])[1] or subprocess.run(
        ["gcc", "--version"], capture_output=True, text=True).stdout.splitlines()[0]}
    for tool in ("clang", "ld"):
        if shutil.which(tool):
            tools[tool] = subprocess.run([tool, "--version"], capture_output=True,
                                         text=True).stdout.splitlines()[0]
    out.write_text(json.dumps({"made_with": tools, "triton_source": str(argv[2]) if len(argv) > 2
                               else "triton/backends/nvidia/driver.c", "rows": rows},
                              indent=1, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
