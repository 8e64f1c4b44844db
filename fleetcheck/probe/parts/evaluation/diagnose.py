"""A failed Triton step named from its own message: the texts the records name, the errno and
the object it names, the limit that explains it.

The workload stage (scripts/own_path.py) records what failed: the exception, its errno and
path, every compiler run Triton made with the compiler's own stderr, and which directory a
reproduced file operation failed in. `diagnoses` reads those in that order and returns every
cause they name, the most precise first, each with the line that names it and the values its
fix is filled with; the caller takes the first whose own check did not pass. The texts are
the real ones of gcc 12/13, clang 14, GNU ld 2.40/2.42 and glibc's loader
(tests/probe/fixtures/toolchain_texts.json, made by running those tools).
"""

import os
import re

from fleetcheck.probe.parts.evaluation.classify import message_causes
from fleetcheck.probe.parts.evaluation.objects import explain, parse_oserror


def inside(path, top):
    """Whether `path` is `top` or below it (both as given and resolved)."""
    if not path or not top:
        return False
    for one, other in ((path, top), (os.path.realpath(path), os.path.realpath(top))):
        if one == other or one.startswith(other.rstrip("/") + "/"):
            return True
    return False


def place_of(path, places):
    """('cache' or 'tmp', the dir) or (None, None): which of the workload's dirs holds path."""
    for place in ("cache", "tmp"):
        for top in places.get(place) or []:
            if inside(path, top):
                return place, top
    return None, None


def first_text_line(text):
    for line in (text or "").splitlines():
        if line.strip():
            return line.strip()
    return ""


def object_causes(text, errno_name, filename, where, places, node):
    """[(cause, line, values)] from an errno (given, or read from the text) and its object."""
    parsed = parse_oserror(text) or {}
    errno_name = errno_name or parsed.get("errno")
    filename = filename or parsed.get("filename")
    line = first_text_line(text)
    for one in (text or "").splitlines():
        if (parsed.get("strerror") and parsed["strerror"] in one) or "failed to map" in one:
            line = one.strip()
            break
    if not errno_name and "failed to map segment" not in (text or "") and (
            "cannot open shared object" not in (text or "")):
        return []
    if errno_name in ("ENOENT", "ENOEXEC") and filename and filename == places.get("cc"):
        return [("cc_env_invalid", line, {})]
    place, top = place_of(filename, places) if filename else (None, None)
    if place is None and where in ("cache", "tmp") and not filename:
        place, top = where, (places.get(where) or [None])[0]
    mapped = re.search(r"(/[^\s:]+): failed to map segment", text or "")
    if mapped and place is None:
        place, top = place_of(mapped.group(1), places)
    found = explain(errno_name, filename, text, node.get("mountinfo"), node.get("limits") or {},
                    place, top)
    return [(cause, line, values) for cause, values in found]


def compiler_causes(run, places, node):
    """[(cause, line, values)] from one failed compiler run: its stderr, read with its argv."""
    stderr = run.get("stderr") or ""
    found = []
    for cause, line in message_causes(stderr):
        if cause == "include_dir_unreadable":
            named = re.search(r": (/\S+): Permission denied", line)
            if named and place_of(named.group(1), places)[0] == "tmp":
                cause = "tmp_dir_unusable"
        found.append((cause, line, {"path": (re.findall(r"(/\S+): Permission", line)
                                             or [""])[0]}))
    # The compiler writes only into Triton's temp dir: an errno without a path is there.
    objects = object_causes(stderr, None, None, "tmp", places, node)
    # A limit of the job's that explains the errno (cc1 out of memory under ulimit -v, ld
    # killed by SIGXFSZ under ulimit -f, cc1 killed under memory.max) is named before the
    # tool's text ("the compiler was killed"): raising it is the fix.
    limits = [one for one in objects if one[2].get("limit")]
    objects = [one for one in objects if not one[2].get("limit")]
    # A tool's own text names the part of the toolchain; where it names only a dir (the temp
    # dir), the errno and the object in the same line say what about it.
    found = limits + (objects + found if not found or found[0][0] == "tmp_dir_unusable" else (
        found + objects))
    if run.get("error"):
        found += object_causes(run["error"], run.get("errno"), run.get("filename"), None,
                               places, node)
    return found


def diagnoses(failure, places, node=None):
    """[(cause, the message line that names it, values)] for a failed Triton step.

    failure: {"error": the exception text, "errno": its errno name, "filename": its path,
    "where": "cache"/"tmp" (the dir a reproduced file operation failed in), "compiler": the
    compiler runs Triton made, each {"argv", "rc", "stderr", "error", "errno", "filename"}}.
    places: {"cache": [dirs], "tmp": [dirs], "include": [dirs], "cc": the compiler path}.
    node: {"mountinfo": the text, "limits": objects.read_limits()}.
    """
    node = node or {}
    for run in reversed(failure.get("compiler") or []):
        if run.get("rc") not in (0, None) or run.get("error"):
            return compiler_causes(run, places, node)
    text = failure.get("error") or ""
    if "No usable temporary directory" in text:
        return [("tmp_dir_unusable", first_text_line(text), {})]
    found = object_causes(text, failure.get("errno"), failure.get("filename"),
                          failure.get("where"), places, node)
    texts: list = [(cause, line, {}) for cause, line in message_causes(text)]
    if "cannot open shared object" in text:
        return texts + found
    return found + texts


def diagnose(failure, places, node=None):
    """(cause or None, the line that names it): the first of `diagnoses`."""
    found = diagnoses(failure, places, node)
    if found:
        return found[0][0], found[0][1]
    runs = [r for r in failure.get("compiler") or [] if r.get("rc") not in (0, None)
            or r.get("error")]
    if runs:
        return None, first_text_line(runs[-1].get("stderr") or runs[-1].get("error"))
    return None, ""
