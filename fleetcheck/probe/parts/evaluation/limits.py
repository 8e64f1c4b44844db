"""The job's limits as they explain a failure: read once, named for an errno, a helper the
job stopped (its start refused, the OOM killer) or a CUDA initialisation error."""

from fleetcheck.probe.parts.catalogue import cause_label
from fleetcheck.probe.parts.core.spawn import LIMIT_ERRNOS, oom_kills
from fleetcheck.probe.parts.core.state import ProbeState
from fleetcheck.probe.parts.evaluation.objects import (
    cuda_limit,
    explain,
    limit_values,
    limited,
    near,
    read_limits,
)


class Limits(ProbeState):
    """The limits of the job, for the facts' errors, the checks' and the verdict's."""

    def cause_label(self, cause):
        """The short name of a root cause, in the node's vendor's terms."""
        return cause_label(cause, self.vendor)

    def node_limits(self):
        if self.limits is None:
            self.limits = read_limits()
        return self.limits

    def limit_named(self, errno_name):
        """(cause, values) of a limit set on this job that explains `errno_name`, or None."""
        for cause, values in explain(errno_name, None, "", None, self.node_limits()):
            if "limit" in values:
                return cause, values
        return None

    def helper_limit(self, result):
        """(cause, values) of the job's limit that stopped one of the probe's own processes
        (`result`: Spawned.result()): the errno that refused its start (EAGAIN, EMFILE, ENFILE,
        ENOMEM), or a SIGKILL by the cgroup's OOM killer (its memory.events oom_kill count rose;
        without the count, memory.max set and its use or peak within a tenth of it); None
        when no limit set explains it."""
        if not result or result.get("timed_out"):
            return None
        if result.get("errno") in LIMIT_ERRNOS:
            return self.limit_named(result["errno"])
        if result.get("rc") != -9:
            return None
        name, limit = limited(self.node_limits(), "memory.max")
        if name and (result.get("oom_kill") or (oom_kills() is None and near(limit))):
            values = dict(limit_values(name, limit), oom_kill="%s -> %s" % tuple(
                result["oom_kill"]) if result.get("oom_kill") else "not counted")
            return "memory_cgroup_limit", values
        return None

    def cuda_os_limit(self, code):
        """(cause, values) of a tight limit of the job's that explains a CUDA initialisation
        error `code` (304: an OS call the driver made failed; 100: no device, with the device
        nodes opening fine), or None: objects.cuda_limit. For check_zero_active_drivers
        (cuInit's code) and check_torch_cuda (the code in torch's warning), beside 2 ->
        limit_named("ENOMEM")."""
        return cuda_limit(code, self.node_limits(),
                          self.statuses.get("dev_nodes_missing") == "pass")

    def limit_note(self, cause, values):
        """'; LABEL: LIMIT = VALUE (where it comes from)' for a summary."""
        return "; %s: %s = %s (%s)" % (self.cause_label(cause), values.get("limit"),
                                       values.get("value"), values.get("source"))
