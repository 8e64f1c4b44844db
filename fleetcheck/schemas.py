"""The JSON Schemas (draft 2020-12) of the documents users script against: the probe's, the node
document and the audit report.

They are generated from the code's own vocabularies (`report/content.py`'s statuses and verdicts,
the documents' schema tags, `nodedoc.ORIGIN_FIELDS`) and checked, key by key, against what the
code's serialisers write (`reportio.node_to_dict`, `reportio.report_to_dict`,
`nodedoc.node_document` and the probe's own `failure_document`): a key written without a type here
stops the build, so a schema cannot fall behind its document. The structure is strict
(`additionalProperties: false` on every object the code defines); what is open by design stays
open: the probe's `facts` and a check's `evidence` (any object), check and cause ids (any
snake_case id: the probe's catalogue grows).

`python -m fleetcheck.schemas` writes them to `fleetcheck/data/schemas/` (package data, which
`fleetcheck schema NAME` prints) and `docs/schemas/`; `--check` says whether both are fresh
(a test pins them). A schema's `$id` and file name follow its document's `schema` tag:
`fleetcheck.audit/1` is `audit-1.json`; a new major version of a document is a new file.
"""

from __future__ import annotations

import json
import pkgutil
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fleetcheck.generated import write_or_check
from fleetcheck.report.content import (
    AUDIT_SCHEMA,
    CHECK_STATUSES,
    NODE_STATUSES,
    PROBE_SCHEMA,
    VERDICTS,
)
from fleetcheck.report.nodedoc import NODE_SCHEMA, ORIGIN_FIELDS

#: The documents, by the name `fleetcheck schema NAME` takes, with the tag each carries.
DOCUMENTS = {
    "probe": PROBE_SCHEMA,
    "node": NODE_SCHEMA,
    "audit": AUDIT_SCHEMA,
}
#: What each is, for `fleetcheck schema --list` and the schemas' titles.
TITLES = {
    "probe": "what the probe script prints on a node "
             "(fleetcheck probe --script | python3 -)",
    "node": "one node's verdict as fleetcheck probe --format json prints it (merge reads it)",
    "audit": "an audit report (fleetcheck audit --format json, merge, report)",
}
#: Where a schema's `$id` points: the name of its file (from its tag) follows.
ID_BASE = "urn:fleetcheck:schema:"
DIALECT = "https://json-schema.org/draft/2020-12/schema"
#: Package data (what `fleetcheck schema` prints) and the copy in docs/.
PACKAGE_DIR = "data/schemas"
REPO = Path(__file__).resolve().parent.parent
WRITTEN_TO = (Path(__file__).resolve().parent / PACKAGE_DIR, REPO / "docs" / "schemas")

#: Check and cause ids: open sets (the catalogue grows), one shape.
ID_PATTERN = r"^[a-z][a-z0-9_]*$"
#: Report timestamps (`timestamps.REPORT_FORMAT`): UTC to the second, with a Z.
TIME_PATTERN = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$"


class SchemaDrift(Exception):
    """A serialiser writes a key the schema does not type, or the reverse."""


def file_name(tag: str) -> str:
    """`fleetcheck.audit/1` -> `audit-1.json`."""
    family, _, version = tag.partition("/")
    return f"{family.split('.', 1)[1]}-{version}.json"


def _string() -> dict[str, Any]:
    return {"type": "string"}


def _nullable(schema: Mapping[str, Any]) -> dict[str, Any]:
    return {"anyOf": [dict(schema), {"type": "null"}]}


def _object(properties: Mapping[str, Any], written: list[str], what: str) -> dict[str, Any]:
    """A closed object of exactly the keys a serialiser wrote (in its order), every one
    required; `properties` must type each of them and nothing else."""
    missing = [key for key in written if key not in properties]
    extra = [key for key in properties if key not in written]
    if missing or extra:
        raise SchemaDrift(f"{what}: keys written without a type: {missing}; typed but never "
                          f"written: {extra}")
    return {"type": "object", "properties": {key: properties[key] for key in written},
            "required": list(written), "additionalProperties": False}


def _written() -> dict[str, list[str]]:
    """The keys the code's serialisers write, read off a document each of them makes."""
    from fleetcheck.probe.parts.main import failure_document
    from fleetcheck.report.content import Check, NodeResult, Report
    from fleetcheck.report.nodedoc import node_document
    from fleetcheck.report.reportio import check_to_dict, node_to_dict, report_to_dict

    node = NodeResult(id="n", host="n", vmid=None, name="n", status="ok", reason="",
                      checks=(Check("c", "pass", ""),))
    as_dict = node_to_dict(node)
    probe = failure_document("", False, 0.0)
    document = node_document(node, "2026-01-01T00:00:00Z", {"hostname": "n"})
    report = report_to_dict(Report(started_at="", finished_at="", nodes=(node,)))
    return {
        "check": list(check_to_dict(node.checks[0])),
        "triton": list(as_dict["triton"]),
        "node": list(as_dict),
        "document": list(document),
        "audit": list(report),
        "probe": list(probe),
        "probe.check": list(probe["checks"][0]),
        "probe.triton": list(probe["triton"]),
    }


def _defs(written: Mapping[str, list[str]], probe: bool) -> dict[str, Any]:
    from fleetcheck.judgement.statuses import PROBE_STATUSES

    check_key, triton_key = ("probe.check", "probe.triton") if probe else ("check", "triton")
    defs: dict[str, Any] = {
        "id": {"type": "string", "pattern": ID_PATTERN,
               "description": "a check or cause id (docs/checks.md); the set grows"},
        "check": _object({
            "id": {"$ref": "#/$defs/id"},
            "status": {"enum": list(CHECK_STATUSES)},
            "summary": _string(),
            "fix": _string(),
            "evidence": {"type": "object",
                         "description": "what the check saw; its keys are the check's own"},
        }, written[check_key], "a check"),
        "triton": _object({
            "verdict": {"enum": list(VERDICTS)},
            "backend": _nullable(_string()),
            "cause": _nullable({"$ref": "#/$defs/id"}),
            "fix": _string(),
        }, written[triton_key], "the Triton verdict"),
        "facts": {"type": "object", "properties": {"hostname": _string()},
                  "description": "what the probe found on the node (docs/checks.md); open: "
                                 "facts are added as the probe learns more"},
    }
    if probe:
        defs["status"] = {"enum": list(PROBE_STATUSES)}
        return defs
    defs["node"] = _object({
        "id": {"type": "string", "minLength": 1},
        "host": _string(),
        "vmid": _nullable({"type": "integer", "minimum": 0}),
        "name": _string(),
        "status": {"enum": list(NODE_STATUSES)},
        "reason": _string(),
        "triton": {"$ref": "#/$defs/triton"},
        "checks": {"type": "array", "items": {"$ref": "#/$defs/check"}},
        "facts": {"$ref": "#/$defs/facts"},
        "duration_s": {"type": "number", "minimum": 0},
        "labels": {"type": "array", "items": _string()},
        "kind": {"type": "string", "pattern": r"^[a-z][a-z0-9_-]*$",
                 "description": "the node's kind (host, lxc, qemu, docker, podman, pod, ...)"},
        "parent": _nullable(_string()),
    }, written["node"], "a node")
    return defs


def _head(name: str) -> dict[str, Any]:
    tag = DOCUMENTS[name]
    return {"$schema": DIALECT, "$id": ID_BASE + file_name(tag),
            "title": f"{tag}: {TITLES[name]}"}


def build_schemas() -> dict[str, dict[str, Any]]:
    """Every schema, by name, from the code as it is."""
    written = _written()
    probe_defs = _defs(written, probe=True)
    defs = _defs(written, probe=False)
    probe = {**_head("probe"), **_object({
        "schema": {"const": PROBE_SCHEMA},
        "probe_version": _string(),
        "duration_s": {"type": "number", "minimum": 0},
        "deep": {"type": "boolean"},
        "facts": {"$ref": "#/$defs/facts"},
        "checks": {"type": "array", "items": {"$ref": "#/$defs/check"}},
        "triton": {"$ref": "#/$defs/triton"},
        "status": {"$ref": "#/$defs/status"},
        "reason": _string(),
    }, written["probe"], "the probe's document"), "$defs": probe_defs}
    node_fields = defs["node"]["properties"]
    origin = {"type": "object", "properties": {key: _string() for key in ORIGIN_FIELDS},
              "additionalProperties": False}
    extra = {"schema": {"const": DOCUMENTS["node"]},
             "probed_at": {"type": "string", "pattern": TIME_PATTERN},
             "fleetcheck": {"type": "string", "description": "the fleetcheck that wrote it"},
             "origin": origin}
    node = {**_head("node"), **_object({**node_fields, **extra}, written["document"],
                                       "the node document"),
            "$defs": {key: value for key, value in defs.items() if key != "node"}}
    summary = {"type": "object",
               "properties": {status: {"type": "integer", "minimum": 0}
                              for status in NODE_STATUSES},
               "required": list(NODE_STATUSES), "additionalProperties": False}
    audit = {**_head("audit"), **_object({
        "schema": {"const": AUDIT_SCHEMA},
        "started_at": {"type": "string", "pattern": TIME_PATTERN},
        "finished_at": {"type": "string", "pattern": TIME_PATTERN},
        "inventory": _nullable(_string()),
        "playbook": _nullable(_string()),
        "interrupted": {"type": "boolean"},
        "summary": summary,
        "fleet_checks": {"type": "array", "items": {"$ref": "#/$defs/check"}},
        "nodes": {"type": "array", "items": {"$ref": "#/$defs/node"}},
    }, written["audit"], "the audit report"), "$defs": defs}
    return {"probe": probe, "node": node, "audit": audit}


def dumps(schema: Mapping[str, Any]) -> str:
    """A schema's text as shipped."""
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


def shipped(name: str) -> str:
    """The shipped schema's text (package data: no generation, as fast as `--help`)."""
    data = pkgutil.get_data(__package__ or "fleetcheck",
                            f"{PACKAGE_DIR}/{file_name(DOCUMENTS[name])}")
    if data is None:  # a loader that cannot read package data
        raise FileNotFoundError(f"{PACKAGE_DIR}/{file_name(DOCUMENTS[name])}")
    return data.decode("utf-8")


def listing() -> str:
    """The schemas, one line each: name, document tag, file name, title (`fleetcheck schema`)."""
    return "".join(f"{name:<6} {tag:<20} {file_name(tag):<14} {TITLES[name]}\n"
                   for name, tag in DOCUMENTS.items())


def schema_for_tag(tag: str) -> str | None:
    """The name of the schema of a document's `schema` tag, or None."""
    return next((name for name, known in DOCUMENTS.items() if known == tag), None)


def _written_files() -> dict[Path, str]:
    """Every schema's text, by the path it is written to (the package and docs/schemas/)."""
    fresh = build_schemas()
    return {folder / file_name(DOCUMENTS[name]): dumps(fresh[name])
            for folder in WRITTEN_TO for name in DOCUMENTS}


def main(argv: list[str]) -> int:
    """`python -m fleetcheck.schemas [--check]`: write the schemas, or say which are stale."""
    if argv and argv != ["--check"]:
        return write_or_check(argv, {}, "fleetcheck.schemas")
    return write_or_check(argv, _written_files(), "fleetcheck.schemas")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
