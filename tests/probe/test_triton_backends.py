"""Triton 3.9's own driver selection (runtime/driver.py of the real wheel, from
scripts/fetch_test_wheels.py), run on backend sets a node can have: its error texts are what
the probe's diagnosis must name (none of them is an unnamed triton_target). Triton 3.6.0's
released runtime/driver.py (which ignores TRITON_DEFAULT_BACKEND) for the fix that must not
offer the variable."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from fleetcheck.probe.parts.evaluation.diagnose import diagnose

DRIVER_PY = (Path(__file__).resolve().parents[2] / ".test-wheels" / "triton-3.9.0" / "triton" /
             "runtime" / "driver.py")


class Backend:
    def __init__(self, active: bool) -> None:
        class Driver:
            @staticmethod
            def is_active() -> bool:
                return active

            def __repr__(self) -> str:
                return f"<Driver active={active}>"
        self.driver = Driver


def create_driver(backends: dict[str, Backend], default: str | None) -> str:
    """Run the real _create_driver() on these backends; the text of what it raises."""
    source = DRIVER_PY.read_text().replace("from ..backends import backends, DriverBase", "")
    space: dict[str, Any] = {"backends": backends, "DriverBase": object, "__name__": "t"}
    exec(compile(source, str(DRIVER_PY), "exec"), space)
    saved = os.environ.pop("TRITON_DEFAULT_BACKEND", None)
    if default is not None:
        os.environ["TRITON_DEFAULT_BACKEND"] = default
    try:
        space["_create_driver"]()
        return ""
    except RuntimeError as exc:
        return f"RuntimeError: {exc}"
    finally:
        os.environ.pop("TRITON_DEFAULT_BACKEND", None)
        if saved is not None:
            os.environ["TRITON_DEFAULT_BACKEND"] = saved


@pytest.mark.skipif(not DRIVER_PY.is_file(),
                    reason="needs Triton 3.9's files (scripts/fetch_test_wheels.py)")
@pytest.mark.parametrize(("backends", "default", "cause", "words"), [
    # Copied onto PYTHONPATH without its dist-info: no entry points, no backend at all.
    ({}, None, "zero_active_drivers", "0 active drivers ([])"),
    ({"nvidia": False, "amd": False}, None, "zero_active_drivers", "0 active drivers"),
    # An extra package whose backend is always active (a CPU backend, a vendor shim).
    ({"nvidia": True, "amd": False, "cpu": True}, None, "triton_backends_conflict",
     "2 active drivers"),
    ({"nvidia": True}, "cuda", "triton_default_backend",
     "Unknown backend device 'cuda'. Available backends: ['nvidia']"),
    ({"nvidia": True, "amd": False}, "amd", "triton_default_backend",
     "Backend device 'amd' is not active."),
], ids=["no-metadata", "none-active", "extra-backend", "unknown-default", "inactive-default"])
def test_tritons_own_selection_errors_are_named(backends: dict[str, bool], default: str | None,
                                                cause: str, words: str) -> None:
    text = create_driver({name: Backend(on) for name, on in backends.items()}, default)
    assert words in text
    assert diagnose({"error": text}, {})[0] == cause


@pytest.mark.skipif(not DRIVER_PY.is_file(),
                    reason="needs Triton 3.9's files (scripts/fetch_test_wheels.py)")
def test_the_default_backend_picks_one_of_two_active() -> None:
    both = {"nvidia": Backend(True), "cpu": Backend(True)}
    assert create_driver(both, None).startswith("RuntimeError: 2 active drivers")
    assert create_driver(both, "nvidia") == ""  # Triton 3.9's way out, the fix the probe gives


def test_a_triton_without_its_metadata_is_named(tmp_path: Path) -> None:
    from tests.nodeenv import make_node, run_probe

    # Copied onto PYTHONPATH without its dist-info: Triton 3.9 discovers no backend (no entry
    # points) and raises the text measured above.
    node = make_node(tmp_path / "node", triton="3.9.0",
                     triton_error="0 active drivers ([]). There should only be one.")
    (node.site / "triton" / "backends").mkdir(parents=True, exist_ok=True)
    (node.site / "triton" / "backends" / "__init__.py").write_text("backends = {}\n")
    _, doc, _ = run_probe(node)
    assert doc["triton"]["cause"] == "triton_no_backends"
    assert "TRITON_BACKENDS_IN_TREE=1" in doc["triton"]["fix"]
    target = next(c for c in doc["checks"] if c["id"] == "triton_target")
    assert target["evidence"]["backends"]["discovered"] == []


def backends_check(tmp_path: Path, **kwargs: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The probe on a node whose Triton has 3.9's real backends and _create_driver()."""
    from tests.nodeenv import make_node, run_probe

    node = make_node(tmp_path / "node", **kwargs)
    _, doc, _ = run_probe(node)
    return next(c for c in doc["checks"] if c["id"] == "triton_backends"), doc


needs_triton = pytest.mark.skipif(not DRIVER_PY.is_file(),
                                  reason="needs Triton 3.9's files (scripts/fetch_test_wheels.py)")


@needs_triton
def test_a_healthy_triton_selects_its_one_backend(tmp_path: Path) -> None:
    check, doc = backends_check(tmp_path)
    assert check["status"] == "pass"
    assert check["summary"] == "Triton selects backend nvidia (active: nvidia (triton 3.6.0))"
    assert check["evidence"]["discovered"] == ["amd", "nvidia"]
    assert doc["triton"]["verdict"] == "gpu"


@needs_triton
def test_an_extra_active_backend_is_named_with_its_package(tmp_path: Path) -> None:
    check, doc = backends_check(tmp_path, extra_backend="cpu")
    assert check["status"] == "fail"
    assert check["summary"].startswith(
        "2 active Triton backends: cpu (triton-cpu-backend 1.0), nvidia (triton 3.6.0); "
        "Triton's own selection raises RuntimeError: 2 active drivers (")
    assert "There should only be one." in check["summary"]
    assert check["fix"] == (f"{doc['facts']['python']['executable']} -m pip uninstall the "
                            "package of the extra backend (triton-cpu-backend "
                            "1.0), or set TRITON_DEFAULT_BACKEND=nvidia in the workload's "
                            "environment")
    assert (doc["triton"]["verdict"], doc["triton"]["cause"]) == (
        "cpu-fallback", "triton_backends_conflict")


@needs_triton
def test_the_default_backend_resolves_the_conflict_as_triton_does(tmp_path: Path) -> None:
    check, _ = backends_check(tmp_path, extra_backend="cpu",
                              env={"TRITON_DEFAULT_BACKEND": "nvidia"})
    assert (check["status"], check["summary"]) == (
        "pass", "Triton selects backend nvidia (TRITON_DEFAULT_BACKEND) (active: cpu "
        "(triton-cpu-backend 1.0), nvidia (triton 3.6.0))")


@needs_triton
def test_an_unknown_default_backend_is_tritons_own_error(tmp_path: Path) -> None:
    check, doc = backends_check(tmp_path, env={"TRITON_DEFAULT_BACKEND": "cuda"})
    assert check["status"] == "fail"
    assert "Unknown backend device 'cuda'. Available backends: ['amd', 'nvidia']" in (
        check["summary"])
    assert doc["triton"]["cause"] == "triton_default_backend"


@needs_triton
def test_without_entry_points_in_tree_discovery_still_finds_the_backends(
        tmp_path: Path) -> None:
    from tests.nodeenv import make_node, run_probe

    for in_tree, status in (("1", "pass"), ("", "fail")):
        node = make_node(tmp_path / f"node{in_tree}", env={"TRITON_BACKENDS_IN_TREE": in_tree})
        (node.site / "triton-3.6.0.dist-info" / "entry_points.txt").unlink()
        _, doc, _ = run_probe(node)
        check = next(c for c in doc["checks"] if c["id"] == "triton_backends")
        assert check["status"] == status
        if status == "fail":
            assert doc["triton"]["cause"] == "triton_no_backends"


DRIVER_36 = (Path(__file__).resolve().parents[2] / ".test-wheels" / "triton-3.6.0" / "triton" /
             "runtime" / "driver.py")


@needs_triton
@pytest.mark.skipif(not DRIVER_36.is_file(),
                    reason="needs Triton 3.6.0's runtime/driver.py (scripts/fetch_test_wheels.py)")
def test_a_triton_that_ignores_the_default_backend_is_not_offered_it(tmp_path: Path) -> None:
    # Triton 3.6.0's released _create_driver() (the H200's, docs/validation.md) counts the
    # active drivers and reads no variable: the conflict stays, set or not, and the fix is
    # the uninstall alone.
    assert "TRITON_DEFAULT_BACKEND" not in DRIVER_36.read_text()
    for env, note in (({}, ""), ({"TRITON_DEFAULT_BACKEND": "nvidia"},
                                 " (TRITON_DEFAULT_BACKEND=nvidia is set, but this Triton's "
                                 "runtime/driver.py does not read it)")):
        check, doc = backends_check(tmp_path / str(len(env)), extra_backend="cpu",
                                    triton_driver="3.6.0", env=env)
        assert check["status"] == "fail"
        assert check["evidence"]["selection"]["reads_default"] is False
        assert check["summary"].startswith(
            "2 active Triton backends: cpu (triton-cpu-backend 1.0), nvidia (triton 3.6.0); "
            "Triton's own selection raises RuntimeError: 2 active drivers (")
        assert check["summary"].endswith("There should only be one." + note)
        assert check["fix"] == (f"{doc['facts']['python']['executable']} -m pip uninstall "
                                "the package of the extra backend (triton-cpu-backend 1.0)")
        assert (doc["triton"]["verdict"], doc["triton"]["cause"]) == (
            "cpu-fallback", "triton_backends_conflict")
