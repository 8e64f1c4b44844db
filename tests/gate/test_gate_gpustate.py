"""The gate and the GPUs' state: a test node (local transport) whose stub NVML reports memory
held by another process, a pending memory repair, a GPU CUDA cannot open; the exit code and
the node's line under each playbook."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fleetcheck.cli import main
from tests.nodeenv import NodeEnv, gpu_state_env, make_node

#: A pid no process has here: a process of another pid namespace (the host's).
ELSEWHERE = 4_000_000

HOLDER_FIX = ("stop what holds it before the job: `nvidia-smi --query-compute-apps=pid,"
              "used_memory --format=csv` lists the processes, `fuser -v /dev/nvidia*` who has "
              "the GPUs open; in a container, processes of other containers or of the host are "
              "seen only as memory in use: run these on the host")


def inventory(node: NodeEnv) -> str:
    path = node.root / "inventory.yaml"
    path.write_text(json.dumps({"hosts": {"gpu": {"transport": "local", "python": node.python,
                                                  "env": node.env}}}), encoding="utf-8")
    return str(path)


def gate(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[str]]:
    code = main(["gate", *argv])
    return code, capsys.readouterr().err.splitlines()


def playbook(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / f"{name}.yaml"
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_memory_held_fails_pre_training_warns_under_default(tmp_path, capsys) -> None:
    held = make_node(tmp_path / "held", env=gpu_state_env(
        (137000, 1, 0, 0, 0, f"{ELSEWHERE}:136000")))
    where = inventory(held)
    code, lines = gate(capsys, where, "--playbook", "pre-training")
    assert code == 1
    assert lines == [
        "gpu: fail: GPU 0: 133.8 GiB of 140.4 GiB in use (95%) by pid 4000000 (not in this pid "
        "namespace: another container's or the host's) (playbook pre-training allows 5% in use) "
        f"(fix: {HOLDER_FIX})"]
    assert gate(capsys, where, "--playbook", "default") == (0, [])
    # A playbook that allows the memory and ignores other processes lets it through.
    lenient = playbook(tmp_path, "shared", "max_gpu_memory_used: 0.99\n"
                                           "foreign_processes: ignore\n")
    assert gate(capsys, where, "--playbook", lenient) == (0, [])
    # ...and one that only minds the processes fails it on them.
    processes = playbook(tmp_path, "strict", "foreign_processes: fail\n")
    code, lines = gate(capsys, where, "--playbook", processes)
    assert code == 1
    assert lines[0].startswith("gpu: fail: 1 foreign process on the GPUs: GPU 0: pid 4000000 ")


def test_a_healthy_gpu_passes_both(tmp_path, capsys) -> None:
    where = inventory(make_node(tmp_path / "healthy"))
    assert gate(capsys, where, "--playbook", "pre-training") == (0, [])
    assert gate(capsys, where, "--playbook", "default") == (0, [])


def test_a_pending_memory_repair_fails_unless_the_playbook_only_warns(tmp_path, capsys) -> None:
    where = inventory(make_node(tmp_path / "repair", env=gpu_state_env((0, 1, 1, 0, 0))))
    code, lines = gate(capsys, where, "--playbook", "default")
    assert code == 1
    assert lines[0].startswith("gpu: fail: GPU 0: memory repair pending ")
    assert "(fix: reset the GPU once nothing uses it (`nvidia-smi -r -i N`" in lines[0]
    warn = playbook(tmp_path, "warn", "memory_health: warn\n")
    assert gate(capsys, where, "--playbook", warn) == (0, [])


def test_a_gpu_cuda_cannot_open_is_missing_for_min_gpus(tmp_path, capsys) -> None:
    where = inventory(make_node(tmp_path / "missing", gpus=2, cuda_missing=1))
    two = playbook(tmp_path, "two", "min_gpus: 2\n")
    code, lines = gate(capsys, where, "--playbook", two)
    assert code == 1
    assert lines[0].startswith("gpu: fail: 1 GPU(s) CUDA can open, of 2 listed, playbook two "
                               "requires 2")
    one = playbook(tmp_path, "one", "min_gpus: 1\n")
    assert gate(capsys, where, "--playbook", one) == (0, [])
