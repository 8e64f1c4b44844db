"""`fleetcheck fix` refusals: one line, exit 2, nothing probed."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from fleetcheck.cli import main

SAVED = {"schema": "fleetcheck.audit/1", "started_at": "2026-12-01T10:00:00Z",
         "finished_at": "2026-12-01T10:00:09Z", "inventory": None, "nodes": []}


def _one_error(capsys: Any) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


@pytest.mark.parametrize(("argv", "message"), [
    (["--history", "h"], "fleetcheck: error: --history needs --apply"),
    (["--apply"], "fleetcheck: error: --apply without a terminal to confirm on needs --yes"),
])
def test_refusals_before_anything_is_probed(tmp_path: Path, capsys: Any,
                                            monkeypatch: pytest.MonkeyPatch,
                                            argv: list[str], message: str) -> None:
    monkeypatch.setattr(sys.stdin, "isatty", lambda: False)
    assert main(["fix", str(tmp_path / "inventory.yaml"), *argv]) == 2
    assert _one_error(capsys).startswith(message)


def test_saved_results_without_an_inventory_cannot_be_applied(tmp_path: Path,
                                                              capsys: Any) -> None:
    saved = tmp_path / "audit.json"
    saved.write_text(json.dumps(SAVED))
    assert main(["fix", str(saved)]) == 3  # nothing verified in it, nothing to plan
    assert "0 failing node(s)" in capsys.readouterr().out
    assert main(["fix", str(saved), "--apply", "--yes"]) == 2
    assert "names no inventory file" in _one_error(capsys)


@pytest.mark.parametrize(("name", "content", "problem"), [
    ("missing.json", None, "no such file"),
    ("bad.json", "{not json", "not valid JSON"),
    ("inventory.yaml", "hosts: [", "inventory.yaml"),
])
def test_unreadable_input_is_one_line(tmp_path: Path, capsys: Any, name: str,
                                      content: str | None, problem: str) -> None:
    path = tmp_path / name
    if content is not None:
        path.write_text(content)
    assert main(["fix", str(path)]) == 2
    assert problem in _one_error(capsys)
