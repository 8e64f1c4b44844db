"""parse_probe_output: the probe's document in, ProbeOutput out; anything hostile -> one error."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetcheck.probe.results import ProbeOutput, ProbeOutputError, parse_probe_output
from fleetcheck.report.content import Check, TritonVerdict


def document(**overrides: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "schema": "fleetcheck.probe/1", "probe_version": "1", "duration_s": 0.31, "deep": False,
        "facts": {"hostname": "gpu1", "gpu_count": 1},
        "checks": [{"id": "no_c_compiler", "status": "fail", "summary": "no C compiler",
                    "fix": "apt-get install -y gcc", "evidence": {"PATH": "/usr/bin"}}],
        "triton": {"verdict": "cpu-fallback", "backend": None, "cause": "no_c_compiler",
                   "fix": "no C compiler: apt-get install -y gcc"},
        "status": "fail", "reason": "Triton cpu-fallback: no C compiler",
    }
    doc.update(overrides)
    return doc


def encode(doc: Any) -> bytes:
    return json.dumps(doc).encode()


def test_valid_document() -> None:
    assert parse_probe_output(encode(document())) == ProbeOutput(
        facts={"hostname": "gpu1", "gpu_count": 1},
        checks=(Check("no_c_compiler", "fail", "no C compiler", "apt-get install -y gcc",
                      {"PATH": "/usr/bin"}),),
        triton=TritonVerdict("cpu-fallback", None, "no_c_compiler",
                             "no C compiler: apt-get install -y gcc"),
        status="fail", reason="Triton cpu-fallback: no C compiler", duration_s=0.31,
        deep=False, probe_version="1")


@pytest.mark.parametrize(("raw", "message"), [
    (b"x" * 2_000_000, "probe output too large (2000000 bytes > 1048576)"),
    (b"\xff\xfe{}", "probe output is not UTF-8"),
    (b"   \n", "probe printed nothing"),
    (b"Welcome to container shell!\n", "probe output is not one JSON document: Expecting value"),
    (b"[" * 100_000 + b"]" * 100_000, "probe output nested too deeply"),
    (b"[1, 2]", "probe output is not a JSON object"),
    (encode(document(schema="other/1")),
     "probe output has schema 'other/1', expected 'fleetcheck.probe/1'"),
    (encode(document(facts=[])), "'facts' must be an object"),
    (encode(document(checks={})), "'checks' must be a list"),
    (encode(document(duration_s="1")), "'duration_s' must be a number"),
    (encode(document(duration_s=True)), "'duration_s' must be a number"),
    (encode(document(status="great")),
     "probe: 'status' is 'great', not one of ok, warn, fail, error"),
    (encode(document(triton={"verdict": "maybe"})),
     "triton: 'verdict' is 'maybe', not one of gpu, cpu-fallback, no-gpu, not-installed, unknown"),
    (encode(document(triton=None)), "'triton' must be an object"),
    (encode(document(checks=[{"id": "x", "status": "meh", "summary": ""}])),
     "checks[0]: 'status' is 'meh', not one of pass, warn, fail, skip, error"),
    (encode(document(checks=[{"id": 3, "status": "pass", "summary": ""}])),
     "checks[0]: 'id' must be a string"),
    (encode(document(checks=["x"])), "checks[0]: not an object"),
    (encode(document(reason=None)), "probe: 'reason' must be a string"),
    (b'{"a": 1} {"b": 2}', "probe output is not one JSON document: Extra data"),
])
def test_hostile_outputs(raw: bytes, message: str) -> None:
    with pytest.raises(ProbeOutputError) as caught:
        parse_probe_output(raw)
    assert str(caught.value) == message


def test_strings_and_nesting_are_bounded() -> None:
    deep: Any = "leaf"
    for _ in range(30):
        deep = {"k": deep}
    doc = document(reason="r" * 10_000, facts={"deep": deep, "long": "f" * 10_000})
    out = parse_probe_output(encode(doc))
    assert len(out.reason) == 4096
    assert len(out.facts["long"]) == 4096
    level: Any = out.facts["deep"]
    depth = 0
    while isinstance(level, dict):
        level = level["k"]
        depth += 1
    assert (depth, level) == (8, None)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(
        st.text(max_size=8), children, max_size=4),
    max_leaves=30)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_any_bytes_parse_or_raise_the_one_error(raw: bytes) -> None:
    try:
        parse_probe_output(raw)
    except ProbeOutputError as exc:
        assert len(str(exc)) < 300


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(list(document())), json_values, max_size=10))
def test_mutated_documents_parse_or_raise_the_one_error(overrides: dict[str, Any]) -> None:
    raw = json.dumps(document(**overrides), allow_nan=True).encode()
    try:
        out = parse_probe_output(raw)
    except ProbeOutputError:
        return
    assert out.status in ("ok", "warn", "fail", "error")
    assert isinstance(out.duration_s, float)


# A check's fields as a node may send them: short and long, ASCII and not, lone surrogates
# (JSON's \ud800 escapes), wrong types; the fast path for well-formed checks must agree with
# the careful one on every input it accepts, and leave every other input to it.
check_texts = st.one_of(st.text(max_size=12), st.text(min_size=4090, max_size=4200),
                        st.sampled_from(["\ud800x", "é" * 120, "x" * 101]))
check_fields = st.fixed_dictionaries({}, optional={
    "id": check_texts | json_values, "summary": check_texts | json_values,
    "status": st.sampled_from(["ok", "warn", "fail", "skip", "bogus"]) | json_values,
    "fix": check_texts | json_values, "evidence": json_values,
})


@settings(max_examples=300, deadline=None)
@given(check_fields)
def test_the_fast_path_of_a_check_agrees_with_the_careful_one(item: dict[str, Any]) -> None:
    from fleetcheck.probe.results import _check, _check_carefully

    try:
        expected: Check | str = _check_carefully(item, 3)
    except ProbeOutputError as exc:
        expected = str(exc)
    try:
        got: Check | str = _check(item, 3)
    except ProbeOutputError as exc:
        got = str(exc)
    assert got == expected
