"""Evaluation: every check in causal order, the warm-cache masking, the node's verdict."""

import re

from fleetcheck.probe.parts.base import Part, bounded, clip, clip_head, error_text, first_line
from fleetcheck.probe.parts.catalogue import (
    CAUSE_LABELS,
    CHECK_IDS,
    CUDA_ONLY,
    GPU_STATE_IDS,
    HIP_CAUSE_LABELS,
    HIP_ONLY,
)
from fleetcheck.probe.parts.diagnose import DIAGNOSIS_LABELS, TOOLCHAIN_CAUSES

#: Checks that need the workload's Python stack to have answered at all.
STACK_DEPENDENT = frozenset({
    "torch_cuda", "torch_lacks_arch", "triton_installed", "triton_2x", "triton_backends",
    "libcuda_unversioned_missing", "ptxas_missing", "ptxas_override_unparsed",
    "triton_too_old_for_gpu", "triton_target", "stale_cache_masks_compiler",
    "blackwell_no_allocator", "fla_fallback_hidden", "driver_too_old",
    "driver_too_old_for_bundled_ptxas", "libamdhip64_other_rocm", "cache_dir_full",
    "tmp_dir_unusable", "triton_own_path", "workload_env", "inductor_ready",
})

#: Checks that only matter when Triton is installed.
TRITON_DEPENDENT = frozenset(CHECK_IDS[CHECK_IDS.index("triton_2x"):CHECK_IDS.index(
    "blackwell_no_allocator")])


#: Checks of one framework's own way (torch.compile): a failure fails the node, not Triton's
#: verdict (Triton itself runs on the GPU).
FRAMEWORK_ONLY = frozenset({"inductor_ready"}) | GPU_STATE_IDS

#: Toolchain failures a warm cache hides (a cached stub skips cc, headers and the link).
MASKABLE = frozenset({"cc_env_invalid", "no_c_compiler", "no_linker", "libc_headers_missing",
                      "python_headers_missing", "libcuda_unversioned_missing", "triton_target"})


class Evaluation(Part):
    """Runs the checks in CHECK_IDS order and derives the Triton verdict."""

    def run_checks(self):
        meta = self.stages.get("meta", {})
        self.no_gpu = not self.hardware_evidence()
        self.triton_missing = not meta.get("triton_dir")
        self.stack_failed = "meta" not in self.stages
        checks = []
        # Each vendor's document holds the shared checks and its own: an NVIDIA (or GPU-less)
        # node's is what it was before AMD support; an AMD node's shared checks answer for HIP.
        left_out = CUDA_ONLY if self.vendor == "amd" else HIP_ONLY
        for check_id in CHECK_IDS:
            if check_id in left_out:
                continue
            method = "check_" + check_id
            if self.vendor == "amd" and hasattr(self, method + "_hip"):
                method += "_hip"
            try:
                if self.no_gpu and check_id != "gpu_present":
                    result: tuple = ("skip", "not evaluated: no %s GPU on this node" % (
                        "AMD" if self.vendor == "amd" else "NVIDIA"), "", {})
                elif (self.stack_failed and check_id in STACK_DEPENDENT):
                    result = self.stack_error()
                elif (self.triton_missing and check_id in TRITON_DEPENDENT):
                    result = ("skip", "not evaluated: Triton is not installed", "", {})
                else:
                    result = getattr(self, method)()
            except Exception as exc:
                result = ("error", "check failed inside the probe: " + error_text(exc), "",
                          {"exception": error_text(exc)})
            status, summary, fix, evidence = result
            checks.append({"id": check_id, "status": status, "summary": clip_head(summary, 400),
                           "fix": clip_head(fix, 600), "evidence": bounded(evidence)})
        self.apply_masking(checks)
        return checks

    def stack_error(self):
        result = self.stack_result
        if result["timed_out"]:
            summary = "the workload's Python stack did not answer within the deadline (%.1f s)" % (
                result["seconds"])
        elif result["error"]:
            summary = "cannot run the workload interpreter: " + result["error"]
        else:
            summary = "the workload interpreter failed: " + (
                first_line(result["stderr"].splitlines()[-1] if result["stderr"] else "")
                or "rc %s" % result["rc"])
        return ("error", summary, "", {"python": self.workload_python,
                                       "stderr": clip(result["stderr"]), "rc": result["rc"]})

    def stage_missing(self, stage):
        """(error, ...) for a stage the stack never reported: it timed out or crashed before."""
        result = self.stack_result
        if result["timed_out"]:
            summary = "timed out before %s finished (deadline %.1f s)" % (
                stage, self.deadline.end - self.deadline.start)
        else:
            summary = "%s did not report (workload interpreter exited with rc %s)" % (
                stage, result["rc"])
        return ("error", summary, "", {"stderr": clip(result["stderr"]), "rc": result["rc"]})

    def hardware_evidence(self):
        if self.vendor == "amd":
            return bool(self.amd["kfd_gpus"] or (self.hip_info.get("count") or 0) > 0)
        numbered = [n for n in self.dev_names if re.match(r"^nvidia\d+$", n)]
        return bool(self.proc["gpus"] or numbered or self.smi_info.get("gpus")
                    or (self.cuda_info.get("count") or 0) > 0)

    def cause_label(self, cause):
        """The short name of a root cause, in the node's vendor's terms."""
        if self.vendor == "amd" and cause in HIP_CAUSE_LABELS:
            return HIP_CAUSE_LABELS[cause]
        return CAUSE_LABELS.get(cause) or DIAGNOSIS_LABELS.get(cause, cause)

    def apply_masking(self, checks):
        """A warm cache that hides a toolchain failure makes those failures warnings."""
        stale = next(c for c in checks if c["id"] == "stale_cache_masks_compiler")
        if stale["status"] != "warn":
            return
        for check in checks:
            masked = check["id"] in MASKABLE or (
                check["id"] == "triton_own_path"
                and (check["evidence"] or {}).get("matches") in TOOLCHAIN_CAUSES | {None})
            if masked and check["status"] == "fail":
                check["status"] = "warn"
                check["summary"] = clip_head(
                    check["summary"] + " (hidden by the warm Triton cache)", 440)

    def verdict(self, checks):
        """(triton verdict dict, status, reason) from the checks in causal order."""
        by_id = {c["id"]: c for c in checks}
        fails = [c for c in checks if c["status"] == "fail"]
        errors = [c for c in checks if c["status"] == "error"]
        warns = [c for c in checks if c["status"] == "warn"]
        target = self.stages.get("target") or {}
        backend = (target.get("target") or {}).get("backend") if target.get("ok") else None
        if self.no_gpu:
            triton = {"verdict": "no-gpu", "backend": None, "cause": None, "fix": ""}
        elif self.triton_missing and not self.stack_failed:
            check = by_id["triton_installed"]
            triton = {"verdict": "not-installed", "backend": None, "cause": "triton_installed",
                      "fix": check["fix"]}
        elif any(c["id"] not in FRAMEWORK_ONLY for c in fails):
            first = next(c for c in fails if c["id"] not in FRAMEWORK_ONLY)
            cause = first["id"]
            if cause in ("triton_target", "triton_own_path", "triton_kernel", "triton_backends",
                         "fla_fallback_hidden"):
                cause = (first["evidence"] or {}).get("matches") or cause
            fix = first["fix"] or by_id.get(cause, {}).get("fix") or ""
            triton = {"verdict": "cpu-fallback", "backend": None, "cause": cause,
                      "fix": "%s: %s" % (self.cause_label(cause), fix) if fix else ""}
        elif by_id["stale_cache_masks_compiler"]["status"] == "warn":
            stale = by_id["stale_cache_masks_compiler"]
            triton = {"verdict": "gpu", "backend": "hip" if self.vendor == "amd" else "cuda",
                      "cause": "stale_cache_masks_compiler",
                      "fix": "%s: %s" % (CAUSE_LABELS["stale_cache_masks_compiler"], stale["fix"])}
        elif target.get("ok"):
            triton = {"verdict": "gpu", "backend": backend, "cause": None, "fix": ""}
        else:
            first = errors[0] if errors else by_id["triton_target"]
            triton = {"verdict": "unknown", "backend": None, "cause": first["id"], "fix": ""}
        if fails:
            status = "fail"
            if triton["verdict"] == "cpu-fallback":
                reason = "Triton cpu-fallback: " + next(
                    c for c in fails if c["id"] not in FRAMEWORK_ONLY)["summary"]
            else:
                reason = fails[0]["summary"]
        elif errors or triton["verdict"] == "unknown":
            status = "error"
            reason = (errors[0]["summary"] if errors else "Triton verdict unknown")
        elif warns:
            status = "warn"
            reason = warns[0]["summary"]
        else:
            status = "ok"
            reason = "Triton %s" % triton["verdict"] + (" (%s)" % backend if backend else "")
        return triton, status, clip_head(reason, 400)
