"""Parse the probe's stdout into a ProbeOutput: hostile input gives ProbeOutputError, never more."""

from __future__ import annotations

import itertools
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fleetcheck.judgement.gpustate import graded
from fleetcheck.judgement.policy import Policy, evaluate_node
from fleetcheck.judgement.statuses import PROBE_STATUSES
from fleetcheck.report.content import CHECK_STATUSES, PROBE_SCHEMA, VERDICTS, Check, TritonVerdict
from fleetcheck.text import clip

#: Statuses a probe reports for its node.
#: Bounds applied to everything read from a node.
MAX_TEXT = 4096
MAX_ITEMS = 200
MAX_DEPTH = 8
MAX_CHECKS = 200


class ProbeOutputError(Exception):
    """The probe's output is not a valid `fleetcheck.probe/1` document (short message)."""


@dataclass(frozen=True)
class ProbeOutput:
    """One probe run as the node reported it."""

    facts: Mapping[str, Any]
    checks: tuple[Check, ...]
    triton: TritonVerdict
    status: str
    reason: str
    duration_s: float
    deep: bool = False
    probe_version: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _safe_text(text: str, limit: int = MAX_TEXT) -> str:
    """Bounded, and encodable: JSON's \\ud800 escapes decode to lone surrogates, which no
    UTF-8 writer accepts, so one hostile node could otherwise stop every report being written."""
    if text.isascii():
        # The common case, tested first: a node's reply holds hundreds of short ASCII strings.
        return text if len(text) <= limit else clip(text, limit)
    return clip(_LONE_SURROGATE.sub("\ufffd", text), limit)


#: One string object for each short key or value that many nodes' replies repeat: every reply
#: has the same keys and mostly the same values (versions, paths, statuses), and json.loads
#: makes new ones for each node. Sharing them is most of what a node's facts would otherwise
#: hold in memory (docs/scaling.md). Bounded, so that replies of unique strings cannot grow it.
_SHARED: dict[str, str] = {}
_SHARED_MAX = 16_384
_SHARED_LEN = 256


def _shared(text: str) -> str:
    found = _SHARED.get(text)
    if found is not None:
        return found
    if len(text) <= _SHARED_LEN and len(_SHARED) < _SHARED_MAX:
        _SHARED[text] = text
    return text


def _bounded(value: Any, depth: int = 0) -> Any:
    """A copy with strings clipped, containers cut, depth limited, non-finite floats dropped."""
    if depth > MAX_DEPTH:
        return None
    # json.loads makes exact types: dispatch on them first (this runs for every value of every
    # node's reply), then fall back to isinstance for anything else.
    kind = type(value)
    if kind is str:
        return _shared(value) if len(value) <= MAX_TEXT and value.isascii() \
            else _safe_text(value)
    if kind is dict:
        # A reply is mostly dicts of short ASCII strings, ints, booleans and nulls: those
        # leaves are handled here, without a call each (a quarter of a reply's walk).
        deeper = depth + 1
        copy: dict[str, Any] = {}
        shared = _SHARED.get
        for key, item in (value.items() if len(value) <= MAX_ITEMS
                          else itertools.islice(value.items(), MAX_ITEMS)):
            if type(key) is str and len(key) <= 200 and key.isascii():
                key = shared(key) or _shared(key)
            else:
                key = _safe_text(str(key), 200)
            leaf = type(item)
            if leaf is str and len(item) <= _SHARED_LEN and item.isascii():
                copy[key] = shared(item) or _shared(item)
            elif leaf is int or leaf is bool or item is None:
                copy[key] = item
            else:
                copy[key] = _bounded(item, deeper)
        return copy
    if kind is list:
        deeper = depth + 1
        return [_bounded(item, deeper) for item in value[:MAX_ITEMS]]
    if kind is int or kind is bool or value is None:
        return value
    if isinstance(value, str):
        return _safe_text(value)
    if isinstance(value, bool) or isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        items = list(value.items())[:MAX_ITEMS]
        return {_safe_text(str(k), 200): _bounded(v, depth + 1) for k, v in items}
    if isinstance(value, list):
        return [_bounded(v, depth + 1) for v in value[:MAX_ITEMS]]
    return None


def _text(data: Mapping[str, Any], key: str, where: str, *, optional: bool = False) -> str:
    value = data.get(key)
    if value is None and optional:
        return ""
    if not isinstance(value, str):
        raise ProbeOutputError(f"{where}: '{key}' must be a string")
    return _safe_text(value)


def _choice(data: Mapping[str, Any], key: str, allowed: tuple[str, ...], where: str) -> str:
    value = data.get(key)
    if value not in allowed:
        shown = _safe_text(repr(value), 40)
        raise ProbeOutputError(f"{where}: '{key}' is {shown}, not one of {', '.join(allowed)}")
    assert isinstance(value, str)
    return value


def _check(item: Any, index: int) -> Check:
    if type(item) is dict:
        # One lookup per field and no helper calls for a well-formed check (every check of
        # every node passes here); anything unusual takes the careful path for its message.
        ident, status, summary = item.get("id"), item.get("status"), item.get("summary")
        fix, evidence = item.get("fix"), item.get("evidence", {})
        if (type(ident) is str and type(summary) is str and status in CHECK_STATUSES
                and (fix is None or type(fix) is str) and type(evidence) is dict):
            return Check(
                id=_shared(ident) if len(ident) <= 100 and ident.isascii()
                else _safe_text(ident, 100),
                status=_shared(status),
                summary=_shared(summary) if len(summary) <= MAX_TEXT and summary.isascii()
                else _safe_text(summary),
                fix="" if fix is None else _shared(_safe_text(fix)),
                evidence=_bounded(evidence),
            )
    return _check_carefully(item, index)


def _check_carefully(item: Any, index: int) -> Check:
    where = f"checks[{index}]"
    if not isinstance(item, dict):
        raise ProbeOutputError(f"{where}: not an object")
    evidence = item.get("evidence", {})
    if not isinstance(evidence, dict):
        raise ProbeOutputError(f"{where}: 'evidence' must be an object")
    return Check(
        id=_safe_text(_text(item, "id", where), 100),
        status=_choice(item, "status", CHECK_STATUSES, where),
        summary=_text(item, "summary", where),
        fix=_text(item, "fix", where, optional=True),
        evidence=_bounded(evidence),
    )


def _verdict(data: Any) -> TritonVerdict:
    if not isinstance(data, dict):
        raise ProbeOutputError("'triton' must be an object")
    backend, cause = data.get("backend"), data.get("cause")
    if backend is not None and not isinstance(backend, str):
        raise ProbeOutputError("triton: 'backend' must be a string or null")
    if cause is not None and not isinstance(cause, str):
        raise ProbeOutputError("triton: 'cause' must be a string or null")
    return TritonVerdict(
        verdict=_choice(data, "verdict", VERDICTS, "triton"),
        backend=_safe_text(backend, 100) if backend else None,
        cause=_safe_text(cause, 100) if cause else None,
        fix=_text(data, "fix", "triton", optional=True),
    )


def parse_probe_output(stdout: bytes, *, max_bytes: int = 1_048_576) -> ProbeOutput:
    """The probe's one JSON document -> ProbeOutput; anything else -> ProbeOutputError."""
    if len(stdout) > max_bytes:
        raise ProbeOutputError(f"probe output too large ({len(stdout)} bytes > {max_bytes})")
    try:
        text = stdout.decode("utf-8")
    except UnicodeDecodeError:
        raise ProbeOutputError("probe output is not UTF-8") from None
    if not text.strip():
        raise ProbeOutputError("probe printed nothing")
    try:
        data = json.loads(text)
    except RecursionError:
        raise ProbeOutputError("probe output nested too deeply") from None
    except json.JSONDecodeError as exc:
        raise ProbeOutputError(f"probe output is not one JSON document: {exc.msg}") from None
    except ValueError:
        # int() of a huge number literal, and similar limits of the decoder.
        raise ProbeOutputError("probe output is not a usable JSON document") from None
    if not isinstance(data, dict):
        raise ProbeOutputError("probe output is not a JSON object")
    return probe_output_from_json(data)


def probe_output_from_json(data: Mapping[str, Any]) -> ProbeOutput:
    """The probe's document, already decoded (a node's reply, or one that `fleetcheck merge`
    reads from a file) -> ProbeOutput; anything else -> ProbeOutputError."""
    if data.get("schema") != PROBE_SCHEMA:
        shown = _safe_text(repr(data.get("schema")), 60)
        raise ProbeOutputError(f"probe output has schema {shown}, expected {PROBE_SCHEMA!r}")
    facts = data.get("facts")
    if not isinstance(facts, dict):
        raise ProbeOutputError("'facts' must be an object")
    checks = data.get("checks")
    if not isinstance(checks, list):
        raise ProbeOutputError("'checks' must be a list")
    if len(checks) > MAX_CHECKS:
        raise ProbeOutputError(f"too many checks ({len(checks)})")
    duration = data.get("duration_s")
    if isinstance(duration, bool) or not isinstance(duration, (int, float)):
        raise ProbeOutputError("'duration_s' must be a number")
    if not math.isfinite(duration) or duration < 0:
        raise ProbeOutputError("'duration_s' must be a finite number >= 0")
    version = data.get("probe_version")
    return ProbeOutput(
        facts=_bounded(facts),
        checks=tuple(_check(item, index) for index, item in enumerate(checks)),
        triton=_verdict(data.get("triton")),
        status=_choice(data, "status", PROBE_STATUSES, "probe"),
        reason=_text(data, "reason", "probe"),
        duration_s=float(duration),
        deep=data.get("deep") is True,
        probe_version=_safe_text(version, 40) if isinstance(version, str) else "",
    )


@dataclass(frozen=True)
class JudgedProbe:
    """A probed node's fields under a policy: what an audit and a merge make of one reply."""

    status: str
    reason: str
    triton: TritonVerdict
    checks: tuple[Check, ...]
    facts: Mapping[str, Any]


def judge_probe_output(output: ProbeOutput, policy: Policy) -> JudgedProbe:
    """The node's status and reason under `policy` (verdict.evaluate_node), with the verdict,
    checks and facts its probe reported: the one path from a probe's reply to a judged node,
    whether the reply came over a transport (audit.py) or in a file (report/nodedoc.py)."""
    status, reason = evaluate_node(output.checks, output.triton, policy, facts=output.facts)
    # The GPU-state checks as the playbook graded them, so their fix stands beside the status.
    return JudgedProbe(status=status, reason=reason, triton=output.triton,
                       checks=graded(output.checks, policy.gpu, policy.name),
                       facts=output.facts)
