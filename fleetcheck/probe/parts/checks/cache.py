"""Checks of Triton's cache directory: writable, exec allowed, node-local."""

import os

from fleetcheck.probe.parts.evaluation.findings import Findings
from fleetcheck.probe.parts.facts.cache import existing_ancestor, mount_fs, mount_of, network_fs


class CacheChecks(Findings):
    """The cache directory checks."""

    def check_cache_dir_unwritable(self):
        cache = self.facts["triton_cache_dir"]
        evidence = {"cache_dir": cache, "HOME": self.env.get("HOME")}
        fix = self.cause_fix("cache_dir_unwritable", {"cache_dir": cache})
        if os.path.isdir(cache):
            # access(2), not a test file: the user's cache is never written to (a job may be
            # using it); it also answers EROFS for a read-only mount.
            if not os.access(cache, os.W_OK | os.X_OK):
                return ("fail", "Triton cache %s not writable: PermissionError: [Errno 13] "
                        "Permission denied: '%s'" % (cache, cache), fix, evidence)
            return ("pass", "%s writable" % cache, "", evidence)
        ancestor = existing_ancestor(cache)
        evidence["nearest_existing"] = ancestor
        if not os.path.isdir(ancestor):
            return ("fail", "Triton cache %s cannot be created: %s is not a directory" % (
                cache, ancestor), fix, evidence)
        if not os.access(ancestor, os.W_OK | os.X_OK):
            missing = os.path.join(ancestor, os.path.relpath(cache, ancestor).split(os.sep)[0])
            return ("fail", "Triton cache cannot be created: PermissionError: [Errno 13] "
                    "Permission denied: '%s'" % missing, fix, evidence)
        return ("pass", "%s can be created under %s" % (cache, ancestor), "", evidence)

    def _cache_mount(self, find):
        """The cache dir and `find`'s answer for the mount that holds it (or would hold it
        once created): a skip result instead when there is no mountinfo to read."""
        cache = self.facts["triton_cache_dir"]
        if not self.mountinfo:
            return cache, None, ("skip", "no /proc/self/mountinfo", "", {"cache_dir": cache})
        where = existing_ancestor(os.path.realpath(cache) if os.path.exists(cache) else cache)
        return cache, find(where, self.mountinfo), None

    def check_cache_dir_noexec(self):
        cache, mount, skipped = self._cache_mount(mount_of)
        if skipped:
            return skipped
        evidence = {"cache_dir": cache, "mount": mount[0] if mount else None,
                    "options": mount[1] if mount else None}
        # statvfs of the cache's file system, as the workload's process sees it (its own
        # mount namespace, a bind mount the mountinfo prefix match cannot place).
        space = (self.stages.get("own") or {}).get("cache_space") or {}
        if space.get("noexec") and not (mount and "noexec" in mount[1].split(",")):
            mount = (space.get("path") or cache, "noexec")
            evidence.update(mount=mount[0], options=mount[1], seen_by="statvfs ST_NOEXEC")
        if mount and "noexec" in mount[1].split(","):
            evidence["expected_error"] = ("ImportError: cuda_utils.so: failed to map segment "
                                          "from shared object")
            return ("fail", "Triton cache %s is on noexec mount %s" % (cache, mount[0]),
                    "set TRITON_CACHE_DIR to a dir on a mount without noexec", evidence)
        return ("pass", "cache mount %s allows exec" % (mount[0] if mount else "/"), "",
                evidence)

    def check_cache_on_network_fs(self):
        cache, mount, skipped = self._cache_mount(mount_fs)
        if skipped:
            return skipped
        evidence = {"cache_dir": cache, "mount": mount and mount[0],
                    "fstype": mount and mount[1], "source": mount and mount[2]}
        if mount and network_fs(mount[1]):
            return ("warn", "Triton cache %s is on %s %s (%s): ranks sharing it race on its "
                    "files (FileNotFoundError on .tmp.pid_*, Stale file handle)" % (
                        cache, mount[1], mount[0], mount[2]),
                    "export TRITON_CACHE_DIR=<a node-local dir>, e.g. /tmp/triton-$USER", evidence)
        return ("pass", "cache on %s (%s)" % (mount[0], mount[1]) if mount else
                "cache mount unknown", "", evidence)

    # The workload's real entries, as the stack's proof met them (scripts/workload.py,
    # audit_entries): one check per kind of entry Triton can neither load nor replace.
    def _entry_problems(self, kind):
        own = self.stages.get("own") or {}
        entries = own.get("entries")
        evidence = {"cache_dir": own.get("cache_dir"), "through": own.get("through"),
                    "keys": own.get("keys")}
        if not own:
            return None, ("skip", "the workload's own path was not tried", "", evidence)
        if entries is None:
            return None, ("skip", "entries not read: this Triton's cache manager is not "
                          "Triton's FileCacheManager", "", evidence)
        evidence["entries"] = entries.get("count")
        evidence["unread"] = entries.get("unread")
        found = [p for p in entries.get("problems") or [] if p.get("kind") == kind]
        evidence["problems"] = found[:8]
        if not found:
            unread = entries.get("unread")
            return None, ("pass", "%d entries of %s usable%s" % (
                entries.get("count") or 0, own.get("cache_dir"),
                " (%d more not read within the probe's time)" % unread if unread else ""),
                "", evidence)
        return found, evidence

    @staticmethod
    def _paths(found):
        """The entry dirs (<cache>/<key>) to remove, a few of them, quoted for a shell."""
        import shlex
        paths = sorted({p.get("entry") or p["path"] for p in found})
        return " ".join(shlex.quote(p) for p in paths[:6]) + (" ..." if len(paths) > 6 else "")

    def check_cache_entry_foreign_owner(self):
        found, evidence = self._entry_problems("foreign_owner")
        if found is None:
            return evidence
        first = found[0]
        owner = first.get("owner") or "uid %s" % first.get("owner_uid")
        me = user_name()
        return ("fail", "Triton cache entry %s is %s's (mode %s): %s; the workload (%s) can "
                "neither use nor replace it%s" % (
                    first["path"], owner, first.get("mode"), first.get("why"), me,
                    " (%d such entries)" % len(found) if len(found) > 1 else ""),
                "remove the entries %s left in the cache (it ran the workload as %s, e.g. with "
                "sudo): sudo rm -rf %s; or give them back: sudo chown -R %s %s" % (
                    owner, owner, self._paths(found), me,
                    self._paths([{"path": evidence.get("cache_dir") or ""}])),
                evidence)

    def check_cache_entry_unreadable(self):
        found, evidence = self._entry_problems("unreadable")
        if found is None:
            return evidence
        first = found[0]
        return ("fail", "Triton cache entry %s is unusable: %s" % (first["path"], first.get(
                    "why")), "chmod -R u+rwX %s (or remove it: rm -rf %s)" % (
                    self._paths(found), self._paths(found)), evidence)

    def check_cache_entry_corrupt(self):
        found, evidence = self._entry_problems("corrupt")
        if found is None:
            return evidence
        first = found[0]
        return ("fail", "Triton cache entry %s is corrupt: %s" % (first["path"], first.get(
                    "why")), "rm -rf %s (Triton builds the entry again)" % self._paths(found),
                evidence)


def user_name():
    """This process's user name (the workload's: the probe runs as it), else its uid (chown
    takes either)."""
    try:
        import pwd
        return pwd.getpwuid(os.geteuid()).pw_name
    except (ImportError, KeyError):
        return str(os.geteuid())
