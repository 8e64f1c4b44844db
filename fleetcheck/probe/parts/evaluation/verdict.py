"""The verdict: every check in causal order, the warm-cache masking, the node's verdict."""

from fleetcheck.probe.parts.catalogue import (
    CHECK_IDS,
    CUDA_ONLY,
    HIP_ONLY,
    MASKABLE,
    NODE_ONLY,
    STACK_DEPENDENT,
    TOOLCHAIN_CAUSES,
    TRITON_DEPENDENT,
    check_method,
)
from fleetcheck.probe.parts.core.base import bounded, clip_head, error_text
from fleetcheck.probe.parts.evaluation.findings import Findings
from fleetcheck.probe.parts.evaluation.objects import LIMIT_CAUSES


class Evaluation(Findings):
    """Runs the checks in CHECK_IDS order (each a `check_<id>` method of a checks/ family,
    looked up by name on the Probe) and derives the Triton verdict."""

    def run_checks(self):
        meta = self.stages.get("meta", {})
        self.no_gpu = not self.hardware_evidence()
        self.triton_missing = not meta.get("triton_dir")
        self.stack_failed = "meta" not in self.stages
        checks = []
        self.statuses = {}
        self.facts["limits"] = self.node_limits()
        # Each vendor's document holds the shared checks and its own: an NVIDIA (or GPU-less)
        # node's is what it was before AMD support; an AMD node's shared checks answer for HIP.
        left_out = CUDA_ONLY if self.vendor == "amd" else HIP_ONLY
        for check_id in CHECK_IDS:
            if check_id in left_out:
                continue
            method = check_method(check_id)
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
            if status == "fail" and not fix:
                # Every failing check says what to change: its cause's record, for this node.
                fix = self.cause_fix((evidence or {}).get("matches") or check_id)
            self.statuses[check_id] = status
            checks.append({"id": check_id, "status": status, "summary": clip_head(summary, 400),
                           "fix": clip_head(fix, 600), "evidence": bounded(evidence)})
        self.apply_masking(checks)
        return checks

    def unknown_verdict(self, errors, first):
        """The unknown verdict when no check failed: where a limit of the job's stopped the
        probe's steps (an error check that names it), that limit is the cause, with the fix
        that raises it (the workload was not judged, so it is no cpu-fallback); else `first`,
        the first check that could not be evaluated, with no fix. verdict() calls it as
        `self.unknown_verdict(errors, errors[0] if errors else by_id["triton_target"])`."""
        for check in errors:
            named = (check.get("evidence") or {}).get("matches")
            if named in LIMIT_CAUSES:
                return {"verdict": "unknown", "backend": None, "cause": named,
                        "fix": "%s: %s" % (self.cause_label(named), check["fix"] or (
                            self.cause_fix(named)))}
        return {"verdict": "unknown", "backend": None, "cause": first["id"], "fix": ""}

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
                      "fix": check["fix"] or self.cause_fix("triton_installed")}
        elif any(c["id"] not in NODE_ONLY for c in fails):
            first = next(c for c in fails if c["id"] not in NODE_ONLY)
            cause = first["id"]
            named = (first["evidence"] or {}).get("matches")
            # The cause the failing step's message names; never one whose own check passed
            # (its fix would repair what is fine), unless the failing tool's own text names
            # it (name_failure: the check searched otherwise than this release does).
            told = ((first["evidence"] or {}).get("object") or {}).get("check_passed")
            if named and (by_id.get(named, {}).get("status") != "pass" or told):
                cause = named
            # The fix is the failing check's own, or the cause's record filled for this node:
            # never the fix of another check.
            fix = first["fix"] or self.cause_fix(cause)
            triton = {"verdict": "cpu-fallback", "backend": None, "cause": cause,
                      "fix": "%s: %s" % (self.cause_label(cause), fix) if fix else ""}
        elif by_id["stale_cache_masks_compiler"]["status"] == "warn":
            stale = by_id["stale_cache_masks_compiler"]
            triton = {"verdict": "gpu", "backend": "hip" if self.vendor == "amd" else "cuda",
                      "cause": "stale_cache_masks_compiler",
                      "fix": "%s: %s" % (self.cause_label("stale_cache_masks_compiler"),
                                         stale["fix"] or self.cause_fix(stale["id"]))}
        elif target.get("ok") and (by_id.get("triton_own_path") or {}).get("status") != "error":
            # gpu only with the proof through the workload's own state, not a fresh dir alone.
            triton = {"verdict": "gpu", "backend": backend, "cause": None, "fix": ""}
        else:
            # Unknown: a limit of the job's that stopped the probe's steps is named with its
            # value and the fix that raises it; else the first check not evaluated.
            triton = self.unknown_verdict(errors, errors[0] if errors else by_id["triton_target"])
        if fails:
            status = "fail"
            if triton["verdict"] == "cpu-fallback":
                reason = "Triton cpu-fallback: " + next(
                    c for c in fails if c["id"] not in NODE_ONLY)["summary"]
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
