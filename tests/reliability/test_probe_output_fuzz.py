"""Whatever a node prints, the parser answers with a ProbeOutput or one ProbeOutputError."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleetcheck.probe.results import ProbeOutput, ProbeOutputError, parse_probe_output
from tests.reliability.support import key_paths

FUZZ = settings(max_examples=300, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

VALID: dict[str, Any] = {
    "schema": "fleetcheck.probe/1", "probe_version": "1", "duration_s": 1.25, "deep": False,
    "facts": {"hostname": "n", "gpu_count": 1, "gpus": [{"name": "NVIDIA H200"}]},
    "checks": [{"id": "gpu_present", "status": "pass", "summary": "1 GPU", "fix": "",
                "evidence": {"count": 1}}],
    "triton": {"verdict": "gpu", "backend": "cuda", "cause": None, "fix": ""},
    "status": "ok", "reason": "Triton gpu (cuda)",
}

json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=30)),
    lambda children: st.one_of(st.lists(children, max_size=4),
                               st.dictionaries(st.text(max_size=10), children, max_size=4)),
    max_leaves=20,
)


def _replaced(path: tuple[Any, ...], value: Any) -> Any:
    doc = json.loads(json.dumps(VALID))
    if not path:
        return value
    parent = doc
    for part in path[:-1]:
        parent = parent[part]
    parent[path[-1]] = value
    return doc


def _strings(value: Any) -> list[str]:
    """Every string in a parsed output (keys included)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (*_strings(k), *_strings(v))]
    if isinstance(value, (list, tuple)):
        return [s for item in value for s in _strings(item)]
    return []


def _parse(raw: bytes) -> ProbeOutput | None:
    try:
        output = parse_probe_output(raw)
    except ProbeOutputError as exc:
        message = str(exc)
        assert "\n" not in message and len(message) < 400, message
        return None
    assert output.status in ("ok", "warn", "fail", "error")
    return output


@FUZZ
@given(raw=st.binary(max_size=600))
def test_arbitrary_bytes(raw: bytes, figures: Any) -> None:
    figures.tried("probe-output parser")
    _parse(raw)


@FUZZ
@given(value=json_values)
def test_arbitrary_json(value: Any, figures: Any) -> None:
    figures.tried("probe-output parser")
    _parse(json.dumps(value).encode())


@FUZZ
@given(path=st.sampled_from(key_paths(VALID)), value=json_values)
def test_a_valid_document_with_one_value_replaced(path: Any, value: Any, figures: Any) -> None:
    figures.tried("probe-output parser")
    _parse(json.dumps(_replaced(path, value)).encode())


@FUZZ
@given(path=st.sampled_from([p for p in key_paths(VALID) if p]))
def test_a_valid_document_with_one_key_missing(path: Any, figures: Any) -> None:
    figures.tried("probe-output parser")
    doc = json.loads(json.dumps(VALID))
    parent = doc
    for part in path[:-1]:
        parent = parent[part]
    del parent[path[-1]]
    _parse(json.dumps(doc).encode())


HOSTILE_DOCUMENTS = {
    "deep-list": b"[" * 200_000 + b"]" * 200_000,
    "deep-object": b'{"a":' * 100_000 + b"1" + b"}" * 100_000,
    "deep-facts": json.dumps({**VALID, "facts": {"x": None}}).encode().replace(
        b'{"x": null}', b'{"x":' * 5000 + b"1" + b"}" * 5000),
    "huge-int": json.dumps({**VALID, "duration_s": 1}).encode().replace(
        b'"duration_s": 1', b'"duration_s": ' + b"9" * 100_000),
    "nan": json.dumps({**VALID, "duration_s": float("nan")}).encode(),
    "invalid-utf8": json.dumps(VALID).encode().replace(b"NVIDIA", b"NV\xff\xfeIDIA"),
    "bom": b"\xef\xbb\xbf" + json.dumps(VALID).encode(),
    "two-documents": json.dumps(VALID).encode() * 2,
    "wrong-schema": json.dumps({**VALID, "schema": "fleetcheck.probe/2"}).encode(),
    "claims-ok-no-checks": json.dumps({"schema": "fleetcheck.probe/1", "status": "ok"}).encode(),
    "claims-ok-no-triton": json.dumps({k: v for k, v in VALID.items() if k != "triton"}).encode(),
    "many-checks": json.dumps({**VALID, "checks": VALID["checks"] * 100_000}).encode(),
    "wide-facts": json.dumps({**VALID, "facts": {str(i): i for i in range(100_000)}}).encode(),
    "long-strings": json.dumps({**VALID, "reason": "r" * 900_000}).encode(),
    "too-large": b" " * 2_000_000 + json.dumps(VALID).encode(),
    "escapes": json.dumps({**VALID, "reason": "\x1b[2J\x1b]0;x\x07<script>"}).encode(),
    "empty": b"",
    "whitespace": b" \n\t ",
    "null": b"null",
}


@pytest.mark.parametrize("name", sorted(HOSTILE_DOCUMENTS))
def test_hostile_documents(name: str, figures: Any) -> None:
    figures.tried("probe-output parser")
    output = _parse(HOSTILE_DOCUMENTS[name])
    if output is not None:
        assert len(output.reason) <= 4096
        assert all(len(s) <= 4096 for s in _strings(output.facts))
        assert len(output.checks) <= 200


def test_a_valid_document_parses(figures: Any) -> None:
    figures.tried("probe-output parser")
    output = _parse(json.dumps(VALID).encode())
    assert output is not None and output.triton.verdict == "gpu"


def test_lone_surrogates_do_not_survive_parsing(figures: Any) -> None:
    figures.tried("probe-output parser")
    doc = {**VALID, "reason": "bad \ud800", "facts": {"hostname": "\udcff"}}
    output = _parse(json.dumps(doc).encode())
    if output is not None:
        for text in [output.reason, *_strings(output.facts)]:
            text.encode("utf-8")
