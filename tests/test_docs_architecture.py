"""docs/architecture.md names only what exists: the tables and constants it names are defined
in fleetcheck, the files it names with their folder are there."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "architecture.md"
#: Where a path the page writes may start from (it writes `cli/options.py` for fleetcheck's).
BASES = (ROOT, ROOT / "fleetcheck", ROOT / "fleetcheck" / "probe")


def _names_in_fleetcheck() -> set[str]:
    """Every top-level name of fleetcheck's modules, and every string their code holds (an
    environment variable the page names is one)."""
    names: set[str] = set()
    for path in (ROOT / "fleetcheck").rglob("*.py"):
        if path.name == "probe.py" and path.parent.name == "probe":
            continue  # the built probe: its parts are read
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Name | ast.FunctionDef | ast.ClassDef):
                names.add(node.id if isinstance(node, ast.Name) else node.name)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                names.update(re.findall(r"\w+", node.value))
    return names


def test_every_table_the_page_names_exists() -> None:
    named = set(re.findall(r"\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b", PAGE.read_text()))
    assert sorted(named - _names_in_fleetcheck()) == []


def test_every_file_the_page_names_with_its_folder_exists() -> None:
    paths = set(re.findall(r"`([\w./-]+/[\w.-]+\.(?:py|md|yaml|json|toml))`", PAGE.read_text()))
    # KIND, NAME, TOOL: the placeholders of a file to add.
    missing = [path for path in sorted(paths) if not re.search(r"(?<![a-zA-Z])[A-Z]{3,}(?![a-z])",
                                                                path)
               and not any((base / path).exists() for base in BASES)]
    assert missing == []
