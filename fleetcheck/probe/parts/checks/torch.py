"""Checks of PyTorch: its CUDA against the driver, the GPUs it sees, its arch list."""

import re

from fleetcheck.probe.parts.core.base import first_line, version_tuple
from fleetcheck.probe.parts.evaluation.findings import Findings


def arch_supported(arch_list, cap):
    """Whether torch's arch list runs on compute capability `cap` (SASS or PTX JIT)."""
    major, minor = cap
    for arch in arch_list:
        match = re.match(r"^(sm|compute)_(\d+)(\d)([af]?)$", arch)
        if not match:
            continue
        kind, a_major, a_minor, suffix = match.group(1), int(match.group(2)), int(
            match.group(3)), match.group(4)
        if kind == "sm" and a_major == major and a_minor <= minor and (
                not suffix or a_minor == minor):
            return True
        if kind == "compute" and not suffix and (a_major, a_minor) <= (major, minor):
            return True
    return False


class TorchChecks(Findings):
    """The PyTorch checks."""

    def torch_info(self):
        return self.stages.get("torch") or {}

    def torch_imported(self, *extra):
        """(None, torch's stage, the check's evidence), or (the check's result, None, None)
        where PyTorch is not installed, its import did not report or failed."""
        torch = self.torch_info()
        if not self.stages.get("meta", {}).get("torch_dir"):
            return ("skip", "PyTorch not installed", "", {}), None, None
        if not torch:
            return self.stage_missing("import torch"), None, None
        evidence = {key: torch.get(key) for key in ("version", *extra, "cuda", "cuda_available",
                                                     "device_count", "import_s", "warnings",
                                                     "error")}
        if torch.get("error"):
            return ("fail", "import torch failed: " + first_line(torch["error"]),
                    "reinstall PyTorch for %s" % self.workload_python, evidence), None, None
        return None, torch, evidence

    def check_driver_too_old(self):
        meta = self.stages.get("meta", {})
        torch_cuda = self.torch_info().get("cuda") or meta.get("torch_cuda")
        driver = self.facts["driver"]["cuda_driver_version"]
        evidence = {"torch_cuda": torch_cuda, "driver_cuda": driver}
        if not meta.get("torch_dir"):
            return ("skip", "PyTorch not installed", "", evidence)
        if not torch_cuda or not driver:
            return ("skip", "cannot compare: torch CUDA %s, driver CUDA %s" % (
                torch_cuda, driver), "", evidence)
        need, have = version_tuple(torch_cuda)[:2], version_tuple(driver)[:2]
        fix = "upgrade the NVIDIA driver to one supporting CUDA %s, or install a torch built " \
              "for CUDA %s" % (torch_cuda, driver)
        if have[:1] < need[:1]:
            return ("fail", "driver supports CUDA %s, torch needs CUDA %s" % (driver, torch_cuda),
                    fix, evidence)
        if have < need:
            return ("warn", "driver supports CUDA %s, torch is built for %s (minor-version "
                    "compatibility only)" % (driver, torch_cuda), fix, evidence)
        return ("pass", "driver CUDA %s >= torch CUDA %s" % (driver, torch_cuda), "", evidence)

    def check_torch_cuda(self):
        result, torch, evidence = self.torch_imported()
        if result:
            return result
        if not torch.get("cuda"):
            return ("fail", "CPU-only PyTorch build (torch %s)" % torch.get("version"),
                    "install a CUDA build of torch, e.g. %s -m pip install torch --index-url "
                    "https://download.pytorch.org/whl/cu128" % self.workload_python, evidence)
        if not torch.get("cuda_available"):
            warning = first_line((torch.get("warnings") or [""])[0])
            # torch's warning carries the CUDA error code ("Error 304: OS call failed"): under
            # a tight limit of the job's, that limit is the cause.
            code = re.search(r"\bError (\d+):", warning or "")
            limit = self.limit_named("ENOMEM") if code and code.group(1) == "2" else (
                self.cuda_os_limit(int(code.group(1))) if code else None)
            if limit:
                evidence["matches"] = limit[0]
                return ("fail", "torch.cuda.is_available() is False: %s under the job's %s of "
                        "%s" % (warning, limit[1]["limit"], limit[1]["value"]),
                        self.cause_fix(*limit), evidence)
            return ("fail", "torch.cuda.is_available() is False" + (
                ": " + warning if warning else ""),
                "fix the driver layer (device nodes, driver, CUDA_VISIBLE_DEVICES)", evidence)
        count = torch.get("device_count") or 0
        if count < len(self.gpus):
            return ("warn", "torch sees %d of %d GPUs (CUDA_VISIBLE_DEVICES=%s)" % (
                count, len(self.gpus), self.env.get("CUDA_VISIBLE_DEVICES")), "", evidence)
        return ("pass", "torch %s (CUDA %s) sees %d GPU(s)" % (
            torch.get("version"), torch.get("cuda"), count), "", evidence)

    def check_torch_lacks_arch(self):
        torch = self.torch_info()
        arch_list = torch.get("arch_list") or []
        caps = self.capabilities()
        evidence = {"arch_list": arch_list, "gpu_capabilities": ["%d.%d" % c for c in caps]}
        if not self.stages.get("meta", {}).get("torch_dir"):
            return ("skip", "PyTorch not installed", "", evidence)
        if not arch_list or not caps:
            return ("skip", "arch list or compute capability unknown", "", evidence)
        missing = [cap for cap in caps if not arch_supported(arch_list, cap)]
        if missing:
            sm = ", ".join("sm_%d%d" % cap for cap in missing)
            return ("fail", "torch %s has no kernels for %s (built for %s)" % (
                torch.get("version"), sm, " ".join(arch_list)),
                "install a torch build that includes %s (cu128 or newer wheels for "
                "Blackwell)" % sm, evidence)
        return ("pass", "torch built for %s" % ", ".join("sm_%d%d" % c for c in caps), "",
                evidence)
