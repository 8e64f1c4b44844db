"""Hostile and broken inventories: the loader answers with one InventoryError line, never a
traceback, and never builds anything but plain data."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleetcheck.inventory.load import load_inventory, parse_inventory
from fleetcheck.inventory_data.errors import InventoryError
from tests.reliability.support import key_paths

FUZZ = settings(
    max_examples=300,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


VALID = {
    "defaults": {
        "ssh": {"user": "root", "port": 22, "known_hosts": "known_hosts"},
        "python": "python3",
        "timeout": 30,
        "env": {"CC": "/usr/bin/gcc"},
    },
    "hosts": {
        "pve1": {"address": "127.0.0.1", "containers": "all"},
        "pve2": {
            "address": "10.0.0.2",
            "probe_host": True,
            "labels": ["gpu"],
            "containers": [200, {"vmid": 201, "python": "/opt/venv/bin/python3",
                                 "env": {"A": "b"}, "name": "ct201", "timeout": 10}],
        },
    },
    "groups": {"all-gpu": ["pve1", "pve2"]},
}

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=40),
    st.sampled_from(["all", "127.0.0.1", "root", "~", "~/x", "", " ", "-1", "1e9",
                     "$(touch /tmp/canary)", "a\nb", "\x1b[31m", "yes", "0x10"]),
)
trees = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.one_of(st.text(max_size=12), st.sampled_from(
            ["hosts", "defaults", "groups", "address", "containers", "vmid", "ssh", "api",
             "env", "python", "labels", "timeout", "port", "token_value", "<<"])),
            children, max_size=4),
    ),
    max_leaves=25,
)


VALID_PATHS = key_paths(VALID)


def _replace(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    doc = copy.deepcopy(doc)
    parent = doc
    for part in path[:-1]:
        parent = parent[part]
    parent[path[-1]] = value
    return doc


def _assert_clean_outcome(text: str) -> None:
    """Loads or raises one InventoryError line naming the file; nothing else may escape."""
    try:
        inventory = parse_inventory(text, "inv.yaml")
    except InventoryError as exc:
        message = str(exc)
        assert message.startswith("inv.yaml"), message
        assert "Traceback" not in message
        return
    assert inventory.hosts or inventory.disabled_hosts


@FUZZ
@given(text=st.text(max_size=400))
def test_arbitrary_text_is_loaded_or_refused_in_one_line(text: str, figures: Any) -> None:
    figures.tried("inventory loader")
    _assert_clean_outcome(text)


@FUZZ
@given(tree=trees)
def test_arbitrary_yaml_documents_are_loaded_or_refused(tree: Any, figures: Any) -> None:
    figures.tried("inventory loader")
    _assert_clean_outcome(yaml.safe_dump(tree, allow_unicode=True))


@FUZZ
@given(path=st.sampled_from(VALID_PATHS), value=trees)
def test_a_valid_inventory_with_one_value_replaced(path: Any, value: Any, figures: Any) -> None:
    figures.tried("inventory loader")
    doc = _replace(VALID, path, value)
    _assert_clean_outcome(yaml.safe_dump(doc, allow_unicode=True))


@settings(max_examples=100, deadline=None, derandomize=True, database=None)
@given(raw=st.binary(max_size=300))
def test_arbitrary_bytes_on_disk(raw: bytes, tmp_path_factory: Any, figures: Any) -> None:
    figures.tried("inventory loader")
    path = tmp_path_factory.mktemp("inv") / "inv.yaml"
    path.write_bytes(raw)
    try:
        load_inventory(str(path))
    except InventoryError as exc:
        assert str(exc).startswith(str(path))


def test_invalid_utf8_is_one_line(tmp_path: Any, figures: Any) -> None:
    figures.tried("inventory loader")
    path = tmp_path / "inv.yaml"
    path.write_bytes(b"hosts:\n  pve1: {address: \xff\xfe, probe_host: true}\n")
    with pytest.raises(InventoryError, match="not a UTF-8 text file"):
        load_inventory(str(path))


@pytest.mark.parametrize(
    "text",
    [
        "!!python/object/apply:os.system ['touch /tmp/fleetcheck-canary']",
        "hosts: !!python/name:os.system\n",
        "hosts:\n  pve1: !!binary aGVsbG8=\n",
        "hosts: !custom {}\n",
        "hosts: !!set {a, b}\n",
    ],
    ids=["python-object", "python-name", "binary", "custom-tag", "set"],
)
def test_yaml_tags_never_build_objects(text: str, figures: Any) -> None:
    figures.tried("inventory loader")
    with pytest.raises(InventoryError, match="not allowed"):
        parse_inventory(text, "inv.yaml")


def test_billion_laughs_is_refused(figures: Any) -> None:
    figures.tried("inventory loader")
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    for level in range(1, 9):
        refs = ", ".join([f"*a{level - 1}"] * 9)
        lines.append(f"a{level}: &a{level} [{refs}]")
    lines.append("hosts: *a8")
    with pytest.raises(InventoryError, match="too many YAML nodes"):
        parse_inventory("\n".join(lines) + "\n", "inv.yaml")


def test_recursive_alias_is_refused(figures: Any) -> None:
    figures.tried("inventory loader")
    with pytest.raises(InventoryError, match="recursive YAML alias"):
        parse_inventory("hosts: &h [*h]\n", "inv.yaml")


@pytest.mark.parametrize("key", ["token_value", "token", "password", "secret"])
def test_secrets_in_the_inventory_are_refused_without_echoing_them(key: str,
                                                                   figures: Any) -> None:
    figures.tried("inventory loader")
    secret = "c0ffee00-dead-beef-0000-5ecret5ecret"
    text = (
        "hosts:\n  pve1:\n    address: 127.0.0.1\n    probe_host: true\n"
        f"    api: {{url: 'https://127.0.0.1:8006', user: fleet@pve, token_name: audit, "
        f"{key}: '{secret}'}}\n"
    )
    with pytest.raises(InventoryError) as info:
        parse_inventory(text, "inv.yaml")
    figures.secrets_scanned([f"inventory error names {key}"] if secret in str(info.value) else [])
    assert secret not in str(info.value)


@pytest.mark.parametrize("char", ["\x00", "\x07", "\x1b", "\ufffe"])
def test_non_printable_character_is_an_inventory_error(char: str, figures: Any) -> None:
    figures.tried("inventory loader")
    with pytest.raises(InventoryError) as info:
        parse_inventory(f"hosts:\n  pve1: {{address: a{char}b, probe_host: true}}\n", "inv.yaml")
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("opening,closing", [("[", "]"), ("{a: ", "}")], ids=["list", "map"])
def test_deep_nesting_is_an_inventory_error(opening: str, closing: str, figures: Any) -> None:
    figures.tried("inventory loader")
    text = "hosts: " + opening * 5000 + "1" + closing * 5000 + "\n"
    with pytest.raises(InventoryError):
        parse_inventory(text, "inv.yaml")


@pytest.mark.parametrize("key", ["a\\nb", "x\\e[2Jy"], ids=["newline", "escape"])
def test_error_naming_a_hostile_key_stays_one_safe_line(key: str, figures: Any) -> None:
    figures.tried("inventory loader")
    text = f'hosts:\n  pve1:\n    address: x\n    probe_host: true\n    "{key}": 1\n'
    with pytest.raises(InventoryError) as info:
        parse_inventory(text, "inv.yaml")
    message = str(info.value)
    assert "\n" not in message and "\x1b" not in message, repr(message)
