"""A fixed audit report covering every row shape the renderers draw, hostile names included."""

from __future__ import annotations

import re
from typing import Any

from fleetcheck.report.content import Check, NodeResult, Report, RunSummary, TritonVerdict

COMPILER_ERROR = (
    "RuntimeError: Failed to find C compiler. Please specify via CC environment variable "
    "or set triton.knobs.build.impl."
)
COMPILER_FIX = "Install gcc libc6-dev python3.12-dev (build-essential), or set CC"
HTML_NAME = "<img src=x onerror=alert(1)>"
ESCAPE_NAME = "\x1b[31mred[bold]x"
#: The control characters no rendering may leave of a node's text (tab and newline may stay).
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
STARTED = "2025-06-01T02:00:00Z"
FINISHED = "2025-06-01T02:00:42Z"

_PASSING = (
    "gpu_present", "dev_nodes_missing", "driver_userspace_mismatch", "zero_active_drivers",
    "driver_too_old", "torch_cuda", "torch_lacks_arch", "triton_installed", "triton_2x",
    "cc_env_invalid", "no_c_compiler", "no_linker", "libc_headers_missing",
    "python_headers_missing", "ldconfig_binary_missing", "libcuda_not_in_ldcache",
    "cache_dir_unwritable", "cache_dir_noexec", "ptxas_missing", "triton_too_old_for_gpu",
    "triton_target", "stale_cache_masks_compiler", "gpu_memory_in_use", "gpu_foreign_processes",
    "gpu_memory_health",
)


def _gpu_state(gpus: int, held: dict[int, tuple[int, dict[str, Any]]] | None = None
               ) -> dict[str, Any]:
    """facts.gpu_state: every GPU idle (512 MiB in use), but `held` ones: index -> (MiB in
    use, the process holding it)."""
    held = held or {}
    return {"source": "nvml", "listed": gpus, "cuda_count": gpus, "gpus": [
        {"index": i, "uuid": f"GPU-{i:04d}", "persistence_mode": 1, "compute_mode": "Default",
         "total_mib": 143771, "used_mib": held.get(i, (512, {}))[0],
         "held_mib": held.get(i, (512, {}))[0],
         "held_share": round(held.get(i, (512, {}))[0] / 143771, 4),
         "processes": [held[i][1]] if i in held else [],
         "health": {"remapped_rows": {"correctable": 0, "uncorrectable": 0, "pending": False,
                                      "failure": False}, "ecc_uncorrected_volatile": 0}}
        for i in range(gpus)]}


#: A leftover of an earlier job holding GPU 2 of pve1/202.
LEFTOVER = {"pid": 4242, "used_mib": 119808, "own": False, "here": True, "name": "python",
            "user": "alice", "cmdline": "python train.py --resume", "pid_reused": None}


def _facts(gpus: int, name: str = "NVIDIA H200", compiler: bool = True) -> dict[str, Any]:
    return {
        "hostname": "n",
        "os": {"id": "debian", "version_id": "12", "pretty_name": "Debian GNU/Linux 12"},
        "kernel": "6.8.12-4-pve",
        "container": None,
        "cpus": 64,
        "memory_bytes": 1081145262080,
        "python": {"executable": "/usr/bin/python3", "version": "3.12.3"},
        "gpus": [
            {"index": i, "name": name, "uuid": f"GPU-{i:04d}", "memory_mib": 143771,
             "compute_capability": "9.0"}
            for i in range(gpus)
        ],
        "gpu_count": gpus,
        "driver": {"kernel_module": "580.159.04", "userspace": "580.159.04",
                   "cuda_driver_version": "13.0"},
        "torch": {"version": "2.11.0+cu130", "cuda": "13.0", "cuda_available": True,
                  "device_count": gpus, "arch_list": ["sm_80", "sm_90", "sm_100"]},
        "triton": {"version": "3.6.0", "location": "/usr/lib/python3/dist-packages/triton",
                   "distributions": ["triton"]},
        "fla": None,
        "compiler": {"path": "/usr/bin/gcc", "source": "PATH"} if compiler else None,
        "triton_cache_dir": "/root/.triton/cache",
    }


#: What the probe reports per framework (facts.frameworks), for a GPU node and a fallback one.
FRAMEWORKS_GPU = {
    "fla": {"installed": False, "outcome": "not-installed",
            "detail": "flash-linear-attention not installed"},
    "vllm": {"installed": True, "version": "0.11.0", "outcome": "triton",
             "detail": "vLLM uses Triton on the GPU"},
    "inductor": {"installed": True, "version": "2.11.0+cu130", "outcome": "triton",
                 "cxx": "/usr/bin/g++",
                 "detail": "torch.compile (inductor): Triton path usable; "
                           "C++ compiler /usr/bin/g++"},
}
FRAMEWORKS_FALLBACK = {
    "fla": {"installed": True, "version": "0.6.0", "outcome": "cpu-fallback",
            "detail": "FLA 0.6.0 falls back to CPU: RuntimeError: Failed to find C compiler. "
                      "Please specify via CC environment variable or set "
                      "triton.knobs.build.impl."},
    "vllm": {"installed": False, "outcome": "not-installed", "detail": "vLLM not installed"},
    "inductor": {"installed": True, "version": "2.11.0+cu130", "outcome": "fails-at-kernel",
                 "cxx": None,
                 "detail": "torch.compile (inductor): BackendCompilerFailed at code generation: "
                           "no C compiler"},
}


def _checks(**overrides: Check) -> tuple[Check, ...]:
    return tuple(overrides.get(cid, Check(cid, "pass", "ok")) for cid in _PASSING)


def sample_report() -> Report:
    fallback_cause = Check(
        "no_c_compiler", "fail", "no C compiler: CC unset, no gcc or clang on PATH",
        COMPILER_FIX, {"error": COMPILER_ERROR, "PATH": "/usr/local/bin:/usr/bin:/bin"},
    )
    fallback_target = Check(
        "triton_target", "fail", "get_current_target() failed in a fresh cache", COMPILER_FIX,
        {"error": COMPILER_ERROR},
    )
    stale = Check(
        "stale_cache_masks_compiler", "warn",
        "works only because the Triton cache is warm; a new kernel signature will fail",
        "Install the toolchain anyway (gcc libc6-dev python3.12-dev)",
        {"cache": "/root/.triton/cache", "stubs": 3},
    )
    held = Check(
        "gpu_memory_in_use", "warn",
        "GPU 2: 117.0 GiB of 140.4 GiB in use (83%) by pid 4242 (python train.py --resume, "
        "user alice, 117.0 GiB)", "stop what holds it before the job",
        {"max_share": 0.05, "worst_share": 0.8333},
    )
    foreign = Check("gpu_foreign_processes", "warn",
                    "1 foreign process on the GPUs: GPU 2: pid 4242 (python train.py --resume, "
                    "user alice, 117.0 GiB)", "stop what holds it before the job",
                    {"processes": [LEFTOVER]})
    gpu = TritonVerdict("gpu", "cuda")
    nodes = (
        NodeResult("pve1", "pve1", None, "pve1", "ok", "Triton gpu (cuda)", gpu,
                   _checks(), {**_facts(8), "frameworks": FRAMEWORKS_GPU,
                               "gpu_state": _gpu_state(8)}, 6.2),
        NodeResult("pve1/201", "pve1", 201, "trainer", "fail",
                   "Triton cpu-fallback: no C compiler: CC unset, no gcc or clang on PATH",
                   TritonVerdict("cpu-fallback", None, "no_c_compiler", COMPILER_FIX),
                   _checks(no_c_compiler=fallback_cause, triton_target=fallback_target),
                   {**_facts(2, compiler=False), "container": "lxc",
                    "frameworks": FRAMEWORKS_FALLBACK}, 7.9),
        NodeResult("pve1/202", "pve1", 202, "inference", "warn", stale.summary, gpu,
                   _checks(stale_cache_masks_compiler=stale, gpu_memory_in_use=held,
                           gpu_foreign_processes=foreign),
                   {**_facts(4), "container": "lxc",
                    "gpu_state": _gpu_state(4, {2: (119808, LEFTOVER)})}, 5.1),
        NodeResult("pve2", "pve2", None, "pve2", "unreachable",
                   "ssh: connect to host 10.1.2.7 port 22: Connection timed out"),
        NodeResult("pve3/300", "pve3", 300, "old-ci", "skipped", "container 300 is stopped"),
        NodeResult("pve3/301", "pve3", 301, HTML_NAME, "ok", "Triton gpu (cuda)", gpu,
                   _checks(), {**_facts(1, "NVIDIA GeForce RTX 5090"), "container": "lxc"}, 4.4),
        NodeResult("pve3/302", "pve3", 302, ESCAPE_NAME, "error",
                   "probe output is not JSON: \x1b[2J[red]boom"),
    )
    fleet = (
        Check("consistent_driver", "warn", "driver differs: 580.159.04 on 3 nodes, 575.57 on 1",
              "Install one driver version fleet-wide"),
    )
    return Report(STARTED, FINISHED, nodes, inventory="/etc/fleetcheck/inventory.yaml",
                  playbook="nightly", fleet_checks=fleet)


def sample_history() -> tuple[RunSummary, ...]:
    def run(day: int, ok: int, fail: int, fallback: int) -> RunSummary:
        summary = {"ok": ok, "skipped": 1, "warn": 1, "unreachable": 0, "error": 0, "fail": fail}
        return RunSummary(f"2025-05-{day:02d}T02:00:00Z", summary, fallback)

    return (run(28, 5, 0, 0), run(29, 5, 0, 0), run(30, 4, 1, 1), run(31, 4, 1, 1))


SAMPLE_FAILING_SINCE = {"pve1/201": "2025-05-30T02:00:00Z"}
SAMPLE_CHANGES = (
    "pve2: ok → unreachable (ssh: connection timed out)",
    "pve3/302: new node",
)
