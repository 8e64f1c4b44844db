"""What every check reports with: a cause's fix filled for this node, the failed step named
(name_failure), the stack's stage that never reported, a limit that stopped a helper."""

import re

from fleetcheck.probe.parts.catalogue import fill_fix
from fleetcheck.probe.parts.core.base import clip, first_line
from fleetcheck.probe.parts.evaluation.classify import message_causes
from fleetcheck.probe.parts.evaluation.diagnose import diagnoses
from fleetcheck.probe.parts.evaluation.objects import parse_oserror
from fleetcheck.probe.parts.facts.libcuda import LibcudaFacts
from fleetcheck.probe.parts.facts.ptxas import PtxasFacts
from fleetcheck.probe.parts.facts.toolchain import install_hint


class Findings(PtxasFacts, LibcudaFacts):
    """The helpers of the check families (checks/) and the verdict: each result they build
    names its cause, its fix and what stopped it the same way."""

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

    def fix_context(self, values=None):
        """The node's values a cause's fix is filled with, and the object's or limit's."""
        python = self.facts["python"].get("executable") or self.workload_python
        os_id, version = self.facts["os"].get("id"), self.facts["python"].get("version")
        context = {"python": python, "pip": "%s -m pip" % python,
                   "library": self.hip_info.get("path")
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

    def compile_fix(self, what):
        return install_hint(self.facts["os"].get("id"), self.facts["python"].get("version"), what)

    def cause_fix(self, cause, values=None):
        """A cause's fix, filled with this node's values ('' for no cause)."""
        override = self.ptxas_override_fix() if cause == "triton_too_old_for_gpu" else ""
        if override:
            return override  # the override is the object, not the release
        return fill_fix(cause, self.fix_context(values)) if cause else ""

    def ptxas_override_fix(self):
        """The fix naming that override and its value; '' where there is none."""
        found = self.ptxas_override_too_old()
        if not found:
            return ""
        key, tool, cap, need = found
        own = self.ptxas_tools().get("ptxas") or {}
        return ("unset %s (now %s, ptxas %s) in the workload's environment, so Triton runs its "
                "own ptxas%s; or point it at a ptxas of CUDA >= %d.%d, which knows sm_%d%d" % (
                    key, tool.get("path"), tool.get("version"),
                    " %s" % own["version"] if own.get("version") else "", need[0], need[1],
                    cap[0], cap[1]))

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
        found = diagnoses(failure, places, {"mountinfo": self.mountinfo,
                                            "limits": self.node_limits()})
        if more:
            found += diagnoses({"error": more}, places, {"mountinfo": self.mountinfo,
                                                         "limits": self.node_limits()})
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
