"""The diagnosis names every failure from its own message: the real texts of gcc, clang, ld,
glibc's loader and Python's OSErrors (tests/probe/fixtures/toolchain_texts.json, made by
tests/probe/toolchain_texts.py with the real tools), and the same cases re-run live here."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from fleetcheck.probe.parts.evaluation.diagnose import diagnose
from tests.probe.toolchain_texts import LIVE, produce

FIXTURE = Path(__file__).parents[2] / "fixtures" / "toolchain_texts.json"
ROWS: list[dict[str, Any]] = json.loads(FIXTURE.read_text())["rows"]
TRITON = Path(__file__).resolve().parents[4] / ".test-wheels" / "triton-3.9.0" / "triton"

#: The workload's dirs as the stage reports them; the bench holds the build's temp dirs.
PLACES = {"cache": ["/home/job/.triton/cache"], "tmp": ["<bench>"],
          "include": ["/usr/include/python3.12"], "cc": "/nonexistent/gcc"}


def failure_for(row: dict[str, Any]) -> dict[str, Any]:
    """What the workload stage records for this text: a compiler run, or an exception."""
    text = row["text"]
    if text.startswith(("ImportError", "OSError", "PermissionError", "FileNotFoundError")):
        errno_name = {"28": "ENOSPC", "13": "EACCES", "30": "EROFS", "2": "ENOENT",
                      "8": "ENOEXEC"}.get(text.partition("[Errno ")[2].partition("]")[0])
        quoted = text.rpartition(": '")[2].rstrip("'") if ": '" in text else None
        return {"error": text, "errno": errno_name,
                "filename": quoted.replace("<bench>", "/nonexistent") if quoted and
                row["case"] == "cc_not_found" else quoted, "where": row["where"]}
    return {"error": "CalledProcessError: Command '[...]' returned non-zero exit status 1.",
            "compiler": [{"argv": ["gcc"], "rc": 1, "stderr": text}]}


def places_for(row: dict[str, Any]) -> dict[str, Any]:
    places = dict(PLACES)
    if row["where"] == "cache":
        places["cache"] = ["<bench>"]
        places["tmp"] = ["/tmp"]
    if row["case"] == "cc_wrong_format":
        places["cc"] = "<bench>/not-a-program"
    return places


#: Rows whose text alone no longer decides: `failed to map segment` is noexec only where the
#: mount says noexec, an address-space limit where one is set (tests/probe/test_objects.py);
#: here, with neither, the library that does not map is named.
NAMED_FROM_THE_OBJECT = {"load_noexec": "loader_map_failed"}


@pytest.mark.parametrize("row", ROWS, ids=[row["case"] for row in ROWS])
def test_real_text_is_named(row: dict[str, Any]) -> None:
    cause, line = diagnose(failure_for(row), places_for(row))
    assert cause == NAMED_FROM_THE_OBJECT.get(row["case"], row["cause"]), row["text"]
    assert line and line in row["text"]


def test_a_message_that_names_nothing_is_shown_not_guessed() -> None:
    failure = {"error": "CalledProcessError: Command '[...]' returned non-zero exit status 1.",
               "compiler": [{"argv": ["gcc"], "rc": 1,
                             "stderr": "cuda_utils.c:40:3: error: something nobody knows\n"}]}
    assert diagnose(failure, PLACES) == (None, "cuda_utils.c:40:3: error: something nobody knows")


@pytest.mark.skipif(not shutil.which("gcc") or not (TRITON / "backends/nvidia/driver.c").is_file(),
                    reason="needs gcc and the Triton 3.9 files (scripts/fetch_test_wheels.py)")
@pytest.mark.parametrize(("case", "cause"), LIVE, ids=[c.__name__[5:] for c, _ in LIVE])
def test_live_tool_text_is_named(case: Any, cause: str) -> None:
    _, text = produce(case, TRITON)
    row = {"case": case.__name__[5:], "cause": cause, "where": None, "text": text}
    expected = NAMED_FROM_THE_OBJECT.get(row["case"], cause)
    assert diagnose(failure_for(row), places_for(row))[0] == expected, text
