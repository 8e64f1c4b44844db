"""The probe's state: what it was asked, the facts it gathered and its helpers' answers, typed.

Every fact collector and check family is a class over ProbeState (facts/, checks/,
evaluation/): what one of them sets and another reads is declared here, so that mypy checks
each name and type the parts pass to one another. The annotations are never evaluated (the
probe runs on CPython 3.8: `from __future__ import annotations`).
"""

from __future__ import annotations

import os
import sys

from fleetcheck.probe.parts.core.base import TYPE_CHECKING
from fleetcheck.probe.parts.core.spawn import Deadline, Spawned

if TYPE_CHECKING:
    from typing import Any


class ProbeState:
    """The attributes the probe's parts share: set by gathering (facts/gather.py), read by
    the checks and the evaluation."""

    # What the probe was asked.
    deep: bool
    deadline: Deadline
    tmp: str  # the probe's own temp dir, removed at its end
    env: dict[str, str]
    workload_python: str

    # The document's facts, as gathered; the evaluation adds facts.limits and frameworks.
    facts: dict[str, Any]

    # The node's files, read by the probe itself.
    proc: dict[str, Any]  # /proc/driver/nvidia (proc_nvidia)
    dev_names: list[str]  # /dev/nvidia*
    amd: dict[str, Any]  # KFD's topology, /dev/kfd and /dev/dri, amdgpu (amd_facts)
    vendor: str  # "nvidia" or "amd": whose checks answer
    possible_gpu: bool  # a GPU of either vendor is there to be reached
    mountinfo: str | None
    proc_devices: str

    # The throw-away dirs the probe makes beside the workload's own, and those it creates.
    own_name: str  # "" until gathering names them
    own_missing: list[str]

    # The helper processes (None: not started).
    stack: Spawned  # the workload's Python stack (STACK_SCRIPT)
    driver_in_stack: bool  # the stack reads the GPU state and the driver layer
    alone: bool  # a tight process limit: the workload's own start first, alone
    deep_run: Spawned | None
    cuda: Spawned | None
    smi: Spawned | None
    ldconfig: Spawned | None
    compile: Spawned | None
    hip: Spawned | None
    rocminfo: Spawned | None
    gpustate: Spawned | None

    # Their answers (Spawned.result(), and the stage lines of the stack and the deep kernel).
    stack_result: dict[str, Any]
    stages: dict[str, dict[str, Any]]
    deep_result: dict[str, Any] | None
    deep_stages: dict[str, dict[str, Any]]
    ld_result: dict[str, Any] | None
    cuda_info: dict[str, Any]
    smi_info: dict[str, Any]
    hip_info: dict[str, Any]
    rocminfo_info: dict[str, Any]
    gpu_state_info: dict[str, Any]
    pyinfo: dict[str, Any]  # the workload interpreter's executable, version, include dir
    gpus: list[dict[str, Any]]

    # The toolchain's proof: the compiler found, the compile that proves it and who ran it.
    compiler: dict[str, Any]
    compile_result: dict[str, Any] | None
    compile_argv: list[str] | None
    compile_by: str | None  # "triton", "deadline", None (the probe's own test compile)

    # The evaluation's.
    limits: dict[str, Any] | None  # the job's limits (objects.read_limits), read once
    statuses: dict[str, str]  # each check's status so far, in causal order
    no_gpu: bool
    triton_missing: bool
    stack_failed: bool

    def __init__(self, deep: bool, deadline: Deadline, workload_python: str | None,
                 tmp: str) -> None:
        self.deep = deep
        self.deadline = deadline
        self.tmp = tmp
        self.env = dict(os.environ)
        self.workload_python = workload_python or sys.executable
        self.facts = {}
        # Read before gathering sets them too: the cleanup of a probe that failed early, the
        # fix of a check evaluated on its own.
        self.own_name = ""
        self.mountinfo = None
        self.hip_info = {}
        self.compile_argv = None
        self.compile_by = None
        self.limits = None
