"""The Probe: the gathering, every check family and the evaluation in one object."""

from fleetcheck.probe.parts.checks.cache import CacheChecks
from fleetcheck.probe.parts.checks.driver import DriverChecks
from fleetcheck.probe.parts.checks.fla import FlaChecks
from fleetcheck.probe.parts.checks.gpustate import GpuStateChecks
from fleetcheck.probe.parts.checks.hip import HipChecks
from fleetcheck.probe.parts.checks.libcuda import LoaderChecks
from fleetcheck.probe.parts.checks.packages import PackageChecks
from fleetcheck.probe.parts.checks.toolchain import ToolchainChecks
from fleetcheck.probe.parts.checks.torch import TorchChecks
from fleetcheck.probe.parts.checks.triton import TritonChecks
from fleetcheck.probe.parts.checks.workload import WorkloadChecks
from fleetcheck.probe.parts.evaluation.frameworks import Frameworks
from fleetcheck.probe.parts.evaluation.verdict import Evaluation
from fleetcheck.probe.parts.facts.gather import Gather


class Probe(
        Gather,
        DriverChecks,
        PackageChecks,
        ToolchainChecks,
        LoaderChecks,
        CacheChecks,
        TritonChecks,
        FlaChecks,
        HipChecks,
        GpuStateChecks,
        Frameworks,
        TorchChecks,
        WorkloadChecks,
        Evaluation,
):
    """Gathers facts concurrently, then evaluates every check in causal order. Its state is
    ProbeState's (core/state.py); each base is a class over it, a subclass of the classes
    whose methods it calls (a subclass before its bases here)."""
