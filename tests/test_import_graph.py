"""fleetcheck's modules import one another without a circle.

The graph is read from the source: every `import`, at the top, inside a function and under
`if TYPE_CHECKING:` (a deferred import or one for the type checker still ties two modules, and
mypy reads both), plus the kind registry's lines, which name modules in strings. Importing
`a.b.c` runs `a/b/__init__.py` first, so a module outside package `a.b` that imports any module
of it depends on the package's `__init__` too: a circle through a package's `__init__` is one
that works only by import order.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from pathlib import Path

import pytest

import fleetcheck
from fleetcheck import kinds

PACKAGE = Path(fleetcheck.__file__).parent


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported(tree: ast.AST, package: str, modules: Mapping[str, Path]) -> set[str]:
    """The modules of `modules` that `tree` imports, wherever the import statement stands."""
    found: set[str] = set()
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            # `from package import module` depends on the module, else on the package.
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                       for alias in node.names]
        found |= {_existing(t, modules) for t in targets} - {""}
    return found


def _existing(target: str, modules: Mapping[str, Path]) -> str:
    """`target`, or the package above it that has it as an alias (`fleetcheck.inventory.model`,
    the old name of `fleetcheck.inventory_data.model`, is an import of `fleetcheck.inventory`);
    "" for a module of no package here."""
    parts = target.split(".")
    while parts and ".".join(parts) not in modules:
        parts.pop()
    return ".".join(parts)


def with_packages(name: str, targets: set[str], modules: Mapping[str, Path]) -> set[str]:
    """`targets` and the packages whose `__init__` importing them runs first: each package
    above a target that `name` is not inside itself."""
    found = set(targets)
    for target in targets:
        parts = target.split(".")
        for end in range(1, len(parts)):
            package = ".".join(parts[:end])
            if package in modules and not (name == package or name.startswith(package + ".")):
                found.add(package)
    return found


def import_graph() -> dict[str, set[str]]:
    modules = {_module_name(path): path for path in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets = imported(ast.parse(path.read_text(), str(path)), package, modules)
        graph[name] |= with_packages(name, targets, modules) - {name}
    for line in kinds.KINDS.values():
        graph["fleetcheck.kinds"].add(line.partition(":")[0])
    return graph


def circles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_circle_finder_finds_a_circle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert circles(graph) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    """The package's graph, read once for the tests below (they only read it)."""
    return import_graph()


def test_the_graph_sees_deferred_and_type_checking_imports_and_packages() -> None:
    modules = {name: Path(name) for name in ("a", "a.b", "a.b.c", "d", "e", "f")}
    tree = ast.parse("from typing import TYPE_CHECKING\n"
                     "import d\n"
                     "if TYPE_CHECKING:\n    import e\n"
                     "def later():\n    from f import x\n"
                     "class K:\n    def m(self):\n        from a.b.c import y\n")
    assert imported(tree, "z", modules) == {"d", "e", "f", "a.b.c"}
    # A name no file has (a package's alias for a module moved elsewhere) is its package's.
    assert imported(ast.parse("from a.b.gone import x\nimport os\n"), "z", modules) == {"a.b"}
    # Importing a.b.c from outside runs a/__init__ and a/b/__init__ first; from inside a.b,
    # the package is already being imported.
    assert with_packages("z", {"a.b.c"}, modules) == {"a", "a.b", "a.b.c"}
    assert with_packages("a.b.x", {"a.b.c"}, modules) == {"a.b.c"}
    assert with_packages("a.b", {"a.b.c"}, modules) == {"a.b.c"}


def test_the_graph_sees_the_registry_and_the_packages(graph: dict[str, set[str]]) -> None:
    assert "fleetcheck.kinds.lxc" in graph["fleetcheck.kinds"]
    assert "fleetcheck.transport.pct" in graph["fleetcheck.kinds.lxc"]
    # kinds/base.py names the inventory's reader for the type checker only.
    assert "fleetcheck.inventory_data.reader" in graph["fleetcheck.kinds.base"]
    assert "fleetcheck.inventory_data" in graph["fleetcheck.kinds.base"]


def test_no_module_imports_itself_through_others(graph: dict[str, set[str]]) -> None:
    assert circles(graph) == []


def test_transport_no_longer_depends_on_discovery(graph: dict[str, set[str]]) -> None:
    """Discovery lives with the kinds: transports need at most the inventory's data."""
    allowed = {"fleetcheck.inventory_data", "fleetcheck.inventory_data.model",
               "fleetcheck.inventory_data.errors", "fleetcheck.inventory_data.pveapi"}
    for module, imports in graph.items():
        if module.startswith("fleetcheck.transport."):
            leaks = {i for i in imports if i.startswith(("fleetcheck.inventory",
                                                         "fleetcheck.inventory_data"))} - allowed
            assert not leaks, (module, leaks)


def test_nothing_below_the_inventory_stage_imports_it(graph: dict[str, set[str]]) -> None:
    """Importing any module of `inventory/` runs its `__init__`, which re-exports the loader,
    `--limit` and discovery, and so imports the kinds: a kind, a transport or the data below
    them that did so would need the registry while the registry is being imported."""
    below = [m for m in graph if m.startswith(("fleetcheck.kinds", "fleetcheck.transport.",
                                               "fleetcheck.inventory_data"))
             or m in ("fleetcheck.report.content", "fleetcheck.kindtable")]
    for module in below:
        assert not {i for i in graph[module] if i == "fleetcheck.inventory"
                    or i.startswith("fleetcheck.inventory.")}, module


def test_transport_does_not_depend_on_the_kinds(graph: dict[str, set[str]]) -> None:
    """The kinds wrap the transports; only the factory, which opens a node's chain of kinds,
    asks the registry. A transport that reached it (the SSH transport reading the
    gatekeeper's refusal through the module that writes the kinds' grammar into the script)
    would close a circle as soon as a kind imported that transport."""
    reached: set[str] = set()
    todo = [m for m in graph if m.startswith("fleetcheck.transport.")
            and m != "fleetcheck.transport.factory"]
    while todo:
        module = todo.pop()
        if module not in reached:
            reached.add(module)
            todo += graph[module]
    assert not {m for m in reached if m.startswith("fleetcheck.kinds")}


def test_the_old_names_of_the_modules_moved_below_the_kinds_are_the_same_modules() -> None:
    import fleetcheck.inventory.model as old_model

    from fleetcheck.inventory import yamlsrc as old_yamlsrc
    from fleetcheck.inventory_data import model, yamlsrc

    assert (old_model, old_yamlsrc) == (model, yamlsrc)


def test_the_packages_spanning_floors_import_nothing_on_import() -> None:
    """`inventory_data/`, `report/`, `judgement/` and `integrations/` group modules that stand
    on different floors (`report/content.py` below the kinds, `judgement/gate.py` above
    `render/sanitize.py`): an `__init__` that imported one of its modules would lift every
    module of the package to that module's floor, and close a circle the first time a lower one
    is imported."""
    for package in ("inventory_data", "report", "judgement", "integrations"):
        init = PACKAGE / package / "__init__.py"
        tree = ast.parse(init.read_text(), str(init))
        assert not [node for node in ast.walk(tree)
                    if isinstance(node, ast.Import | ast.ImportFrom)], package
