"""Packages as installed: Triton's and torch's files against their dist-info RECORD (a backend
dir, ptxas, any file pip installed and that is gone), the module a broken install fails to
import, and an install without its metadata.

A broken install is named before the checks that merely follow from it (no active driver, no
ptxas, no backend), with the reinstall for the workload's interpreter.
"""

import csv
import os
import re

from fleetcheck.probe.parts.core.base import CheckResult, first_line
from fleetcheck.probe.parts.evaluation.findings import Findings


def record_missing(dist_path, package, limit=5):
    """(files of `package` its RECORD lists that are gone (at most `limit`), whether there
    is a RECORD). Compiled bytecode is left out: pip lists it, Python rewrites it."""
    site = os.path.dirname(dist_path)
    missing = []
    try:
        with open(os.path.join(dist_path, "RECORD"), newline="") as handle:
            for row in csv.reader(handle):
                name = row[0] if row else ""
                if (name.startswith(package + "/") and not name.endswith(".pyc")
                        and not os.path.lexists(os.path.join(site, name))):
                    missing.append(name)
                    if len(missing) >= limit:
                        break
    except (OSError, csv.Error):
        return [], False
    return missing, True


def dist_infos(site, name):
    """The dist-info dirs of distribution `name` in `site`."""
    try:
        entries = os.listdir(site)
    except OSError:
        return []
    low = name.lower().replace("-", "_")
    return [os.path.join(site, e) for e in sorted(entries) if e.endswith(".dist-info")
            and e.split("-")[0].lower().replace(".", "_") == low]


def missing_module(text):
    match = re.search(r"No module named '((triton|torch)[\w.]*)'", text or "")
    return match.group(1) if match else None


class PackageChecks(Findings):
    """Triton's and torch's installs."""

    def package_check(self, package, top, dists, errors):
        evidence = {"location": top, "distributions": [
            "%s %s" % (d.get("name"), d.get("version")) for d in dists]}
        broken = []
        for dist in dists:
            missing, has_record = record_missing(dist["path"], package)
            if not has_record:
                broken.append("%s %s has no RECORD" % (dist.get("name"), dist.get("version")))
            elif missing:
                broken.append("%s %s lacks %s" % (dist.get("name"), dist.get("version"),
                                                  ", ".join(missing)))
        for text in errors:
            module = missing_module(text)
            if module and (module == package or module.startswith(package + ".")):
                broken.append("No module named '%s' (%s)" % (module, first_line(text)))
                break
        evidence["broken"] = broken
        shadow = self.shadowing(package, top, dists)
        if shadow and broken:
            evidence["shadowed_by"] = shadow
            return CheckResult("fail", "%s at %s (from %s) shadows %s installed in %s: %s" % (
                package, top, shadow["source"], shadow["installed"], shadow["site"],
                "; ".join(broken)), "take %s off %s (it holds %s, which shadows the "
                "installed %s), or build that %s there" % (
                    shadow["entry"], shadow["variable"], top, shadow["installed"], package),
                evidence)
        if not dists and not broken:
            # Triton >= 3.4 finds its backends through its dist-info's entry points.
            status = "fail" if package == "triton" and self.triton_version() >= (3, 4) else "warn"
            return CheckResult(status, "no %s dist-info for %s (installed without its "
                               "metadata)" % (package, top), self.cause_fix(
                                   package + "_install_broken"), evidence)
        if broken:
            return CheckResult("fail", "the %s installation at %s is incomplete: %s" % (
                package, top, "; ".join(broken)), self.cause_fix(package + "_install_broken"),
                evidence)
        return CheckResult("pass", "%s's files are all there (%s)" % (
            package, ", ".join(evidence["distributions"])), "", evidence)

    def shadowing(self, package, top, dists):
        """{"entry", "variable", "source", "installed", "site"} when the `package` Python
        imports is not the one a dist-info installed (a source checkout on PYTHONPATH, a
        copy in the working directory), else None."""
        sites = {os.path.realpath(os.path.dirname(d["path"])) for d in dists if d.get("path")}
        here = os.path.realpath(os.path.dirname(top)) if top else None
        if not sites or here is None or here in sites:
            return None
        entry = self.stages.get("meta", {}).get(package + "_entry") or os.path.dirname(top)
        listed = [p for p in (self.env.get("PYTHONPATH") or "").split(os.pathsep) if p]
        if any(os.path.realpath(p) == os.path.realpath(entry) for p in listed):
            variable, source = "PYTHONPATH", "PYTHONPATH"
        else:
            variable, source = "sys.path (a .pth file or the script's directory)", "sys.path"
        first = dists[0]
        return {"entry": entry, "variable": variable, "source": source,
                "installed": "%s %s" % (first.get("name"), first.get("version")),
                "site": os.path.dirname(first["path"])}

    def check_triton_install_broken(self):
        meta = self.stages.get("meta", {})
        if not meta.get("triton_dir"):
            return CheckResult("skip", "Triton is not installed", "", {})
        target = self.stages.get("target") or {}
        errors = [(self.stages.get("backends") or {}).get("error"), target.get("error")]
        return self.package_check("triton", meta["triton_dir"], meta.get("triton_dists") or [],
                                  [e for e in errors if e])

    def check_torch_install_broken(self):
        meta = self.stages.get("meta", {})
        top = meta.get("torch_dir")
        if not top:
            return CheckResult("skip", "PyTorch not installed", "", {})
        # torch-2.9.1+rocm6.4.dist-info: the version is what lies between the dashes.
        dists = [{"name": "torch", "version": os.path.basename(p)[:-len(".dist-info")].split(
            "-")[1], "path": p} for p in dist_infos(os.path.dirname(top), "torch")]
        error = (self.stages.get("torch") or {}).get("error")
        return self.package_check("torch", top, dists, [error] if error else [])
