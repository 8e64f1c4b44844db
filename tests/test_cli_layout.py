"""The command line's layout stays as docs/architecture.md says: one module per command, each
registered by the entry point and holding its options and its run; no CLI module over 300 lines
and no function over 80; one owner for writing output, for exit codes and for asking; the
formats and their suffixes from the renderers' registry."""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

import fleetcheck.cli as cli
from fleetcheck.completion import subparsers
from fleetcheck.render import FORMATS, PROBE_FORMATS, suffixes

PACKAGE = Path(cli.__file__).parent
MAX_MODULE_LINES = 300
MAX_FUNCTION_LINES = 80
#: The modules the commands share (besides the entry point), each the one owner of its rule.
SHARED = {"options", "inputs", "output", "exits", "confirm", "runs"}


def sources() -> dict[str, str]:
    """Every module of the CLI package, by its path below the package (`fix.py`)."""
    return {path.relative_to(PACKAGE).as_posix(): path.read_text(encoding="utf-8")
            for path in sorted(PACKAGE.rglob("*.py"))}


def long_functions(source: str) -> dict[str, int]:
    """The functions (methods and nested ones too) of `source` longer than the limit, with
    their lengths from the first decorator to the last line."""
    found: dict[str, int] = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            length = (node.end_lineno or node.lineno) - first + 1
            if length > MAX_FUNCTION_LINES:
                found[node.name] = length
    return found


def calls_of(source: str, name: str) -> list[ast.Call]:
    """The calls of `name` in `source`, as `name(...)` or `anything.name(...)`."""
    return [node for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Call)
            and (getattr(node.func, "id", None) == name
                 or getattr(node.func, "attr", None) == name)]


def test_the_limits_see_a_long_function() -> None:
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_FUNCTION_LINES))
    assert long_functions(f"@decorated\ndef long():\n{body}") == {
        "long": MAX_FUNCTION_LINES + 2}
    assert long_functions("class K:\n    def short(self):\n        return 1\n") == {}
    assert len(calls_of("import os\nos._exit(1)\n_exit(2)\n", "_exit")) == 2


def test_no_cli_module_is_longer_than_300_lines() -> None:
    lines = {name: len(text.splitlines()) for name, text in sources().items()}
    assert {name: n for name, n in lines.items() if n > MAX_MODULE_LINES} == {}


def test_no_cli_function_is_longer_than_80_lines() -> None:
    found = {name: long_functions(text) for name, text in sources().items()}
    assert {name: functions for name, functions in found.items() if functions} == {}


def test_every_command_is_its_own_module_registered_by_the_entry_point() -> None:
    assert list(subparsers(cli.build_parser())) == list(cli.COMMANDS)
    for name, module in cli.COMMANDS.items():
        assert module.__name__ == f"fleetcheck.cli.{name.replace('-', '_')}"
        assert module.NAME == name
        # The module adds its own parser, and only its own.
        sub = argparse.ArgumentParser().add_subparsers()
        parser = module.add_parser(sub)
        assert sub.choices == {name: parser}
        assert callable(module.run)
    commands = {module.__name__.rpartition(".")[2] + ".py" for module in cli.COMMANDS.values()}
    shared = {f"{name}.py" for name in SHARED}
    assert set(sources()) == {"__init__.py"} | commands | shared


def test_only_a_command_module_adds_a_command() -> None:
    """The entry point only registers: a parser of a command is added in its own module."""
    for name, text in sources().items():
        added = [call for call in calls_of(text, "add_parser")
                 if call.args and isinstance(call.args[0], (ast.Name, ast.Constant))
                 and getattr(call.args[0], "id", None) != "sub"]
        assert len(added) == (0 if name == "__init__.py" or name[:-3] in SHARED else 1), name


def test_output_exit_codes_and_asking_each_have_one_owner() -> None:
    owners = {"write_atomic": "output.py", "dup2": "output.py", "print": "output.py",
              "_exit": "exits.py", "input": "confirm.py", "isatty": "confirm.py"}
    for name, text in sources().items():
        for call, owner in owners.items():
            assert not calls_of(text, call) or name == owner, (name, call)
        tree = ast.parse(text)
        if name != "output.py":
            assert "sys.stdout" not in text, name
        for node in ast.walk(tree):
            # An exit code is one of exits.py's names, never a number written in a command.
            if isinstance(node, ast.Return) and isinstance(node.value, ast.Constant):
                assert type(node.value.value) is not int, (name, node.lineno)
            if isinstance(node, ast.ImportFrom) and name != "exits.py":
                assert not any(alias.name.startswith("EXIT_") for alias in node.names) or \
                    node.module == "fleetcheck.cli.exits", (name, node.module)


def test_the_formats_and_their_suffixes_come_from_the_renderers_registry() -> None:
    """`--format` offers a registry's tuple and its help names that tuple's suffixes: a format
    added to the registry is in every command, its completion and its man page."""
    offered = {}
    for name, parser in subparsers(cli.build_parser()).items():
        for action in parser._actions:
            if "--format" in action.option_strings:
                assert action.choices is not None
                offered[name] = tuple(action.choices)
                assert "/".join(suffixes(offered[name])) in (action.help or ""), name
    assert offered == {"audit": FORMATS, "report": FORMATS, "merge": FORMATS,
                       "probe": PROBE_FORMATS}


def test_a_command_named_first_builds_only_its_own_parser_and_parses_the_same() -> None:
    """`fleetcheck gate ...` adds the gate's parser alone (the others' defaults import
    renderers, the history, the gatekeeper): what it parses is what the whole parser gives."""
    whole = subparsers(cli.build_parser())
    for name in cli.COMMANDS:
        alone = subparsers(cli.build_parser(name))
        assert list(alone) == [name]
        assert [(a.option_strings, a.dest, a.default, a.choices, a.help)
                for a in alone[name]._actions] == \
            [(a.option_strings, a.dest, a.default, a.choices, a.help)
             for a in whole[name]._actions]
