"""ProbeState is the one home of the probe's shared attributes: no part sets one it lacks."""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import pytest

from fleetcheck.probe.build import PARTS_PACKAGE
from fleetcheck.probe.parts import PARTS
from fleetcheck.probe.parts.core.assembly import Probe
from fleetcheck.probe.parts.core.spawn import Deadline
from fleetcheck.probe.parts.core.state import ProbeState

DECLARED = set(ProbeState.__annotations__)


def _state_classes() -> list[type]:
    """Every class of the parts that derives from ProbeState (the Probe's bases and theirs)."""
    found = []
    for name in PARTS:
        module = importlib.import_module(f"{PARTS_PACKAGE}.{name.replace('/', '.')}")
        found += [value for value in vars(module).values() if isinstance(value, type)
                  and issubclass(value, ProbeState) and value.__module__ == module.__name__]
    return found


def _attributes_set(cls: type) -> dict[str, int]:
    """The `self.NAME` a class's methods assign (plain, annotated, augmented, unpacked), with
    the line of the first."""
    source = inspect.getsource(cls)
    names: dict[str, int] = {}
    for node in ast.walk(ast.parse(source)):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, ast.AnnAssign | ast.AugAssign):
            targets = [node.target]
        for target in targets:
            for item in ast.walk(target):
                if (isinstance(item, ast.Attribute) and isinstance(item.value, ast.Name)
                        and item.value.id == "self"):
                    names.setdefault(item.attr, item.lineno)
    return names


@pytest.mark.parametrize("cls", _state_classes(), ids=lambda cls: cls.__name__)
def test_every_attribute_a_part_sets_is_declared(cls: type) -> None:
    undeclared = sorted(set(_attributes_set(cls)) - DECLARED)
    assert undeclared == [], (
        f"{cls.__module__}.{cls.__name__} sets {undeclared}: declare them, typed, in "
        "ProbeState (fleetcheck/probe/parts/core/state.py)")


def test_the_probe_joins_every_state_class() -> None:
    assert set(_state_classes()) <= set(Probe.__mro__)


def test_a_new_probe_has_what_is_read_before_gathering(tmp_path: Path) -> None:
    # The cleanup of a probe that failed early and a fix filled before gathering read these.
    probe = Probe(False, Deadline(30), None, str(tmp_path))
    assert (probe.own_name, probe.mountinfo, probe.hip_info, probe.limits, probe.compile_by,
            probe.compile_argv, probe.facts) == ("", None, {}, None, None, None, {})
    probe.remove_workload_dirs()  # names nothing yet: removes nothing
