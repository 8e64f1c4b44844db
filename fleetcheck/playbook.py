"""Playbooks: YAML files naming what a run requires and what only warns -> a verdict Policy."""

from __future__ import annotations

import pkgutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from fleetcheck.checks import CHECKS_BY_ID
from fleetcheck.errors import FleetcheckError
from fleetcheck.inventory_data.yamlread import YamlReader
from fleetcheck.inventory_data.yamlsrc import YamlWording, load_yaml, read_source
from fleetcheck.judgement.gpustate import FOREIGN_LEVELS, HEALTH_LEVELS, GpuPolicy
from fleetcheck.judgement.policy import CONSISTENCY_KEYS, DEFAULT_POLICY, Policy
from fleetcheck.report.content import VERDICTS
from fleetcheck.text import did_you_mean

#: The playbook used when none is given (fleetcheck/playbooks/default.yaml).
DEFAULT_PLAYBOOK = "default"

_TOP_KEYS = (
    "name", "description", "deep", "triton", "min_gpus", "consistency", "checks",
    "strict_warnings", "max_gpu_memory_used", "foreign_processes", "memory_health",
)
_CONSISTENCY_KEYS = ("fail", "warn")
_CHECKS_KEYS = ("warn_only", "ignore")
#: A verdict that can be accepted; "unknown" is never a pass (it is an error) nor a failure.
_ACCEPTABLE_VERDICTS = tuple(v for v in VERDICTS if v != "unknown")


class PlaybookError(FleetcheckError):
    """A playbook could not be loaded: one line, "FILE:LINE: KEY: problem", worded as the
    inventory's mistakes are (`yamlsrc.YamlWording`, `yamlread.YamlReader`)."""


#: How a playbook's mistakes are worded: as the inventory's, with its own noun and exception.
PLAYBOOK_WORDING = YamlWording("playbook", PlaybookError)


def _suggest(word: object, choices: Iterable[str]) -> str:
    return did_you_mean(word, choices, ignore_case=True)


def parse_playbook(text: str, source: str, default_name: str) -> Policy:
    """The Policy a playbook's YAML text describes; `source` names it in error messages."""
    doc = load_yaml(text, source, PLAYBOOK_WORDING)
    read = YamlReader(doc)
    if doc.data is None:
        raise doc.wording.empty(source, "expected a mapping of settings such as triton, "
                                        "min_gpus or checks")
    top = read.mapping(doc.data, (), _TOP_KEYS)
    fields: dict[str, Any] = {"name": default_name, "source": source}
    for key in ("name", "description"):
        if key in top:
            fields[key] = read.string(top[key], (key,)).strip()
    for flag in ("deep", "strict_warnings"):
        if flag in top:
            fields[flag] = read.boolean(top[flag], (flag,))
    if "min_gpus" in top:
        fields["min_gpus"] = read.integer(top["min_gpus"], ("min_gpus",), 0)
    if "triton" in top:
        accepted = read.names(top["triton"], ("triton",), _ACCEPTABLE_VERDICTS,
                              "Triton verdict")
        if "cpu-fallback" in accepted:
            index = list(top["triton"]).index("cpu-fallback")
            raise read.fail(
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
            raise read.fail(("consistency", "warn"),
                             f"{sorted(both)[0]!r} is also listed under consistency.fail")
    fields["gpu"] = _gpu_policy(read, top)
    if "checks" in top:
        section = read.mapping(top["checks"], ("checks",), _CHECKS_KEYS)
        for key in _CHECKS_KEYS:
            if key in section:
                fields[key] = frozenset(read.names(section[key], ("checks", key),
                                                   CHECKS_BY_ID, "check id"))
    return Policy(**fields)


def _gpu_policy(read: YamlReader, top: dict[str, Any]) -> GpuPolicy:
    """The GPU-state keys: max_gpu_memory_used (a share, or null), foreign_processes,
    memory_health; a key left out keeps GpuPolicy's default."""
    fields: dict[str, Any] = {}
    if top.get("max_gpu_memory_used") is not None:
        value = top["max_gpu_memory_used"]
        if (isinstance(value, bool) or not isinstance(value, (int, float))
                or not 0 <= value <= 1):
            raise read.fail(("max_gpu_memory_used",),
                            "must be a share of each GPU's memory between 0 and 1 (0.05 for "
                            f"5 %), or null, got {read.shown(value)}")
        fields["max_memory_used"] = float(value)
    if "foreign_processes" in top:
        fields["foreign_processes"] = read.choice(top["foreign_processes"],
                                                  ("foreign_processes",), FOREIGN_LEVELS)
    if "memory_health" in top:
        fields["memory_health"] = read.choice(top["memory_health"], ("memory_health",),
                                              HEALTH_LEVELS)
    return GpuPolicy(**fields)


def builtin_playbooks() -> list[str]:
    """Names of the playbooks shipped with fleetcheck, sorted."""
    import importlib.resources

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
        text = read_source(path, path_or_name, PLAYBOOK_WORDING)
        return parse_playbook(text, path_or_name, path.stem)
    data = _builtin_text(path_or_name)
    if data is None:
        names = builtin_playbooks()
        raise PlaybookError(
            f"{path_or_name}: no such playbook file, nor a built-in playbook of that name"
            f"{_suggest(path_or_name, names)} (built-ins: {', '.join(names)})"
        )
    return parse_playbook(data, f"builtin:{path_or_name}", path_or_name)


def _builtin_text(name: str) -> str | None:
    """The text of the built-in playbook `name`, None when there is none.

    Read through the package's loader (`pkgutil.get_data`, as the probe's text is): the gate
    reads one at every start, and importlib.resources' file objects cost more to import
    (tempfile, zipfile) than the playbook does to parse.
    """
    if name.startswith(".") or not name.strip():
        return None
    try:
        data = pkgutil.get_data("fleetcheck", f"playbooks/{name}.yaml")
    except OSError:
        return None
    return None if data is None else data.decode("utf-8")
