"""Where a command's text goes: stdout, which outlives a reader that left (`| head`), or a file
written atomically; the operator's lines on stderr; the format -o's suffix names; and the -o
and --history paths refused before anything is probed."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Sequence
from typing import Any

from fleetcheck.cli.options import UsageError


def prepare_stdout() -> None:
    """Before anything is written: a report must be written even if a node sent text this
    terminal cannot encode."""
    if hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(errors="replace")


def to_file(output: str | None) -> bool:
    """Whether `output` (-o) names a file; None, '-' and /dev/stdout are stdout."""
    return output not in (None, "-", "/dev/stdout")


def say(lines: Sequence[str], *, prefix: str = "fleetcheck: ") -> None:
    """Lines for the operator, on stderr; fleetcheck's own name before each unless told
    otherwise (the gate's lines for blocking nodes begin with the node)."""
    for line in lines:
        print(f"{prefix}{line}", file=sys.stderr)


def emit(text: str, output: str | None = None) -> None:
    """Print to stdout, or write FILE atomically (readable, never group/world-writable)."""
    if output is None or not to_file(output):
        try:
            sys.stdout.write(text)
            sys.stdout.flush()
        except BrokenPipeError:
            # `fleetcheck … | head`: the reader left; the exit code must still say what was
            # found.
            silence_stdout()
        except OSError as exc:
            # A full disk or a failing device behind `>`: said in one line, like -o FILE.
            silence_stdout()
            raise UsageError(f"standard output: cannot write report: {exc.strerror or exc}"
                             ) from None
        return
    from fleetcheck.report.reportio import write_atomic

    umask = os.umask(0)
    os.umask(umask)
    try:
        write_atomic(output, text, mode=0o644 & ~umask)
    except OSError as exc:
        raise UsageError(f"{output}: cannot write report: {exc.strerror or exc}") from None


def silence_stdout() -> None:
    """Point stdout at /dev/null after its reader left, so the flush at exit stays quiet."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def flush_streams() -> bool:
    """Flush stdout and stderr before the process ends; False when stdout could not be
    written (said on stderr). A reader that left (`fleetcheck audit | head`) is no failure,
    as in `emit`."""
    written = True
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        pass
    except (OSError, ValueError) as exc:
        print(f"fleetcheck: error: writing standard output: {exc}", file=sys.stderr)
        written = False
    try:
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    return written


def output_format(fmt: str | None, output: str | None,
                  formats: Iterable[str] | None = None) -> str:
    """The format asked for, else the one of `formats` (default: all) that `output`'s suffix
    names in the renderers' registry, else the table."""
    if fmt:
        return fmt
    if output and output != "-":
        from fleetcheck.render import FORMATS, format_for_path

        return format_for_path(output, FORMATS if formats is None else formats) or "table"
    return "table"


def file_options(output: str | None) -> dict[str, Any]:
    """A table written to a file gets no colour and no terminal width limit."""
    return {"color": False, "width": 0} if to_file(output) else {}


def check_output(output: str | None) -> None:
    """Refuse an -o FILE that cannot be written, before anything is probed."""
    if output is None or not to_file(output):
        return
    target = os.path.realpath(output)
    if os.path.isdir(target):
        raise UsageError(f"{output}: is a folder, not a file")
    if os.path.exists(target) and not os.path.isfile(target):
        return  # a device or FIFO: written to as it is
    folder = os.path.dirname(target) or "."
    if not os.path.isdir(folder):
        raise UsageError(f"{output}: folder {folder} does not exist")
    if not os.access(folder, os.W_OK):
        raise UsageError(f"{output}: folder {folder} is not writable")


def check_history(directory: str) -> None:
    """Refuse a --history DIR that cannot hold runs, before anything is probed."""
    path = os.path.abspath(directory)
    probe = path
    while not os.path.exists(probe):
        probe = os.path.dirname(probe)
    if not os.path.isdir(probe):
        raise UsageError(f"--history {directory}: {probe} is not a folder")
    if not os.access(probe, os.W_OK):
        raise UsageError(f"--history {directory}: {probe} is not writable")
