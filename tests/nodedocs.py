"""Node documents dated from the clock as each test starts: a node, its document, a file."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from fleetcheck.report.content import Check, NodeResult, TritonVerdict
from fleetcheck.report.nodedoc import node_document
from fleetcheck.timestamps import REPORT_FORMAT
from tests.contracts import validated

#: The merges here run "now" (the CLI's tests cannot be given another time): documents are
#: dated relative to it, and the stale ones hours before it. Set again as each test starts
#: (`fresh_now`): the module is imported when the suite is collected, minutes before its tests
#: run, and a document's age is printed to 0.1 h.
NOW = datetime.now(timezone.utc).replace(microsecond=0)


def set_now(monkeypatch: pytest.MonkeyPatch) -> None:
    """Date this test's documents from the clock as it reads now."""
    monkeypatch.setitem(globals(), "NOW", datetime.now(timezone.utc).replace(microsecond=0))


def when(minutes_ago: float) -> str:
    return (NOW - timedelta(minutes=minutes_ago)).strftime(REPORT_FORMAT)


def node(node_id: str, *, status: str = "ok", torch: str = "2.11.0+cu130",
         verdict: str = "gpu") -> NodeResult:
    facts = {"hostname": node_id, "torch": {"version": torch, "cuda": "13.0"},
             "driver": {"kernel_module": "580.95.05"}, "gpus": [{"name": "NVIDIA H200"}],
             "gpu_count": 1}
    cause = "no_c_compiler" if status == "fail" else None
    return NodeResult(id=node_id, host=node_id, vmid=None, name=node_id, status=status,
                      reason="Triton gpu (cuda)" if status == "ok" else "no C compiler",
                      triton=TritonVerdict(verdict=verdict, cause=cause),
                      checks=(Check("gpu_present", "pass", "1 GPU"),), facts=facts)


def write(path: Path, document: Any) -> Path:
    path.write_text(json.dumps(document, indent=2), encoding="utf-8")
    return path


def doc(node_id: str, minutes_ago: float = 1, origin: dict[str, str] | None = None,
        **kwargs: Any) -> dict[str, Any]:
    return validated(node_document(node(node_id, **kwargs), when(minutes_ago),
                                   origin if origin is not None else {"hostname": node_id}))
