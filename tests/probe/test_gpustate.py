"""The GPUs' state before a job, as the probe reads it from the test node's stub NVML: memory
held, foreign processes (here, in another pid namespace, the probe's own), memory health, a
GPU CUDA cannot open, persistence mode, the kernel log's Xid events; and the nvidia-smi and
/dev/kmsg readings on their own."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fleetcheck.probe.parts.facts.gpustate import parse_kmsg, parse_smi_state
from tests.nodeenv import gpu_state_env, make_node, run_probe

#: A pid no process has here: the driver's pid of a process in another pid namespace.
ELSEWHERE = 4_000_000

KMSG = (
    # 1000 s ago on this node's GPU 0: fallen off the bus (critical).
    "3,1000,9000000000,-;NVRM: Xid (PCI:0000:18:00): 79, pid=1234, name=python, GPU has "
    "fallen off the bus.\n"
    # 500 s ago, a program's illegal address on GPU 1 (application).
    "4,1001,9500000000,-;NVRM: Xid (PCI:0000:19:00): 13, pid=99, name=train, Graphics "
    "Exception: ESR 0x514648=0x1000f\n"
    # Two hours ago: outside the window.
    "3,900,2800000000,-;NVRM: Xid (PCI:0000:18:00): 48, pid=1, DBE (double bit error)\n"
    # Another GPU of the host, not this node's.
    "3,1002,9600000000,-;NVRM: Xid (PCI:0000:99:00): 95, pid=2, Uncontained ECC error\n"
    "6,1003,9700000000,-;usb 1-1: new high-speed USB device\n"
)


def user_name() -> str | None:
    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        return None


@pytest.fixture
def holder(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], Path]]:
    """A process of this pid namespace that holds a GPU device node open (`sleep`, its fd 3 on
    the node's /dev/nvidia0), as a leftover job does; the node is built under tmp_path/node."""
    dev = tmp_path / "node" / "sysroot" / "dev"
    dev.mkdir(parents=True)
    (dev / "nvidia0").write_text("")
    proc = subprocess.Popen(["sh", "-c", 'exec 3<"$0"; exec sleep 300', str(dev / "nvidia0")])
    for _ in range(500):
        fd = Path(f"/proc/{proc.pid}/fd/3")
        comm = Path(f"/proc/{proc.pid}/comm")
        if fd.exists() and comm.read_text().strip() == "sleep":
            break
        time.sleep(0.01)
    yield proc, dev / "nvidia0"
    proc.kill()
    proc.wait()


def checks_of(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["id"]: c for c in doc["checks"]}  # type: ignore[index]


def test_held_foreign_unhealthy_missing_gpus_and_xids_each_their_check(tmp_path, holder) -> None:
    proc, _ = holder
    env = gpu_state_env(
        # GPU 0: the leftover holds 100 GiB, a process of another namespace 30 GiB, the probe's
        # own stage 2 GiB; GPU 1: a memory repair pending, 2 uncorrected ECC errors,
        # persistence mode off.
        (133120, 1, 0, 0, 0, f"{proc.pid}:102400", f"{ELSEWHERE}:30720", "parent:2048"),
        (0, 0, 1, 0, 2),
    )
    node = make_node(tmp_path / "node", gpus=3, cuda_missing=1, env=env)
    (node.sysroot / "dev" / "kmsg").write_text(KMSG)
    (node.sysroot / "proc" / "uptime").write_text("10000.00 5000.00\n")
    code, doc, _ = run_probe(node)
    checks = checks_of(doc)
    state = doc["facts"]["gpu_state"]  # type: ignore[index]

    # Memory: the probe's own 2 GiB is not held; what is, and by whom, is named.
    gpu0 = state["gpus"][0]
    assert (gpu0["used_mib"], gpu0["held_mib"], gpu0["total_mib"]) == (133120, 131072, 143771)
    memory = checks["gpu_memory_in_use"]
    assert memory["status"] == "warn"
    assert memory["summary"].startswith("GPU 0: 128.0 GiB of 140.4 GiB in use (91%) by pid "
                                        f"{proc.pid} (sleep 300")
    assert "nvidia-smi --query-compute-apps=pid,used_memory" in memory["fix"]
    assert "fuser -v /dev/nvidia*" in memory["fix"]
    assert memory["evidence"]["worst_share"] == 0.912

    # Processes: the leftover (its command and user), the other namespace's pid (never a
    # guess), and not the probe's own.
    own = [p for p in gpu0["processes"] if p["own"]]
    assert len(own) == 1 and own[0]["used_mib"] == 2048
    foreign = checks["gpu_foreign_processes"]
    assert foreign["status"] == "warn"
    assert foreign["summary"].startswith("2 foreign processes on the GPUs: ")
    here = next(p for p in foreign["evidence"]["processes"] if p["pid"] == proc.pid)
    assert (here["here"], here["name"], here["cmdline"], here["user"]) == (
        True, "sleep", "sleep 300", user_name())
    elsewhere = next(p for p in foreign["evidence"]["processes"] if p["pid"] == ELSEWHERE)
    assert (elsewhere["here"], elsewhere["name"], elsewhere["cmdline"]) == (False, None, None)
    assert f"pid {ELSEWHERE} (not in this pid namespace" in foreign["summary"]

    # Memory health: the pending repair fails the node, not Triton's verdict.
    health = checks["gpu_memory_health"]
    assert health["status"] == "fail"
    assert health["summary"].startswith("GPU 1: memory repair pending (row remapping or page ")
    assert "nvidia-smi -r -i N" in health["fix"] and "reboot" in health["fix"]
    assert (code, doc["status"], doc["triton"]["verdict"]) == (1, "fail", "gpu")  # type: ignore[index]
    assert doc["reason"] == health["summary"]

    # One of the three GPUs the driver lists CUDA cannot open.
    missing = checks["gpu_missing_for_cuda"]
    assert (missing["status"], missing["summary"]) == (
        "warn", "the driver lists 3 GPU(s), CUDA opens 2: 1 missing for CUDA")
    assert (state["listed"], state["cuda_count"]) == (3, 2)

    persistence = checks["gpu_persistence_mode"]
    assert persistence["status"] == "warn" and persistence["summary"].startswith("GPU 1: ")

    # The kernel log: this node's critical Xid of the last hour; not the old one, not another
    # GPU's, the informational line ignored.
    xid = checks["gpu_xid_events"]
    assert xid["status"] == "fail"
    assert xid["summary"].startswith("1 critical Xid event(s) in the last 1 h: Xid 79 on "
                                     "0000:18:00 (pid=1234, name=python, GPU has fallen off")
    assert [(e["xid"], e["ago_s"]) for e in xid["evidence"]["events"]] == [(79, 1000), (13, 500)]


def test_a_healthy_gpu_passes_and_an_unread_kernel_log_is_never_clean(tmp_path) -> None:
    node = make_node(tmp_path / "node", gpus=2)
    code, doc, _ = run_probe(node)
    checks = checks_of(doc)
    assert (code, doc["status"]) == (0, "ok")
    assert {cid: checks[cid]["status"] for cid in (
        "gpu_memory_in_use", "gpu_foreign_processes", "gpu_memory_health", "gpu_missing_for_cuda",
        "gpu_persistence_mode", "gpu_xid_events")} == {
        "gpu_memory_in_use": "pass", "gpu_foreign_processes": "pass",
        "gpu_memory_health": "pass", "gpu_missing_for_cuda": "pass",
        "gpu_persistence_mode": "pass", "gpu_xid_events": "skip"}
    assert checks["gpu_xid_events"]["summary"].startswith(
        "kernel log not readable, Xid events unknown (not clean): ")
    assert checks["gpu_memory_in_use"]["summary"] == "GPU memory free: at most 0% in use (GPU 0)"


def test_a_stack_that_dies_first_leaves_the_gpu_state_and_driver_to_helpers(tmp_path) -> None:
    # The stack reads both in a thread; where its interpreter dies before it says anything
    # (here it is `false`), helpers of the probe's own read them, the GPU state first.
    node = make_node(tmp_path / "node", gpus=2)
    _, healthy, _ = run_probe(node)
    _, doc, _ = run_probe(node, "--python", shutil.which("false") or "/bin/false")
    facts: Any = doc["facts"]
    helpers = facts["probe_cost"]["helpers"]
    assert helpers.index("stack") < helpers.index("gpustate") < helpers.index("libcuda"), helpers
    assert [g["index"] for g in facts["gpu_state"]["gpus"]] == [0, 1]
    assert facts["driver"] == healthy["facts"]["driver"]  # type: ignore[index]
    assert facts["gpu_count"] == 2


def test_memory_held_by_no_process_listed_is_another_namespace_s(tmp_path) -> None:
    # A container sees the host's processes only as memory in use; the job's own GPU is the
    # only one CUDA_VISIBLE_DEVICES gives it, so nothing is missing, and GPU 1, another job's
    # on a shared node (busy, persistence off), is none of its business.
    env = {**gpu_state_env((65536, 1, 0, 0, 0), (100000, 0, 0, 0, 0, f"{ELSEWHERE}:100000")),
           "CUDA_VISIBLE_DEVICES": "0"}
    node = make_node(tmp_path / "node", gpus=2, cuda_missing=1, env=env)
    _, doc, _ = run_probe(node)
    checks = checks_of(doc)
    assert checks["gpu_foreign_processes"]["summary"] == (
        "1 foreign process on the GPUs: GPU 0: 64.0 GiB in use by processes of another pid "
        "namespace (the host's or another container's: seen only as memory)")
    assert checks["gpu_memory_in_use"]["summary"] == (
        "GPU 0: 64.0 GiB of 140.4 GiB in use (46%) by no process this node can list (another "
        "pid namespace's)")
    assert checks["gpu_missing_for_cuda"]["status"] == "pass"
    assert checks["gpu_persistence_mode"]["status"] == "pass"
    assert [g["job"] for g in doc["facts"]["gpu_state"]["gpus"]] == [True, False]  # type: ignore[index]


def test_nvidia_smi_queries_give_the_nvml_stage_s_shape() -> None:
    def result(stdout: str, rc: int = 0) -> dict[str, Any]:
        return {"rc": rc, "stdout": stdout, "stderr": "", "timed_out": False, "error": None,
                "seconds": 0.1}

    gpus = result("0, GPU-a, 81559, 77000, 4559, Enabled, Default, No, Yes, No, 0\n"
                  "1, GPU-b, 81559, 3, 81556, Disabled, Exclusive_Process, [N/A], No, No, "
                  "[N/A]\n")
    apps = result("GPU-a, 4242, 76990\nGPU-b, 77, [N/A]\n")
    state = parse_smi_state(gpus, apps)
    assert state["source"] == "nvidia-smi"
    first, second = state["gpus"]
    assert first["memory"] == {"total": 81559 << 20, "used": 77000 << 20, "free": 4559 << 20}
    assert first["processes"] == [{"pid": 4242, "used": 76990 << 20}]
    assert (first["persistence_mode"], first["compute_mode"]) == (1, 0)
    assert first["health"] == {"retired_pages_pending": False,
                               "remapped_rows": {"pending": True, "failure": False},
                               "ecc_uncorrected_volatile": 0}
    assert (second["persistence_mode"], second["compute_mode"]) == (0, 3)
    assert second["processes"] == [{"pid": 77, "used": None}]
    assert second["health"] == {"remapped_rows": {"pending": False, "failure": False}}
    failed = parse_smi_state(result("NVIDIA-SMI has failed because it couldn't communicate "
                                    "with the NVIDIA driver.\n", 9), None)
    assert failed["error"].startswith("nvidia-smi: NVIDIA-SMI has failed")


def test_kmsg_records_classified_by_xid_within_the_window() -> None:
    events = parse_kmsg(KMSG, 10000.0, 3600, ["0000:18:00.0", "0000:19:00.0"])
    assert [(e["xid"], e["kind"], e["this_node"]) for e in events] == [
        (79, "critical", True), (13, "application", True), (95, "critical", False)]
    # Without the uptime every record counts (the window cannot be placed).
    assert [e["xid"] for e in parse_kmsg(KMSG, None, 3600, [])] == [79, 13, 48, 95]
