"""A node's fix: a cause's record fills in what an older probe's verdict or check left out."""

from __future__ import annotations

from fleetcheck.judgement.fixes import blocking_fix, node_fix
from fleetcheck.report.content import Check, NodeResult, TritonVerdict

#: A node of an older probe: its verdict names a cause, with no fix text of its own.
FACTS = {"python": {"executable": "/opt/venv/bin/python", "version": "3.12.3"},
         "os": {"id": "rocky"}, "triton": {"version": "3.6.0"}}


def test_a_failing_verdict_without_a_fix_gets_its_causes_record() -> None:
    failing = NodeResult(id="n", host="n", vmid=None, name="n", status="fail",
                         reason="Triton cpu-fallback",
                         triton=TritonVerdict("cpu-fallback", None, "libc_crt_missing", ""),
                         checks=(Check("triton_target", "fail", "crti.o", ""),), facts=FACTS)
    fix = "libc's startup files (crti.o, crt1.o) missing: dnf install -y glibc-devel"
    assert node_fix(failing) == fix
    assert blocking_fix(failing) == fix


def test_a_failing_check_without_a_fix_gets_its_record_filled_for_the_node() -> None:
    failing = NodeResult(id="n", host="n", vmid=None, name="n", status="fail", reason="x",
                         triton=TritonVerdict("gpu", "cuda"),
                         checks=(Check("inductor_ready", "pass", "ok", ""),
                                 Check("triton_install_broken", "fail", "files gone", "")),
                         facts=FACTS)
    expected = ("/opt/venv/bin/python -m pip install --force-reinstall --no-deps "
                "triton==3.6.0")
    assert expected in node_fix(failing)
    assert expected in blocking_fix(failing)
