"""The JSON rendering of the sample report: exact, the audit contract, read back whole."""

from __future__ import annotations

import json

from fleetcheck.render import render
from fleetcheck.report.reportio import report_from_dict

from .golden import assert_golden
from .sample import sample_report


def test_json_is_the_audit_contract_and_round_trips() -> None:
    text = render(sample_report(), "json")
    assert_golden("report.json", text)
    data = json.loads(text)
    assert data["schema"] == "fleetcheck.audit/1"
    assert data["summary"] == {"ok": 2, "skipped": 1, "warn": 1, "unreachable": 1, "error": 1,
                               "fail": 1}
    assert report_from_dict(data) == sample_report()
