"""tests/nodeenv.py reads released Python source without `ast.parse`, so the fake nodes it
builds do not depend on what earlier tests of the worker left to the garbage collector.

CPython 3.11 before 3.11.8 (Debian 12 has 3.11.2) counts the AST constructor's recursion in one
variable of the interpreter (CPython gh-106905): an `ast.parse` during which another one runs
(a finalizer that the collector runs meanwhile formats a traceback, which 3.11 does with
ast.parse) fails with "SystemError: AST constructor recursion depth mismatch". On Debian 12 a
node's `_real_create_driver` once failed so, after earlier tests had left an unretrieved
BrokenPipeError of asyncio's for the collector (tests/transport/test_local.py).

The reference texts come from `ast.get_source_segment` in a child interpreter of its own.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator

import pytest

from tests import nodeenv
from tests.nodeenv import TEST_WHEELS, top_level_function

pytestmark = pytest.mark.timeout(60)

DRIVERS = {version: TEST_WHEELS / f"triton-{version}" / "triton" / "runtime" / "driver.py"
           for version in ("3.6.0", "3.9.0")}
FETCHED = {version: path for version, path in DRIVERS.items() if path.is_file()}
needs_drivers = pytest.mark.skipif(not FETCHED, reason="no Triton runtime/driver.py fetched "
                                   "(scripts/fetch_test_wheels.py)")

#: (source, name) pairs whose edges the reader must get as the AST does.
CASES: list[tuple[str, str]] = [
    ("def f(): return 1\nx = 2\n", "f"),
    ("def f(): return 1", "f"),
    ("import os\n\n\n@decorated\ndef f(a,\n      b=(1,\n         2)) -> int:\n"
     "    '''Doc.'''\n    # a comment\n\n    if a:\n        return b  # trailing\n"
     "    # indented comment after the last statement\n\n# top-level comment\n"
     "def g():\n    pass\n", "f"),
    ("class C:\n    def f(self):\n        return 1\n\n\ndef f():\n    return 2\n", "f"),
    ('TEXT = """\ndef f():\n    return 0\n"""\n\ndef f():\n    return [\n        1,\n'
     "    ]\n", "f"),
    ("def f():\r\n    x = 1\r\n    return x\r\n\r\ny = 3\r\n", "f"),
    ("def f():\n\tif True:\n\t\treturn '''a\nb'''\n", "f"),
    ("def f():\n    def g():\n        return 1\n    return g\nh = f\n", "f"),
    ("def f(): pass  # no body below\n\ndef g():\n    pass\n", "f"),
    ("async def f():\n    pass\n", "f"),
    ("x = 1\n", "f"),
    ("if True:\n    def f():\n        pass\n", "f"),
]


def ast_segments(pairs: list[tuple[str, str]]) -> list[str | None]:
    """`ast.get_source_segment` of each module-level def NAME, in a child interpreter."""
    script = textwrap.dedent("""\
        import ast, json, sys
        out = []
        for source, name in json.load(sys.stdin):
            found = next((node for node in ast.parse(source).body
                          if isinstance(node, ast.FunctionDef) and node.name == name), None)
            out.append(None if found is None else ast.get_source_segment(source, found))
        json.dump(out, sys.stdout)
        """)
    done = subprocess.run([sys.executable, "-c", script], input=json.dumps(pairs),
                          capture_output=True, text=True, timeout=60, check=True)
    segments: list[str | None] = json.loads(done.stdout)
    return segments


def test_a_function_is_read_as_the_ast_gives_it() -> None:
    pairs = CASES + [(path.read_text(), "_create_driver") for path in FETCHED.values()]
    assert [top_level_function(source, name) for source, name in pairs] == ast_segments(pairs)


@pytest.fixture
def no_parse(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """`ast.parse` fails, and the drivers are read afresh."""
    def refused(*args: object, **kwargs: object) -> ast.Module:
        raise AssertionError("ast.parse called")

    monkeypatch.setattr(nodeenv, "_CREATE_DRIVERS", {})
    monkeypatch.setattr(ast, "parse", refused)
    yield


@needs_drivers
@pytest.mark.usefixtures("no_parse")
def test_a_nodes_create_driver_is_read_without_ast_parse() -> None:
    for version in FETCHED:
        text = nodeenv._real_create_driver(version)
        assert text.startswith("def _create_driver() -> DriverBase:\n") and text.endswith(
            "\n"), text
        assert nodeenv._real_create_driver(version) is text  # once a worker


@pytest.mark.skipif("3.9.0" not in FETCHED, reason="Triton 3.9.0's driver.py is not fetched")
def test_a_parse_run_by_the_collector_meanwhile_does_not_fail_it() -> None:
    # A fresh interpreter (the worker's own garbage is not this test's to arm): garbage whose
    # finalizer parses, as the formatting of a logged traceback does on 3.11, and a collection
    # every few allocations, during the reads of the driver.
    script = textwrap.dedent("""\
        import ast, gc
        from tests import nodeenv

        class Finalized:
            def __del__(self):
                ast.parse("os.write(self._fileno, self._buffer)")

        expected = nodeenv._real_create_driver("3.9.0")
        gc.set_threshold(10)
        for _ in range(30):
            nodeenv._CREATE_DRIVERS.clear()
            for _ in range(20):
                garbage = Finalized()
                garbage.cycle = garbage
            del garbage
            assert nodeenv._real_create_driver("3.9.0") == expected
        print("read")
        """)
    done = subprocess.run([sys.executable, "-c", script], cwd=nodeenv.TEST_WHEELS.parent,
                          capture_output=True, text=True, timeout=60, check=False)
    assert (done.returncode, done.stdout, done.stderr) == (0, "read\n", "")
