"""What `fleetcheck fix` does about each cause is its record's `repair`: every cause planned on a
node where its repair can be done, and what the planner did compared with the record."""

from __future__ import annotations

from typing import Any

import pytest

from fleetcheck import kinds
from fleetcheck.fix import plan_node
from fleetcheck.fix.plan import LDCONFIG, NodePlan
from fleetcheck.probe.parts.catalogue import CAUSES, CAUSES_BY_ID, REPAIRS
from fleetcheck.report.content import Check, NodeResult, TritonVerdict
from tests.fix.support import node_facts

LIBDIR = "/usr/lib/x86_64-linux-gnu"
#: What each repair needs of a check's evidence, all at once: the libcuda the loader found and
#: the dir for its link (a real driver dir), the interpreter's include dir without Python.h.
EVIDENCE: dict[str, Any] = {"dlopen": f"{LIBDIR}/libcuda.so.1", "dirs": [LIBDIR],
                            "include": "/usr/include/python3.12", "python_h_exists": False}


def _node(cause: str, vendor: str) -> NodeResult:
    """An LXC container on Debian failing `cause`: its check failed where it has one, else
    only the verdict names it (a cause named from a message)."""
    facts = dict(node_facts("debian"), gpu_vendor=vendor, triton_cache_dir="/root/.triton/cache")
    checks = (Check(cause, "fail", f"{cause} failed", "", EVIDENCE),) if (
        CAUSES_BY_ID[cause].check) else ()
    return NodeResult(id="pve1/101", host="pve1", vmid=101, name="n", status="fail",
                      reason=f"{cause} failed", triton=TritonVerdict("cpu-fallback", None, cause),
                      checks=checks, facts=facts, kind="lxc")


def planned_repair(plan: NodePlan, vendor: str) -> str | None:
    """The repair the plan did, read from its steps or its printed action (REPAIRS' words)."""
    argvs = [step.argv for step in plan.steps]
    if (LDCONFIG,) in argvs:
        return "ldcache"
    if any(argv[0] == "ln" for argv in argvs):
        return "symlink"
    if argvs:
        return "packages"
    action = plan.manual[0]
    if action.who == "host":
        check = plan.node.check(action.cause)
        lxc = kinds.find("lxc")
        assert lxc is not None and check is not None
        passthrough = lxc.gpu_passthrough(plan.node, check, vendor)
        return "gpu_access" if action.lines == passthrough else "host"
    assert action.who == "person"
    cache_dir = any("TRITON_CACHE_DIR=" in line and "mkdir -p -m 0700" in line
                    for line in action.lines)
    return "cache_dir" if cache_dir else None


CASES = [(cause.id, vendor) for cause in CAUSES
         for vendor in ((cause.vendor,) if cause.vendor else ("nvidia", "amd"))]


@pytest.mark.parametrize(("cause", "vendor"), CASES, ids=[f"{c}-{v}" for c, v in CASES])
def test_the_planner_does_what_the_record_says(cause: str, vendor: str) -> None:
    plan = plan_node(_node(cause, vendor))
    assert plan is not None
    assert [action.cause for action in plan.manual] + [step.cause for step in plan.steps] \
        and {action.cause for action in plan.manual} | {step.cause for step in plan.steps} \
        == {cause}
    assert planned_repair(plan, vendor) == CAUSES_BY_ID[cause].repair


def test_every_repair_is_one_the_planner_knows() -> None:
    assert {cause.repair for cause in CAUSES} <= set(REPAIRS)
