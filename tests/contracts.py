"""The published JSON Schemas as the tests hold documents to them: every probe document, node
document and audit report the suite's helpers produce is validated here (fleetcheck/schemas.py).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from typing import Any

from jsonschema import Draft202012Validator

from fleetcheck.schemas import DOCUMENTS, schema_for_tag, shipped


@functools.cache
def validator(name: str) -> Draft202012Validator:
    schema = json.loads(shipped(name))
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def problems(document: Any, name: str | None = None) -> list[str]:
    """What in `document` its schema refuses (by its own `schema` tag, or `name`), one line
    each, with the path to it; [] for a valid document."""
    if name is None:
        tag = document.get("schema") if isinstance(document, Mapping) else None
        name = schema_for_tag(tag) if isinstance(tag, str) else None
        assert name is not None, f"no published schema for a document tagged {tag!r}"
    assert name in DOCUMENTS, name
    return [f"{'/'.join(str(part) for part in error.absolute_path) or '(root)'}: "
            f"{error.message}"[:300]
            for error in sorted(validator(name).iter_errors(document), key=str)]


def validated(document: Any, name: str | None = None) -> Any:
    """`document`, once it is valid under its published schema (else the test fails)."""
    found = problems(document, name)
    assert not found, "not valid under its published schema:\n" + "\n".join(found[:10])
    return document


def validated_json(text: str | bytes, name: str | None = None) -> Any:
    """The JSON document `text` holds, validated."""
    return validated(json.loads(text), name)
