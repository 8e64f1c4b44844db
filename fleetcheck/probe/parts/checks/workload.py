"""Checks of the workload's own path: its dirs judged where it runs, its environment, inductor.

They read the stack's `own` stage (scripts/workload.py: the workload's real
get_current_target() in throw-away subdirectories of its own cache and temp dirs, with every
compiler run's stderr), its `knobs` and `inductor` stages, and the environment table of
facts/env.py.
"""

from fleetcheck.probe.parts.core.base import first_line
from fleetcheck.probe.parts.evaluation.findings import Findings
from fleetcheck.probe.parts.facts.env import env_findings

#: Below this much free space (or these many free inodes) a real job's kernels may not fit:
#: one kernel writes ~30 KiB in 8 files, the stub ~32 KiB, autotuning a few hundred kernels.
LOW_SPACE_BYTES = 100 << 20
LOW_INODES = 2000

def mib(value):
    return "%.1f MiB" % (value / 1048576.0) if isinstance(value, int) else "?"


class WorkloadChecks(Findings):
    """The workload's own cache, temp dir and environment, and torch.compile's own path."""

    def own_stage(self):
        return self.stages.get("own") or {}

    def places(self):
        own = self.own_stage()
        tmp = [d for d in (own.get("python_tmp"), own.get("gcc_tmp"), self.env.get("TMPDIR"))
               if d]
        return {"cache": [d for d in (own.get("cache_dir"), own.get("probe_cache")) if d],
                "tmp": tmp, "include": [self.pyinfo.get("include") or ""],
                "cc": self.compiler.get("path") or self.env.get("CC")}

    def own_diagnosis(self):
        """(cause, line, values) of the own-path failure, or (None, '', {}) when it worked or
        did not run."""
        failure = self.own_stage().get("failure")
        if not failure or failure.get("probe_step"):
            return None, "", {}  # the probe's own error names no cause of the workload's
        return self.name_failure(failure, self.places())

    def check_cache_dir_full(self):
        own = self.own_stage()
        space = own.get("cache_space") or {}
        cache = own.get("cache_dir") or self.facts["triton_cache_dir"]
        evidence = {"cache_dir": cache, "space": space, "failure": own.get("failure"),
                    "reproduced": own.get("reproduced")}
        if not own:
            return ("skip", "the workload's own path was not tried", "", evidence)
        fix = self.cause_fix("cache_dir_full", {"mount": space.get("path") or cache,
                                                "cache_dir": cache})
        cause, line, _ = self.own_diagnosis()
        if cause == "cache_dir_full":
            return ("fail", "Triton cache %s is full: the workload's own build fails (%s); %s "
                    "free" % (cache, line, mib(space.get("free_bytes"))), fix, evidence)
        free, inodes = space.get("free_bytes"), space.get("free_inodes")
        if isinstance(inodes, int) and inodes < LOW_INODES and not (
                isinstance(free, int) and free < LOW_SPACE_BYTES):
            return ("warn", "Triton cache %s has %s inodes free (and %s): a job's kernels may "
                    "not fit" % (cache, inodes, mib(free)), self.cause_fix("fs_out_of_inodes", {
                        "mount": space.get("path") or cache, "free": mib(free)}), evidence)
        if isinstance(free, int) and free < LOW_SPACE_BYTES:
            return ("warn", "Triton cache %s has %s and %s inodes free: a job's kernels may "
                    "not fit" % (cache, mib(free), inodes), fix, evidence)
        return ("pass", "%s free for the Triton cache %s" % (mib(free), cache), "", evidence)

    def check_tmp_dir_unusable(self):
        own = self.own_stage()
        space = own.get("tmp_space") or {}
        evidence = {"TMPDIR": self.env.get("TMPDIR"), "python_tmp": own.get("python_tmp"),
                    "gcc_tmp": own.get("gcc_tmp"), "space": space,
                    "failure": own.get("failure")}
        if not own:
            return ("skip", "the workload's own path was not tried", "", evidence)
        where = own.get("gcc_tmp") or own.get("python_tmp") or "the temp dir"
        fix = self.cause_fix("tmp_dir_unusable", {"tmp_dir": where})
        cause, line, _ = self.own_diagnosis()
        if cause == "tmp_dir_unusable":
            return ("fail", "the workload's temp dir %s is unusable: its own build fails (%s)" % (
                where, line), fix, evidence)
        free = space.get("free_bytes")
        if isinstance(free, int) and free < LOW_SPACE_BYTES:
            return ("warn", "temp dir %s has %s free: Triton's builds write there" % (
                where, mib(free)), fix, evidence)
        tmpdir = self.env.get("TMPDIR")
        if tmpdir and own.get("python_tmp") and own["python_tmp"] != tmpdir:
            return ("warn", "TMPDIR=%s is not usable: Python falls back to %s, gcc uses %s" % (
                tmpdir, own["python_tmp"], own.get("gcc_tmp")), fix, evidence)
        return ("pass", "temp dir %s (%s free)" % (where, mib(free)), "", evidence)

    def check_triton_own_path(self):
        if "own" not in self.stages:
            if "target" in self.stages:
                return ("skip", "not tried: " + (self.stages.get("own-skip") or {}).get(
                    "why", "no Triton target stage"), "", {})
            return self.stage_missing("the workload's own get_current_target()")
        own = self.own_stage()
        evidence = {key: own.get(key) for key in ("cache_dir", "probe_cache", "python_tmp",
                                                  "gcc_tmp", "failure", "reproduced")}
        if own.get("ok"):
            target = own.get("target") or {}
            return ("pass", "get_current_target() = %s:%s in the workload's own cache %s and "
                    "temp dir %s" % (target.get("backend"), target.get("arch"),
                                     own.get("cache_dir"), own.get("gcc_tmp")), "", evidence)
        failure = own.get("failure") or {}
        if failure.get("probe_step"):
            return self.probe_fault("the workload's own get_current_target()", failure,
                                    evidence)
        cause, line, values = self.own_diagnosis()
        evidence["matches"] = cause
        evidence["object"] = values or None
        evidence["message"] = line or first_line(failure.get("error"))
        runs = [r for r in failure.get("compiler") or [] if r.get("rc") or r.get("error")]
        if runs:
            evidence["compiler_stderr"] = runs[-1].get("stderr")
            evidence["compiler_argv"] = runs[-1].get("argv")
        fix = self.cause_fix(cause, values) if cause else (
            "no known cause matches (%s): run the workload's get_current_target() as its "
            "user with the same environment to investigate" % (
                line or first_line(failure.get("error"))))
        told = first_line(failure.get("error"))
        return ("fail", "the workload's own get_current_target() fails: %s%s" % (
            "%s (%s)" % (line, failure.get("type") or "error") if line and line not in told
            else told, self.object_note(cause, values)), fix, evidence)

    def installed_libraries(self):
        meta = self.stages.get("meta", {})
        found = {"triton"} if meta.get("triton_dir") else set()
        if meta.get("torch_dir"):
            found |= {"torch"} | ({"inductor"} if meta.get("inductor") else set())
        for key in ("vllm", "xformers", "fla"):
            if meta.get(key + "_dir"):
                found.add(key)
        return found

    def env_report(self):
        findings = env_findings(self.env, self.installed_libraries())
        knobs = self.stages.get("knobs") or {}
        if knobs.get("interpret") and not any(f["variable"] == "TRITON_INTERPRET"
                                              for f in findings):
            findings.insert(0, {"variable": "TRITON_INTERPRET", "value": self.env.get(
                "TRITON_INTERPRET"), "effect": "moves", "library": "triton",
                "text": "Triton's knobs say interpret: every kernel runs on the CPU"})
        return findings

    def check_workload_env(self):
        findings = self.env_report()
        evidence = {"findings": findings, "knobs": self.stages.get("knobs")}
        moves = [f for f in findings if f["effect"] == "moves" and f["library"] != "inductor"]
        slows = [f for f in findings if f["effect"] == "slows"]
        if moves:
            first = moves[0]
            return ("fail", "%s=%s: %s" % (first["variable"], first["value"], first["text"]),
                    "unset %s in the workload's environment" % ", ".join(
                        f["variable"] for f in moves), evidence)
        if slows:
            return ("warn", "; ".join("%s=%s: %s" % (f["variable"], f["value"], f["text"])
                                      for f in slows[:3]),
                    "unset %s unless meant" % ", ".join(f["variable"] for f in slows), evidence)
        return ("pass", "no variable changes where or how the kernels run", "", evidence)

    def check_inductor_ready(self):
        meta = self.stages.get("meta", {})
        if not meta.get("inductor"):
            return ("skip", "torch.compile (inductor) not installed", "", {})
        data = self.stages.get("inductor")
        if data is None:
            return ("skip", "not evaluated (no torch in the workload stack)", "", {})
        evidence = dict(data)
        user = data.get("user_error")
        if user:
            return ("fail", "torch.compile fails before any kernel: inductor looks up the user "
                    "name: %s" % user.get("error"),
                    "run the workload as a user with a passwd entry, or set USER (or LOGNAME) "
                    "in its environment", evidence)
        cache_error = data.get("cache_error")
        if cache_error:
            return ("fail", "torch.compile fails before any kernel: inductor's cache dir %s: %s"
                    % (data.get("cache_dir"), cache_error.get("error")),
                    "export TORCHINDUCTOR_CACHE_DIR=<a writable dir with space>", evidence)
        moves = [f for f in self.env_report() if f["library"] == "inductor" and
                 f["effect"] == "moves"]
        if moves or data.get("disable_device_detection"):
            name = (moves[0]["variable"] if moves
                    else "TORCHINDUCTOR_TRITON_DISABLE_DEVICE_DETECTION")
            return ("fail", "torch.compile of CUDA code raises TritonMissing: %s=1 disables "
                    "inductor's Triton" % name, "unset %s" % name, evidence)
        return ("pass", "inductor's cache dir %s usable, user %s" % (
            data.get("cache_dir"), data.get("user")), "", evidence)
