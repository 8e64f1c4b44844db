"""The shipped probe is the build of its sources (fleetcheck/probe/parts/); the build's rules."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fleetcheck.probe import build as probe_build
from fleetcheck.probe import probe as probe_module
from fleetcheck.probe import probe_source
from fleetcheck.probe.parts import PARTS
from fleetcheck.probe.parts.core import stages as source_stages

SCRIPTS = ("HELPER_PRELUDE", "PY_INCLUDE", "STACK_SCRIPT", "CUDA_SCRIPT", "PYINFO_SCRIPT",
           "DEEP_SCRIPT")


def test_the_committed_probe_is_a_fresh_build() -> None:
    assert probe_source() == probe_build.build(), (
        "fleetcheck/probe/probe.py is not the build of fleetcheck/probe/parts/: "
        "rebuild it with `python -m fleetcheck.probe.build`")


def test_check_mode_agrees() -> None:
    done = subprocess.run([sys.executable, "-m", "fleetcheck.probe.build", "--check"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert (done.returncode, done.stderr) == (0, "")


def test_every_part_is_in_the_built_file_in_order() -> None:
    text = probe_source()
    rules = [line.split()[2] for line in text.splitlines() if line.startswith("# --- ")]
    assert rules == list(PARTS)


@pytest.mark.parametrize("name", SCRIPTS)
def test_the_stage_scripts_are_sent_as_the_sources_write_them(name: str) -> None:
    built = getattr(probe_module, name)
    assert built == getattr(source_stages, name)
    # They run in the workload's interpreter: any CPython >= 3.8.
    ast.parse(built, feature_version=(3, 8))


def _parts(tmp_path: Path, **files: str) -> Path:
    """A copy of the real parts with some files replaced (name -> text; "" removes it; `__`
    in a name is a folder's `/`: facts__where is facts/where.py)."""
    parts = tmp_path / "parts"
    shutil.copytree(probe_build.PARTS_DIR, parts)
    for name, text in files.items():
        path = parts / f"{name.replace('__', '/')}.py"
        if text:
            path.write_text(text)
        else:
            path.unlink()
    return parts


def _error(parts: Path, order: tuple[str, ...] = PARTS) -> str:
    with pytest.raises(probe_build.BuildError) as caught:
        probe_build.build(parts, order)
    return str(caught.value)


def test_a_copy_of_the_parts_builds_the_same_probe(tmp_path: Path) -> None:
    assert probe_build.build(_parts(tmp_path)) == probe_source()


def test_a_part_may_import_only_the_standard_library(tmp_path: Path) -> None:
    parts = _parts(tmp_path, facts__where='"""Where."""\n\nimport yaml\n\nX = yaml\n')
    assert _error(parts) == (
        f"{parts}/facts/where.py:3: a part imports the standard library only, as `import NAME` "
        "(not 'import yaml')")


def test_imports_go_at_the_top(tmp_path: Path) -> None:
    parts = _parts(tmp_path, facts__where='"""Where."""\n\nX = 1\nimport os\n')
    assert _error(parts) == f"{parts}/facts/where.py:4: imports go at the top of a part"


def test_a_part_imports_only_from_parts_before_it(tmp_path: Path) -> None:
    parts = _parts(tmp_path, facts__where=(
        '"""Where."""\n\nfrom fleetcheck.probe.parts.core.assembly import Probe\n\nX = Probe\n'))
    assert _error(parts) == (
        f"{parts}/facts/where.py:3: imports 'core/assembly', which does not come before it in "
        "PARTS")
    parts = _parts(tmp_path / "b", facts__where=(
        '"""Where."""\n\nfrom fleetcheck.probe.parts.core.base import nothing\n'))
    assert _error(parts) == f"{parts}/facts/where.py:3: core/base.py defines no top-level 'nothing'"


def _function(source: str, name: str) -> str:
    """The top-level function `name` of `source`, without its docstring, as ast.dump."""
    found = [node for node in ast.parse(source).body
             if isinstance(node, ast.FunctionDef) and node.name == name]
    assert len(found) == 1, name
    function = found[0]
    if ast.get_docstring(function) is not None:
        function.body = function.body[1:]
    return ast.dump(function)


def test_a_function_both_interpreters_run_has_one_source() -> None:
    # The probe's interpreter and the stack each give glibc's freed heap back: the script's
    # definition, copied into the probe by the build, is the only one in the sources.
    sources = [path for path in probe_build.PARTS_DIR.rglob("*.py")
               if "def give_back_freed_memory(" in path.read_text()]
    assert [path.relative_to(probe_build.PARTS_DIR).as_posix() for path in sources] == [
        "scripts/workload.py"]
    built = probe_source()
    assert built.count("def give_back_freed_memory(") == 2  # the probe's, the stack's text
    assert _function(built, "give_back_freed_memory") == _function(
        source_stages.STACK_SCRIPT, "give_back_freed_memory")
    assert "give_back_freed_memory" in vars(probe_module)


def test_a_part_takes_only_a_self_contained_function_of_a_script(tmp_path: Path) -> None:
    def where_importing(names: str) -> str:
        return (f'"""Where."""\n\nfrom fleetcheck.probe.parts.scripts.{names}\n\n'
                "X = 1\n")

    parts = _parts(tmp_path, facts__where=where_importing("prelude import emit"))
    prelude = (parts / "scripts" / "prelude.py").read_text().splitlines()
    line = prelude.index("def emit(stage, data):") + 1
    assert _error(parts) == (
        f"{parts}/scripts/prelude.py:{line}: emit() uses the script's EMITTING, MARK, json, "
        "sys: a function a part imports needs nothing but its own imports and builtins")
    parts = _parts(tmp_path / "b", facts__where=where_importing("prelude import nothing"))
    assert _error(parts) == (
        f"{parts}/facts/where.py:3: prelude.py's script defines no plain top-level function "
        "'nothing'")
    parts = _parts(tmp_path / "c", facts__where=where_importing("prelude import err as e"))
    assert _error(parts) == (
        f"{parts}/facts/where.py:3: a script's function keeps its name "
        "('from fleetcheck.probe.parts.scripts.prelude import err as e')")
    parts = _parts(tmp_path / "d", facts__where=where_importing("nowhere import err"))
    assert _error(parts) == (
        f"{parts}/facts/where.py:3: no stage script {parts}/scripts/nowhere.py:1")
    # A self-contained one is copied in place of its import, and is the part's own name.
    built = probe_build.build(_parts(tmp_path / "e", facts__where=(
        '"""Where."""\n\nfrom fleetcheck.probe.parts.scripts.prelude import err\n\n\n'
        "def where_it_runs(*args):\n    return err(ValueError('x'))\n")), PARTS)
    section = built.split("# --- facts/where ")[1].split("# --- ")[0]
    assert "def err(e):\n    return (type(e).__name__" in section
    assert "parts.scripts.prelude import" not in built


def test_a_name_lives_in_one_part(tmp_path: Path) -> None:
    parts = _parts(tmp_path, facts__where='"""Where."""\n\n\ndef clip(text):\n    return text\n')
    assert _error(parts) == (
        f"{parts}/facts/where.py:1: 'clip' is defined in core/base.py too (the built probe is "
        "one namespace)")


def test_every_part_file_is_listed_and_every_entry_is_a_file(tmp_path: Path) -> None:
    # The folders are the stages; PARTS, the one build order, names every file in them.
    parts = _parts(tmp_path, facts__extra='"""Extra."""\n')
    assert _error(parts) == (
        f"{parts}/facts/extra.py:1: not in PARTS (fleetcheck/probe/parts/__init__.py)")
    parts = _parts(tmp_path / "b", extra='"""Extra."""\n')
    assert _error(parts) == f"{parts}/extra.py:1: not in PARTS (fleetcheck/probe/parts/__init__.py)"
    parts = _parts(tmp_path / "c")
    (parts / "judge").mkdir()
    (parts / "judge" / "__init__.py").write_text('"""Judge."""\n')
    (parts / "judge" / "odds.py").write_text('"""Odds."""\n')
    assert _error(parts) == (
        f"{parts}/judge/odds.py:1: not in PARTS (fleetcheck/probe/parts/__init__.py)")
    assert _error(_parts(tmp_path / "d", facts__where=""), PARTS) == (
        f"{tmp_path}/d/parts/__init__.py:1: PARTS names 'facts/where', but there is no "
        "facts/where.py")
    assert _error(_parts(tmp_path / "e"), (*PARTS, "facts/gone")) == (
        f"{tmp_path}/e/parts/__init__.py:1: PARTS names 'facts/gone', but there is no "
        "facts/gone.py")


def test_the_declared_order_is_the_files_on_disk() -> None:
    assert sorted(PARTS) == sorted(probe_build.part_files())
    assert {name.partition("/")[0] for name in PARTS if "/" in name} == {
        "core", "facts", "evaluation", "checks"}


def test_a_stage_folders_init_holds_only_its_docstring(tmp_path: Path) -> None:
    # It is imported when a part is, but never built into the probe.
    parts = _parts(tmp_path)
    (parts / "facts" / "__init__.py").write_text('"""Facts."""\n\nLIMIT = 3\n')
    assert _error(parts) == (
        f"{parts}/facts/__init__.py:1: a stage folder's __init__.py holds its docstring only "
        "(the build never reads it)")


def test_a_stage_script_needs_its_mark(tmp_path: Path) -> None:
    parts = _parts(tmp_path, scripts__cuda='"""No mark."""\nprint(1)\n')
    assert "cuda.py:1: cuda.py: no line '# ---- sent as is" in _error(parts)


def test_the_shipped_probe_reaches_the_guest_agent_api_in_few_pieces() -> None:
    # QEMU VMs probed through the Proxmox API get the probe as `input-data` (64 KiB at most a
    # call): the build leaves full-line comments out so that its compressed form stays small,
    # and a probe over the limit goes in pieces (transport/qemu_api.py), a few at most.
    from fleetcheck.probe.build import TARGET
    from fleetcheck.transport.qemu_api import API_INPUT_LIMIT, MAX_PIECES, pack_script

    packed = pack_script(["python3", "-"], TARGET.read_bytes())
    assert packed.argv[:2] == ["python3", "-c"]
    assert len(packed.pieces) + 1 < MAX_PIECES
    assert all(len(text) <= API_INPUT_LIMIT for text in (*packed.pieces, packed.data))


def _with_record(source: str, record: str) -> str:
    """catalogue.py's text with `record` added before the GPU-state records (a check there)."""
    anchor = "    # The GPUs' state before a job"
    assert anchor in source
    return source.replace(anchor, record + anchor, 1)


def test_a_record_whose_check_is_missing_fails_the_build(tmp_path: Path) -> None:
    # Before the build checked, such a record built a probe that called check_<id> by name on
    # every node: each one an `error` (exit 3) at the user's command.
    catalogue = (probe_build.PARTS_DIR / "catalogue.py").read_text()
    parts = _parts(tmp_path, catalogue=_with_record(catalogue, (
        '    Cause("widget_broken", "a broken widget", "{pip} install widget", check=True),\n')))
    line = next(number for number, text in enumerate(
        (parts / "catalogue.py").read_text().splitlines(), 1) if '"widget_broken"' in text)
    assert _error(parts) == (
        f"{parts}/catalogue.py:{line}: the record 'widget_broken' has a check, but the Probe "
        "has no check_widget_broken() (a method of a checks/*.py part's class, among Probe's "
        "bases in core/assembly.py)")


def test_a_check_method_removed_fails_the_build(tmp_path: Path) -> None:
    source = (probe_build.PARTS_DIR / "checks" / "fla.py").read_text()
    parts = _parts(tmp_path, checks__fla=source.replace(
        "def check_fla_fallback_hidden(self):", "def fla_fallback_hidden(self):"))
    assert "the record 'fla_fallback_hidden' has a check, but the Probe has no " \
           "check_fla_fallback_hidden()" in _error(parts)

