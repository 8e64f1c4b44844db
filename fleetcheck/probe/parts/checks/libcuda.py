"""Checks of libcuda as Triton finds it: /sbin/ldconfig, the linker cache, libcuda.so."""

import os

from fleetcheck.probe.parts.core.base import first_line, host_path
from fleetcheck.probe.parts.evaluation.findings import Findings
from fleetcheck.probe.parts.evaluation.objects import ERRNO_LIMITS, parse_oserror
from fleetcheck.probe.parts.facts.libcuda import parse_ldconfig


class LoaderChecks(Findings):
    """The loader and linker-cache checks."""

    def check_ldconfig_binary_missing(self):
        path = host_path("/sbin/ldconfig")
        evidence = {"path": "/sbin/ldconfig", "TRITON_LIBCUDA_PATH":
                    self.env.get("TRITON_LIBCUDA_PATH")}
        if os.access(path, os.X_OK):
            return ("pass", "/sbin/ldconfig present", "", evidence)
        if self.env.get("TRITON_LIBCUDA_PATH"):
            return ("pass", "/sbin/ldconfig absent but unused (TRITON_LIBCUDA_PATH is set)", "",
                    evidence)
        evidence["expected_error"] = ("FileNotFoundError: [Errno 2] No such file or directory: "
                                      "'/sbin/ldconfig'")
        return ("fail", "/sbin/ldconfig missing (Triton runs it by that path)",
                "set TRITON_LIBCUDA_PATH=%s, or install libc-bin" % (
                    self.libcuda_dir() or "<dir of libcuda.so.1>"), evidence)

    def libcuda_dirs(self):
        """Triton's libcuda_dirs(): (dirs, assertion text or None, ldconfig entries)."""
        env_path = self.env.get("TRITON_LIBCUDA_PATH")
        if env_path:
            return [env_path], None, []
        text = self.ld_result["stdout"] if self.ld_result else ""
        entries = parse_ldconfig(text)
        locs = [path for name, path in entries if "libcuda.so.1" in name]
        dirs = [os.path.dirname(loc) for loc in locs]
        ld_path = self.env.get("LD_LIBRARY_PATH")
        if ld_path and not dirs:
            dirs = [d for d in ld_path.split(":") if os.path.exists(os.path.join(d,
                                                                               "libcuda.so.1"))]
        msg = "libcuda.so cannot found!\n"
        if locs:
            msg += "Possible files are located at %s." % str(locs)
            msg += "Please create a symlink of libcuda.so to any of the files."
        else:
            msg += 'Please make sure GPU is set up and then run "/sbin/ldconfig"'
            msg += " (requires sudo) to refresh the linker cache."
        ok = any(os.path.exists(os.path.join(d, "libcuda.so.1")) for d in dirs)
        return dirs, (None if ok else "AssertionError: " + msg), entries

    def ldconfig_limit(self):
        """(cause, values, shared) when `ldconfig -p` gave no answer because of a limit: its
        start refused or the OOM killer (helper_limit), or its own stderr naming a limit's
        errno ("Can't open cache file ...: Too many open files"). shared: Triton's own
        `ldconfig -p` meets the limit too (ldconfig itself failed, or the probe, holding no
        other process, could not start one); else only the probe's concurrency did."""
        result = self.ld_result
        if not result or self.env.get("TRITON_LIBCUDA_PATH"):
            return None
        limit = self.helper_limit(result)
        if limit:
            return limit[0], limit[1], bool(result.get("alone")) and not result.get("oom_kill")
        if result["rc"] in (0, None) and result["stdout"].strip():
            return None
        parsed = parse_oserror(result["stderr"])
        named = self.limit_named(parsed["errno"]) if parsed and parsed["errno"] in (
            ERRNO_LIMITS) else None
        return (named[0], named[1], True) if named else None

    def check_libcuda_not_in_ldcache(self):
        if self.ld_result is None and not self.env.get("TRITON_LIBCUDA_PATH"):
            return ("skip", "no /sbin/ldconfig to ask (see ldconfig_binary_missing)", "", {})
        if self.ld_result and self.ld_result["timed_out"]:
            return ("error", "/sbin/ldconfig -p timed out", "", {})
        # ldconfig's answer; {} where it did not run (no limit then stopped it, it said nothing).
        ran = self.ld_result or {}
        said = ran.get("stderr") or ""
        limit = self.ldconfig_limit()
        if limit:
            cause, values, shared = limit
            evidence = {"stderr": said, "rc": ran["rc"], "error": ran["error"],
                        "errno": ran.get("errno")}
            if not shared:
                return self.limit_stopped("/sbin/ldconfig -p", ran, cause, values, evidence)
            # Triton runs the same `/sbin/ldconfig -p` (subprocess) under the same limits: its
            # libcuda lookup fails, and get_current_target() with it.
            evidence.update(matches=cause, object=values, expected_error=first_line(
                ran["error"] or said))
            return ("fail", "/sbin/ldconfig -p, which Triton runs to find libcuda, cannot run "
                    "in this job: %s%s" % (first_line(ran["error"]) or " ".join(
                        said.split()), self.limit_note(cause, values)),
                    self.cause_fix(cause, values), evidence)
        if "Can't open cache file" in said and not self.env.get("TRITON_LIBCUDA_PATH"):
            # ldconfig is there; its cache is not: Triton's `ldconfig -p` lists nothing.
            return ("fail", "/sbin/ldconfig -p fails: %s" % " ".join(said.split()),
                    self.cause_fix("ld_so_cache_missing"), {
                        "matches": "ld_so_cache_missing", "stderr": said, "rc": ran["rc"]})
        dirs, failure, entries = self.libcuda_dirs()
        locs = [p for n, p in entries if "libcuda.so.1" in n]
        if failure and locs and not self.env.get("TRITON_LIBCUDA_PATH"):
            return ("skip", "ldconfig lists libcuda.so.1, at a path that does not exist (see "
                    "ldcache_stale_libcuda_entry)", "", {"ldconfig_libcuda": locs})
        evidence = {"dirs": dirs, "ldconfig_libcuda": [p for n, p in entries if "libcuda" in n],
                    "LD_LIBRARY_PATH": self.env.get("LD_LIBRARY_PATH"),
                    "TRITON_LIBCUDA_PATH": self.env.get("TRITON_LIBCUDA_PATH"),
                    "dlopen": self.cuda_info.get("loaded")}
        if failure:
            evidence["expected_error"] = failure
            where = self.libcuda_dir()
            fix = ("run ldconfig (add an /etc/ld.so.conf.d entry for %s), or set "
                   "TRITON_LIBCUDA_PATH=%s" % (where or "the libcuda dir",
                                               where or "<dir of libcuda.so.1>"))
            summary = "libcuda.so.1 is not in the ldconfig cache nor on LD_LIBRARY_PATH"
            if where:
                summary += " (the loader finds %s)" % self.cuda_info.get("loaded")
            return ("fail", summary, fix, evidence)
        return ("pass", "libcuda.so.1 in %s" % ", ".join(dirs), "", evidence)

    def check_libcuda_unversioned_missing(self):
        version = self.triton_version()
        if not version:
            return ("skip", "Triton version unknown", "", {})
        if version >= (3, 6):
            return ("pass", "not needed: Triton >= 3.6 links libcuda.so.1", "", {})
        dirs, failure, entries = self.libcuda_dirs()
        if failure:
            return ("skip", "libcuda.so.1 not found (see libcuda_not_in_ldcache)", "", {})
        in_dirs = [d for d in dirs if os.path.exists(os.path.join(d, "libcuda.so"))]
        in_cache = [p for n, p in entries if n == "libcuda.so"]
        evidence = {"dirs": dirs, "with_libcuda_so": in_dirs, "ldconfig": in_cache}
        if in_dirs or in_cache:
            return ("pass", "libcuda.so present for -lcuda", "", evidence)
        evidence["expected_error"] = "/usr/bin/ld: cannot find -lcuda"
        target = os.path.join(dirs[0], "libcuda.so") if dirs else "libcuda.so"
        return ("fail", "Triton %s links -lcuda but only libcuda.so.1 exists" % ".".join(
            map(str, version)), "ln -s libcuda.so.1 %s, or upgrade to Triton >= 3.6" % target,
            evidence)

    def check_ldcache_stale_libcuda_entry(self):
        if self.env.get("TRITON_LIBCUDA_PATH"):
            return ("pass", "not consulted (TRITON_LIBCUDA_PATH is set)", "", {})
        if self.ld_result is None:
            return ("skip", "no /sbin/ldconfig to ask (see ldconfig_binary_missing)", "", {})
        if self.ldconfig_limit():
            return ("skip", "/sbin/ldconfig -p gave no answer under the job's limit (see "
                    "libcuda_not_in_ldcache)", "", {})
        entries = parse_ldconfig(self.ld_result["stdout"])
        locs = [p for n, p in entries if "libcuda.so.1" in n]
        loaded, _ = self.loaded_libcuda()
        evidence = {"ldconfig_libcuda": locs, "exists": {p: os.path.exists(p) for p in locs},
                    "dlopen": loaded}
        if not locs:
            return ("skip", "ldconfig lists no libcuda.so.1 (see libcuda_not_in_ldcache)", "",
                    evidence)
        if any(os.path.exists(p) for p in locs):
            return ("pass", "ldconfig's libcuda.so.1 exists (%s)" % ", ".join(
                p for p in locs if os.path.exists(p)), "", evidence)
        if not loaded:
            return ("skip", "ldconfig's libcuda.so.1 is missing and the loader finds none either "
                    "(see zero_active_drivers)", "", evidence)
        real_dir = os.path.dirname(loaded)
        evidence["expected_error"] = (
            "AssertionError: libcuda.so cannot found!\nPossible files are located at %s."
            "Please create a symlink of libcuda.so to any of the files." % str(locs))
        return ("fail", "ldconfig -p lists libcuda.so.1 only at %s, which does not exist here; "
                "the loader uses %s, which Triton ignores" % (", ".join(locs), loaded),
                "set TRITON_LIBCUDA_PATH=%s, or rerun ldconfig over %s" % (real_dir, real_dir),
                evidence)
