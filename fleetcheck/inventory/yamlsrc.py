"""Read YAML into plain values plus the line of every key, refusing duplicates and odd tags."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

from fleetcheck.inventory.errors import InventoryError

#: A key path: ("hosts", "pve1", "containers", 2, "vmid").
KeyPath = tuple[str | int, ...]

_YAML = "tag:yaml.org,2002:"
#: Plain data only: anything else (python/object, !custom, binary, set...) is refused, so a
#: file from elsewhere can never make the loader build objects.
_SCALAR_TAGS = frozenset(_YAML + t for t in ("str", "int", "float", "bool", "null"))
_MAP_TAG = _YAML + "map"
_SEQ_TAG = _YAML + "seq"
_MERGE_TAG = _YAML + "merge"


class _LineLoader(yaml.SafeLoader):
    """SafeLoader used only to compose nodes and construct plain scalars."""


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

    def line(self, path: KeyPath) -> int:
        """The line of `path`, or of its closest ancestor that has one."""
        while path:
            if path in self.lines:
                return self.lines[path]
            path = path[:-1]
        return self.lines.get((), 1)

    def error(self, path: KeyPath, problem: str) -> InventoryError:
        """An InventoryError "FILE:LINE: KEY: problem" for `path`."""
        where = f"{self.path}:{self.line(path)}"
        key = format_path(path)
        return InventoryError(f"{where}: {key}: {problem}" if key else f"{where}: {problem}")


def load_yaml(text: str, path: str) -> YamlDocument:
    """Parse `text` (read from `path`) or raise InventoryError with line and column."""
    node = None
    converter: _Converter | None = None
    try:
        # Building the loader already reads the text and refuses non-printable characters.
        loader = _LineLoader(text)
        try:
            node = loader.get_single_node()
            converter = _Converter(loader, path)
            data = None if node is None else converter.convert(node, ())
        finally:
            loader.dispose()
    except yaml.reader.ReaderError as exc:
        line = text.count("\n", 0, exc.position) + 1
        char = exc.character if isinstance(exc.character, int) else ord(exc.character)
        raise InventoryError(
            f"{path}:{line}: character U+{char:04X} is not allowed in YAML"
        ) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else path
        problem = exc.problem or exc.context or "invalid YAML"
        raise InventoryError(f"{where}: YAML syntax error: {_one_line(problem)}") from None
    except yaml.YAMLError as exc:
        raise InventoryError(f"{path}: YAML error: {_one_line(str(exc))}") from None
    except RecursionError:
        # PyYAML composes nested collections recursively; an inventory is never this deep.
        raise InventoryError(f"{path}: YAML nested too deeply") from None
    lines = converter.lines if converter else {}
    if node is not None:
        lines.setdefault((), node.start_mark.line + 1)
    return YamlDocument(path, data, lines)


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

    def __init__(self, loader: _LineLoader, file: str) -> None:
        self.loader = loader
        self.file = file
        self.lines: dict[KeyPath, int] = {}
        self._active: set[int] = set()
        self._count = 0

    def convert(self, node: yaml.Node, path: KeyPath) -> Any:
        self._count += 1
        line = node.start_mark.line + 1
        if self._count > _MAX_NODES:
            raise InventoryError(f"{self.file}:{line}: too many YAML nodes (alias expansion?)")
        if id(node) in self._active:
            raise InventoryError(
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
                what = "host" if path == ("hosts",) else "key"
                where = format_path((*path, key))
                raise InventoryError(
                    f"{self.file}:{line}: {where}: duplicate {what} "
                    f"{safe_key(key)!r} (first defined at line {seen[key]})"
                )
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
            raise InventoryError(f"{self.file}:{line}: {where}: keys must be plain strings")
        # Host names such as 101 or `yes` are read as int/bool by YAML; keys are names, so
        # the text as written is what counts.
        return str(node.value)

    def _tag_error(self, node: yaml.Node, path: KeyPath) -> InventoryError:
        line = node.start_mark.line + 1
        tag = node.tag.replace(_YAML, "!!")
        where = format_path(path) or "(top)"
        return InventoryError(
            f"{self.file}:{line}: {where}: YAML tag {tag} is not allowed (plain data only)"
        )
