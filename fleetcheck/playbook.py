"""Playbooks: YAML files naming what a run requires and what only warns -> a verdict Policy."""

from __future__ import annotations

import importlib.resources
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from fleetcheck.checks import CHECKS_BY_ID
from fleetcheck.errors import FleetcheckError
from fleetcheck.inventory.yamlsrc import (
    KeyPath,
    YamlDocument,
    YamlWording,
    load_yaml,
    read_source,
)
from fleetcheck.model import VERDICTS
from fleetcheck.text import did_you_mean
from fleetcheck.verdict import CONSISTENCY_KEYS, DEFAULT_POLICY, Policy

#: The playbook used when none is given (fleetcheck/playbooks/default.yaml).
DEFAULT_PLAYBOOK = "default"

_TOP_KEYS = (
    "name", "description", "deep", "triton", "min_gpus", "consistency", "checks",
    "strict_warnings",
)
_CONSISTENCY_KEYS = ("fail", "warn")
_CHECKS_KEYS = ("warn_only", "ignore")
#: A verdict that can be accepted; "unknown" is never a pass (it is an error) nor a failure.
_ACCEPTABLE_VERDICTS = tuple(v for v in VERDICTS if v != "unknown")


class PlaybookError(FleetcheckError):
    """A playbook could not be loaded: one line, "FILE:LINE: KEY: problem"."""


class _LineDict(dict[Any, Any]):
    """A YAML mapping that remembers the line of each key (1-based)."""

    lines: dict[Any, int]


class _LineList(list[Any]):
    """A YAML sequence that remembers the line of each item (1-based)."""

    lines: list[int]


class _PlaybookWording(YamlWording):
    """The playbook's own error texts around the shared YAML loader."""

    def problem(self, text: str) -> Exception:
        return PlaybookError(text)

    def not_found(self, path: str) -> Exception:
        return PlaybookError(f"{path}: no such playbook file")

    def not_utf8(self, path: str) -> Exception:
        return PlaybookError(f"{path}:1: not UTF-8 text")

    def unreadable(self, path: str, exc: OSError) -> Exception:
        return PlaybookError(f"{path}: cannot read: {exc.strerror}")

    def bad_character(self, path: str, line: int, char: int) -> Exception:
        return PlaybookError(f"{path}:{line}: invalid YAML: character U+{char:04X} is not allowed")

    def syntax(self, path: str, exc: yaml.MarkedYAMLError) -> Exception:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else 1
        return PlaybookError(f"{path}:{line}: invalid YAML: {exc.problem or exc}")

    def other(self, path: str, exc: yaml.YAMLError) -> Exception:
        return PlaybookError(f"{path}:1: invalid YAML: {exc}")

    def duplicate(
        self, path: str, line: int, key_path: KeyPath, key: str, first_line: int
    ) -> Exception:
        return PlaybookError(f"{path}:{line}: {key}: duplicate key")

    def tag(self, path: str, line: int, key_path: KeyPath, tag: str) -> Exception:
        if tag.startswith(_YAML_TAG) and not tag.startswith(_YAML_TAG + "python/"):
            return super().tag(path, line, key_path, tag)
        # What PyYAML's SafeLoader says of a tag it has no constructor for.
        return PlaybookError(
            f"{path}:{line}: invalid YAML: could not determine a constructor for the tag {tag!r}"
        )


_YAML_TAG = "tag:yaml.org,2002:"


def _with_lines(doc: YamlDocument, value: Any, path: KeyPath = ()) -> Any:
    """The document's data as _LineDict/_LineList, each part carrying its line."""
    if isinstance(value, dict):
        mapping = _LineDict()
        mapping.lines = {}
        for key, item in value.items():
            mapping[key] = _with_lines(doc, item, (*path, key))
            mapping.lines[key] = doc.line((*path, key))
        return mapping
    if isinstance(value, list):
        items = _LineList(_with_lines(doc, item, (*path, index))
                          for index, item in enumerate(value))
        items.lines = [doc.line((*path, index)) for index in range(len(value))]
        return items
    return value


_PLAYBOOK_WORDING = _PlaybookWording()


def _suggest(word: object, choices: Iterable[str]) -> str:
    return did_you_mean(word, choices, ignore_case=True)


def _type_name(value: object) -> str:
    if value is None:
        return "nothing"
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
            _LineDict: "a mapping", _LineList: "a list"}.get(type(value), type(value).__name__)


class _Reader:
    """Validates one parsed playbook, raising PlaybookError with file, line and key."""

    def __init__(self, source: str) -> None:
        self.source = source

    def error(self, line: int, key: str, problem: str) -> PlaybookError:
        return PlaybookError(f"{self.source}:{line}: {key}: {problem}")

    def mapping(self, value: object, line: int, key: str, allowed: tuple[str, ...]) -> _LineDict:
        if not isinstance(value, _LineDict):
            raise self.error(line, key, f"must be a mapping, not {_type_name(value)}")
        for name, name_line in value.lines.items():
            if name not in allowed:
                where = f"{key}.{name}" if key != "(top level)" else str(name)
                raise self.error(name_line, where, "unknown key" + _suggest(name, allowed))
        return value

    def boolean(self, value: object, line: int, key: str) -> bool:
        if not isinstance(value, bool):
            raise self.error(line, key, f"must be true or false, not {_type_name(value)}")
        return value

    def string(self, value: object, line: int, key: str) -> str:
        if not isinstance(value, str):
            raise self.error(line, key, f"must be a string, not {_type_name(value)}")
        if not value.strip():
            raise self.error(line, key, "must not be empty")
        return value.strip()

    def count(self, value: object, line: int, key: str) -> int:
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            shown = repr(value) if isinstance(value, (int, float, str)) else _type_name(value)
            raise self.error(line, key, f"must be a non-negative integer, not {shown}")
        return value

    def names(
        self, value: object, line: int, key: str, valid: Iterable[str], what: str,
    ) -> tuple[str, ...]:
        """A list of names from `valid`, in the file's order, duplicates dropped."""
        valid = tuple(valid)
        if not isinstance(value, _LineList):
            raise self.error(line, key, f"must be a list of {what}s, not {_type_name(value)}")
        result: list[str] = []
        for index, (item, item_line) in enumerate(zip(value, value.lines, strict=True)):
            if not isinstance(item, str):
                raise self.error(
                    item_line, f"{key}[{index}]", f"must be a {what}, not {_type_name(item)}"
                )
            if item not in valid:
                raise self.error(
                    item_line, f"{key}[{index}]", f"unknown {what} {item!r}" + _suggest(item, valid)
                )
            if item not in result:
                result.append(item)
        return tuple(result)


def parse_playbook(text: str, source: str, default_name: str) -> Policy:
    """The Policy a playbook's YAML text describes; `source` names it in error messages."""
    doc = load_yaml(text, source, _PLAYBOOK_WORDING)
    data = _with_lines(doc, doc.data)
    read = _Reader(source)
    if data is None:
        raise read.error(1, "(top level)", "the playbook is empty")
    top = read.mapping(data, 1, "(top level)", _TOP_KEYS)
    lines = top.lines
    fields: dict[str, Any] = {"name": default_name, "source": source}
    if "name" in top:
        fields["name"] = read.string(top["name"], lines["name"], "name")
    if "description" in top:
        fields["description"] = read.string(top["description"], lines["description"], "description")
    for flag in ("deep", "strict_warnings"):
        if flag in top:
            fields[flag] = read.boolean(top[flag], lines[flag], flag)
    if "min_gpus" in top:
        fields["min_gpus"] = read.count(top["min_gpus"], lines["min_gpus"], "min_gpus")
    if "triton" in top:
        accepted = read.names(
            top["triton"], lines["triton"], "triton", _ACCEPTABLE_VERDICTS, "Triton verdict"
        )
        if "cpu-fallback" in accepted:
            index = list(top["triton"]).index("cpu-fallback")
            raise read.error(
                top["triton"].lines[index], f"triton[{index}]",
                "cpu-fallback cannot be accepted: it is the failure fleetcheck exists to catch",
            )
        fields["failing_verdicts"] = frozenset(_ACCEPTABLE_VERDICTS) - frozenset(accepted)
    if "consistency" in top:
        section = read.mapping(
            top["consistency"], lines["consistency"], "consistency", _CONSISTENCY_KEYS
        )
        for level, field_name in (("fail", "consistent"), ("warn", "consistent_warn")):
            if level in section:
                fields[field_name] = read.names(
                    section[level], section.lines[level], f"consistency.{level}",
                    CONSISTENCY_KEYS, "fact",
                )
        both = set(fields.get("consistent", ())) & set(fields.get("consistent_warn", ()))
        if both:
            raise read.error(
                section.lines["warn"], "consistency.warn",
                f"{sorted(both)[0]!r} is also listed under consistency.fail",
            )
    if "checks" in top:
        section = read.mapping(top["checks"], lines["checks"], "checks", _CHECKS_KEYS)
        for key in _CHECKS_KEYS:
            if key in section:
                fields[key] = frozenset(
                    read.names(section[key], section.lines[key], f"checks.{key}",
                               CHECKS_BY_ID, "check id")
                )
    return Policy(**fields)


def builtin_playbooks() -> list[str]:
    """Names of the playbooks shipped with fleetcheck, sorted."""
    folder = importlib.resources.files("fleetcheck") / "playbooks"
    return sorted(
        entry.name.removesuffix(".yaml") for entry in folder.iterdir()
        if entry.name.endswith(".yaml")
    )


def _is_bare_name(text: str) -> bool:
    return "/" not in text and "\\" not in text and not text.endswith((".yaml", ".yml"))


def load_playbook(path_or_name: str | None) -> Policy:
    """The Policy of a playbook file, of a built-in by bare name, or the default for None.

    A string naming an existing file is read as that file; otherwise a bare name (no folder,
    no .yaml suffix) such as `pre-training` picks the built-in of that name.
    """
    if path_or_name is None:
        return DEFAULT_POLICY
    if not path_or_name.strip():
        raise PlaybookError("--playbook: empty playbook name")
    path = Path(path_or_name).expanduser()
    if path.is_file() or not _is_bare_name(path_or_name):
        text = read_source(path, path_or_name, _PLAYBOOK_WORDING)
        return parse_playbook(text, path_or_name, path.stem)
    names = builtin_playbooks()
    if path_or_name not in names:
        raise PlaybookError(
            f"{path_or_name}: no such playbook file, nor a built-in playbook of that name"
            f"{_suggest(path_or_name, names)} (built-ins: {', '.join(names)})"
        )
    resource = importlib.resources.files("fleetcheck") / "playbooks" / f"{path_or_name}.yaml"
    return parse_playbook(
        resource.read_text(encoding="utf-8"), f"builtin:{path_or_name}", path_or_name
    )
