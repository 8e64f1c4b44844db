"""Checks of flash-linear-attention: its device detection and Blackwell's allocator."""

import re

from fleetcheck.probe.parts.core.base import first_line, version_tuple
from fleetcheck.probe.parts.core.stages import FLA_LAYOUTS
from fleetcheck.probe.parts.evaluation.findings import Findings


class FlaChecks(Findings):
    """The flash-linear-attention checks."""

    def check_blackwell_no_allocator(self):
        meta = self.stages.get("meta", {})
        caps = self.capabilities()
        blackwell = [c for c in caps if c[0] in (10, 12)]
        evidence = {"fla_version": meta.get("fla_version"),
                    "gpu_capabilities": ["%d.%d" % c for c in caps]}
        if not meta.get("fla_dir"):
            return ("skip", "flash-linear-attention not installed", "", evidence)
        if not blackwell:
            return ("pass", "not a Blackwell GPU", "", evidence)
        version = version_tuple(meta.get("fla_version"))
        fla = self.stages.get("fla") or {}
        if version and version < (0, 5, 0):
            return ("fail", "FLA %s registers no Triton allocator on Blackwell" % (
                meta.get("fla_version")), "upgrade flash-linear-attention to >= 0.5.1", evidence)
        if fla.get("device_platform") == "cpu":
            return ("fail", "FLA fell back to CPU, so no allocator is set on Blackwell",
                    "fix the fallback (see fla_fallback_hidden)", evidence)
        return ("pass", "FLA %s sets an allocator on Blackwell" % meta.get("fla_version"), "",
                evidence)

    def check_fla_fallback_hidden(self):
        meta = self.stages.get("meta", {})
        if not meta.get("fla_dir"):
            return ("skip", "flash-linear-attention not installed", "", {})
        fla = self.stages.get("fla")
        if fla is None:
            return self.stage_missing("FLA's device detection")
        target = self.stages.get("target") or {}
        evidence = {"version": meta.get("fla_version"), "layout": fla.get("layout"),
                    "module": fla.get("module"), "device_platform": fla.get("device_platform"),
                    "warnings": fla.get("warnings"), "swallowed": fla.get("swallowed"),
                    "error": fla.get("error"), "seconds": fla.get("seconds"),
                    "triton_error": target.get("error")}
        version = meta.get("fla_version") or "?"
        evidence["unmet"] = fla.get("unmet")
        if fla.get("error") and fla.get("layout") != "unknown":
            # FLA's own module raised at import: the workload's `import fla...` raises the same.
            evidence["matches"] = "fla_import_fails"
            missing = re.search(r"No module named '([^']+)'", fla["error"])
            return ("fail", "FLA %s: import %s fails: %s" % (
                version, fla.get("module"), first_line(fla["error"])),
                "%s -m pip install %s" % (self.workload_python, missing.group(1).split(".")[0])
                if missing and not missing.group(1).startswith("fla") else
                "install the torch and Triton this FLA supports, or the FLA release made for "
                "them (%s -m pip install -U flash-linear-attention)" % self.workload_python,
                evidence)
        if fla.get("unmet"):
            # What its kernels import at import time: `import fla.ops` (and every layer) fails.
            evidence["matches"] = "fla_import_fails"
            first = fla["unmet"][0]
            return ("fail", "FLA %s cannot import its kernels: %s requires %s (%s)" % (
                version, first["dist"], first["requires"], first["problem"]) + (
                    "; %d more unmet" % (len(fla["unmet"]) - 1) if len(fla["unmet"]) > 1
                    else ""),
                "%s -m pip install %s" % (self.workload_python, " ".join(
                    "'%s'" % u["requires"] for u in fla["unmet"])), evidence)
        if fla.get("error"):
            if fla.get("layout") == "unknown":
                # A release newer than this probe: say so, never guess its verdict.
                return ("warn", "FLA %s: layout unknown to this probe (no %s); import fla.utils: "
                        "%s" % (version, ", ".join("fla/" + rel for rel, _ in FLA_LAYOUTS),
                                first_line(fla["error"])), "", evidence)
            return ("fail", "FLA %s: import %s failed: %s" % (
                version, fla.get("module"), first_line(fla["error"])),
                self.cause_fix("fla_import_fails"), evidence)
        if fla.get("device_platform") == "cpu" or fla.get("warnings"):
            warning = first_line((fla.get("warnings") or ["no warning"])[0])
            hidden = (fla.get("swallowed") or target.get("error")
                      or "not seen (FLA cached its verdict before the probe looked)")
            cause, _, values = self.name_failure({"error": fla.get("swallowed") or target.get(
                "error") or ""}, {})
            evidence["matches"] = cause
            return ("fail", "FLA %s falls back to CPU (device_platform=%s): %s; the exception "
                    "it swallowed: %s" % (version, fla.get("device_platform"), warning,
                                          first_line(hidden)),
                    self.cause_fix(cause or "fla_fallback_hidden", values), evidence)
        return ("pass", "FLA %s runs on the GPU (device_platform=%s, from fla/%s)" % (
            version, fla.get("device_platform"), fla.get("layout")), "", evidence)
