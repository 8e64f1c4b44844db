"""One YAML reader, one wording: an inventory and a playbook say the same of the same mistake,
only the file's noun and the exception raised differing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fleetcheck.errors import FleetcheckError
from fleetcheck.inventory import InventoryError, load_inventory, parse_inventory
from fleetcheck.inventory.yamlread import YamlReader
from fleetcheck.inventory.yamlsrc import INVENTORY_WORDING, YamlWording, load_yaml
from fleetcheck.playbook import PLAYBOOK_WORDING, PlaybookError, load_playbook, parse_playbook

WORDINGS = [(INVENTORY_WORDING, InventoryError), (PLAYBOOK_WORDING, PlaybookError)]


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


def read(wording: YamlWording, text: str, method: str, key: str, *args: Any) -> Any:
    doc = load_yaml(text, "f.yaml", wording)
    return getattr(YamlReader(doc), method)(doc.data[key], (key,), *args)


@pytest.mark.parametrize(("wording", "error"), WORDINGS, ids=["inventory", "playbook"])
@pytest.mark.parametrize(
    ("text", "call", "message"),
    [
        ("a: {b: 1}\n", ("mapping", "a", ("c", "d")),
         "f.yaml:1: a.b: unknown key (valid: c, d)"),
        ("a: {ssh: 1}\n", ("mapping", "a", ("shh",)),
         "f.yaml:1: a.ssh: unknown key (did you mean 'shh'?)"),
        ("a: [1]\n", ("mapping", "a", ()), "f.yaml:1: a: must be a mapping, got a list"),
        ("a: 3\n", ("string", "a"), "f.yaml:1: a: must be a string, got 3"),
        ("a: ' '\n", ("string", "a"), "f.yaml:1: a: must not be empty"),
        ("a: yes please\n", ("boolean", "a"), "f.yaml:1: a: must be true or false, got "
                                              "'yes please'"),
        ("a: eight\n", ("integer", "a", 0), "f.yaml:1: a: must be an integer, got 'eight'"),
        ("a: -1\n", ("integer", "a", 0), "f.yaml:1: a: must be at least 0, got -1"),
        ("a: 0\n", ("seconds", "a"), "f.yaml:1: a: must be more than 0 seconds, got 0"),
        ("a: lxd\n", ("choice", "a", ("docker", "podman")),
         "f.yaml:1: a: must be one of docker, podman, got 'lxd'"),
        ("a: x\n", ("names", "a", ("x",), "fact"), "f.yaml:1: a: must be a list of facts, "
                                                   "got 'x'"),
        ("a:\n  - Torch\n", ("names", "a", ("torch",), "fact"),
         "f.yaml:2: a[0]: unknown fact 'Torch' (did you mean 'torch'?)"),
    ],
)
def test_a_value_reads_the_same_in_either_wording(wording: YamlWording, error: type,
                                                   text: str, call: tuple[Any, ...],
                                                   message: str) -> None:
    method, key, *args = call
    with pytest.raises(error) as caught:
        read(wording, text, method, key, *args)
    assert str(caught.value) == message


def test_a_list_of_names_keeps_the_files_order_without_repeats() -> None:
    assert read(PLAYBOOK_WORDING, "a: [b, a, b]\n", "names", "a", ("a", "b"), "fact") == (
        "b", "a")
