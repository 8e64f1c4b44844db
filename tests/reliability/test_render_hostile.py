"""Hostile strings from nodes reach every renderer neutralised: no raw escape on a terminal, no
tag created in HTML, valid XML for JUnit, a textfile prometheus_client parses."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleetcheck.cli import main
from fleetcheck.report.reportio import report_to_dict
from tests.reliability.render_checks import CHECKERS, hostile_report

# A lone surrogate is what a node's JSON "\ud800" decodes to; it has its own test below.
_ENCODABLE = st.text(max_size=80).filter(lambda s: not re.search("[\ud800-\udfff]", s))


@pytest.mark.parametrize("fmt", sorted(CHECKERS))
def test_hostile_strings_are_neutralised(fmt: str, hostile_strings: tuple[str, ...],
                                         figures: Any) -> None:
    for text in hostile_strings:
        if re.search("[\ud800-\udfff]", text):
            continue
        figures.tried(f"renderer {fmt}")
        CHECKERS[fmt](hostile_report(text), text)


@pytest.mark.parametrize("fmt", sorted(CHECKERS))
@settings(max_examples=60, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(text=st.one_of(_ENCODABLE, st.sampled_from(["\x1b", "<", "&", "]]>", "\x9b", "\\"])))
def test_random_strings_are_neutralised(fmt: str, text: str, figures: Any) -> None:
    figures.tried(f"renderer {fmt}")
    CHECKERS[fmt](hostile_report(text), text)


@pytest.mark.parametrize("fmt", ["json", "html", "table", "prometheus", "junit"])
def test_lone_surrogate_from_a_node_still_writes_a_report(fmt: str, tmp_path: Path,
                                                          figures: Any) -> None:
    figures.tried(f"renderer {fmt}")
    saved = tmp_path / "saved.json"
    # json.dumps writes the surrogate as the escape "\\ud800", as a hostile node would.
    saved.write_text(json.dumps(report_to_dict(hostile_report("bad \ud800 text"))))
    target = tmp_path / f"out.{fmt}"
    code = main(["report", str(saved), "--format", fmt, "-o", str(target)])
    assert code == 0 and target.exists()
