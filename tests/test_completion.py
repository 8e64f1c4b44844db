"""Shell completion and the man page: generated from the parser, covering every subcommand and
option of it (the parser walked), shipped fresh, and completing in a real bash."""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fleetcheck import completion, completion_build
from fleetcheck.cli import build_parser


def commands() -> dict[str, argparse.ArgumentParser]:
    """The parser's subcommands by name, and "" for the top level."""
    parser = build_parser()
    return {"": parser, **completion.subparsers(parser)}


def options(parser: argparse.ArgumentParser, *, with_help: bool = True) -> set[str]:
    return {option for action in parser._actions for option in action.option_strings
            if with_help or not isinstance(action, argparse._HelpAction)}


def bash_array(script: str, name: str) -> list[str]:
    match = re.search(rf"^{re.escape(name)}=\((.*)\)$", script, re.M)
    assert match, f"no {name} in the bash script"
    return match[1].split()


def zsh_options(script: str, command: str) -> set[str]:
    """The option strings the zsh script's `_arguments` spec of a command declares."""
    name = "_shtab_fleetcheck" + (f"_{command.replace('-', '_')}" if command else "")
    match = re.search(rf"^{name}_options=\(\n(.*?)^\)", script, re.M | re.S)
    assert match, f"no {name}_options in the zsh script"
    found: set[str] = set()
    for line in match[1].splitlines():
        # `"(- : *)"{-h,--help}"[...]"`, `"(- : *)--version[...]"`, `"--id[...]:..."`,
        # `"*"{--limit,-l}"[...]"` (repeatable)
        spec = re.match(r'\s*"?(?:\([^)]*\)"?|\*"?)?(\{[^}]*\}|--?[\w-]+)', line)
        if spec:
            found |= {word for word in spec[1].strip("{}").split(",") if word}
    return found


def man_sections(page: str) -> dict[str, str]:
    """The man page's sections by title, roff's escapes of `-` undone."""
    parts = re.split(r"^\.SH ", page, flags=re.M)[1:]
    return {part.split("\n", 1)[0].replace("\\-", "-"): part.replace("\\-", "-")
            for part in parts}


def man_options(section: str) -> set[str]:
    return set(re.findall(r"\\fB(--?[A-Za-z0-9][\w-]*)\\fR", section))


def test_the_shipped_files_are_a_fresh_generation_from_the_parser() -> None:
    assert completion_build.stale() == [], "run python -m fleetcheck.completion_build"
    done = subprocess.run([sys.executable, "-m", "fleetcheck.completion_build", "--check"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert (done.returncode, done.stderr) == (0, "")


def test_completion_and_man_page_list_every_subcommand_and_option() -> None:
    bash, zsh, page = (completion.shipped("bash"), completion.shipped("zsh"),
                       completion.shipped(None))
    sections = man_sections(page)
    found = commands()
    assert set(bash_array(bash, "_shtab_fleetcheck_subparsers")) == set(found) - {""}
    for name, parser in found.items():
        wanted = options(parser)
        array = "_shtab_fleetcheck" + (f"_{name.replace('-', '_')}" if name else "") + \
            "_option_strings"
        assert set(bash_array(bash, array)) == wanted, name
        assert zsh_options(zsh, name) == wanted, name
        assert f"{name}:" in zsh or not name, name
        title = f"OPTIONS \\fI\\,'fleetcheck {name}'\\/\\fR" if name else "OPTIONS"
        # argparse-manpage leaves out -h/--help, which every command has.
        assert man_options(sections.get(title, "")) == options(parser, with_help=False), name
        if name:
            assert f"COMMAND \\fI\\,'fleetcheck {name}'\\/\\fR" in sections, name


def test_a_new_option_makes_the_shipped_files_stale(monkeypatch: pytest.MonkeyPatch) -> None:
    import fleetcheck.cli

    original = fleetcheck.cli.build_parser

    def with_more() -> argparse.ArgumentParser:
        parser = original()
        completion.subparsers(parser)["merge"].add_argument("--brand-new", action="store_true")
        return parser

    monkeypatch.setattr(fleetcheck.cli, "build_parser", with_more)
    assert sorted(path.name for path in completion_build.stale()) == [
        "_fleetcheck", "fleetcheck", "fleetcheck.1"]


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
@pytest.mark.parametrize(("line", "offered"), [
    ("fleetcheck me", ["merge"]),
    ("fleetcheck merge --i", ["--id"]),
    ("fleetcheck schema ", ["probe", "node", "audit"]),
    ("fleetcheck completion ", ["bash", "zsh"]),
    ("fleetcheck gate --no", ["--nodes"]),
])
def test_bash_completes_from_the_shipped_script(line: str, offered: list[str]) -> None:
    words = line.split(" ")
    program = ("source /dev/stdin; COMP_WORDS=(\"$@\"); COMP_CWORD=$(($# - 1)); "
               f"COMP_LINE={line!r}; COMP_POINT=${{#COMP_LINE}}; _shtab_fleetcheck; "
               'printf "%s\\n" "${COMPREPLY[@]}"')
    done = subprocess.run(["bash", "--norc", "--noprofile", "-c", program, "bash", *words],
                          input=completion.shipped("bash"), capture_output=True, text=True,
                          timeout=60, check=False)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.split() == offered


@pytest.mark.skipif(shutil.which("zsh") is None, reason="needs zsh")
def test_zsh_parses_and_loads_the_shipped_script(tmp_path) -> None:
    (tmp_path / "_fleetcheck").write_text(completion.shipped("zsh"))
    parsed = subprocess.run(["zsh", "-f", "-n", str(tmp_path / "_fleetcheck")],
                            capture_output=True, text=True, timeout=60, check=False)
    assert (parsed.returncode, parsed.stderr) == (0, "")
    done = subprocess.run(["zsh", "-f", "-c", f"fpath=({tmp_path} $fpath); autoload -Uz "
                           "compinit && compinit -u && autoload -Uz _fleetcheck && "
                           "whence -w _fleetcheck"], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert "function" in done.stdout


def test_install_puts_each_file_where_its_folder_is_and_says_how_otherwise(tmp_path) -> None:
    root = tmp_path / "root"
    (root / "usr/local/share/zsh/site-functions").mkdir(parents=True)
    command = tmp_path / "fleetcheck"
    command.write_text(f"#!/bin/sh\nexec {sys.executable} -m fleetcheck \"$@\"\n")
    command.chmod(0o755)
    script = Path(__file__).resolve().parents[1] / "scripts" / "install-completion.sh"
    done = subprocess.run([str(script)], env={**os.environ, "DESTDIR": str(root),
                                              "FLEETCHECK": str(command)},
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    bash_dir = root / "usr/share/bash-completion/completions"
    assert done.stderr.splitlines() == [
        f"bash completion: not installed (no {bash_dir}); for one user: {command} completion "
        "bash > ~/.local/share/bash-completion/completions/fleetcheck",
        f"zsh completion: {root}/usr/local/share/zsh/site-functions/_fleetcheck",
        f"man page: {root}/usr/local/share/man/man1/fleetcheck.1"]
    zsh = root / "usr/local/share/zsh/site-functions/_fleetcheck"
    assert zsh.read_text() == completion.shipped("zsh")
    assert (root / "usr/local/share/man/man1/fleetcheck.1").read_text() == completion.shipped()
    bash_dir.mkdir(parents=True)
    again = subprocess.run([str(script)], env={**os.environ, "DESTDIR": str(root),
                                               "FLEETCHECK": str(command)},
                           capture_output=True, text=True, timeout=120, check=False)
    assert again.stderr.splitlines()[0] == f"bash completion: {bash_dir}/fleetcheck"
    assert (bash_dir / "fleetcheck").read_text() == completion.shipped("bash")
    assert oct((bash_dir / "fleetcheck").stat().st_mode & 0o777) == "0o644"
    assert sorted(path.name for path in bash_dir.iterdir()) == ["fleetcheck"]
