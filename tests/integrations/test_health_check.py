"""fleetcheck.integrations.health_check: the cache's verdicts and the Slurm drain rules, without
a Slurm."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest

from fleetcheck.integrations.health_check import (
    DRAIN_TAG,
    Health,
    SlurmError,
    apply_to_slurm,
    cache_document,
    read_cache,
)

FAILED = {"status": "fail", "reason": "Triton cpu-fallback: no C compiler",
          "triton": {"verdict": "cpu-fallback", "cause": "no_c_compiler"}, "checks": []}


class FakeSlurm:
    """sinfo prints `reason` (once per partition, as sinfo -N does); scontrol records its argv."""

    def __init__(self, reason: str = "", scontrol_rc: int = 0) -> None:
        self.reason = reason
        self.scontrol_rc = scontrol_rc
        self.calls: list[list[str]] = []

    def __call__(self, argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
        self.calls.append(list(argv))
        if argv[0] == "sinfo":
            line = (self.reason or "none") + "\n"
            return subprocess.CompletedProcess(list(argv), 0, line * 2, "")
        return subprocess.CompletedProcess(list(argv), self.scontrol_rc, "",
                                           "slurm_update error: Invalid node name specified\n")


def test_cached_failure_reads_as_fail_with_cause(tmp_path: Path) -> None:
    cache = tmp_path / "node.json"
    cache.write_text(cache_document(FAILED, 1, now=1000.0))
    health = read_cache(str(cache), max_age_s=600, now=1500.0)
    assert health == Health("fail", "no_c_compiler: Triton cpu-fallback: no C compiler")
    assert read_cache(str(cache), max_age_s=600, now=1700.0).state == "unknown"


def test_drain_writes_the_tagged_reason_once() -> None:
    slurm = FakeSlurm()
    done = apply_to_slurm(Health("fail", "no_c_compiler: x"), "gpu07", runner=slurm)
    assert slurm.calls[-1] == ["scontrol", "update", "NodeName=gpu07", "State=DRAIN",
                               f"Reason={DRAIN_TAG} no_c_compiler: x"]
    assert done.startswith("drained gpu07")
    again = FakeSlurm(reason=f"{DRAIN_TAG} no_c_compiler: x")
    apply_to_slurm(Health("fail", "no_c_compiler: x"), "gpu07", runner=again)
    assert [call[0] for call in again.calls] == ["sinfo"]


@pytest.mark.parametrize(("reason", "health", "scontrol"), [
    ("bad DIMM", Health("fail", "c"), False),
    ("bad DIMM", Health("ok", "fine"), False),
    ("", Health("ok", "fine"), False),
    (f"{DRAIN_TAG} c", Health("ok", "fine"), True),
    ("", Health("unknown", "stale"), False),
])
def test_only_fleetchecks_own_drains_are_touched(reason: str, health: Health,
                                                 scontrol: bool) -> None:
    slurm = FakeSlurm(reason=reason)
    apply_to_slurm(health, "gpu07", runner=slurm)
    assert any(call[0] == "scontrol" for call in slurm.calls) == scontrol


def test_unverified_drains_only_when_asked() -> None:
    slurm = FakeSlurm()
    apply_to_slurm(Health("unknown", "stale"), "gpu07", drain_unknown=True, runner=slurm)
    assert slurm.calls[-1][-1] == f"Reason={DRAIN_TAG} stale"


def test_a_failing_scontrol_is_one_line_naming_it() -> None:
    with pytest.raises(SlurmError, match=r"^scontrol: slurm_update error: Invalid node name"):
        apply_to_slurm(Health("fail", "c"), "gpu07", runner=FakeSlurm(scontrol_rc=1))
