"""fleetcheck's modules import one another without a circle.

The graph is read from the source (every `import`, at the top or inside a function, but not
under `if TYPE_CHECKING:`), plus the kind registry's lines, which name modules in strings.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
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


def _runtime_nodes(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node but those under `if TYPE_CHECKING:` (imports for the type checker only)."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            yield from (n for child in node.orelse for n in [child, *_runtime_nodes(child)])
            continue
        yield node
        yield from _runtime_nodes(node)


def import_graph() -> dict[str, set[str]]:
    modules = {_module_name(path): path for path in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in _runtime_nodes(ast.parse(path.read_text(), str(path))):
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
            graph[name] |= {t for t in targets if t in modules and t != name}
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


def test_the_graph_sees_function_level_imports_and_the_registry(
        graph: dict[str, set[str]]) -> None:
    assert "fleetcheck.kinds.lxc" in graph["fleetcheck.kinds"]
    assert "fleetcheck.transport.pct" in graph["fleetcheck.kinds.lxc"]
    # model.py reads the registry inside a function.
    assert "fleetcheck.kinds" in graph["fleetcheck.model"]


def test_no_module_imports_itself_through_others(graph: dict[str, set[str]]) -> None:
    assert circles(graph) == []


def test_transport_no_longer_depends_on_discovery(graph: dict[str, set[str]]) -> None:
    """Discovery lives with the kinds: transports need at most the inventory's data."""
    allowed = {"fleetcheck.inventory.model", "fleetcheck.inventory.errors",
               "fleetcheck.inventory.pveapi"}
    for module, imports in graph.items():
        if module.startswith("fleetcheck.transport."):
            leaks = {i for i in imports if i.startswith("fleetcheck.inventory")} - allowed
            assert not leaks, (module, leaks)


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
