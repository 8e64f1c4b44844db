"""Audit JSON in and out: the `fleetcheck.audit/1` contract, atomic file writes.

Also the one upgrade of an old document: a node saved before failures had ids (no
`triton.cause`) gets, when read, the id its reason's wording names (`_WORDED_FAILURES`), so
that everything after the reading decides by the id alone.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import stat
import tempfile
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fleetcheck import failures
from fleetcheck.errors import FleetcheckError
from fleetcheck.judgement.statuses import UNVERIFIED_STATUSES
from fleetcheck.report.content import AUDIT_SCHEMA, Check, NodeResult, Report, TritonVerdict


class ReportFileError(FleetcheckError):
    """A saved report could not be read: names the file and what is wrong."""


def check_to_dict(check: Check) -> dict[str, Any]:
    return {
        "id": check.id,
        "status": check.status,
        "summary": check.summary,
        "fix": check.fix,
        "evidence": dict(check.evidence),
    }


def node_to_dict(node: NodeResult) -> dict[str, Any]:
    return {
        "id": node.id,
        "host": node.host,
        "vmid": node.vmid,
        "name": node.name,
        "status": node.status,
        "reason": node.reason,
        "triton": {
            "verdict": node.triton.verdict,
            "backend": node.triton.backend,
            "cause": node.triton.cause,
            "fix": node.triton.fix,
        },
        "checks": [check_to_dict(check) for check in node.checks],
        "facts": dict(node.facts),
        "duration_s": round(node.duration_s, 3),
        "labels": list(node.labels),
        "kind": node.kind,
        "parent": node.parent,
    }


def report_to_dict(report: Report) -> dict[str, Any]:
    return {**_report_head(report), "nodes": [node_to_dict(node) for node in report.nodes]}


def _report_head(report: Report) -> dict[str, Any]:
    """Everything of the document but its nodes."""
    return {
        "schema": report.schema,
        "started_at": report.started_at,
        "finished_at": report.finished_at,
        "inventory": report.inventory,
        "playbook": report.playbook,
        "interrupted": report.interrupted,
        "summary": report.summary,
        "fleet_checks": [check_to_dict(check) for check in report.fleet_checks],
    }


def _str(value: Any, default: str = "") -> str:
    return value if isinstance(value, str) else default


def check_from_dict(data: Mapping[str, Any]) -> Check:
    evidence = data.get("evidence")
    return Check(
        id=_str(data.get("id"), "unknown"),
        status=_str(data.get("status"), "error"),
        summary=_str(data.get("summary")),
        fix=_str(data.get("fix")),
        evidence=evidence if isinstance(evidence, dict) else {},
    )


#: How reports written before failures had ids worded the failures whose fixes depend on
#: the id (`verdict.blocking_fix`): read only for an unverified node saved without a cause,
#: once, where the document is read.
_WORDED_FAILURES = (
    (re.compile(r"host key for .* is not in "), failures.HOST_KEY_UNKNOWN),
    (re.compile(r"host key for .* does not match known_hosts"), failures.HOST_KEY_CHANGED),
    (re.compile(r"jump host .* its host key is not trusted by "), failures.JUMP_HOST_KEY),
    (re.compile(r"probe timed out after "), failures.TIMED_OUT),
)


def _cause(cause: Any, status: str, reason: str) -> str | None:
    """A saved node's `triton.cause`; for a node saved before failures had ids, the id its
    reason's wording names (the upgrade of an old document)."""
    if isinstance(cause, str):
        return cause
    if status in UNVERIFIED_STATUSES:
        for pattern, failure in _WORDED_FAILURES:
            if pattern.match(reason):
                return failure
    return None


def node_from_dict(data: Mapping[str, Any]) -> NodeResult:
    triton = data.get("triton") if isinstance(data.get("triton"), dict) else {}
    assert isinstance(triton, dict)
    vmid = data.get("vmid")
    checks = data.get("checks") if isinstance(data.get("checks"), list) else []
    assert isinstance(checks, list)
    facts = data.get("facts")
    labels = data.get("labels")
    duration = data.get("duration_s")
    status = _str(data.get("status"), "error")
    reason = _str(data.get("reason"))
    return NodeResult(
        id=_str(data.get("id"), "?"),
        host=_str(data.get("host"), "?"),
        vmid=vmid if isinstance(vmid, int) and not isinstance(vmid, bool) else None,
        name=_str(data.get("name")),
        status=status,
        reason=reason,
        triton=TritonVerdict(
            verdict=_str(triton.get("verdict"), "unknown"),
            backend=triton.get("backend") if isinstance(triton.get("backend"), str) else None,
            cause=_cause(triton.get("cause"), status, reason),
            fix=_str(triton.get("fix")),
        ),
        checks=tuple(check_from_dict(c) for c in checks if isinstance(c, dict)),
        facts=facts if isinstance(facts, dict) else {},
        duration_s=float(duration) if isinstance(duration, (int, float)) else 0.0,
        labels=tuple(x for x in labels if isinstance(x, str)) if isinstance(labels, list) else (),
        # Reports written before kinds existed: derived from vmid, as NodeResult does.
        kind=_str(data.get("kind")),
        parent=data.get("parent") if isinstance(data.get("parent"), str) else None,
    )


def report_from_dict(data: Mapping[str, Any], source: str = "<report>") -> Report:
    if not isinstance(data, Mapping) or data.get("schema") != AUDIT_SCHEMA:
        raise ReportFileError(f"{source}: not a fleetcheck audit report (schema {AUDIT_SCHEMA!r})")
    nodes = data.get("nodes")
    if not isinstance(nodes, list):
        raise ReportFileError(f"{source}: key 'nodes' must be a list")
    fleet = data.get("fleet_checks") if isinstance(data.get("fleet_checks"), list) else []
    assert isinstance(fleet, list)
    return Report(
        started_at=_str(data.get("started_at")),
        finished_at=_str(data.get("finished_at")),
        nodes=tuple(node_from_dict(n) for n in nodes if isinstance(n, dict)),
        inventory=data.get("inventory") if isinstance(data.get("inventory"), str) else None,
        playbook=data.get("playbook") if isinstance(data.get("playbook"), str) else None,
        fleet_checks=tuple(check_from_dict(c) for c in fleet if isinstance(c, dict)),
        interrupted=bool(data.get("interrupted", False)),
    )


def dumps_report(report: Report) -> str:
    """The audit JSON document, ending in a newline: the header indented, one line per node.

    One compact line per node keeps the file greppable and diffable by node, and lets
    json's C encoder do the work (with `indent`, json falls back to its pure-Python encoder,
    the largest item of the auditor's CPU profile at 500 nodes).
    """
    head = json.dumps(_report_head(report), indent=2, ensure_ascii=False)
    if not report.nodes:
        return head[:-2] + ',\n  "nodes": []\n}\n'
    # Each node's dict lives only while its line is encoded: the peak holds the lines, not a
    # second copy of every node's checks and facts as dicts.
    # One join over every piece: joining the nodes first and then adding the head would hold
    # the nodes' text three times at once.
    encode = json.JSONEncoder(ensure_ascii=False).encode
    pieces = [head[:-2], ',\n  "nodes": [\n    ']
    for node in report.nodes:
        pieces += (encode(node_to_dict(node)), ",\n    ")
    pieces[-1] = "\n  ]\n}\n"
    return "".join(pieces)


def load_report(path: str | os.PathLike[str]) -> Report:
    """Read a saved audit JSON file (plain or .gz)."""
    source = str(path)
    try:
        raw = Path(path).read_bytes()
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        data = json.loads(raw.decode("utf-8"))
    except FileNotFoundError:
        raise ReportFileError(f"{source}: no such file") from None
    except (OSError, EOFError, zlib.error) as exc:
        raise ReportFileError(f"{source}: cannot read: {exc}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ReportFileError(f"{source}: not valid JSON: {exc}") from None
    return report_from_dict(data, source)


def write_atomic(path: str | os.PathLike[str], data: str | bytes, mode: int = 0o644) -> None:
    """Write a file so that readers see the old content or the whole new one, never a part.

    The data goes to a temporary file in the same folder, is flushed to disk, then renamed
    over the target. On any error the temporary file is removed and the target is untouched.
    A new file gets `mode`; an existing one keeps its own permissions, less any write access
    for group and others. A symbolic link is
    followed (its target is replaced, the link stays), and what is not a regular file — a
    device such as /dev/null, a FIFO — is written to directly, as the shell's `>` would.
    """
    payload = data.encode("utf-8", "replace") if isinstance(data, str) else data
    target = Path(os.path.realpath(path))
    try:
        info = target.stat()
    except FileNotFoundError:
        info = None
    if info is not None and not stat.S_ISREG(info.st_mode):
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError(21, "Is a directory", str(path))
        with open(target, "wb") as handle:
            handle.write(payload)
        return
    if info is not None:
        # Replacing a file keeps the permissions its owner gave it (e.g. a 0600 report),
        # except write access for group and others, which a report never gets.
        mode = info.st_mode & 0o755
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp_name, mode)
        os.replace(tmp_name, target)
    except BaseException:
        try:
            os.unlink(tmp_name)
        except OSError:
            pass
        raise
