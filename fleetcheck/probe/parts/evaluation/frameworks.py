"""What each framework (FLA, vLLM, torch.compile's inductor) will do on this node."""

import os
import shutil

from fleetcheck.probe.parts.checks.torch import TorchChecks
from fleetcheck.probe.parts.checks.workload import WorkloadChecks
from fleetcheck.probe.parts.core.base import first_line

#: How each framework's own copy of FLA's detection catches Triton's exception.
CATCHES = {"vllm": "(RuntimeError, AttributeError): silent",
           "sglang": "BaseException, with FLA's warning",
           "unsloth_zoo": "Exception, with a warning"}


class Frameworks(TorchChecks, WorkloadChecks):
    """Each installed framework's outcome, from the checks and the Triton verdict."""

    def frameworks(self, checks, triton):
        """Per installed framework: its outcome on this node and one line saying why."""
        by_id = {c["id"]: c for c in checks}
        meta = self.stages.get("meta", {})
        torch = self.torch_info()
        target = self.stages.get("target") or {}
        verdict = triton["verdict"]
        cause = triton.get("cause")
        label = self.cause_label(cause) if cause else None
        # Triton's own driver check (is_active(): torch.cuda.is_available(), or cuInit on 3.8+
        # without torch) passes although a compile-time cause will fail the first kernel.
        if torch.get("installed") or meta.get("torch_dir"):
            active = bool(torch.get("cuda_available"))
        else:
            active = self.cuda_info.get("init") == 0 and (self.cuda_info.get("count") or 0) > 0
        if cause == "fla_import_fails" and target.get("ok"):
            # Only FLA cannot be imported: Triton itself runs for the other frameworks.
            verdict, cause, label = "gpu", None, None
        late = verdict == "cpu-fallback" and bool(target.get("ok"))
        out = {}
        fla = by_id.get("fla_fallback_hidden") or {}
        if not meta.get("fla_dir"):
            out["fla"] = {"installed": False, "outcome": "not-installed",
                          "detail": "flash-linear-attention not installed"}
        else:
            ev = fla.get("evidence") or {}
            version = meta.get("fla_version")
            ready = by_id.get("inductor_ready") or {}
            before = ready.get("status") == "fail" and any(
                (ready.get("evidence") or {}).get(k) for k in ("user_error", "cache_error"))
            interpreted = any(f["variable"] == "TRITON_INTERPRET" for f in self.env_report())
            if (fla.get("evidence") or {}).get("matches") == "fla_import_fails":
                outcome, detail = "import-fails", fla["summary"]
            elif before:
                # Its modules use @torch.compile, whose import of torch._dynamo calls inductor's
                # cache_dir() (torch 2.11: torch/_dynamo/package.py): seen on the H200.
                outcome = "import-fails"
                detail = "import fla fails before any kernel (its torch.compile import reaches " \
                    "inductor's cache dir): %s" % ready["summary"]
            elif interpreted:
                outcome = "cpu"
                detail = "FLA %s picks device %s, but TRITON_INTERPRET runs its kernels in " \
                    "Triton's interpreter on the CPU" % (version, ev.get("device_platform"))
            elif fla.get("status") == "fail" and ev.get("device_platform") == "cpu":
                outcome = "cpu-fallback"
                detail = "FLA %s falls back to CPU: %s" % (version, first_line(
                    ev.get("swallowed") or ev.get("triton_error") or "cause not seen"))
            elif fla.get("status") == "pass" and late:
                outcome = "fails-at-kernel"
                detail = "FLA %s picks the GPU, its first kernel fails: %s" % (version, label)
            elif fla.get("status") == "pass":
                outcome = "gpu"
                detail = "FLA %s runs on the GPU (device_platform=%s)" % (
                    version, ev.get("device_platform"))
            else:
                outcome = "unknown"
                detail = "FLA %s: %s" % (version, fla.get("summary") or "not evaluated")
            out["fla"] = {"installed": True, "version": version, "outcome": outcome,
                          "detail": detail}
        if not meta.get("vllm_dir"):
            out["vllm"] = {"installed": False, "outcome": "not-installed",
                           "detail": "vLLM not installed"}
        else:
            outcome, detail = self.vllm_outcome(verdict, label)
            real = self.stages.get("vllm") or {}
            out["vllm"] = {"installed": True, "version": meta.get("vllm_version"),
                           "outcome": outcome, "detail": detail,
                           "platform": real.get("platform"), "has_triton": real.get("has_triton")}
        if not meta.get("inductor"):
            out["inductor"] = {"installed": False, "outcome": "not-installed",
                               "detail": "torch.compile (inductor) not installed"}
        else:
            path = self.env.get("PATH", os.defpath)
            cxx_name = self.env.get("CXX") or "g++"
            cxx = shutil.which(cxx_name, path=path)
            caps = self.capabilities()
            if self.triton_missing:
                outcome, why = "no-triton", "no Triton: Cannot find a working triton installation"
            elif not active:
                outcome, why = "cpu-only", "no %s device: compiles for the CPU only" % (
                    "ROCm (torch.cuda)" if self.vendor == "amd" else "CUDA")
            elif caps and min(caps) < (7, 0):
                outcome, why = "gpu-unsupported", "GPU capability < 7.0: no Triton path"
            elif (by_id.get("inductor_ready") or {}).get("status") == "fail":
                outcome, why = "fails-before-triton", by_id["inductor_ready"]["summary"]
            elif any(f["variable"] == "TRITON_INTERPRET" for f in self.env_report()):
                outcome, why = "cpu", ("its Triton kernels run in Triton's interpreter on the "
                                       "CPU (TRITON_INTERPRET)")
            elif verdict == "gpu":
                outcome, why = "triton", "Triton path usable" + (
                    " (HIP backend)" if self.vendor == "amd" else "")
            else:
                outcome, why = "fails-at-kernel", "BackendCompilerFailed at code generation: %s" % (
                    label or "Triton verdict %s" % verdict)
            cxx_text = ("C++ compiler %s" % cxx if cxx else
                        "no C++ compiler for its CPU/cpp-wrapper path (InvalidCxxCompiler: No "
                        "working C++ compiler found in torch._inductor.config.cpp.cxx: (None, "
                        "'%s'))" % cxx_name)
            out["inductor"] = {"installed": True, "version": torch.get("version") or meta.get(
                "torch_version"), "outcome": outcome, "cxx": cxx,
                "detail": "torch.compile (inductor): %s; %s" % (why, cxx_text)}
        self.vendored_outcomes(out, active, verdict, label)
        self.other_outcomes(out, active, verdict, label)
        return out

    def vllm_outcome(self, verdict, label):
        """(outcome, detail) from vLLM's own platform detection and HAS_TRITON, run on the node
        (the "vllm" stage: scripts/workload.py vllm_report), with the Triton verdict."""
        real = self.stages.get("vllm")
        if real is None:
            return "unknown", "vLLM's own detection did not report (the stack stopped first)"
        log = real.get("log") or []

        def said(logger, *words):
            for _, name, message in log:
                if name.startswith(logger) and all(w in message for w in words):
                    return message
            return None
        for key, what in (("import_error", "import vllm fails"),
                          ("platform_error", "vLLM's platform detection raises"),
                          ("triton_error", "importing vllm.triton_utils fails")):
            if real.get(key):
                return "import-fails", "%s: %s" % (what, first_line(real[key].get("error")))
        platform = real.get("platform")
        if platform == "UnspecifiedPlatform":
            kind = "ROCm" if self.vendor == "amd" else "CUDA"
            why = said("vllm.platforms", kind + " platform is not available because") or said(
                "vllm.platforms", "No platform detected")
            nvml = self.cuda_info.get("nvml_error") or (
                self.cuda_info.get("nvml_init_text") if self.cuda_info.get("nvml_init") else None)
            return "import-fails", (
                "vLLM finds no platform (UnspecifiedPlatform): %s%s; its engine raises "
                "RuntimeError: Failed to infer device type" % (
                    why or "no plugin activated", " (NVML, as the probe loads it: %s)" % (
                        first_line(nvml)) if nvml and kind == "CUDA" else ""))
        if platform and "Cpu" in platform:
            why = said("vllm.platforms", "Confirmed CPU platform") or platform
            return "cpu", "vLLM selects its CPU platform: %s" % why
        if real.get("has_triton") is False:
            why = said("vllm.triton_utils", "Disabling Triton") or said(
                "vllm.triton_utils", "Triton not installed")
            return ("no-triton" if self.triton_missing else "triton-disabled",
                    "vLLM (%s) sets HAS_TRITON = False: %s" % (platform, why or "no reason logged"))
        if verdict == "gpu":
            return "triton", "vLLM (%s) uses Triton on the GPU (HAS_TRITON)" % platform
        return "fails-at-kernel", "vLLM (%s) enables Triton (HAS_TRITON), the first kernel " \
            "fails: %s" % (platform, label or "Triton verdict %s" % verdict)

    def vendored_outcomes(self, out, active, verdict, label):
        """The frameworks' own copies of FLA's detection, as their installed code decided."""
        for item in (self.stages.get("vendored") or {}).get("detections") or []:
            fw = item.get("framework")
            catches = CATCHES.get(fw, "?")
            if item.get("raised"):
                outcome, detail = "import-fails", (
                    "its copy of FLA's detection (catches %s) lets %s through: importing its "
                    "FLA ops fails" % (catches, first_line(item["raised"])))
            elif item.get("error"):
                outcome, detail = "unknown", "its copy of FLA's detection: %s" % item["error"]
            elif item.get("backend") == "cpu":
                outcome = "cpu-fallback"
                detail = "its copy of FLA's detection (catches %s) says cpu%s" % (
                    catches, ": " + first_line(item["warnings"][0]) if item.get("warnings")
                    else ", and logs nothing")
            else:
                outcome, detail = "gpu", "its copy of FLA's detection says %s" % item.get(
                    "backend")
            if fw == "vllm" and "vllm" in out:
                vllm = out["vllm"]
                vllm["fla_copy"] = {"outcome": outcome, "detail": detail, "file": item["file"]}
                if outcome != "gpu" and vllm.get("outcome") in ("triton", "fails-at-kernel"):
                    vllm["outcome"], vllm["detail"] = outcome, "vLLM: " + detail
                continue
            out[fw] = {"installed": True, "outcome": outcome, "detail": detail,
                       "file": item["file"]}

    def other_outcomes(self, out, active, verdict, label):
        """xformers, Liger-Kernel and mamba-ssm/causal-conv1d: each really imported on the node,
        with its own device decision (the "imports" stage: scripts/workload.py
        framework_imports); the Triton verdict says whether its kernels then run."""
        meta = self.stages.get("meta", {})
        found = self.stages.get("imports") or {}

        def later(what):
            return ("gpu", what) if verdict == "gpu" else (
                "fails-at-kernel", "%s, its first Triton kernel fails: %s" % (
                    what, label or "Triton verdict %s" % verdict))
        for name, label_name in (("xformers", "xformers"), ("liger_kernel", "Liger-Kernel"),
                                 ("mamba_ssm", "mamba-ssm"), ("causal_conv1d", "causal-conv1d")):
            if not meta.get(name + "_dir"):
                continue
            item = found.get(name)
            if item is None:
                outcome, why = "unknown", "its import did not report (the stack stopped first)"
            elif item.get("import_error"):
                outcome, why = "import-fails", "import %s fails: %s" % (
                    name, first_line(item["import_error"].get("error")))
            elif name == "xformers":
                if item.get("_is_triton_available") is False:
                    reason = next((m for m in item.get("log") or [] if "Triton" in m),
                                  None) or next((
                        "%s=%s" % (k, self.env[k]) for k in ("XFORMERS_FORCE_DISABLE_TRITON",)
                        if self.env.get(k, "0") == "1"), None)
                    outcome, why = "triton-off", "_is_triton_available() is False%s" % (
                        ": " + first_line(reason) if reason else " (no CUDA device, or "
                        "capability < 8.0)")
                else:
                    outcome, why = later("_is_triton_available() is True")
                    outcome = "triton" if outcome == "gpu" else outcome
            elif name == "liger_kernel":
                device = item.get("infer_device")
                outcome, why = later("infer_device() = %s" % device) if device == "cuda" else (
                    "cpu-only", "infer_device() = %s: its Triton kernels get no GPU" % device)
            else:
                outcome, why = later("imported (its @triton.jit kernels defined)")
            out[name] = {"installed": True, "outcome": outcome,
                         "detail": "%s: %s" % (label_name, why)}
