"""Inductor's config read from its source (workload.source_settings) against Python's own import
of the same source: the same value in every environment, or NotPlain (the probe then imports the
module), never a different value.

The module is torch's `torch/_inductor/config.py` in the shape its releases write the settings
the probe reads (`triton_disable_device_detection`, `cpp.cxx`), with the forms around them:
annotated assignments, `os.environ.get` / `os.getenv` / `os.environ[...]`, `sys.platform`,
conditional expressions, `not`, `and` / `or`, tuples; and forms the reader must refuse.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from fleetcheck.probe.parts.scripts import workload

CONFIG = '''
import os
import sys
from typing import Literal

def is_fbcode() -> bool:
    return False

# Disable triton from trying to initialize and detect devices on the host
triton_disable_device_detection = (
    os.environ.get("TORCHINDUCTOR_TRITON_DISABLE_DEVICE_DETECTION", "0") == "1"
)
either = os.environ.get("FC_A") or os.getenv("FC_B", "b")
both = not (os.environ.get("FC_A", "") and os.environ.get("FC_B"))
member = os.environ.get("FC_A", "x") in ("1", "x")
called = os.environ.get("FC_A", "1" if not is_fbcode() else "0") == "1"
indexed = os.environ["FC_INDEXED"] if "FC_INDEXED" in os.environ else None

class cpp:
    threads = -1
    cxx: tuple[Literal[None], str] = (
        None,  # download gcc12 from conda-forge if conda is installed
        os.getenv("CXX", "clang++" if sys.platform == "darwin" else "g++"),
    )
'''

PLAIN = (("triton_disable_device_detection", None), ("either", None), ("both", None),
         ("member", None), ("cxx", "cpp"), ("threads", "cpp"))

ENVIRONMENTS: list[dict[str, str]] = [
    {},
    {"TORCHINDUCTOR_TRITON_DISABLE_DEVICE_DETECTION": "1", "CXX": "clang++"},
    {"TORCHINDUCTOR_TRITON_DISABLE_DEVICE_DETECTION": "true", "FC_A": "1"},
    {"FC_A": "", "FC_B": "", "CXX": ""},
    {"FC_B": "given", "FC_INDEXED": "here"},
]


def imported(path: Path) -> dict[str, Any]:
    """The module's namespace as Python's import of it sets it."""
    namespace: dict[str, Any] = {"__name__": "config"}
    exec(compile(path.read_text(), str(path), "exec"), namespace)
    return namespace


@pytest.mark.parametrize("env", ENVIRONMENTS, ids=lambda e: ",".join(e) or "empty")
def test_the_source_says_what_the_import_sets(tmp_path: Path, env: dict[str, str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    for key in ("TORCHINDUCTOR_TRITON_DISABLE_DEVICE_DETECTION", "CXX", "FC_A", "FC_B",
                "FC_INDEXED"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    config = tmp_path / "config.py"
    config.write_text(CONFIG)
    found = workload.source_settings(str(config), PLAIN)
    module = imported(config)
    assert found == {name: getattr(module["cpp"], name) if scope else module[name]
                     for name, scope in PLAIN}
    # Values that need more than the environment: refused, never guessed.
    for name in ("called", "indexed"):
        with pytest.raises(workload.NotPlain):
            workload.source_settings(str(config), ((name, None),))


def test_a_setting_never_made_is_left_out_and_one_made_twice_is_refused(
        tmp_path: Path) -> None:
    config = tmp_path / "config.py"
    config.write_text("import os\nx = 1\nx = os.getenv('X')\n")
    assert workload.source_settings(str(config), (("y", None), ("z", "cpp"))) == {}
    with pytest.raises(workload.NotPlain):
        workload.source_settings(str(config), (("x", None),))


@pytest.mark.parametrize("maker", [
    "def __getattr__(name):\n    return True\n",
    "import types\n__getattr__ = types.SimpleNamespace().__getattribute__\n",
    "from os.path import *\n",
])
def test_a_module_that_makes_attributes_is_imported_not_read(tmp_path: Path, maker: str) -> None:
    # A name its source never assigns may still be an attribute of the module: refused.
    config = tmp_path / "config.py"
    config.write_text("import os\n" + maker + "x = os.getenv('X')\n")
    with pytest.raises(workload.NotPlain):
        workload.source_settings(str(config), (("triton_disable_device_detection", None),))


def test_the_platform_is_this_interpreters(tmp_path: Path) -> None:
    config = tmp_path / "config.py"
    config.write_text("import sys\nwhere = 'mac' if sys.platform == 'darwin' else sys.platform\n")
    expected = "mac" if sys.platform == "darwin" else sys.platform
    assert workload.source_settings(str(config), (("where", None),)) == {"where": expected}
