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
    format_path,
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


_PLAYBOOK_WORDING = _PlaybookWording()


def _suggest(word: object, choices: Iterable[str]) -> str:
    return did_you_mean(word, choices, ignore_case=True)


def _type_name(value: object) -> str:
    if value is None:
        return "nothing"
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
            dict: "a mapping", list: "a list"}.get(type(value), type(value).__name__)


class _Reader:
    """Validates one parsed playbook, raising PlaybookError with file, line and key: the
    lines are the document's own (`YamlDocument.line`), as the inventory's are."""

    def __init__(self, doc: YamlDocument) -> None:
        self.doc = doc

    def error(self, path: KeyPath, problem: str) -> PlaybookError:
        key = format_path(path) or "(top level)"
        return PlaybookError(f"{self.doc.path}:{self.doc.line(path)}: {key}: {problem}")

    def mapping(self, value: object, path: KeyPath, allowed: tuple[str, ...]
                ) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.error(path, f"must be a mapping, not {_type_name(value)}")
        for name in value:
            if name not in allowed:
                raise self.error((*path, name), "unknown key" + _suggest(name, allowed))
        return value

    def boolean(self, value: object, path: KeyPath) -> bool:
        if not isinstance(value, bool):
            raise self.error(path, f"must be true or false, not {_type_name(value)}")
        return value

    def string(self, value: object, path: KeyPath) -> str:
        if not isinstance(value, str):
            raise self.error(path, f"must be a string, not {_type_name(value)}")
        if not value.strip():
            raise self.error(path, "must not be empty")
        return value.strip()

    def count(self, value: object, path: KeyPath) -> int:
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            shown = repr(value) if isinstance(value, (int, float, str)) else _type_name(value)
            raise self.error(path, f"must be a non-negative integer, not {shown}")
        return value

    def names(self, value: object, path: KeyPath, valid: Iterable[str], what: str,
              ) -> tuple[str, ...]:
        """A list of names from `valid`, in the file's order, duplicates dropped."""
        valid = tuple(valid)
        if not isinstance(value, list):
            raise self.error(path, f"must be a list of {what}s, not {_type_name(value)}")
        result: list[str] = []
        for index, item in enumerate(value):
            if not isinstance(item, str):
                raise self.error((*path, index), f"must be a {what}, not {_type_name(item)}")
            if item not in valid:
                raise self.error((*path, index),
                                 f"unknown {what} {item!r}" + _suggest(item, valid))
            if item not in result:
                result.append(item)
        return tuple(result)


def parse_playbook(text: str, source: str, default_name: str) -> Policy:
    """The Policy a playbook's YAML text describes; `source` names it in error messages."""
    doc = load_yaml(text, source, _PLAYBOOK_WORDING)
    read = _Reader(doc)
    if doc.data is None:
        raise read.error((), "the playbook is empty")
    top = read.mapping(doc.data, (), _TOP_KEYS)
    fields: dict[str, Any] = {"name": default_name, "source": source}
    for key in ("name", "description"):
        if key in top:
            fields[key] = read.string(top[key], (key,))
    for flag in ("deep", "strict_warnings"):
        if flag in top:
            fields[flag] = read.boolean(top[flag], (flag,))
    if "min_gpus" in top:
        fields["min_gpus"] = read.count(top["min_gpus"], ("min_gpus",))
    if "triton" in top:
        accepted = read.names(top["triton"], ("triton",), _ACCEPTABLE_VERDICTS,
                              "Triton verdict")
        if "cpu-fallback" in accepted:
            index = list(top["triton"]).index("cpu-fallback")
            raise read.error(
                ("triton", index),
                "cpu-fallback cannot be accepted: it is the failure fleetcheck exists to catch",
            )
        fields["failing_verdicts"] = frozenset(_ACCEPTABLE_VERDICTS) - frozenset(accepted)
    if "consistency" in top:
        section = read.mapping(top["consistency"], ("consistency",), _CONSISTENCY_KEYS)
        for level, field_name in (("fail", "consistent"), ("warn", "consistent_warn")):
            if level in section:
                fields[field_name] = read.names(section[level], ("consistency", level),
                                                CONSISTENCY_KEYS, "fact")
        both = set(fields.get("consistent", ())) & set(fields.get("consistent_warn", ()))
        if both:
            raise read.error(("consistency", "warn"),
                             f"{sorted(both)[0]!r} is also listed under consistency.fail")
    if "checks" in top:
        section = read.mapping(top["checks"], ("checks",), _CHECKS_KEYS)
        for key in _CHECKS_KEYS:
            if key in section:
                fields[key] = frozenset(read.names(section[key], ("checks", key),
                                                   CHECKS_BY_ID, "check id"))
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
