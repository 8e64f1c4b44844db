"""The Probe: every fact and check family in one object."""

import os
import sys

from fleetcheck.probe.parts.checks_cache import CacheChecks
from fleetcheck.probe.parts.checks_driver import DriverChecks
from fleetcheck.probe.parts.checks_fla import FlaChecks
from fleetcheck.probe.parts.checks_gpustate import GpuStateChecks
from fleetcheck.probe.parts.checks_hip import HipChecks
from fleetcheck.probe.parts.checks_libcuda import LoaderChecks
from fleetcheck.probe.parts.checks_toolchain import ToolchainChecks
from fleetcheck.probe.parts.checks_torch import TorchChecks
from fleetcheck.probe.parts.checks_triton import TritonChecks
from fleetcheck.probe.parts.checks_workload import WorkloadChecks
from fleetcheck.probe.parts.evaluate import Evaluation
from fleetcheck.probe.parts.facts_amd import AmdFacts
from fleetcheck.probe.parts.facts_gpustate import GpuStateFacts
from fleetcheck.probe.parts.facts_libcuda import LibcudaFacts
from fleetcheck.probe.parts.facts_toolchain import ToolchainFacts
from fleetcheck.probe.parts.frameworks import Frameworks
from fleetcheck.probe.parts.gather import Gather


class Probe(
        LibcudaFacts,
        AmdFacts,
        ToolchainFacts,
        Gather,
        DriverChecks,
        TorchChecks,
        ToolchainChecks,
        LoaderChecks,
        CacheChecks,
        TritonChecks,
        FlaChecks,
        WorkloadChecks,
        HipChecks,
        GpuStateFacts,
        GpuStateChecks,
        Frameworks,
        Evaluation,
):
    """Gathers facts concurrently, then evaluates every check in causal order."""

    def __init__(self, deep, deadline, workload_python, tmp):
        self.deep = deep
        self.deadline = deadline
        self.tmp = tmp
        self.env = dict(os.environ)
        self.workload_python = workload_python or sys.executable
        self.facts = {}
        self.data = {}
