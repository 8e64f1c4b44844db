"""A node's own health check for the engines fleets run: the cached verdict, Slurm and NPD.

This module owns the node-health cache (its file format and when it is too old), the one-line
health message, the node-problem-detector custom-plugin protocol, and fleetcheck's Slurm drain
convention (the `fleetcheck:` reason tag; only drains carrying it are ever resumed).

Why a cache: Slurm kills a HealthCheckProgram after 60 s and runs it on every node at once, and
a probe costs seconds (4–6 s on an H200, more with `--deep`). As LBNL NHC does, a timer (or the
nightly run) probes and writes the node's latest verdict (`fleetcheck probe --cache FILE`), and
the health check only reads it: it always ends in well under a second.

The drain bound (fleetcheck/outbound.py): slurmd runs the health check on every node at once,
so under a fleet-wide failure every node decides at the same moment, each knowing only what
slurmctld says. A node first counts its partitions' nodes already out; under the bound it
drains, waits DRAIN_SETTLE_S so that every drain slurmctld stamped in the same second is
visible, and counts again, ranking the nodes out by slurmctld's reason time (one clock for
all), then name: beyond the bound it resumes itself at once. Every node reads the same ranking,
so exactly the bound's number keep their drains.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fleetcheck.budget import DEFAULT_MAX_AGE_S, SLURM_COMMAND_TIMEOUT
from fleetcheck.judgement.exit_codes import EXIT_FAIL, EXIT_PASS, EXIT_UNVERIFIED
from fleetcheck.outbound import OutBound

#: The cache file's schema tag; a file without it is refused, never guessed at.
CACHE_SCHEMA = "fleetcheck.nodehealth/1"

#: Every drain fleetcheck makes starts with this; it resumes only drains that do (NHC's rule).
DRAIN_TAG = "fleetcheck:"

#: node-problem-detector cuts a plugin's stdout to max_output_length (80 by default).
NPD_MAX_MESSAGE = 80

#: node-problem-detector's statuses by exit code (pkg/custompluginmonitor/types: 0 OK,
#: 1 NonOK, anything else Unknown); fleetcheck's own exit codes already follow it.
STATE_EXIT = {"ok": EXIT_PASS, "fail": EXIT_FAIL, "unknown": EXIT_UNVERIFIED}


#: Longest drain reason written (Slurm keeps more, but sinfo's columns do not).
_REASON_MAX = 200


@dataclass(frozen=True)
class Health:
    """What the health check concludes: ok, fail or unknown, with one printable line."""

    state: str
    message: str

    @property
    def exit_code(self) -> int:
        return STATE_EXIT[self.state]


def one_line(text: str, limit: int) -> str:
    """Printable ASCII on one line, no quotes or backslashes (safe in a Slurm reason)."""
    cleaned = "".join(ch if " " <= ch <= "~" and ch not in "\"'\\" else " " for ch in text)
    words = " ".join(cleaned.split())
    return words if len(words) <= limit else words[: limit - 3].rstrip() + "..."


def cache_document(node: Mapping[str, Any], exit_code: int, now: float | None = None) -> str:
    """The cache file's text: the probe's node object, its exit code and when it was written."""
    document = {
        "schema": CACHE_SCHEMA,
        "written_at": time.time() if now is None else now,
        "exit_code": exit_code,
        "node": dict(node),
    }
    return json.dumps(document, ensure_ascii=False, indent=1) + "\n"


def health_of_node(node: Mapping[str, Any], exit_code: int) -> Health:
    """The health of one probed node, from its node JSON and the probe's exit code."""
    def field(mapping: Mapping[str, Any], key: str, default: str = "") -> str:
        value = mapping.get(key)
        return value if isinstance(value, str) else default

    raw_triton = node.get("triton")
    triton: Mapping[str, Any] = raw_triton if isinstance(raw_triton, Mapping) else {}
    status = field(node, "status", "error")
    verdict = field(triton, "verdict", "unknown")
    cause = field(triton, "cause")
    if not cause:
        raw_checks = node.get("checks")
        checks: list[Any] = raw_checks if isinstance(raw_checks, list) else []
        failed = [c.get("id") for c in checks
                  if isinstance(c, Mapping) and c.get("status") == "fail"]
        cause = next((c for c in failed if isinstance(c, str)), "")
    reason = field(node, "reason")
    if exit_code == 0:
        return Health("ok", one_line(f"{status}: Triton {verdict}", _REASON_MAX))
    if exit_code == 1:
        text = ": ".join(part for part in (cause, reason) if part) or f"{status}"
        return Health("fail", one_line(text, _REASON_MAX))
    return Health("unknown", one_line(f"could not verify: {reason or status}", _REASON_MAX))


def read_cache(path: str, max_age_s: float = DEFAULT_MAX_AGE_S,
               now: float | None = None) -> Health:
    """The node's health from the cache file; a missing, broken or stale one is unknown."""
    moment = time.time() if now is None else now
    try:
        with open(path, encoding="utf-8") as handle:
            document = json.load(handle)
    except FileNotFoundError:
        return Health("unknown", one_line(f"no cached result at {path}", _REASON_MAX))
    except (OSError, ValueError) as exc:
        detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        return Health("unknown", one_line(f"{path}: unreadable cache: {detail}", _REASON_MAX))
    if not isinstance(document, dict) or document.get("schema") != CACHE_SCHEMA:
        return Health("unknown", one_line(f"{path}: not a fleetcheck node cache", _REASON_MAX))
    written = document.get("written_at")
    code = document.get("exit_code")
    node = document.get("node")
    if (not isinstance(written, (int, float)) or isinstance(written, bool)
            or not isinstance(code, int) or isinstance(code, bool)
            or not isinstance(node, dict)):
        return Health("unknown", one_line(f"{path}: malformed cache", _REASON_MAX))
    age = moment - float(written)
    if age > max_age_s:
        return Health("unknown", one_line(
            f"cached result is stale: {int(age)} s old (max {int(max_age_s)} s)", _REASON_MAX))
    return health_of_node(node, code)


def npd_message(health: Health) -> str:
    """node-problem-detector's condition message: one line of at most 80 characters."""
    prefix = {"ok": "fleetcheck ok", "fail": "fleetcheck FAIL", "unknown": "fleetcheck unknown"}
    return one_line(f"{prefix[health.state]}: {health.message}", NPD_MAX_MESSAGE)


# --- Slurm ------------------------------------------------------------------------------------

Runner = Callable[[Sequence[str]], "subprocess.CompletedProcess[str]"]


class SlurmError(Exception):
    """A Slurm command failed or timed out; one line, naming the command."""


def _run(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(list(argv), capture_output=True, text=True, check=False,
                              timeout=SLURM_COMMAND_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise SlurmError(f"{argv[0]}: timed out after {SLURM_COMMAND_TIMEOUT:g} s") from None
    except OSError as exc:
        raise SlurmError(f"{argv[0]}: {exc.strerror or exc}") from None


def current_reason(node: str, runner: Runner = _run) -> str:
    """The node's drain reason as sinfo prints it (%E); empty when it has none."""
    done = runner(["sinfo", "-h", "-N", "-n", node, "-o", "%E"])
    if done.returncode != 0:
        raise SlurmError(f"sinfo: {one_line(done.stderr, 160) or 'exit ' + str(done.returncode)}")
    # sinfo -N prints the node once per partition; the reason is the node's, the same on each.
    first = next((line.strip() for line in done.stdout.splitlines() if line.strip()), "")
    return "" if first in ("none", "(null)") else first


def _scontrol(node: str, *settings: str, runner: Runner) -> None:
    done = runner(["scontrol", "update", f"NodeName={node}", *settings])
    if done.returncode != 0:
        detail = one_line(done.stderr, 160) or f"exit {done.returncode}"
        raise SlurmError(f"scontrol: {detail}")


#: Node states (sinfo %T, less its flag suffixes) of a node out of service.
_OUT_STATES = ("drain", "down", "fail")
#: After its own drain, how long a node waits before counting the partition again: every
#: drain slurmctld stamped in the same second as its own is then visible (module docstring).
DRAIN_SETTLE_S = 2.0


def _partitions(node: str, runner: Runner) -> list[str]:
    done = runner(["sinfo", "-h", "-N", "-n", node, "-o", "%R"])
    if done.returncode != 0:
        raise SlurmError(f"sinfo: {one_line(done.stderr, 160) or 'exit ' + str(done.returncode)}")
    return sorted({line.strip() for line in done.stdout.splitlines() if line.strip()})


def _partition_nodes(partition: str, runner: Runner) -> list[tuple[str, bool, str]]:
    """(node, out of service, when its reason was set) for every node of the partition."""
    done = runner(["sinfo", "-h", "-N", "-p", partition, "-o", "%N|%T|%H"])
    if done.returncode != 0:
        raise SlurmError(f"sinfo: {one_line(done.stderr, 160) or 'exit ' + str(done.returncode)}")
    nodes: dict[str, tuple[str, bool, str]] = {}
    for line in done.stdout.splitlines():
        name, _, rest = line.strip().partition("|")
        state, _, stamp = rest.partition("|")
        if name:
            out = state.strip().lower().rstrip("*~#!%$@^-+").startswith(_OUT_STATES)
            # "Unknown" (no reason time) sorts first: out longer than anyone can say.
            when = "" if stamp.strip() in ("", "Unknown", "None") else stamp.strip()
            nodes[name] = (name, out, when)
    return list(nodes.values())


def _over_bound(node: str, bound: OutBound, runner: Runner, *, drained: bool) -> str | None:
    """Why draining `node` would take more of one of its partitions out than the bound allows.

    Before the drain: the nodes already out, this one aside, against the bound. After it (the
    nodes of a fleet-wide failure drain at once): the nodes out ranked by when slurmctld set
    their reasons, then by name; `node` keeps its drain only if it is within the bound.
    """
    for partition in _partitions(node, runner):
        members = _partition_nodes(partition, runner)
        allowed = bound.allowed(len(members))
        out = sorted((when, name) for name, is_out, when in members if is_out and name != node)
        if not drained and len(out) >= allowed:
            return (f"{len(out)} of {len(members)} nodes of partition {partition} already out "
                    f"(--max-out {bound.describe(len(members))} at once)")
        if drained:
            mine = next(((when, name) for name, is_out, when in members if name == node), None)
            ranked = sorted(out + ([mine] if mine else []))
            if mine is not None and ranked.index(mine) >= allowed:
                return (f"{len(ranked) - 1} other nodes of partition {partition} went out "
                        f"first (--max-out {bound.describe(len(members))} at once)")
    return None


def apply_to_slurm(health: Health, node: str, *, drain_unknown: bool = False,
                   runner: Runner = _run, bound: OutBound | None = None,
                   settle_s: float = DRAIN_SETTLE_S) -> str:
    """Drain or resume the node as NHC does; return one line saying what was done.

    fail (or unknown with drain_unknown): drain with reason "fleetcheck: <cause>", unless the
    node already carries someone else's drain reason, which is kept, or the drain would take
    more of one of the node's partitions out of service than `bound` allows: then the node is
    left as it was (`_over_bound` says how a fleet-wide failure is decided). ok: resume the
    node only when its reason is fleetcheck's own. unknown: nothing changes.
    """
    reason = current_reason(node, runner)
    ours = reason.startswith(DRAIN_TAG)
    if health.state == "ok":
        if ours:
            _scontrol(node, "State=RESUME", runner=runner)
            return f"resumed {node} (was: {reason})"
        return f"{node} healthy; nothing to do"
    if health.state == "unknown" and not drain_unknown:
        return f"{node} not verified ({health.message}); left as it is"
    if reason and not ours:
        return f"{node} already drained by someone else ({reason}); reason kept"
    wanted = one_line(f"{DRAIN_TAG} {health.message}", _REASON_MAX)
    if reason == wanted:
        return f"{node} already drained: {reason}"
    if bound is not None and not ours:
        refusal = _over_bound(node, bound, runner, drained=False)
        if refusal:
            return f"not draining {node}: {refusal}; left as it is ({health.message})"
    _scontrol(node, "State=DRAIN", f"Reason={wanted}", runner=runner)
    if bound is not None and not ours:
        time.sleep(settle_s)
        refusal = _over_bound(node, bound, runner, drained=True)
        if refusal:
            _scontrol(node, "State=RESUME", runner=runner)
            return (f"not draining {node}: {refusal}; its drain undone, left as it was "
                    f"({health.message})")
    return f"drained {node}: {wanted}"


def slurm_node_name() -> str:
    """The node's Slurm name: SLURMD_NODENAME when slurmd set it, else the short host name."""
    name = os.environ.get("SLURMD_NODENAME", "").strip()
    return name or os.uname().nodename.split(".")[0]
