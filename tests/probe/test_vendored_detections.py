"""The frameworks' own copies of FLA's device detection, run from their released sources.

vLLM 0.33.0 (its files read out of the real wheel by scripts/fetch_test_wheels.py), SGLang 0.5.23
(tests/probe/fixtures/frameworks, unchanged from its wheel: PROVENANCE.md) and unsloth-zoo
2026.10.9 (its real wheel, fetched by scripts/fetch_test_wheels.py) are installed at their real
paths in the fake node; the probe
compiles their `get_available_device()` from the installed file and calls it with the node's
Triton in the workload's own dirs. Each decides with its own except clause.
"""

from __future__ import annotations

import shutil
import zipfile
from pathlib import Path
from typing import Any

import pytest

from tests.nodeenv import make_node, run_probe

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).with_name("fixtures") / "frameworks"
UNSLOTH = ROOT / ".test-wheels" / "unsloth_zoo-2026.10.9-py3-none-any.whl"
UNSLOTH_FILE = "unsloth_zoo/_vendored/fla/utils/_device.py"


def install_frameworks(site: Path) -> None:
    """The released detection files at their paths, with the packages' __init__ beside them."""
    source = FIXTURES / "sglang-0.5.23"
    for path in source.rglob("*.py"):
        target = site / path.relative_to(source)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, target)
    (site / "sglang" / "__init__.py").write_text("")
    with zipfile.ZipFile(UNSLOTH) as wheel:
        target = site / UNSLOTH_FILE
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(wheel.read(UNSLOTH_FILE))
    (site / "unsloth_zoo" / "__init__.py").write_text("")


def frameworks(tmp_path: Path, **kwargs: Any) -> dict[str, Any]:
    node = make_node(tmp_path / "node", vllm="0.33.0", **kwargs)
    install_frameworks(node.site)
    _, doc, stderr = run_probe(node)
    assert stderr == ""
    return doc["facts"]["frameworks"]


pytestmark = pytest.mark.skipif(not UNSLOTH.is_file(),
                                reason="needs the wheels of scripts/fetch_test_wheels.py")


def test_on_a_healthy_node_every_copy_says_cuda(tmp_path: Path) -> None:
    found = frameworks(tmp_path)
    assert found["vllm"]["fla_copy"]["outcome"] == "gpu"
    assert found["vllm"]["fla_copy"]["file"].endswith(
        "vllm/third_party/flash_linear_attention/ops/utils.py")
    assert (found["sglang"]["outcome"], found["unsloth_zoo"]["outcome"]) == ("gpu", "gpu")


def test_a_runtime_error_is_silent_in_vllm_and_warned_in_the_others(tmp_path: Path) -> None:
    # No compiler: Triton raises RuntimeError, which every copy catches.
    found = frameworks(tmp_path, compiler=False)
    vllm = found["vllm"]
    assert vllm["fla_copy"]["outcome"] == "cpu-fallback"
    assert vllm["fla_copy"]["detail"].endswith("says cpu, and logs nothing")
    assert found["sglang"]["outcome"] == "cpu-fallback"
    assert "roll back to CPU" in found["sglang"]["detail"]
    assert found["unsloth_zoo"]["outcome"] == "cpu-fallback"
    assert "roll back to CPU" in found["unsloth_zoo"]["detail"]


def test_an_os_error_crashes_vllms_copy_and_not_the_others(tmp_path: Path) -> None:
    # The cache cannot be created: NotADirectoryError (an OSError), which vLLM's copy
    # (RuntimeError, AttributeError) lets through; SGLang (BaseException) and unsloth-zoo
    # (Exception) fall back with FLA's warning.
    found = frameworks(tmp_path, cache="unwritable")
    vllm = found["vllm"]
    assert vllm["fla_copy"]["outcome"] == "import-fails"
    assert "NotADirectoryError" in vllm["fla_copy"]["detail"]
    assert vllm["outcome"] == "import-fails"
    assert (found["sglang"]["outcome"], found["unsloth_zoo"]["outcome"]) == (
        "cpu-fallback", "cpu-fallback")
