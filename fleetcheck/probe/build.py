"""Build the shipped probe, fleetcheck/probe/probe.py, from its sources in fleetcheck/probe/parts/.

    python -m fleetcheck.probe.build           # rewrite probe.py
    python -m fleetcheck.probe.build --check   # exit 1 if probe.py is not the build

The parts are joined in `parts.PARTS` order into one standard-library file (docs/architecture.md,
"The probe's sources"). A part is named by its path under parts/ without `.py` (`facts/gather`:
the stages' folders core/, facts/, evaluation/, checks/; `catalogue` and `main` at the top);
every such file is in PARTS and every entry of PARTS is a file. Of each part the build

- drops the module docstring and its imports of other parts (`from fleetcheck.probe.parts.NAME
  import ...`, NAME dotted: NAME must come earlier in PARTS and define the names);
- puts in place of an import of a stage script's function (`from
  fleetcheck.probe.parts.scripts.NAME import FUNCTION`) that function's definition, copied from
  the script: one source for what the probe's interpreter and a script both run (the function
  must be a plain top-level `def` of the script's sent text that needs nothing of the
  script's other names: its copy runs in the probe's namespace);
- hoists its `import NAME` lines (the standard library only; `from __future__` too) to the top
  of the file, once each, sorted;
- keeps the rest as it is written, except that `stage_script("NAME")` becomes the text of
  parts/scripts/NAME.py after its SCRIPT_MARK line, as a raw string literal, and that lines
  holding only a comment, and the docstrings of functions and classes, are left out (the parts
  keep them; the shipped probe must fit the QEMU guest agent API's 64 KiB input once
  compressed: transport/qemu_api.py).

Imports of other kinds at a part's top level, a top-level import after other code, a
script's function that is not such a `def`, a name that two parts define, a part file missing
from PARTS, an entry of PARTS with no file and a stage folder's `__init__.py` holding more than
its docstring are errors (`FILE:LINE: problem`, exit 2). So is a cause record with a check
whose method the built Probe lacks (`check_method(id)`, `check_<id>`): the probe would
otherwise run, and call the check by name, on a user's node.
"""

from __future__ import annotations

import argparse
import ast
import builtins
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from fleetcheck.probe.parts import PARTS
from fleetcheck.probe.parts.scripts import script_text, shipped

HERE = Path(__file__).resolve().parent
PARTS_DIR = HERE / "parts"
TARGET = HERE / "probe.py"
PARTS_PACKAGE = "fleetcheck.probe.parts"
SCRIPTS_PACKAGE = PARTS_PACKAGE + ".scripts"
REBUILD = "python -m fleetcheck.probe.build"
BANNER = (
    f"# Built by `{REBUILD}` from fleetcheck/probe/parts/ (docs/architecture.md:\n"
    "# \"The probe's sources\"). Edit the parts, then rebuild; tests/probe/test_build.py checks.\n"
)
WIDTH = 100


class BuildError(Exception):
    """A part breaks a rule of the build; the message starts with `FILE:LINE:`."""


@dataclass
class Part:
    name: str
    path: Path
    imports: list[str]
    future: list[str]
    body: str
    defines: set[str]
    uses: list[tuple[ast.ImportFrom, str]]  # (the import, a name it takes from another part)


def _where(path: Path, line: int) -> str:
    try:
        shown = path.relative_to(HERE.parent.parent)
    except ValueError:
        shown = path
    return f"{shown}:{line}"


def _defined(statements: list[ast.stmt]) -> set[str]:
    """The names a part's top-level statements bind (both branches of a top-level `if`)."""
    names: set[str] = set()
    for node in statements:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                names |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
        elif isinstance(node, ast.AnnAssign | ast.AugAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.If):
            names |= _defined(node.body) | _defined(node.orelse)
    return names


def _literal(text: str, where: str) -> str:
    """`text` as a raw triple-quoted literal, as the probe has always carried its scripts."""
    literal = "r'''" + text + "'''"
    if "'''" in text or text.endswith("\\") or ast.literal_eval(literal) != text:
        raise BuildError(f"{where}: this script cannot be written as r'''...''' literally")
    return literal


def _embed_scripts(body: str, tree: ast.Module, path: Path, offset: int, scripts: Path) -> str:
    """Replace each `stage_script("NAME")` call with NAME's script text as a literal."""
    calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call)
             and isinstance(node.func, ast.Name) and node.func.id == "stage_script"]
    lines = body.splitlines(keepends=True)
    for call in sorted(calls, key=lambda c: (c.lineno, c.col_offset), reverse=True):
        where = _where(path, call.lineno)
        arg = call.args[0] if len(call.args) == 1 and not call.keywords else None
        if not (isinstance(arg, ast.Constant) and isinstance(arg.value, str)
                and call.end_lineno == call.lineno and call.end_col_offset is not None):
            raise BuildError(f"{where}: stage_script takes one script name, on one line")
        script = scripts / f"{arg.value}.py"
        if not script.is_file():
            raise BuildError(f"{where}: no stage script {_where(script, 1)}")
        try:
            text = script_text(script.read_text(encoding="utf-8"), arg.value)
        except ValueError as exc:
            raise BuildError(f"{_where(script, 1)}: {exc}") from None
        index = call.lineno - 1 - offset
        line = lines[index]
        # col offsets count UTF-8 bytes
        raw = line.encode("utf-8")
        lines[index] = (raw[:call.col_offset] + _literal(text, _where(script, 1)).encode("utf-8")
                        + raw[call.end_col_offset:]).decode("utf-8")
    return "".join(lines)


def read_part(name: str, parts_dir: Path = PARTS_DIR) -> Part:
    """One part: its hoisted imports, the names it defines and its body as built."""
    path = parts_dir / f"{name}.py"
    if not path.is_file():
        raise BuildError(f"{_where(parts_dir / '__init__.py', 1)}: PARTS names {name!r}, "
                         f"but there is no {name}.py")
    source = path.read_text(encoding="utf-8")
    try:
        tree = ast.parse(source, filename=str(path))
    except SyntaxError as exc:
        raise BuildError(f"{_where(path, exc.lineno or 1)}: {exc.msg}") from None
    statements = list(tree.body)
    header_end = 0
    if (statements and isinstance(statements[0], ast.Expr)
            and isinstance(statements[0].value, ast.Constant)
            and isinstance(statements[0].value.value, str)):
        header_end = statements.pop(0).end_lineno or 0
    imports: list[str] = []
    future: list[str] = []
    uses: list[tuple[ast.ImportFrom, str]] = []
    borrowed: list[tuple[str, str]] = []  # (name, definition) of the scripts' functions
    while statements:
        node = statements[0]
        if not isinstance(node, ast.Import | ast.ImportFrom):
            break
        statements.pop(0)
        header_end = node.end_lineno or header_end
        where = _where(path, node.lineno)
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname or alias.name.split(".")[0] not in sys.stdlib_module_names:
                    raise BuildError(f"{where}: a part imports the standard library only, as "
                                     f"`import NAME` (not {ast.unparse(node)!r})")
                imports.append(f"import {alias.name}")
        elif node.module == "__future__":
            future += [alias.name for alias in node.names]
        elif node.module == SCRIPTS_PACKAGE and not node.level:
            if [alias.name for alias in node.names] != ["stage_script"]:
                raise BuildError(f"{where}: a part takes only stage_script from the scripts")
        elif (node.module or "").startswith(SCRIPTS_PACKAGE + ".") and not node.level:
            script = parts_dir / "scripts" / f"{(node.module or '').rsplit('.', 1)[1]}.py"
            for alias in node.names:
                if alias.asname:
                    raise BuildError(f"{where}: a script's function keeps its name "
                                     f"({ast.unparse(node)!r})")
                borrowed.append(script_function(script, alias.name, where))
        elif (node.module or "").startswith(PARTS_PACKAGE + ".") and not node.level:
            uses += [(node, alias.name) for alias in node.names]
        else:
            raise BuildError(f"{where}: at a part's top, only `import NAME` (standard library) "
                             f"and `from {PARTS_PACKAGE}.PART import ...` ({ast.unparse(node)!r})")
    for node in statements:
        if isinstance(node, ast.Import | ast.ImportFrom):
            raise BuildError(f"{_where(path, node.lineno)}: imports go at the top of a part")
    lines = source.splitlines(keepends=True)[header_end:]
    body = _embed_scripts("".join(lines), tree, path, header_end,
                          parts_dir / "scripts").strip("\n") + "\n"
    if borrowed:
        body = "\n\n".join(definition for _, definition in borrowed) + "\n\n\n" + body
    return Part(name, path, imports, future, body,
                _defined(statements) | {name for name, _ in borrowed}, uses)


def script_function(script: Path, name: str, where: str) -> tuple[str, str]:
    """(name, its definition's text) of the top-level function `name` of a stage script's sent
    text, for a part that imports it; BuildError where it is not a plain `def` there, or where
    it needs a name of the script's own (its copy runs in the probe's namespace)."""
    if not script.is_file():
        raise BuildError(f"{where}: no stage script {_where(script, 1)}")
    source = script.read_text(encoding="utf-8")
    try:
        sent = script_text(source, script.stem)
    except ValueError as exc:
        raise BuildError(f"{_where(script, 1)}: {exc}") from None
    offset = source[:len(source) - len(sent)].count("\n")
    tree = ast.parse(sent)
    found = [node for node in tree.body if isinstance(node, ast.FunctionDef)
             and node.name == name]
    if len(found) != 1 or found[0].decorator_list:
        raise BuildError(f"{where}: {script.stem}.py's script defines no plain top-level "
                         f"function {name!r}")
    function = found[0]
    bound = {arg.arg for arg in ast.walk(function.args) if isinstance(arg, ast.arg)}
    for node in ast.walk(function):
        if isinstance(node, ast.Import | ast.ImportFrom):
            bound |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
        elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            bound.add(node.id)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
        elif isinstance(node, ast.FunctionDef | ast.ClassDef) and node is not function:
            bound.add(node.name)
    needs = sorted({node.id for node in ast.walk(function) if isinstance(node, ast.Name)
                    and isinstance(node.ctx, ast.Load) and node.id not in bound
                    and not hasattr(builtins, node.id)})
    if needs:
        raise BuildError(f"{_where(script, offset + function.lineno)}: {name}() uses the "
                         f"script's {', '.join(needs)}: a function a part imports needs "
                         "nothing but its own imports and builtins")
    text = ast.get_source_segment(sent, function)
    assert text is not None
    return name, text


def part_files(parts_dir: Path = PARTS_DIR) -> list[str]:
    """The names of the part files in `parts_dir` (`facts/gather`), the stage scripts and the
    packages' `__init__.py` left out; BuildError for a stage folder's `__init__.py` that holds
    more than its docstring (it is never built into the probe)."""
    names = []
    for path in sorted(parts_dir.rglob("*.py")):
        relative = path.relative_to(parts_dir)
        if relative.parts[0] in ("scripts", "__pycache__"):
            continue
        if path.name == "__init__.py":
            tree = ast.parse(path.read_text(encoding="utf-8"))
            if len(relative.parts) > 1 and (len(tree.body) != 1
                                            or ast.get_docstring(tree) is None):
                raise BuildError(f"{_where(path, 1)}: a stage folder's __init__.py holds its "
                                 "docstring only (the build never reads it)")
            continue
        names.append(relative.with_suffix("").as_posix())
    return names


def part_name(module: str) -> str:
    """The part a module of the parts' package is (`...parts.facts.gather` -> `facts/gather`)."""
    return module.removeprefix(PARTS_PACKAGE + ".").replace(".", "/")


def build(parts_dir: Path = PARTS_DIR, order: Sequence[str] = PARTS) -> str:
    """The text of the shipped probe, built from the parts in `parts_dir`, in `order`."""
    listed = set(order)
    if len(listed) != len(order):
        raise BuildError(f"{_where(parts_dir / '__init__.py', 1)}: PARTS lists a part twice")
    for name in sorted(set(part_files(parts_dir)) - listed):
        raise BuildError(f"{_where(parts_dir / (name + '.py'), 1)}: not in PARTS "
                         "(fleetcheck/probe/parts/__init__.py)")
    parts: list[Part] = []
    owner: dict[str, str] = {}
    for name in order:
        part = read_part(name, parts_dir)
        for node, used in part.uses:
            source = part_name(node.module or "")
            done = {p.name: p for p in parts}
            if source not in done:
                raise BuildError(f"{_where(part.path, node.lineno)}: imports {source!r}, which "
                                 "does not come before it in PARTS")
            if used not in done[source].defines:
                raise BuildError(f"{_where(part.path, node.lineno)}: {source}.py defines no "
                                 f"top-level {used!r}")
        for defined in sorted(part.defines):
            if defined in owner:
                raise BuildError(f"{_where(part.path, 1)}: {defined!r} is defined in "
                                 f"{owner[defined]}.py too (the built probe is one namespace)")
            owner[defined] = name
        parts.append(part)
    init = (parts_dir / "__init__.py").read_text(encoding="utf-8")
    tree = ast.parse(init)
    docstring = ast.get_source_segment(init, tree.body[0]) if tree.body else None
    if not docstring or ast.get_docstring(tree) is None:
        raise BuildError(f"{_where(parts_dir / '__init__.py', 1)}: the probe's docstring "
                         "is missing")
    out = [docstring + "\n\n", BANNER, "\n"]
    future = sorted({name for part in parts for name in part.future})
    if future:
        out.append(f"from __future__ import {', '.join(future)}\n\n")
    out += [line + "\n" for line in sorted({i for part in parts for i in part.imports})]
    for index, part in enumerate(parts):
        rule = f"# --- {part.name} "
        gap = "\n" if index == 0 else "\n\n"  # isort's one blank line after the imports
        out.append(gap + rule + "-" * (WIDTH - len(rule)) + "\n\n"
                   + shipped(part.body))
    text = "".join(out)
    verify_checks(text, parts_dir)
    return text


def _record_line(catalogue: Path, cause_id: str) -> int:
    """The line of the record `Cause("ID", ...)` in the catalogue part (1 if not found)."""
    tree = ast.parse(catalogue.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id == "Cause" and node.args
                and isinstance(node.args[0], ast.Constant) and node.args[0].value == cause_id):
            return node.lineno
    return 1


def verify_checks(text: str, parts_dir: Path = PARTS_DIR) -> None:
    """Every record with a check finds its method on the built Probe (BuildError if not).

    The built text is run as a module (it defines, and runs nothing at import) and asked as
    the probe asks it: `getattr(probe, check_method(id))` for each id of CHECK_IDS.
    """
    namespace: dict[str, object] = {"__name__": "fleetcheck_probe_built"}
    try:
        exec(compile(text, str(TARGET), "exec"), namespace)  # noqa: S102 - our own build
    except Exception as exc:  # noqa: BLE001 - any failure is the build's to report
        raise BuildError(f"{_where(parts_dir / '__init__.py', 1)}: the built probe does not "
                         f"import: {type(exc).__name__}: {exc}") from None
    probe, method_of, ids = (namespace.get(name) for name in ("Probe", "check_method",
                                                               "CHECK_IDS"))
    if not isinstance(probe, type) or not callable(method_of) or not isinstance(ids, tuple):
        raise BuildError(f"{_where(parts_dir / '__init__.py', 1)}: the built probe lacks its "
                         "Probe class, check_method() or CHECK_IDS")
    for cause_id in ids:
        method = method_of(cause_id)
        if not callable(getattr(probe, method, None)):
            catalogue = parts_dir / "catalogue.py"
            raise BuildError(f"{_where(catalogue, _record_line(catalogue, cause_id))}: the "
                             f"record {cause_id!r} has a check, but the Probe has no "
                             f"{method}() (a method of a checks/*.py part's class, among "
                             "Probe's bases in core/assembly.py)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m fleetcheck.probe.build",
        description="Build fleetcheck/probe/probe.py from fleetcheck/probe/parts/.")
    parser.add_argument("--check", action="store_true",
                        help="change nothing; exit 1 if probe.py is not the fresh build")
    args = parser.parse_args(argv)
    try:
        text = build()
    except BuildError as exc:
        print(f"fleetcheck.probe.build: {exc}", file=sys.stderr)
        return 2
    current = TARGET.read_text(encoding="utf-8") if TARGET.exists() else None
    if args.check:
        if current != text:
            print(f"fleetcheck/probe/probe.py is not the build of fleetcheck/probe/parts/: "
                  f"run `{REBUILD}`", file=sys.stderr)
            return 1
        return 0
    if current != text:
        TARGET.write_text(text, encoding="utf-8")
        print("fleetcheck/probe/probe.py rebuilt", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
