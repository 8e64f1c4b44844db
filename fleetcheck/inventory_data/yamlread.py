"""Typed reading of a parsed YAML document: the one reader of the YAML files fleetcheck reads
(the inventory, the node kinds' declarations in it, its sources, playbooks).

Every mistake is one line, "FILE:LINE: key: problem", in the document's wording
(`yamlsrc.YamlWording`: the inventory's or a playbook's noun and exception). A value that is
wrong is shown as the user wrote it ("got 'yes please'", "got a list").
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from fleetcheck.errors import FleetcheckError
from fleetcheck.inventory_data.yamlsrc import KeyPath, YamlDocument
from fleetcheck.text import did_you_mean

#: What a value reads as (`YamlReader.unique`'s items, `YamlReader.optional`'s value) and an
#: absent key's default.
T = TypeVar("T")
D = TypeVar("D")


def show(value: Any) -> str:
    """A value as the user wrote it, for "got ..." in messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return str(value)


class YamlReader:
    """Reads the values of one parsed document, raising its wording's error at the first
    mistake."""

    def __init__(self, doc: YamlDocument) -> None:
        self.doc = doc
        #: Relative paths in the document are relative to its folder.
        self.base_dir = os.path.dirname(os.path.abspath(doc.path))

    def fail(self, path: KeyPath, problem: str) -> FleetcheckError:
        """The error "FILE:LINE: key: problem" for the value at `path`, to raise."""
        return self.doc.error(path, problem)

    def shown(self, value: Any) -> str:
        """A value as the user wrote it, for a "got ..." of the caller's own (`show`)."""
        return show(value)

    def optional(
        self,
        raw: Mapping[str, Any],
        path: KeyPath,
        key: str,
        convert: Callable[[Any, KeyPath], T],
        default: D,
    ) -> T | D:
        """`raw[key]` checked by `convert`, or `default` when the key is absent."""
        return convert(raw[key], (*path, key)) if key in raw else default

    def mapping(self, value: Any, path: KeyPath, allowed: tuple[str, ...]) -> dict[str, Any]:
        """A mapping whose keys are all in `allowed`."""
        if not isinstance(value, dict):
            raise self.fail(path, f"must be a mapping, got {show(value)}")
        for key in value:
            if key not in allowed:
                hint = did_you_mean(key, allowed) or " (valid: " + ", ".join(allowed) + ")"
                raise self.fail((*path, key), f"unknown key{hint}")
        return value

    def string(self, value: Any, path: KeyPath) -> str:
        if not isinstance(value, str):
            raise self.fail(path, f"must be a string, got {show(value)}")
        if not value.strip():
            raise self.fail(path, "must not be empty")
        if "\0" in value:
            # A command line ends at the first NUL on the node: the rest would be dropped.
            raise self.fail(path, "must not contain a NUL character")
        return value

    def checked(self, text: str, path: KeyPath, problem_of: Callable[[str], str | None]) -> str:
        """`text`, unless `problem_of` says why it is wrong."""
        problem = problem_of(text)
        if problem is not None:
            raise self.fail(path, problem)
        return text

    def boolean(self, value: Any, path: KeyPath) -> bool:
        if not isinstance(value, bool):
            raise self.fail(path, f"must be true or false, got {show(value)}")
        return value

    def integer(self, value: Any, path: KeyPath, low: int, high: int | None = None) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(path, f"must be an integer, got {show(value)}")
        if value < low or (high is not None and value > high):
            bounds = f"between {low} and {high}" if high is not None else f"at least {low}"
            raise self.fail(path, f"must be {bounds}, got {value}")
        return value

    def seconds(self, value: Any, path: KeyPath) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.fail(path, f"must be a number of seconds, got {show(value)}")
        if not value > 0:
            raise self.fail(path, f"must be more than 0 seconds, got {value}")
        if value == float("inf"):
            raise self.fail(path, "must be a finite number of seconds")
        return float(value)

    def choice(self, value: Any, path: KeyPath, choices: tuple[str, ...]) -> str:
        if value not in choices:
            raise self.fail(path, f"must be one of {', '.join(choices)}, got {show(value)}")
        return str(value)

    def names(self, value: Any, path: KeyPath, valid: Iterable[str], what: str
              ) -> tuple[str, ...]:
        """A list of names from `valid` (a `what` each: "check id"), in the file's order,
        duplicates dropped."""
        valid = tuple(valid)
        if not isinstance(value, list):
            raise self.fail(path, f"must be a list of {what}s, got {show(value)}")
        result: list[str] = []
        for index, item in enumerate(value):
            if not isinstance(item, str):
                raise self.fail((*path, index), f"must be a {what}, got {show(item)}")
            if item not in valid:
                raise self.fail((*path, index), f"unknown {what} {item!r}"
                                + did_you_mean(item, valid, ignore_case=True))
            if item not in result:
                result.append(item)
        return tuple(result)

    def local_path(self, value: Any, path: KeyPath) -> str:
        """A file on this machine: `~` expanded, relative to the document's folder."""
        text = os.path.expanduser(self.string(value, path))
        return text if os.path.isabs(text) else os.path.join(self.base_dir, text)

    def unique(self, items: list[Any], path: KeyPath, read: Callable[[Any, KeyPath], T],
               named: Callable[[T], str]) -> tuple[T, ...]:
        """Each item of a list read by `read`; one named (`named`) as an earlier one is
        refused with the line of the first."""
        specs: list[T] = []
        seen: dict[str, int] = {}
        for index, item in enumerate(items):
            item_path = (*path, index)
            spec = read(item, item_path)
            name = named(spec)
            if name in seen:
                raise self.fail(item_path, f"{name} listed twice (first at line {seen[name]})")
            seen[name] = self.doc.line(item_path)
            specs.append(spec)
        return tuple(specs)
