"""The YAML source loader: libyaml's composer (when PyYAML has it) and the pure-Python one give
the same document, and every refusal is worded by the pure-Python loader; one wording, an
inventory and a playbook saying the same of the same mistake, only the file's noun and the
exception raised differing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from fleetcheck.errors import FleetcheckError
from fleetcheck.inventory import InventoryError, load_inventory, parse_inventory
from fleetcheck.inventory_data import yamlsrc
from fleetcheck.playbook import PlaybookError, load_playbook, parse_playbook

needs_libyaml = pytest.mark.skipif(yamlsrc._FastLoader is None,
                                   reason="PyYAML built without libyaml")

INVENTORY = """\
defaults: &defaults
  timeout: 120
  ssh: {user: root, port: 2222}
hosts:
  pve1:
    <<: *defaults
    address: 10.0.0.1
    containers:
      - vmid: 101
      - {vmid: 102, name: "two"}
  "101":
    address: gpu-101
    probe_host: yes
  gpu[01-04]:
    address: ~
    tags: [a, 'b', 3.5, true]
"""

REFUSED = [
    "hosts:\n  a: [1, 2\n",                       # unclosed flow sequence
    "hosts:\n  a: 1\n   b: 2\n",                  # bad indentation
    "hosts: \x07\n",                              # a control character
    "hosts:\n  a: *nowhere\n",                    # an undefined alias
    "hosts:\n  a: 1\n  a: 2\n",                   # a duplicate key (fleetcheck's own check)
    "hosts:\n  a: !!python/object:os.system x\n",  # a tag that builds objects
    "[" * 1200 + "]" * 1200,                      # deeper than libyaml's nesting limit
]


def _load(text: str, fast: bool, monkeypatch: pytest.MonkeyPatch) -> object:
    with monkeypatch.context() as patch:
        if not fast:
            patch.setattr(yamlsrc, "_FastLoader", None)
        try:
            document = yamlsrc.load_yaml(text, "inv.yaml")
        except InventoryError as exc:
            return ("refused", str(exc))
        return (document.data, document.lines)


@needs_libyaml
def test_both_composers_give_the_same_data_and_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    fast = _load(INVENTORY, True, monkeypatch)
    slow = _load(INVENTORY, False, monkeypatch)
    assert fast == slow
    document = yamlsrc.load_yaml(INVENTORY, "inv.yaml")
    assert document.data["hosts"]["pve1"]["ssh"] == {"user": "root", "port": 2222}
    assert document.lines[("hosts", "gpu[01-04]", "tags")] == 16


@needs_libyaml
@pytest.mark.parametrize("text", REFUSED)
def test_refusals_are_worded_as_the_pure_python_loader_words_them(
    text: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast = _load(text, True, monkeypatch)
    assert fast == _load(text, False, monkeypatch)
    assert fast[0] == "refused"  # type: ignore[index]


@pytest.fixture
def composers(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The loader classes load_yaml composes with, in order, as it uses them."""
    used: list[str] = []
    original = yamlsrc._compose

    def compose(loader_class: type, *args: object) -> object:
        used.append(loader_class.__name__)
        return original(loader_class, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(yamlsrc, "_compose", compose)
    return used


@needs_libyaml
def test_the_fast_path_is_the_one_taken(composers: list[str]) -> None:
    used = composers
    yamlsrc.load_yaml(INVENTORY, "inv.yaml")
    assert used == ["_CLineLoader"]
    used.clear()
    with pytest.raises(InventoryError):
        yamlsrc.load_yaml(REFUSED[0], "inv.yaml")
    assert used == ["_CLineLoader", "_LineLoader"]
    assert issubclass(yamlsrc._LineLoader, yaml.SafeLoader)


@needs_libyaml
def test_too_deep_a_document_is_refused_without_the_pure_python_scanner(
    composers: list[str],
) -> None:
    # The pure-Python scanner is quadratic in flow nesting: libyaml's own refusal is enough.
    with pytest.raises(InventoryError, match=r"^inv\.yaml: YAML nested too deeply$"):
        yamlsrc.load_yaml("hosts: " + "[" * 1200 + "]" * 1200, "inv.yaml")
    assert composers == ["_CLineLoader"]


@needs_libyaml
def test_too_deep_for_python_in_the_c_loader_is_refused_without_the_pure_python_scanner(
    composers: list[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A libyaml without a nesting limit (PyYAML's wheels before 6.0.4) composes the document
    # until Python's recursion limit; the pure-Python scanner would say the same, seconds later.
    def too_deep(self: Any) -> Any:
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(yamlsrc._CLineLoader, "get_single_node", too_deep)
    with pytest.raises(InventoryError, match=r"^inv\.yaml: YAML nested too deeply$"):
        yamlsrc.load_yaml("hosts: [[[]]]", "inv.yaml")
    assert composers == ["_CLineLoader"]


def refusal(call: Any, *args: Any) -> FleetcheckError:
    with pytest.raises(FleetcheckError) as caught:
        call(*args)
    return caught.value


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a: [true\n", "f.yaml:2:1: YAML syntax error: expected ',' or ']', but got "
                       "'<stream end>'"),
        ("a: 1\nb: 2\na: 3\n", "f.yaml:3: a: duplicate key 'a' (first defined at line 1)"),
        ("a: !!python/object/apply:os.system ['true']\n",
         "f.yaml:1: a: YAML tag !!python/object/apply:os.system is not allowed (plain data only)"),
        ("a: \x07\n", "f.yaml:1: character U+0007 is not allowed in YAML"),
    ],
    ids=["syntax", "duplicate", "tag", "character"],
)
def test_a_yaml_mistake_reads_the_same_in_an_inventory_and_a_playbook(text: str,
                                                                        message: str) -> None:
    inventory = refusal(parse_inventory, text, "f.yaml")
    playbook = refusal(parse_playbook, text, "f.yaml", "f")
    assert (type(inventory), str(inventory)) == (InventoryError, message)
    assert (type(playbook), str(playbook)) == (PlaybookError, message)


def test_a_file_mistake_names_the_files_noun(tmp_path: Path) -> None:
    missing = str(tmp_path / "nope.yaml")
    assert str(refusal(load_inventory, missing)) == f"{missing}: inventory file not found"
    assert str(refusal(load_playbook, missing)) == f"{missing}: playbook file not found"
    binary = tmp_path / "bin.yaml"
    binary.write_bytes(b"a: \xff\n")
    for load in (load_inventory, load_playbook):
        assert str(refusal(load, str(binary))) == f"{binary}: not a UTF-8 text file"
    assert str(refusal(parse_inventory, "", "f.yaml")).startswith("f.yaml: empty inventory (")
    assert str(refusal(parse_playbook, "", "f.yaml", "f")).startswith("f.yaml: empty playbook (")
