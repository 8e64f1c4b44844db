"""A failed Triton step named from its own message: compiler, linker, loader texts and errnos.

The workload stage (scripts/own_path.py) records what failed: the exception, its errno and
path, every compiler run Triton made with the compiler's own stderr, and which directory a
reproduced file operation failed in. `diagnose` reads those in that order and names the cause;
it returns None only when no message names one (then the report shows the captured message).
The texts below are the real ones of gcc 12/13, clang 14, GNU ld 2.40/2.42 and glibc's loader
(tests/probe/fixtures/toolchain_texts.json, made by running those tools).
"""

import os
import re

from fleetcheck.probe.parts.classify import ERROR_PATTERNS

#: What the compiler, assembler, linker and dynamic loader print -> the cause (first match
#: wins). gcc quotes with ‘’ in UTF-8 locales and with '' under LANG=C, hence the dots.
TOOL_TEXTS = (
    (r"cannot find .ld.|\"ld\" doesn't exist|cannot execute .ld.|error trying to exec .ld.",
     "no_linker"),
    (r"cannot execute .as.|\"as\" doesn't exist|error trying to exec .as.", "no_linker"),
    (r"cannot execute .(cc1|cc1plus|collect2).|error trying to exec .cc1.", "no_c_compiler"),
    (r"Killed signal terminated program|out of memory allocating|virtual memory exhausted"
     r"|internal compiler error: (Killed|Segmentation fault) signal", "compiler_killed"),
    (r"unrecognized command[- ]line option|bad value .* for .-m[\w-]+=. switch"
     r"|unknown argument: |unsupported option", "cc_rejects_flags"),
    (r"(error|fatal error): (\S+): Permission denied", "include_dir_unreadable"),
    (r"\bPython\.h.?(: No such file| file not found)", "python_headers_missing"),
    (r"fatal error: .?[\w./-]+\.h.?(: No such file| file not found)", "libc_headers_missing"),
    (r"cannot find -lcuda\b", "libcuda_unversioned_missing"),
    (r"cannot find -l:?libcuda\.so\.1", "libcuda_not_in_ldcache"),
    (r"No space left on device|Disk quota exceeded|IO failure on output stream"
     r"|cannot open output file .*: (Permission denied|Read-only file system)"
     r"|No usable temporary directory found", "tmp_dir_unusable"),
    (r"failed to map segment from shared object", "cache_dir_noexec"),
    (r"libcuda\.so\.1: cannot open shared object file", "zero_active_drivers"),
    (r"undefined symbol: cu[A-Z]\w*", "driver_too_old"),
    (r"version .GLIBC_[\d.]+. not found", "glibc_too_old"),
    (r"file too short|invalid ELF header", "cache_entry_corrupt"),
    (r"Unknown backend device|Backend device '[^']*' is not active", "triton_default_backend"),
    (r"\b([2-9]|\d\d+) active drivers", "triton_backends_conflict"),
)

#: How to repair what the diagnosis names where no check of its own gives the fix.
DIAGNOSIS_FIXES = {
    "compiler_killed": "the compiler was killed (out of memory): raise the memory limit of the "
                       "job or container (cgroup memory.max, ulimit -v)",
    "cc_rejects_flags": "set CC to gcc or clang (this one rejects the flags Triton passes)",
    "include_dir_unreadable": "make the include dir (and its parents) readable by the workload's "
                              "user, or use an interpreter installed for that user",
    "cache_entry_corrupt": "remove the damaged entry from the Triton cache (or the whole cache "
                           "dir): Triton rebuilds it",
    "glibc_too_old": "this Triton wheel needs a newer glibc (manylinux_2_27+): a newer OS image",
    "process_limits": "raise the job's process, open-file or memory limit (pids.max, ulimit)",
    "disk_full": "free space on the file system the failing write went to",
    "triton_default_backend": "unset TRITON_DEFAULT_BACKEND, or set it to nvidia",
    "triton_no_backends": "reinstall Triton with pip (its dist-info's entry_points.txt names the "
                          "backends), or set TRITON_BACKENDS_IN_TREE=1",
    "triton_backends_conflict": "remove the extra Triton backend package (pip list | grep -i "
                                "triton), or set TRITON_DEFAULT_BACKEND=nvidia (Triton >= 3.9)",
}

#: Short names of the causes only the diagnosis names (catalogue.CAUSE_LABELS has the checks').
DIAGNOSIS_LABELS = {
    "compiler_killed": "the C compiler was killed (out of memory)",
    "cc_rejects_flags": "the C compiler rejects Triton's flags",
    "include_dir_unreadable": "an include dir is unreadable for the workload's user",
    "cache_entry_corrupt": "a damaged Triton cache entry",
    "glibc_too_old": "glibc too old for this Triton",
    "process_limits": "a process, file or memory limit of the job",
    "disk_full": "no space left on a file system Triton writes",
    "triton_default_backend": "TRITON_DEFAULT_BACKEND names no active backend",
    "triton_backends_conflict": "more than one active Triton backend",
    "triton_no_backends": "Triton finds no backend (installed without its metadata)",
    # Named by fla_fallback_hidden (its evidence's `matches`): FLA's own import raises.
    "fla_import_fails": "flash-linear-attention cannot be imported",
}

#: A diagnosis that names a toolchain cause a warm cache hides (see evaluate.MASKABLE).
TOOLCHAIN_CAUSES = frozenset({"cc_env_invalid", "no_c_compiler", "no_linker",
                              "libc_headers_missing", "python_headers_missing",
                              "libcuda_unversioned_missing", "include_dir_unreadable",
                              "cc_rejects_flags", "compiler_killed"})


#: errno names -> (cause in the Triton cache, cause in the temp dir, cause elsewhere).
ERRNO_CAUSES = {
    "ENOSPC": ("cache_dir_full", "tmp_dir_unusable", "disk_full"),
    "EDQUOT": ("cache_dir_full", "tmp_dir_unusable", "disk_full"),
    "EACCES": ("cache_dir_unwritable", "tmp_dir_unusable", None),
    "EPERM": ("cache_dir_unwritable", "tmp_dir_unusable", None),
    "EROFS": ("cache_dir_unwritable", "tmp_dir_unusable", None),
    "ENOTDIR": ("cache_dir_unwritable", "tmp_dir_unusable", None),
    "EAGAIN": ("process_limits",) * 3,
    "EMFILE": ("process_limits",) * 3,
    "ENFILE": ("process_limits",) * 3,
    "ENOMEM": ("process_limits",) * 3,
}


def tool_cause(text):
    """(cause, the line that names it) from a tool's or the loader's text, or (None, '')."""
    for pattern, cause in TOOL_TEXTS:
        for line in (text or "").splitlines():
            if re.search(pattern, line):
                return cause, line.strip()
    return None, ""


def inside(path, top):
    """Whether `path` is `top` or below it (both as given and resolved)."""
    if not path or not top:
        return False
    for one, other in ((path, top), (os.path.realpath(path), os.path.realpath(top))):
        if one == other or one.startswith(other.rstrip("/") + "/"):
            return True
    return False


def place_of(path, places):
    """'cache', 'tmp' or None: which of the workload's dirs a path is in."""
    if any(inside(path, top) for top in places.get("cache") or []):
        return "cache"
    if any(inside(path, top) for top in places.get("tmp") or []):
        return "tmp"
    return None


def text_paths(text):
    """Absolute paths a message names (quoted or after 'to '/'file ')."""
    return re.findall(r"(?:'|‘|\bto |\bfile )(/[^'’:\s]+)", text or "")


def compiler_cause(run, places):
    """(cause, line) from one failed compiler run: its stderr, read with its argv."""
    stderr = run.get("stderr") or ""
    cause, line = tool_cause(stderr)
    if cause == "include_dir_unreadable":
        named = re.search(r": (/\S+): Permission denied", line)
        if named and place_of(named.group(1), places) == "tmp":
            cause = "tmp_dir_unusable"
    elif cause == "tmp_dir_unusable":
        # The compiler writes only into Triton's temp dir (the -o path and its own temp
        # files); a path the message names says which one it was.
        for path in text_paths(line):
            if place_of(path, places) == "cache":
                cause = "cache_dir_full"
    if cause is None and run.get("error"):
        cause, line = error_cause(run["error"], run.get("errno"), run.get("filename"),
                                  None, places)
    return cause, line


def error_cause(text, errno_name, filename, where, places):
    """(cause, line) from an exception: its errno and the dir it failed in, then its text."""
    if errno_name in ("ENOENT", "ENOEXEC") and filename and filename == places.get("cc"):
        return "cc_env_invalid", first_text_line(text)
    if errno_name == "ENOENT" and "No usable temporary directory" in (text or ""):
        return "tmp_dir_unusable", first_text_line(text)
    if errno_name in ERRNO_CAUSES:
        at = place_of(filename, places) if filename else None
        at = at or where
        cache, tmp, other = ERRNO_CAUSES[errno_name]
        cause = cache if at == "cache" else tmp if at == "tmp" else other
        if cause:
            return cause, first_text_line(text)
    cause, line = tool_cause(text)
    if cause:
        return cause, line
    for pattern, check_id in ERROR_PATTERNS:
        for line in (text or "").splitlines():
            if re.search(pattern, line):
                return check_id, line.strip()
    return None, ""


def first_text_line(text):
    for line in (text or "").splitlines():
        if line.strip():
            return line.strip()
    return ""


def diagnose(failure, places):
    """(cause or None, the message line that names it) for a failed Triton step.

    failure: {"error": the exception text, "errno": its errno name, "filename": its path,
    "where": "cache"/"tmp" (the dir a reproduced file operation failed in), "compiler": the
    compiler runs Triton made, each {"argv", "rc", "stderr", "error", "errno", "filename"}}.
    places: {"cache": [dirs], "tmp": [dirs], "include": [dirs], "cc": the compiler path}.
    """
    for run in reversed(failure.get("compiler") or []):
        if run.get("rc") not in (0, None) or run.get("error"):
            cause, line = compiler_cause(run, places)
            if cause:
                return cause, line
            return None, first_text_line(run.get("stderr") or run.get("error"))
    return error_cause(failure.get("error"), failure.get("errno"), failure.get("filename"),
                       failure.get("where"), places)
