"""The toolchain as Triton uses it: the workload's interpreter, the C compiler, a test compile."""

import json
import os
import shutil
import sys

from fleetcheck.probe.parts.core.base import clip
from fleetcheck.probe.parts.core.spawn import Spawned, run_inline
from fleetcheck.probe.parts.core.stages import PYINFO_SCRIPT
from fleetcheck.probe.parts.core.state import ProbeState

COMPILE_SOURCE = """\
#include <stdio.h>
#include <dlfcn.h>
#include <Python.h>
/* What Triton's cuda_utils.c needs: libc (stdio, dlfcn) and the interpreter's Python.h. */
int fleetcheck_probe(void) { return (int)sizeof(PyObject) + (dlsym != 0) + (printf != 0); }
"""


def install_hint(os_id, python_version, what):
    """Package install line for the node's distribution (apt by default)."""
    xy = ".".join(str(python_version or "3").split(".")[:2])
    rhel = (os_id or "") in ("rhel", "centos", "rocky", "almalinux", "fedora", "ol", "amzn")
    names = {
        "compiler": ("gcc libc6-dev python%s-dev" % xy, "gcc glibc-devel python%s-devel" % xy),
        "linker": ("binutils", "binutils"),
        "libc": ("libc6-dev", "glibc-devel"),
        "python": ("python%s-dev" % xy, "python%s-devel" % xy),
    }[what]
    if rhel:
        return "dnf install -y " + names[1]
    return "apt-get install -y " + names[0]


class ToolchainFacts(ProbeState):
    """The workload interpreter's facts, the compiler Triton would pick, and the test compile."""

    def workload_pyinfo(self):
        if os.path.realpath(self.workload_python) == os.path.realpath(sys.executable):
            info = json.loads(run_inline(PYINFO_SCRIPT))
            return info
        result = Spawned([self.workload_python, "-c", PYINFO_SCRIPT],
                         self.deadline.timeout(15), env=self.env, label="pyinfo").result()
        try:
            return json.loads(result["stdout"])
        except ValueError:
            return {"executable": self.workload_python, "version": None, "include": None,
                    "error": result["error"] or clip(result["stderr"] or "no output", 1000)}

    def find_compiler(self):
        """The compiler as Triton picks it: $CC as is, else gcc, else clang (never `cc`)."""
        path = self.env.get("PATH", os.defpath)
        cc = self.env.get("CC")
        if cc is not None:
            found = shutil.which(cc, path=path) if os.sep not in cc else (
                cc if os.path.isfile(cc) and os.access(cc, os.X_OK) else None)
            return {"path": found, "source": "CC", "value": cc}
        for name in ("gcc", "clang"):
            found = shutil.which(name, path=path)
            if found:
                return {"path": found, "source": name, "value": None}
        return {"path": None, "source": None, "value": None,
                "plain_cc": shutil.which("cc", path=path)}

    def start_compile(self):
        if not self.compiler["path"]:
            return None
        work = os.path.join(self.tmp, "cc")
        os.mkdir(work)
        source = os.path.join(work, "fleetcheck_cc.c")
        with open(source, "w") as handle:
            handle.write(COMPILE_SOURCE)
        argv = [self.compiler["path"], source, "-O0", "-shared", "-fPIC", "-Wno-psabi", "-o",
                os.path.join(work, "fleetcheck_cc.so")]
        if self.pyinfo.get("include"):
            argv.append("-I" + self.pyinfo["include"])
        env = dict(self.env)
        env["TMPDIR"] = work
        self.compile_argv = argv
        return Spawned(argv, self.deadline.timeout(30), env=env, cwd=work)
