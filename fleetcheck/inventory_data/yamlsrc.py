"""Read YAML into plain values plus the line of every key, refusing duplicates and odd tags.

The one YAML source loader: inventories, playbooks and static Ansible inventories all read
through `load_yaml`, with one wording (`YamlWording`) whose noun and exception are the file's;
`yamlread.YamlReader` then reads the document's values in the same wording.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import yaml

from fleetcheck.errors import FleetcheckError
from fleetcheck.inventory_data.errors import InventoryError

#: A key path: ("hosts", "pve1", "containers", 2, "vmid").
KeyPath = tuple[str | int, ...]

_YAML = "tag:yaml.org,2002:"
#: Plain data only: anything else (python/object, !custom, binary, set...) is refused, so a
#: file from elsewhere can never make the loader build objects.
_SCALAR_TAGS = frozenset(_YAML + t for t in ("str", "int", "float", "bool", "null"))
_MAP_TAG = _YAML + "map"
_SEQ_TAG = _YAML + "seq"
_MERGE_TAG = _YAML + "merge"


class YamlWording:
    """The error messages of the YAML files fleetcheck reads, one wording for all: only the
    file's noun ("inventory", "playbook") and the exception raised differ.

    Each method returns the exception to raise (one line, naming file, line and key).
    """

    def __init__(self, noun: str, error: type[FleetcheckError]) -> None:
        self.noun = noun
        self.error = error

    def problem(self, text: str) -> FleetcheckError:
        """Any other refusal, already worded "FILE:LINE: KEY: problem"."""
        return self.error(text)

    def at(self, path: str, line: int, key_path: KeyPath, problem: str) -> FleetcheckError:
        """"FILE:LINE: KEY: problem" ("FILE:LINE: problem" for the document itself)."""
        key = format_path(key_path)
        return self.problem(f"{path}:{line}: {key}: {problem}" if key
                            else f"{path}:{line}: {problem}")

    def not_found(self, path: str) -> FleetcheckError:
        return self.problem(f"{path}: {self.noun} file not found")

    def not_utf8(self, path: str) -> FleetcheckError:
        return self.problem(f"{path}: not a UTF-8 text file")

    def unreadable(self, path: str, exc: OSError) -> FleetcheckError:
        return self.problem(f"{path}: cannot read: {exc.strerror or exc}")

    def empty(self, path: str, expected: str) -> FleetcheckError:
        """A document with nothing in it; `expected` says what it should hold."""
        return self.problem(f"{path}: empty {self.noun} ({expected})")

    def bad_character(self, path: str, line: int, char: int) -> FleetcheckError:
        return self.problem(f"{path}:{line}: character U+{char:04X} is not allowed in YAML")

    def syntax(self, path: str, exc: yaml.MarkedYAMLError) -> FleetcheckError:
        mark = exc.problem_mark or exc.context_mark
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else path
        problem = exc.problem or exc.context or "invalid YAML"
        return self.problem(f"{where}: YAML syntax error: {_one_line(problem)}")

    def other(self, path: str, exc: yaml.YAMLError) -> FleetcheckError:
        return self.problem(f"{path}: YAML error: {_one_line(str(exc))}")

    def duplicate(
        self, path: str, line: int, key_path: KeyPath, key: str, first_line: int
    ) -> FleetcheckError:
        # An entry of the top-level `hosts:` is a host (only an inventory has one).
        what = "host" if key_path[:-1] == ("hosts",) else "key"
        return self.at(path, line, key_path,
                       f"duplicate {what} {safe_key(key)!r} (first defined at line {first_line})")

    def tag(self, path: str, line: int, key_path: KeyPath, tag: str) -> FleetcheckError:
        shown = tag.replace(_YAML, "!!")
        where = format_path(key_path) or "(top)"
        return self.problem(
            f"{path}:{line}: {where}: YAML tag {shown} is not allowed (plain data only)"
        )


INVENTORY_WORDING = YamlWording("inventory", InventoryError)


class _LineLoader(yaml.SafeLoader):
    """SafeLoader used only to compose nodes and construct plain scalars."""


#: libyaml's scanner, parser and composer (PyYAML's C extension, in PyYAML's wheels), with the
#: same resolver and constructor: the same nodes, tags and line marks, composed in C. Reading a
#: 1,000-host inventory through the pure-Python composer costs five times the CPU
#: (docs/scaling.md). Any YAML error is worded by the pure-Python loader: the fast path never
#: decides a refusal, it only composes what both accept.
_FastLoader: type[Any] | None = None
if getattr(yaml, "__with_libyaml__", False):

    class _CLineLoader(yaml.CSafeLoader):
        """CSafeLoader used only to compose nodes and construct plain scalars."""

    _FastLoader = _CLineLoader


def format_path(path: KeyPath) -> str:
    """("hosts", "pve1", "containers", 2, "vmid") -> "hosts.pve1.containers[2].vmid"."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{safe_key(part)}" if out else safe_key(part)
    return out


@dataclass(frozen=True)
class YamlDocument:
    """A parsed YAML file: its data and the 1-based line of every key path."""

    path: str
    data: Any
    lines: dict[KeyPath, int]
    #: The wording of its mistakes (the inventory's, a playbook's...).
    wording: YamlWording = field(default=INVENTORY_WORDING, compare=False)

    def line(self, path: KeyPath) -> int:
        """The line of `path`, or of its closest ancestor that has one."""
        while path:
            if path in self.lines:
                return self.lines[path]
            path = path[:-1]
        return self.lines.get((), 1)

    def error(self, path: KeyPath, problem: str) -> FleetcheckError:
        """The wording's error "FILE:LINE: KEY: problem" for `path`."""
        return self.wording.at(self.path, self.line(path), path, problem)


def read_source(file: str | os.PathLike[str], shown: str, wording: YamlWording) -> str:
    """The UTF-8 text of `file` (named `shown` in messages), or `wording`'s error."""
    try:
        with open(file, encoding="utf-8") as handle:
            return handle.read()
    except FileNotFoundError:
        raise wording.not_found(shown) from None
    except UnicodeDecodeError:
        raise wording.not_utf8(shown) from None
    except OSError as exc:
        raise wording.unreadable(shown, exc) from None


_TOO_DEEP = "YAML nested too deeply"
# libyaml's own refusal of a document deeper than its nesting limit (scanner.c, 1,000 levels).
_LIBYAML_TOO_DEEP = "exceeded maximum nesting depth"


def load_yaml(
    text: str, path: str, wording: YamlWording = INVENTORY_WORDING
) -> YamlDocument:
    """Parse `text` (read from `path`) or raise `wording`'s error with line and column."""
    if _FastLoader is not None:
        try:
            return _compose(_FastLoader, text, path, wording)
        except (yaml.YAMLError, RecursionError) as exc:
            # libyaml refused the nesting, or (a libyaml without that limit: PyYAML's wheels
            # before 6.0.4) composing it recursed past Python's limit. The pure-Python scanner
            # is quadratic in flow nesting (seconds for a few KB): say at once what it would
            # say after them.
            if isinstance(exc, RecursionError) or getattr(exc, "problem", None) == (
                    _LIBYAML_TOO_DEEP):
                raise wording.problem(f"{path}: {_TOO_DEEP}") from None
            # Any other refusal: the pure-Python loader says why, in its own words.
    try:
        return _compose(_LineLoader, text, path, wording)
    except yaml.reader.ReaderError as exc:
        line = text.count("\n", 0, exc.position) + 1
        char = exc.character if isinstance(exc.character, int) else ord(exc.character)
        raise wording.bad_character(path, line, char) from None
    except yaml.MarkedYAMLError as exc:
        raise wording.syntax(path, exc) from None
    except yaml.YAMLError as exc:
        raise wording.other(path, exc) from None
    except RecursionError:
        # PyYAML composes nested collections recursively; an inventory is never this deep.
        raise wording.problem(f"{path}: {_TOO_DEEP}") from None


def _compose(
    loader_class: type[Any], text: str, path: str, wording: YamlWording
) -> YamlDocument:
    """The document as `loader_class` composes it; YAML's own errors are the caller's."""
    converter: _Converter | None = None
    # Building the loader already reads the text and refuses non-printable characters.
    loader = loader_class(text)
    try:
        node = loader.get_single_node()
        converter = _Converter(loader, path, wording)
        data = None if node is None else converter.convert(node, ())
    finally:
        loader.dispose()
    lines = converter.lines
    if node is not None:
        lines.setdefault((), node.start_mark.line + 1)
    return YamlDocument(path, data, lines, wording)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def safe_key(key: str) -> str:
    """A key fit for a one-line message: newlines and escape sequences shown escaped."""
    return key if key.isprintable() else key.encode("unicode_escape").decode("ascii")


#: Aliases can make a small file expand into a huge tree ("billion laughs"); an inventory
#: never needs more nodes than this.
_MAX_NODES = 200_000


class _Converter:
    """Walks composed nodes into plain values, noting the line of every key path."""

    def __init__(self, loader: Any, file: str, wording: YamlWording) -> None:
        self.loader = loader
        self.file = file
        self.wording = wording
        self.lines: dict[KeyPath, int] = {}
        self._active: set[int] = set()
        self._count = 0

    def convert(self, node: yaml.Node, path: KeyPath) -> Any:
        self._count += 1
        line = node.start_mark.line + 1
        if self._count > _MAX_NODES:
            raise self.wording.problem(
                f"{self.file}:{line}: too many YAML nodes (alias expansion?)"
            )
        if id(node) in self._active:
            raise self.wording.problem(
                f"{self.file}:{line}: {format_path(path) or '(top)'}: recursive YAML alias"
            )
        if isinstance(node, yaml.MappingNode):
            if node.tag != _MAP_TAG:
                raise self._tag_error(node, path)
            self._active.add(id(node))
            try:
                return self._mapping(node, path)
            finally:
                self._active.discard(id(node))
        if isinstance(node, yaml.SequenceNode):
            if node.tag != _SEQ_TAG:
                raise self._tag_error(node, path)
            self._active.add(id(node))
            try:
                items = []
                for index, item in enumerate(node.value):
                    item_path = (*path, index)
                    self.lines[item_path] = item.start_mark.line + 1
                    items.append(self.convert(item, item_path))
                return items
            finally:
                self._active.discard(id(node))
        if node.tag not in _SCALAR_TAGS:
            raise self._tag_error(node, path)
        self.lines.setdefault(path, line)
        return self.loader.construct_object(node, deep=True)

    def _mapping(self, node: yaml.MappingNode, path: KeyPath) -> dict[str, Any]:
        # PyYAML silently keeps the last of two equal keys; a duplicated host would then
        # vanish without a word, so duplicates among the keys written in one mapping are an
        # error. Keys brought in by a `<<` merge may be overridden, as YAML intends.
        seen: dict[str, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == _MERGE_TAG:
                continue
            key = self._key(key_node, path)
            line = key_node.start_mark.line + 1
            if key in seen:
                raise self.wording.duplicate(self.file, line, (*path, key), key, seen[key])
            seen[key] = line
        self.loader.flatten_mapping(node)
        result: dict[str, Any] = {}
        for key_node, value_node in node.value:
            key = self._key(key_node, path)
            child = (*path, key)
            self.lines[child] = key_node.start_mark.line + 1
            result[key] = self.convert(value_node, child)
        return result

    def _key(self, node: yaml.Node, path: KeyPath) -> str:
        line = node.start_mark.line + 1
        if not isinstance(node, yaml.ScalarNode) or node.tag not in _SCALAR_TAGS:
            where = format_path(path) or "(top)"
            raise self.wording.problem(f"{self.file}:{line}: {where}: keys must be plain strings")
        # Host names such as 101 or `yes` are read as int/bool by YAML; keys are names, so
        # the text as written is what counts.
        return str(node.value)

    def _tag_error(self, node: yaml.Node, path: KeyPath) -> Exception:
        return self.wording.tag(self.file, node.start_mark.line + 1, path, node.tag)
