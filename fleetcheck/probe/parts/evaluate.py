"""Evaluation: every check in causal order, the warm-cache masking, the node's verdict."""

import re

from fleetcheck.probe.parts.base import Part, bounded, clip, clip_head, error_text, first_line
from fleetcheck.probe.parts.catalogue import (
    CHECK_IDS,
    CUDA_ONLY,
    HIP_ONLY,
    MASKABLE,
    NODE_ONLY,
    STACK_DEPENDENT,
    TOOLCHAIN_CAUSES,
    TRITON_DEPENDENT,
    cause_label,
    check_method,
    fill_fix,
)
from fleetcheck.probe.parts.classify import message_causes
from fleetcheck.probe.parts.diagnose import diagnoses
from fleetcheck.probe.parts.facts_toolchain import install_hint
from fleetcheck.probe.parts.objects import (
    LIMIT_CAUSES,
    cuda_limit,
    explain,
    limit_values,
    limited,
    near,
    parse_oserror,
    read_limits,
)
from fleetcheck.probe.parts.spawn import LIMIT_ERRNOS, oom_kills


class Evaluation(Part):
    """Runs the checks in CHECK_IDS order and derives the Triton verdict."""

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

    def stack_error(self):
        """(error, ...) for a check the workload's stack never answered: it could not start,
        timed out or failed; a limit of the job's that stopped it is named, with its fix."""
        result = self.stack_result
        evidence = {"python": self.workload_python, "stderr": clip(result["stderr"]),
                    "rc": result["rc"]}
        limit = self.helper_limit(result)
        if limit:
            return self.limit_stopped("the workload interpreter", result, limit[0], limit[1],
                                      evidence)
        if result["timed_out"]:
            summary = "the workload's Python stack did not answer within the deadline (%.1f s)" % (
                result["seconds"])
        elif result["error"]:
            summary = "cannot run the workload interpreter: " + result["error"]
        else:
            summary = "the workload interpreter failed: " + (
                first_line(result["stderr"].splitlines()[-1] if result["stderr"] else "")
                or "rc %s" % result["rc"])
            # The interpreter itself failed for a limit (no thread, no memory, no file).
            tail = result["stderr"][-4000:] if result["rc"] else ""
            parsed = parse_oserror(first_line(tail.splitlines()[-1] if tail.strip() else "")
                                   ) or parse_oserror(tail)
            named = self.limit_named(parsed["errno"]) if parsed else None
            if named:
                return ("error", summary + self.limit_note(*named), self.cause_fix(*named),
                        dict(evidence, matches=named[0], object=named[1]))
        return ("error", summary, "", evidence)

    def stage_missing(self, stage):
        """(error, ...) for a stage the stack never reported: it timed out or crashed before
        (killed by the OOM killer under the job's memory.max: that limit, with its fix)."""
        result = self.stack_result
        evidence = {"stderr": clip(result["stderr"]), "rc": result["rc"]}
        limit = self.helper_limit(result)
        if limit:
            return self.limit_stopped("the workload interpreter", result, limit[0], limit[1],
                                      evidence, step=stage)
        if result["timed_out"]:
            summary = "timed out before %s finished (deadline %.1f s)" % (
                stage, self.deadline.end - self.deadline.start)
        else:
            summary = "%s did not report (workload interpreter exited with rc %s)" % (
                stage, result["rc"])
        return ("error", summary, "", evidence)

    def probe_fault(self, step, failure, evidence):
        """(error, ...) for a step that failed in the probe's own code (its instrumentation of
        the workload's, or an API this release lacks): the probe's error, never a cause of the
        workload's, so the verdict is unknown rather than a false cpu-fallback."""
        evidence = dict(evidence, probe_step=failure.get("probe_step"),
                        probe_error=failure.get("error"), matches=None)
        return ("error", "%s: the probe's own step %s() failed (%s); the workload's Triton "
                "was not judged" % (step, failure.get("probe_step"), first_line(
                    failure.get("error"))), "", evidence)

    def hardware_evidence(self):
        if self.vendor == "amd":
            return bool(self.amd["kfd_gpus"] or (self.hip_info.get("count") or 0) > 0)
        numbered = [n for n in self.dev_names if re.match(r"^nvidia\d+$", n)]
        return bool(self.proc["gpus"] or numbered or self.smi_info.get("gpus")
                    or (self.cuda_info.get("count") or 0) > 0)

    def cause_label(self, cause):
        """The short name of a root cause, in the node's vendor's terms."""
        return cause_label(cause, self.vendor)

    def node_limits(self):
        if getattr(self, "limits", None) is None:
            self.limits = read_limits()
        return self.limits

    def fix_context(self, values=None):
        """The node's values a cause's fix is filled with, and the object's or limit's."""
        python = self.facts["python"].get("executable") or self.workload_python
        os_id, version = self.facts["os"].get("id"), self.facts["python"].get("version")
        context = {"python": python, "pip": "%s -m pip" % python,
                   "library": getattr(self, "hip_info", {}).get("path")
                   or "/opt/rocm/lib/libamdhip64.so",
                   "triton": (self.facts.get("triton") or {}).get("version"),
                   "torch": (self.facts.get("torch") or {}).get("version"),
                   "cache_dir": self.facts.get("triton_cache_dir"),
                   "tmp_dir": (self.stages.get("own") or {}).get("gcc_tmp"),
                   "dists": " ".join(d.get("name") or "" for d in self.stages.get(
                       "meta", {}).get("triton_dists") or []) or "triton"}
        for key, what in (("pkg_cc", "compiler"), ("pkg_libc", "libc"),
                          ("pkg_python", "python")):
            line = install_hint(os_id, version, what).split()
            context["install"], context[key] = " ".join(line[:3]), " ".join(line[3:])
        try:
            context["libcuda_dir"] = self.libcuda_dir()
        except Exception:
            pass
        context.update(values or {})
        return context

    def cause_fix(self, cause, values=None):
        """A cause's fix, filled with this node's values ('' for no cause)."""
        override = self.ptxas_override_fix() if cause == "triton_too_old_for_gpu" else ""
        if override:
            return override  # the override is the object, not the release
        return fill_fix(cause, self.fix_context(values)) if cause else ""

    def limit_named(self, errno_name):
        """(cause, values) of a limit set on this job that explains `errno_name`, or None."""
        for cause, values in explain(errno_name, None, "", None, self.node_limits()):
            if "limit" in values:
                return cause, values
        return None

    def helper_limit(self, result):
        """(cause, values) of the job's limit that stopped one of the probe's own processes
        (`result`: Spawned.result()): the errno that refused its start (EAGAIN, EMFILE, ENFILE,
        ENOMEM), or a SIGKILL by the cgroup's OOM killer (its memory.events oom_kill count rose;
        without the count, memory.max set and its use or peak within a tenth of it); None
        when no limit set explains it."""
        if not result or result.get("timed_out"):
            return None
        if result.get("errno") in LIMIT_ERRNOS:
            return self.limit_named(result["errno"])
        if result.get("rc") != -9:
            return None
        name, limit = limited(self.node_limits(), "memory.max")
        if name and (result.get("oom_kill") or (oom_kills() is None and near(limit))):
            values = dict(limit_values(name, limit), oom_kill="%s -> %s" % tuple(
                result["oom_kill"]) if result.get("oom_kill") else "not counted")
            return "memory_cgroup_limit", values
        return None

    def cuda_os_limit(self, code):
        """(cause, values) of a tight limit of the job's that explains a CUDA initialisation
        error `code` (304: an OS call the driver made failed; 100: no device, with the device
        nodes opening fine), or None: objects.cuda_limit. For check_zero_active_drivers
        (cuInit's code) and check_torch_cuda (the code in torch's warning), beside 2 ->
        limit_named("ENOMEM")."""
        return cuda_limit(code, self.node_limits(),
                          self.statuses.get("dev_nodes_missing") == "pass")

    def limit_note(self, cause, values):
        """'; LABEL: LIMIT = VALUE (where it comes from)' for a summary."""
        return "; %s: %s = %s (%s)" % (self.cause_label(cause), values.get("limit"),
                                       values.get("value"), values.get("source"))

    def limit_stopped(self, what, result, cause, values, evidence, step=""):
        """(error, ...) for a check the probe could not evaluate: its own process `what` was
        stopped by the job's limit (a start refused, or the OOM killer under memory.max: the
        probe's processes needed more than the limit left). The workload itself was not
        judged: the limit is named, with the fix that raises it. step: the stage that did not
        report."""
        before = " before %s reported" % step if step else ""
        if result.get("errno") and result.get("alone"):
            how = ("this job cannot start a process: the probe, holding no other, could not "
                   "start %s%s (%s)" % (what, before, first_line(result["error"])))
        elif result.get("errno"):
            how = "the probe could not start %s%s while its other helpers ran (%s)" % (
                what, before, first_line(result["error"]))
        else:
            how = ("%s was killed by the cgroup's OOM killer%s (rc -9, oom_kill %s): the probe "
                   "needed more memory than the limit left, the workload itself is untested" % (
                       what, before, values.get("oom_kill")))
        evidence = dict(evidence, matches=cause, object=values, errno=result.get("errno"),
                        oom_kill=result.get("oom_kill"))
        return ("error", "not evaluated: " + how + self.limit_note(cause, values),
                self.cause_fix(cause, values), evidence)

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

    def object_note(self, cause, values):
        """'; LABEL: the object or limit' for a summary ('' when the cause names none)."""
        if not values or not cause:
            return ""
        if values.get("limit"):
            what = "%s = %s" % (values["limit"], values.get("value"))
        elif values.get("target"):
            what = "%s -> %s (missing)" % (values.get("component"), values["target"])
        elif values.get("owner"):
            what = "%s (owner %s)" % (values.get("component"), values["owner"])
        else:
            what = values.get("component") or values.get("library") or ""
        return "; %s: %s" % (self.cause_label(cause), what) if what else ""

    def name_failure(self, failure, places, more=""):
        """(cause, line, values) of a failed step: the first cause its message, errno, object
        or limit names whose own check did not pass; (None, line, {}) when none does."""
        found = diagnoses(failure, places, {"mountinfo": getattr(self, "mountinfo", None),
                                            "limits": self.node_limits()})
        if more:
            found += diagnoses({"error": more}, places, {"mountinfo": getattr(
                self, "mountinfo", None), "limits": self.node_limits()})
        # The causes the failing tool's own message names (its text, not an errno or an
        # object of ours): they beat a check of ours that passed, which searched otherwise
        # than this release does (a user site Triton 3.0 never looks in, a library torch
        # mapped but Triton does not find).
        told = set()
        for text in [failure.get("error"), more] + [
                r.get("stderr") for r in failure.get("compiler") or [] if isinstance(r, dict)]:
            told |= {cause for cause, _ in message_causes(text or "")}
        for cause, line, values in found:
            # A check that ran and passed has shown its cause is not there...
            if self.statuses.get(cause) != "pass":
                return cause, line, values
            if cause in told:  # ...unless the tool's own message names it
                return cause, line, dict(values, **self.message_object(cause, line))
        runs = [r for r in failure.get("compiler") or [] if r.get("rc") or r.get("error")]
        line = first_line((runs[-1].get("stderr") or runs[-1].get("error")) if runs else
                          failure.get("error"))
        return None, line, {}

    def message_object(self, cause, line):
        """What a message names beside what our own check of its cause found: the values
        its fix is filled with, and the evidence of both searches."""
        values = {"check_passed": True, "message": line}
        if cause == "libamdhip64_not_found":
            tried = re.search(r"attempted paths (\[.*\])", line or "")
            values["searched"] = tried.group(1) if tried else None
            values["check_searched"] = self.hip_info.get("search")
            if self.hip_info.get("path"):
                values["library"] = self.hip_info["path"]
        return values

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
