"""Checks of Triton's cache directory: writable, exec allowed, node-local."""

import os

from fleetcheck.probe.parts.base import Part
from fleetcheck.probe.parts.facts_cache import existing_ancestor, mount_fs, mount_of, network_fs


class CacheChecks(Part):
    """The cache directory checks."""

    def check_cache_dir_unwritable(self):
        cache = self.facts["triton_cache_dir"]
        evidence = {"cache_dir": cache, "HOME": self.env.get("HOME")}
        fix = "export TRITON_CACHE_DIR=<a writable dir>"
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
