"""The node probe: its source as package data (sent over stdin) and the argv that runs it."""

from __future__ import annotations

import functools
import pkgutil

__all__ = ["probe_argv", "probe_source"]


@functools.lru_cache(maxsize=1)
def probe_source() -> str:
    """The text of probe.py, read once as package data (it is sent to nodes, not imported).

    pkgutil.get_data reads it through the package's loader, as importlib.resources would, at a
    fraction of the import cost (7 ms of every start, bench/results.md).
    """
    data = pkgutil.get_data(__package__, "probe.py")
    if data is None:  # a loader that cannot read package data
        raise FileNotFoundError(f"{__package__}/probe.py")
    return data.decode("utf-8")


def probe_argv(
    python: str, *, deep: bool, deadline: float, workload_python: str | None = None
) -> list[str]:
    """The argv that runs the probe read from stdin on a node.

    `python` runs the probe (any CPython >= 3.8); `workload_python` is the interpreter whose
    torch/Triton stack is checked (default: `python` itself).
    """
    argv = [python, "-", "--deadline", format(float(deadline), "g")]
    if deep:
        argv.append("--deep")
    if workload_python and workload_python != python:
        argv += ["--python", workload_python]
    return argv
