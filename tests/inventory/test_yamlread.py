"""The typed reader of a parsed YAML document: a value's mistake reads the same in either
wording, an inventory's or a playbook's, only the exception raised differing."""

from __future__ import annotations

from typing import Any

import pytest

from fleetcheck.inventory import InventoryError
from fleetcheck.inventory_data.yamlread import YamlReader
from fleetcheck.inventory_data.yamlsrc import INVENTORY_WORDING, YamlWording, load_yaml
from fleetcheck.playbook import PLAYBOOK_WORDING, PlaybookError

WORDINGS = [(INVENTORY_WORDING, InventoryError), (PLAYBOOK_WORDING, PlaybookError)]


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
