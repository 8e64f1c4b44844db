"""The report matrix: the GPU memory column and per-GPU rows from facts.gpu_state."""

from __future__ import annotations

from fleetcheck.render.matrix import GpuRow, gpu_memory_text, gpu_rows


def state(*gpus: dict[str, object]) -> dict[str, object]:
    return {"gpu_state": {"gpus": list(gpus)}}


IDLE = {"index": 0, "held_mib": 512, "total_mib": 81559, "processes": [],
        "persistence_mode": 0, "compute_mode": "Exclusive_Process",
        "health": {"remapped_rows": {"pending": True, "failure": False},
                   "ecc_uncorrected_volatile": 3}}
ELSEWHERE = {"index": 1, "held_mib": 70000, "total_mib": 81559,
             "processes": [{"pid": 4000000, "used_mib": None, "own": False, "here": False},
                           {"pid": 12, "used_mib": 500, "own": True, "here": True}],
             "health": {}}


def test_the_column_shows_the_fullest_gpu_or_what_holds_it() -> None:
    assert gpu_memory_text(state(IDLE), problem=False) == "0.5/80G"
    assert gpu_memory_text(state(IDLE, ELSEWHERE), problem=False) == "68/80G"
    assert gpu_memory_text(state(IDLE, ELSEWHERE), problem=True) == "held 68G pid 4000000?"
    assert gpu_memory_text({}, problem=True) is None


def test_per_gpu_rows_name_processes_without_guessing() -> None:
    assert gpu_rows(state(IDLE, ELSEWHERE)) == [
        GpuRow("0", "0.5 of 80 GiB in use", "none", "persistence off, Exclusive_Process",
               "repair pending, 3 uncorrected ECC"),
        GpuRow("1", "68 of 80 GiB in use",
               "pid 4000000 (another pid namespace); pid 12 (the probe) 0.5 GiB",
               "persistence ?, compute mode ?", "not read"),
    ]
    assert gpu_rows({"gpu_state": {"gpus": "hostile"}}) == []
