"""The published JSON Schemas: generated from the code, shipped fresh, versioned by the
documents' own tags, strict where the code defines the shape and open where it grows."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from fleetcheck import schemas
from fleetcheck.report import reportio
from fleetcheck.report.content import AUDIT_SCHEMA, PROBE_SCHEMA
from fleetcheck.report.nodedoc import NODE_SCHEMA
from fleetcheck.report.reportio import report_to_dict
from tests.contracts import problems
from tests.nodedocs import doc
from tests.render.golden import GOLDEN_DIR
from tests.render.sample import sample_report

REPO = Path(__file__).resolve().parents[1]


def test_the_shipped_schemas_are_a_fresh_build_in_the_package_and_in_docs() -> None:
    fresh = schemas.build_schemas()
    for name, tag in schemas.DOCUMENTS.items():
        text = schemas.dumps(fresh[name])
        assert schemas.shipped(name) == text, "run python -m fleetcheck.schemas"
        assert (REPO / "docs" / "schemas" / schemas.file_name(tag)).read_text() == text
    done = subprocess.run([sys.executable, "-m", "fleetcheck.schemas", "--check"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert (done.returncode, done.stderr) == (0, "")


@pytest.mark.parametrize(("name", "tag", "file"), [
    ("probe", PROBE_SCHEMA, "probe-1.json"), ("node", NODE_SCHEMA, "node-1.json"),
    ("audit", AUDIT_SCHEMA, "audit-1.json")])
def test_each_schema_is_versioned_by_its_documents_tag(name: str, tag: str, file: str) -> None:
    schema = json.loads(schemas.shipped(name))
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"] == schemas.ID_BASE + file
    assert schema["properties"]["schema"] == {"const": tag}
    assert schemas.schema_for_tag(tag) == name


def test_every_key_the_serialisers_write_is_typed_and_no_other(
        monkeypatch: pytest.MonkeyPatch) -> None:
    built = schemas.build_schemas()
    audit = built["audit"]
    node = audit["$defs"]["node"]
    sample = reportio.node_to_dict(sample_report().nodes[0])
    assert node["required"] == list(node["properties"]) == list(sample)
    assert node["additionalProperties"] is False
    assert list(audit["properties"]) == list(report_to_dict(sample_report()))
    assert list(built["node"]["properties"]) == list(doc("gpu01"))
    # A key a serialiser starts writing, with no type in the schema, stops the build.
    original = reportio.node_to_dict
    monkeypatch.setattr(reportio, "node_to_dict",
                        lambda n: {**original(n), "owner": "team-a"})
    with pytest.raises(schemas.SchemaDrift, match=r"a node: keys written without a type: "
                       r"\['owner'\]"):
        schemas.build_schemas()


def test_golden_files_and_the_sample_report_are_valid() -> None:
    golden = sorted(GOLDEN_DIR.glob("*.json"))
    assert golden
    for path in golden:
        assert problems(json.loads(path.read_text())) == [], path
    assert problems(report_to_dict(sample_report())) == []


def test_open_where_the_probe_grows_strict_where_the_code_defines_the_shape() -> None:
    document: dict[str, Any] = doc("gpu01")
    grown = copy.deepcopy(document)
    grown["checks"].append({"id": "gpu_memory_errors", "status": "warn", "summary": "2 ECC",
                            "fix": "", "evidence": {"uncorrected": 2}})
    grown["triton"]["cause"] = "some_future_cause"
    grown["facts"]["gpus"] = [{"index": 0, "memory_used_mib": 12, "processes": []}]
    assert problems(grown) == []
    cases = {
        "an unknown top-level key": ("(root)", lambda d: d.update(owner="x")),
        "a check status outside the vocabulary": (
            "checks/0/status", lambda d: d["checks"][0].update(status="maybe")),
        "a check id that is not an id": (
            "checks/0/id", lambda d: d["checks"][0].update(id="Has Spaces")),
        "a key a check never has": ("checks/0", lambda d: d["checks"][0].update(extra=1)),
        "a node status outside the vocabulary": (
            "status", lambda d: d.update(status="great")),
        "a verdict outside the vocabulary": (
            "triton/verdict", lambda d: d["triton"].update(verdict="fast")),
        "an origin field merge does not know": (
            "origin", lambda d: d["origin"].update(rack="r1")),
        "a probed_at that is no report time": (
            "probed_at", lambda d: d.update(probed_at="yesterday")),
        "a missing key": ("(root)", lambda d: d.pop("checks")),
    }
    for what, (where, change) in cases.items():
        broken = copy.deepcopy(document)
        change(broken)
        found = problems(broken)
        assert found and all(line.startswith(f"{where}: ") for line in found), (what, found)


def test_a_probe_document_is_held_to_the_probes_statuses() -> None:
    from fleetcheck.probe.parts.main import failure_document

    document = failure_document("boom", False, 0.0)
    assert problems(document) == []
    assert problems({**document, "status": "skipped"}) == [
        "status: 'skipped' is not one of ['ok', 'warn', 'fail', 'error']"]
    assert problems({**document, "id": "gpu01"}) == [
        "(root): Additional properties are not allowed ('id' was unexpected)"]
