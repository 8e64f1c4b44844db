"""Checks of Triton: install, version, ptxas, get_current_target(), warm cache, --deep kernel."""

import os

from fleetcheck.probe.parts.core.base import clip, first_line, version_tuple
from fleetcheck.probe.parts.evaluation.diagnose import inside
from fleetcheck.probe.parts.evaluation.findings import Findings
from fleetcheck.probe.parts.facts.ptxas import PTXAS_MIN_FOR_CC


class TritonChecks(Findings):
    """The Triton checks."""

    def check_triton_installed(self):
        meta = self.stages.get("meta", {})
        dists = meta.get("triton_dists") or []
        evidence = {"location": meta.get("triton_dir"), "distributions": dists}
        if not meta.get("triton_dir"):
            return ("warn", "Triton is not installed for %s" % (
                self.facts["python"].get("executable")),
                "%s -m pip install triton (PyTorch's CUDA wheels bring it)" % (
                    self.workload_python), evidence)
        if len(dists) > 1:
            names = ", ".join("%s %s" % (d.get("name"), d.get("version")) for d in dists)
            # Both write triton/: uninstall every one, then reinstall the one torch pins.
            return ("fail", "%d Triton distributions installed (%s)" % (len(dists), names),
                    self.cause_fix("triton_installed"), evidence)
        version = self.facts["triton"]["version"]
        return ("pass", "triton %s at %s" % (version, meta["triton_dir"]), "", evidence)

    def check_triton_2x(self):
        version = self.triton_version()
        evidence = {"version": (self.facts.get("triton") or {}).get("version")}
        if not version:
            return ("skip", "Triton version unknown", "", evidence)
        if version[0] < 3:
            # Triton 2.x itself builds and runs kernels (torch.compile on torch 2.1-2.3): what
            # needs driver.active (FLA, vLLM) falls back, and their own checks say so.
            return ("pass", "Triton %s (no driver.active: FLA and vLLM need Triton >= 3.0; "
                    "their checks say whether they fall back)" % evidence["version"], "",
                    evidence)
        return ("pass", "Triton %s" % evidence["version"], "", evidence)

    def check_triton_backends(self):
        """Which backend the installed Triton picks: its own discovery (entry points or
        TRITON_BACKENDS_IN_TREE), each driver's is_active() and its own _create_driver()."""
        found = self.stages.get("backends")
        if found is None:
            return ("skip", "Triton's backends were not read (the stack stopped before)", "", {})
        evidence = dict(found)
        if found.get("probe_error"):
            return ("skip", "not judged: the probe's own step %s() failed (%s)" % (
                found.get("probe_step"), first_line(found["probe_error"])), "", evidence)
        if found.get("error"):
            evidence["matches"] = None
            return ("fail", "import triton.backends fails: %s" % first_line(found["error"]),
                    "reinstall Triton: %s -m pip install --force-reinstall triton==%s" % (
                        self.workload_python,
                        (self.facts.get("triton") or {}).get("version") or "<version>"),
                    evidence)
        if "discovered" not in found:
            return ("skip", "this Triton has no triton.backends (Triton < 3.0)", "", evidence)
        if found["discovered"] == [] and not found.get("in_tree"):
            evidence["matches"] = "triton_no_backends"
            return ("fail", "Triton discovers no backend: no `triton.backends` entry points "
                    "(installed without its dist-info)", self.cause_fix("triton_no_backends"),
                    evidence)
        chosen = found.get("selection") or {}
        providers = found.get("providers") or {}
        names = ", ".join("%s (%s)" % (n, providers[n]) if n in providers else n
                          for n in found.get("active") or [])
        if chosen.get("error"):
            cause, line, values = self.name_failure({"error": chosen["error"]}, {})
            evidence["matches"] = cause
            if cause == "zero_active_drivers":
                return ("skip", "no active Triton backend: the driver checks above say why",
                        "", evidence)
            if cause == "triton_backends_conflict":
                extra = [n for n in found.get("active") or [] if n not in ("nvidia", "amd")]
                own = [n for n in found.get("active") or [] if n in ("nvidia", "amd")]
                fix = "%s -m pip uninstall the package of the extra backend%s" % (
                    self.workload_python,
                    " (%s)" % ", ".join(providers.get(n, n) for n in extra) if extra else "")
                if chosen.get("reads_default") and own:
                    fix += ", or set TRITON_DEFAULT_BACKEND=%s in the workload's environment" % (
                        own[0])
                ignored = found.get("default") and not chosen.get("reads_default")
                return ("fail", "%d active Triton backends: %s; Triton's own selection raises "
                        "%s%s" % (len(found.get("active") or []), names, first_line(
                            chosen["error"]), " (TRITON_DEFAULT_BACKEND=%s is set, but this "
                            "Triton's runtime/driver.py does not read it)" % found["default"]
                            if ignored else ""), fix, evidence)
            fix = self.cause_fix(cause, values) or self.cause_fix("triton_backends")
            return ("fail", "Triton's own backend selection raises %s" % (
                line or first_line(chosen["error"])), fix, evidence)
        if chosen.get("selected"):
            default = found.get("default")
            return ("pass", "Triton selects backend %s%s (active: %s)" % (
                chosen["selected"], " (TRITON_DEFAULT_BACKEND)" if default else "", names),
                "", evidence)
        return ("skip", "Triton's selection not run: %s" % (
            chosen.get("unavailable") or "no result"), "", evidence)

    def check_ptxas_missing(self):
        _, tool = self.active_ptxas()
        evidence = {"ptxas": self.ptxas_tools()}
        if tool is None:
            return ("skip", "ptxas location unknown", "", evidence)
        if not tool.get("executable"):
            version = (self.facts.get("triton") or {}).get("version")
            return ("fail", "Triton's ptxas %s at %s" % (
                "is not executable" if tool.get("exists") else "is missing", tool["path"]),
                "reinstall the wheel: %s -m pip install --force-reinstall triton==%s" % (
                    self.workload_python, version),
                evidence)
        return ("pass", "ptxas %s (%s)" % (tool.get("version"), tool["path"]), "", evidence)

    def check_ptxas_override_unparsed(self):
        """TRITON_PTXAS_PATH (or its Blackwell twin) that this Triton cannot parse, or whose
        ptxas does not know a GPU's architecture here: the override is the object."""
        tool = self.ptxas_tools().get("TRITON_PTXAS_PATH") or self.ptxas_tools().get(
            "TRITON_PTXAS_BLACKWELL_PATH")
        if not tool:
            return ("pass", "TRITON_PTXAS_PATH not set", "", {})
        evidence = {"ptxas": tool, "triton": (self.facts.get("triton") or {}).get("version")}
        cuda = version_tuple(tool.get("version"))
        triton = self.triton_version()
        if not cuda or not triton:
            return ("skip", "ptxas or Triton version unknown", "", evidence)
        too_old = self.ptxas_override_too_old()
        if too_old:
            key, tool, cap, need = too_old
            evidence["override"] = {"variable": key, "value": tool.get("path")}
            return ("fail", "%s=%s is ptxas %s, which does not know sm_%d%d (needs CUDA >= "
                    "%d.%d); Triton %s runs it instead of its own" % (
                        key, tool.get("path"), tool.get("version"), cap[0], cap[1], need[0],
                        need[1], evidence["triton"]), self.ptxas_override_fix(), evidence)
        if (triton <= (3, 2, 99) and cuda >= (12, 7)) or (triton <= (3, 4, 99) and cuda >= (13,)):
            evidence["expected_error"] = ("Triton only support CUDA 10.0 or higher, but got "
                                          "CUDA version: %s" % tool.get("version"))
            return ("fail", "Triton %s cannot parse the version of TRITON_PTXAS_PATH's ptxas %s"
                    % (evidence["triton"], tool.get("version")),
                    "unset TRITON_PTXAS_PATH and upgrade Triton instead", evidence)
        return ("pass", "TRITON_PTXAS_PATH ptxas %s" % tool.get("version"), "", evidence)

    def check_triton_too_old_for_gpu(self):
        caps = self.capabilities()
        evidence: dict = {"gpu_capabilities": ["%d.%d" % c for c in caps]}
        if not caps:
            return ("skip", "compute capability unknown", "", evidence)
        for cap in caps:
            key, tool = self.active_ptxas(cap)
            have = version_tuple((tool or {}).get("version"))
            need = PTXAS_MIN_FOR_CC.get(cap)
            evidence["sm_%d%d" % cap] = {"ptxas": key, "version": (tool or {}).get("version"),
                                          "needs": "%d.%d" % need if need else None}
            if not have or not need:
                continue
            if have[:2] < need:
                version = (self.facts.get("triton") or {}).get("version")
                if key in ("TRITON_PTXAS_PATH", "TRITON_PTXAS_BLACKWELL_PATH"):
                    # The workload's own override picks the old ptxas, not Triton's release.
                    return ("skip", "%s=%s overrides Triton %s's ptxas (see "
                            "ptxas_override_unparsed)" % (key, tool.get("path"), version), "",
                            evidence)
                return ("fail", "Triton %s's ptxas %s does not know sm_%d%d (needs >= %d.%d)" % (
                    version, tool.get("version"), cap[0], cap[1], need[0], need[1]),
                    "upgrade: torch >= 2.7 with Triton >= 3.3 (Triton >= 3.6 for sm_121)",
                    evidence)
        return ("pass", "ptxas knows %s" % ", ".join("sm_%d%d" % c for c in caps), "", evidence)

    def check_driver_too_old_for_bundled_ptxas(self):
        version = self.cuda_info.get("version")
        caps = self.capabilities() or [None]
        key, tool = self.active_ptxas(caps[-1])
        ptxas = version_tuple((tool or {}).get("version"))
        evidence = {"cuda_driver_version": version, "ptxas": key,
                    "ptxas_version": (tool or {}).get("version"),
                    "ptxas_path": (tool or {}).get("path")}
        if not isinstance(version, int) or version <= 0 or not ptxas:
            return ("skip", "driver or ptxas version unknown", "", evidence)
        driver = (version // 1000, version % 1000 // 10)
        # Cubins from a newer CUDA major than the driver's do not load (minor-version
        # compatibility covers only the same major), so get_current_target() works and the
        # first kernel fails.
        if ptxas[0] > driver[0]:
            evidence["expected_error"] = ("RuntimeError: Triton Error [CUDA]: device kernel "
                                          "image is invalid")
            return ("fail", "driver supports CUDA %d.%d (cuDriverGetVersion %d), Triton %s's %s "
                    "is CUDA %s: the first kernel fails ('device kernel image is invalid'), "
                    "get_current_target() still works" % (
                        driver[0], driver[1], version,
                        (self.facts.get("triton") or {}).get("version"), key,
                        tool.get("version")),
                    "upgrade the NVIDIA driver to one supporting CUDA %d.x, or set "
                    "TRITON_PTXAS_PATH to a ptxas no newer than CUDA %d.%d" % (
                        ptxas[0], driver[0], driver[1]), evidence)
        return ("pass", "driver CUDA %d.%d loads ptxas %s's cubins" % (
            driver[0], driver[1], tool.get("version")), "", evidence)

    def check_triton_target(self):
        target = self.stages.get("target")
        if target is None:
            if "own-start" in self.stages and "own" not in self.stages:
                # The workload's own build runs first: triton_own_path names where it stopped.
                return ("skip", "not tried: the workload's own get_current_target(), which "
                        "runs first, did not finish", "", {})
            return self.stage_missing("get_current_target()")
        evidence = {"seconds": target.get("seconds"), "cache": target.get("cache") or "fresh",
                    "stderr": clip(self.stack_result["stderr"], 2000)}
        if target.get("ok"):
            t = target.get("target") or {}
            if target.get("cache") == "own":
                # The workload's own build compiled it all and loaded no existing entry.
                evidence["cache_dir"] = target.get("cache_dir")
                return ("pass", "get_current_target() = %s:%s, built from nothing (no entry "
                        "of it in the workload's cache)" % (t.get("backend"), t.get("arch")),
                        "", evidence)
            if target.get("cache") == "skeleton":
                # The workload's own start loaded its entry; its next build is proven.
                return ("pass", "get_current_target() = %s:%s through the workload's cache; "
                        "Triton's own build of its driver module's skeleton (the same "
                        "compiler, headers, flags and link) loaded from a fresh cache" % (
                            t.get("backend"), t.get("arch")), "", evidence)
            return ("pass", "get_current_target() = %s:%s in a fresh cache" % (
                t.get("backend"), t.get("arch")), "", evidence)
        error = target.get("error") or ""
        evidence["error"] = error
        if (target.get("failure") or {}).get("probe_step"):
            return self.probe_fault("get_current_target() in a fresh cache", target["failure"],
                                    evidence)
        # The step's own message first (the compiler's stderr, the errno), then Triton's text.
        fresh = target.get("fresh_dir") or os.path.join(self.tmp, "cache")
        # A fresh dir beside the workload's entries names the workload's cache dir.
        places = {"cache": [d for d in (self.facts.get("triton_cache_dir"), fresh)
                            if d and inside(fresh, d)] or [fresh],
                  "tmp": [os.path.join(self.tmp, "tmp")],
                  "include": [self.pyinfo.get("include") or ""],
                  "cc": self.compiler.get("path") or self.env.get("CC")}
        cause, line, values = self.name_failure(target.get("failure") or {"error": error}, places,
                                                self.stack_result["stderr"][-4000:])
        evidence["matches"] = cause
        evidence["object"] = values or None
        evidence["message"] = line or None
        backends = self.stages.get("backends") or {}
        evidence["backends"] = backends or None
        if (evidence["matches"] == "zero_active_drivers" and backends.get("discovered") == []
                and not backends.get("in_tree")):
            # Triton 3.4+ finds its backends through entry points: none without its dist-info.
            evidence["matches"] = "triton_no_backends"
        runs = [r for r in (target.get("failure") or {}).get("compiler") or []
                if r.get("rc") or r.get("error")]
        if runs:
            evidence["compiler_stderr"] = runs[-1].get("stderr")
        # A cause no record names: say so, with the step and its message, rather than guess.
        fix = self.cause_fix(evidence["matches"], values) if evidence["matches"] else (
            "no known cause matches this error (%s): run the workload's get_current_target() "
            "with the same environment to investigate" % (line or first_line(error)))
        # The message that names the cause leads; Triton's wrapper (a long command) follows.
        summary = "get_current_target() in a fresh cache: " + (
            "%s (%s)" % (line, (target.get("failure") or {}).get("type") or "error")
            if line and line not in first_line(error) else first_line(error))
        return ("fail", summary + self.object_note(evidence["matches"], values), fix, evidence)

    def check_stale_cache_masks_compiler(self):
        target = self.stages.get("target")
        warm = self.stages.get("warm")
        if target is None:
            return ("skip", "no target result", "", {})
        if target.get("ok"):
            return ("pass", "Triton works from a fresh cache", "", {})
        failure = target.get("failure") or {}
        if failure.get("probe_step"):
            # The probe's own error in the fresh cache: nothing about the workload's toolchain.
            return ("skip", "not judged: the probe's own step %s() failed (%s)" % (
                failure["probe_step"], first_line(failure.get("error"))), "",
                {"probe_step": failure["probe_step"], "probe_error": failure.get("error")})
        if not warm or warm.get("ok") is None:
            return ("skip", "no warm cache to compare with", "",
                    {"cache_dir": (warm or {}).get("cache_dir")})
        evidence = {"cache_dir": warm.get("cache_dir"), "warm_error": warm.get("error")}
        if warm.get("ok"):
            return ("warn", "Triton works only thanks to the warm cache %s: a fresh cache fails "
                    "(%s)" % (warm.get("cache_dir"), first_line(target.get("error"))),
                    "install the toolchain anyway (%s): kernels with a new signature still "
                    "compile a launcher" % self.compile_fix("compiler"), evidence)
        return ("skip", "the warm cache fails too", "", evidence)

    def check_triton_kernel(self):
        if not self.deep:
            return ("skip", "not run (use --deep)", "", {})
        stages = self.deep_stages
        result = self.deep_result
        if result is None:  # never started: no GPU here (the other checks are skipped too)
            return ("skip", "not run: no GPU to run it on", "", {})
        evidence = {"stderr": clip(result["stderr"], 2000), "seconds": result["seconds"]}
        if "error" in stages:
            error = stages["error"]["error"]
            evidence["error"] = error
            cause, _, values = self.name_failure({"error": error}, {}, result["stderr"][-4000:])
            evidence["matches"] = cause
            return ("fail", "kernel run failed: " + first_line(error), self.cause_fix(
                cause or "triton_kernel", values), evidence)
        if "count" not in stages:
            if result["timed_out"]:
                return ("error", "kernel run timed out after %.1f s" % result["seconds"], "",
                        evidence)
            return ("error", "kernel run did not report (rc %s)" % result["rc"], "", evidence)
        count = stages["count"].get("count") or 0
        devices = [stages.get("device%d" % i) for i in range(count)]
        evidence["devices"] = devices
        if count == 0:
            return ("fail", "kernel run: torch sees no GPU", self.cause_fix("torch_cuda"),
                    evidence)
        answered = [d for d in devices if d is not None]
        if len(answered) < count:
            return ("error", "kernel run timed out before GPU %d" % devices.index(None), "",
                    evidence)
        bad = [d for d in answered if not d.get("ok")]
        if bad:
            cause, _, values = self.name_failure({"error": bad[0].get("error")}, {})
            evidence["matches"] = cause
            return ("fail", "kernel failed on GPU %d: %s" % (
                bad[0]["index"], first_line(bad[0].get("error"))), self.cause_fix(
                    cause or "triton_kernel", values), evidence)
        return ("pass", "JIT kernel verified on %d GPU(s) in a fresh cache" % count, "", evidence)
