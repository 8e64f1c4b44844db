"""Checks of the toolchain Triton compiles its launcher with: $CC, compiler, linker, headers."""

import os
import re
import shutil

from fleetcheck.probe.parts.core.base import clip, first_line
from fleetcheck.probe.parts.evaluation.classify import classify_error
from fleetcheck.probe.parts.evaluation.findings import Findings

#: compile_outcome()'s outcomes with no compiler output to read.
NOT_COMPILED = ("none", "deadline", "timeout")


def compiler_error_line(text):
    """The line of compiler output that says what broke."""
    for line in (text or "").splitlines():
        if "error" in line.lower():
            return line.strip()[:300]
    return first_line(text)[:300]


def header_missing(text):
    match = re.search(r"fatal error: '?([\w./-]+\.h)'?(?::| file not found)", text or "")
    return match.group(1) if match else None


class ToolchainChecks(Findings):
    """The compiler, linker and header checks, read from the test compile."""

    def check_cc_env_invalid(self):
        cc = self.env.get("CC")
        evidence = {"CC": cc}
        if cc is None:
            return ("pass", "CC not set (Triton looks for gcc, then clang)", "", evidence)
        if self.compiler["path"]:
            return ("pass", "CC=%s is executable" % cc, "", evidence)
        text = "FileNotFoundError: [Errno 2] No such file or directory: '%s'" % cc
        evidence["expected_error"] = text
        return ("fail", "CC=%s is not an executable (Triton uses it unchecked)" % cc,
                "fix or unset CC (export CC=/usr/bin/gcc)", evidence)

    def check_no_c_compiler(self):
        path = self.env.get("PATH", os.defpath)
        gcc, clang = shutil.which("gcc", path=path), shutil.which("clang", path=path)
        evidence = {"PATH": path, "gcc": gcc, "clang": clang, "CC": self.env.get("CC"),
                    "cc": shutil.which("cc", path=path)}
        fix = self.compile_fix("compiler") + ", or set CC"
        if self.compiler["source"] == "CC":
            if self.compiler["path"]:
                return ("pass", "compiler from CC: %s" % self.compiler["path"], "", evidence)
            if gcc or clang:
                return ("pass", "%s on PATH (unused while CC is set)" % (gcc or clang), "",
                        evidence)
            return ("fail", "no C compiler: CC is invalid and there is no gcc or clang on PATH",
                    fix, evidence)
        if self.compiler["path"]:
            return ("pass", "%s (%s)" % (self.compiler["path"], self.compiler["source"]), "",
                    evidence)
        summary = "no C compiler: CC unset, no gcc or clang on PATH"
        if evidence["cc"]:
            summary += " (%s exists, but Triton never tries cc)" % evidence["cc"]
        evidence["expected_error"] = ("RuntimeError: Failed to find C compiler. Please specify "
                                      "via CC environment variable or set "
                                      "triton.knobs.build.impl.")
        return ("fail", summary, fix, evidence)

    def compile_outcome(self):
        """'ok', 'none' (nothing compiled), 'deadline' (none left for it), 'timeout' or the
        compiler's stderr."""
        result = self.compile_result
        by = getattr(self, "compile_by", None)
        if result is None:
            return ("deadline" if by == "deadline" else "none"), {}
        evidence = {"argv": getattr(self, "compile_argv", None), "rc": result["rc"],
                    "stderr": clip(result["stderr"]), "seconds": result["seconds"],
                    "by": "triton" if by == "triton" else "probe"}
        if result["timed_out"]:
            return "timeout", evidence
        if result["error"]:
            evidence["error"] = result["error"]
            return result["error"], evidence
        if result["rc"] == 0:
            return "ok", evidence
        return result["stderr"] or "rc %s" % result["rc"], evidence

    def check_no_linker(self):
        outcome, evidence = self.compile_outcome()
        ld = shutil.which("ld", path=self.env.get("PATH", os.defpath))
        evidence["ld"] = ld
        if outcome == "ok":
            return ("pass", "compiled and linked a Python extension with %s%s" % (
                self.compiler["path"], " (Triton's own build)" if evidence["by"] == "triton"
                else ""), "", evidence)
        if outcome == "deadline":
            return ("skip", "not tested: the workload's stack left too little of the deadline "
                    "(ld: %s)" % (ld or "absent"), "", evidence)
        if outcome == "none":
            return ("skip", "no compiler to test the linker with (ld: %s)" % (ld or "absent"),
                    "", evidence)
        if outcome == "timeout":
            return ("error", "test compile timed out", "", evidence)
        if classify_error(outcome) == "no_linker":
            return ("fail", "no linker: " + compiler_error_line(outcome),
                    self.compile_fix("linker"), evidence)
        return ("pass", "ld at %s (the test compile failed earlier)" % ld if ld else
                "linker not reached (the test compile failed earlier)", "", evidence)

    def check_libc_headers_missing(self):
        outcome, evidence = self.compile_outcome()
        headers = {name: os.path.exists("/usr/include/" + name) for name in ("stdio.h", "dlfcn.h")}
        evidence["headers"] = headers
        fix = self.compile_fix("libc")
        if outcome == "ok":
            return ("pass", "libc headers found (stdio.h, dlfcn.h)", "", evidence)
        if outcome not in NOT_COMPILED and classify_error(outcome) == "libc_headers_missing":
            return ("fail", "libc headers missing: " + compiler_error_line(outcome), fix, evidence)
        if outcome in NOT_COMPILED or header_missing(outcome) is None:
            if not all(headers.values()):
                return ("fail", "libc headers missing: no /usr/include/%s" % ", ".join(
                    n for n, ok in headers.items() if not ok), fix, evidence)
            return ("pass", "/usr/include/stdio.h and dlfcn.h present", "", evidence)
        return ("pass", "libc headers found", "", evidence)

    def check_python_headers_missing(self):
        outcome, evidence = self.compile_outcome()
        include = self.pyinfo.get("include")
        header = os.path.join(include, "Python.h") if include else None
        evidence.update({"include": include, "python_h_exists": bool(
            header and os.path.exists(header))})
        fix = self.compile_fix("python") + " (headers for %s)" % (
            self.facts["python"].get("executable"))
        if outcome == "ok":
            return ("pass", "Python.h for %s compiles" % self.facts["python"].get("version"), "",
                    evidence)
        if outcome not in NOT_COMPILED and re.search(r"\bPython\.h\b", outcome):
            return ("fail", "Python.h missing for Python %s: %s" % (
                self.facts["python"].get("version"), compiler_error_line(outcome)), fix, evidence)
        if not evidence["python_h_exists"]:
            return ("fail", "Python.h missing for Python %s (not in %s)" % (
                self.facts["python"].get("version"), include), fix, evidence)
        return ("pass", "%s present" % header, "", evidence)
