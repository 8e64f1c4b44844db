"""Text and path helpers every part uses: the sysroot, clipping, bounded JSON, versions."""

import collections
import os
import re

#: mypy reads `if TYPE_CHECKING:` as true; the probe never does, so it never imports typing.
TYPE_CHECKING = False


MAX_TEXT = 4096

SYSROOT = os.environ.get("FLEETCHECK_SYSROOT") or "/"


def host_path(path):
    """A node path (/dev/..., /proc/...) under FLEETCHECK_SYSROOT."""
    if SYSROOT in ("", "/"):
        return path
    return SYSROOT.rstrip("/") + path


def clip(text, limit=MAX_TEXT):
    """Bound a text for the JSON (keeps the end of long compiler output, where errors are)."""
    if text is None:
        return None
    text = str(text)
    if len(text) <= limit:
        return text
    return "…" + text[-(limit - 1):]


def clip_head(text, limit):
    """Bound a one-line text, keeping its start (summaries, fixes, reasons)."""
    text = str(text or "")
    return text if len(text) <= limit else text[:limit - 1] + "…"


def bounded(value, depth=0):
    """A JSON-safe copy of `value` with every string clipped and nesting limited."""
    if depth > 8:
        return None
    if isinstance(value, str):
        return clip(value)
    if isinstance(value, bool) or value is None or isinstance(value, int):
        return value
    if isinstance(value, float):
        return round(value, 3) if value == value else None
    if isinstance(value, dict):
        return {str(k)[:200]: bounded(v, depth + 1) for k, v in list(value.items())[:200]}
    if isinstance(value, (list, tuple)):
        return [bounded(v, depth + 1) for v in list(value)[:200]]
    return clip(repr(value))


def error_text(exc):
    """Exception text as Triton users see it: type name, then str() (repr drops OSError paths)."""
    return clip(type(exc).__name__ + ": " + str(exc))


def read_text(path, limit=1 << 20):
    try:
        with open(path, "rb") as handle:
            return handle.read(limit).decode("utf-8", "replace")
    except OSError:
        return None


def first_line(text):
    for line in (text or "").splitlines():
        if line.strip():
            return line.strip()
    return ""


def version_tuple(text):
    """(3, 6, 0) from '3.6.0+git...'; () when there is no leading number."""
    parts = []
    for piece in re.split(r"[.+\-]", str(text or "")):
        match = re.match(r"\d+", piece)
        if not match:
            break
        parts.append(int(match.group()))
        if len(parts) == 3:
            break
    return tuple(parts)


#: A check's result: status (pass, warn, fail, skip, error), one-line summary, fix, evidence.
CheckResult = collections.namedtuple("CheckResult", "status summary fix evidence")
