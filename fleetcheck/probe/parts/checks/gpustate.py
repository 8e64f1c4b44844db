"""Checks of the GPUs' state before a job: memory already held, foreign processes, memory
health, GPUs CUDA cannot open, persistence mode, Xid events. They fail or warn the node (a
playbook decides: max_gpu_memory_used, foreign_processes, memory_health, min_gpus), never
Triton's verdict."""


from fleetcheck.probe.parts.evaluation.findings import Findings
from fleetcheck.probe.parts.facts.gpustate import DEFAULT_MEMORY_SHARE

#: How to find and stop what holds a GPU, on the node (or, for a container, on its host).
HOLDER_FIX = ("stop what holds it before the job: `nvidia-smi --query-compute-apps=pid,"
              "used_memory --format=csv` lists the processes, `fuser -v /dev/nvidia*` who has "
              "the GPUs open; in a container, processes of other containers or of the host are "
              "seen only as memory in use: run these on the host")


def gib(mib):
    return "%.1f GiB" % (mib / 1024.0)


def process_words(process):
    """'pid 1234 (python train.py, user alice)', or what is known of a pid seen elsewhere."""
    if not process.get("here"):
        return "pid %s (not in this pid namespace: another container's or the host's%s)" % (
            process["pid"], ", the same pid here is another process" if process.get(
                "pid_reused") else "")
    what = process.get("cmdline") or process.get("name") or "?"
    words = [what[:60]]
    if process.get("user"):
        words.append("user " + process["user"])
    if process.get("used_mib") is not None:
        words.append(gib(process["used_mib"]))
    return "pid %s (%s)" % (process["pid"], ", ".join(words))


def foreign(gpu):
    return [p for p in gpu.get("processes") or [] if not p.get("own")]


class GpuStateChecks(Findings):
    """One `check_<id>` per GPU-state check (facts.gpu_state, facts/gpustate.py)."""

    def gpu_state(self):
        return self.facts.get("gpu_state") or {}

    def job_gpus(self):
        """The GPUs the job may use (CUDA_VISIBLE_DEVICES's, or all)."""
        return [g for g in self.gpu_state().get("gpus") or [] if g.get("job", True)]

    def state_unread(self):
        state = self.gpu_state()
        return ("skip", "GPU state not read (%s)" % (
            state.get("error") or "no NVML, no nvidia-smi"), "", {"error": state.get("error")})

    def check_gpu_memory_in_use(self):
        gpus = [g for g in self.job_gpus() if g.get("total_mib")]
        if not gpus:
            return self.state_unread()
        worst = max(gpus, key=lambda g: g["held_share"])
        evidence = {"max_share": DEFAULT_MEMORY_SHARE, "worst_share": worst["held_share"],
                    "gpus": [{key: g.get(key) for key in ("index", "held_mib", "total_mib",
                                                          "held_share")} for g in gpus]}
        held = [g for g in gpus if g["held_share"] > DEFAULT_MEMORY_SHARE]
        if not held:
            return ("pass", "GPU memory free: at most %.0f%% in use (GPU %s)" % (
                worst["held_share"] * 100, worst["index"]), "", evidence)
        parts = []
        for gpu in held:
            who = foreign(gpu)
            parts.append("GPU %s: %s of %s in use (%.0f%%)%s" % (
                gpu["index"], gib(gpu["held_mib"]), gib(gpu["total_mib"]),
                gpu["held_share"] * 100,
                " by " + ", ".join(process_words(p) for p in who[:3]) if who else
                " by no process this node can list (another pid namespace's)"))
        return ("warn", "; ".join(parts), HOLDER_FIX, evidence)

    def check_gpu_foreign_processes(self):
        gpus = self.job_gpus()
        if not gpus:
            return self.state_unread()
        found, unseen, unread = [], [], []
        for gpu in gpus:
            for process in foreign(gpu):
                found.append((gpu["index"], process))
            if (not foreign(gpu) and gpu.get("held_share") is not None
                    and gpu["held_share"] > DEFAULT_MEMORY_SHARE):
                unseen.append(gpu)
            if gpu.get("processes_error"):
                unread.append(gpu)
        evidence = {"processes": [dict(p, gpu=index) for index, p in found][:32],
                    "unseen": [g["index"] for g in unseen],
                    "unread": [g["index"] for g in unread]}
        if found or unseen:
            words = ["GPU %s: %s" % (index, process_words(p)) for index, p in found[:4]]
            words += ["GPU %s: %s in use by processes of another pid namespace (the host's or "
                      "another container's: seen only as memory)" % (g["index"],
                                                                     gib(g["held_mib"]))
                      for g in unseen[:4]]
            count = len(found) + len(unseen)
            return ("warn", "%d foreign process%s on the GPUs: %s" % (
                count, "" if count == 1 else "es", "; ".join(words)), HOLDER_FIX, evidence)
        if unread and len(unread) == len(gpus):
            return ("skip", "GPU processes not listed (%s)" % unread[0]["processes_error"], "",
                    evidence)
        return ("pass", "no other process on the GPUs", "", evidence)

    def check_gpu_memory_health(self):
        gpus = [g for g in self.job_gpus() if g.get("health")]
        if not gpus:
            return self.state_unread() if not self.job_gpus() else (
                "skip", "memory-health counters not readable (NVML: not supported here)", "",
                {})
        pending, failed, ecc, retired = [], [], [], []
        for gpu in gpus:
            health = gpu["health"]
            rows = health.get("remapped_rows") or {}
            if rows.get("failure"):
                failed.append(gpu["index"])
            if rows.get("pending") or health.get("retired_pages_pending"):
                pending.append(gpu["index"])
            if health.get("ecc_uncorrected_volatile"):
                ecc.append((gpu["index"], health["ecc_uncorrected_volatile"]))
            if (health.get("retired_pages") or {}).get("double_bit"):
                retired.append((gpu["index"], health["retired_pages"]["double_bit"]))
        evidence = {"gpus": [{"index": g["index"], "health": g["health"]} for g in gpus]}
        if failed:
            return ("fail", "GPU %s: row remapping failed (uncorrectable memory the GPU could "
                    "not remap): the GPU needs service" % ", ".join(str(i) for i in failed),
                    "drain the node and have the GPU serviced (RMA); `nvidia-smi -q -d "
                    "ROW_REMAPPER -i N` shows the counters", evidence)
        if pending:
            return ("fail", "GPU %s: memory repair pending (row remapping or page retirement "
                    "waits for a GPU reset): the next large allocation may hit the bad memory"
                    % ", ".join(str(i) for i in pending),
                    "reset the GPU once nothing uses it (`nvidia-smi -r -i N`, as root, on the "
                    "host) or reboot the node; `nvidia-smi -q -d ROW_REMAPPER,PAGE_RETIREMENT "
                    "-i N` shows what waits", evidence)
        if ecc or retired:
            words = ["GPU %s: %d uncorrected ECC error(s) since boot" % e for e in ecc]
            words += ["GPU %s: %d page(s) retired for double-bit errors" % r for r in retired]
            return ("warn", "; ".join(words), "watch the GPU: `nvidia-smi -q -d ECC,"
                    "ROW_REMAPPER -i N`; more errors mean a reset or service", evidence)
        return ("pass", "no pending memory repair, no uncorrected ECC error", "", evidence)

    def check_gpu_missing_for_cuda(self):
        state = self.gpu_state()
        listed = state.get("listed") or 0
        cuda = state.get("cuda_count")
        visible = state.get("visible_devices")
        expected = listed if visible is None else min(listed, len(visible))
        evidence = {"listed": listed, "cuda_count": cuda, "visible_devices": visible,
                    "expected": expected}
        if cuda is None:
            return ("skip", "CUDA does not initialise (see zero_active_drivers): no count to "
                    "compare", "", evidence)
        if cuda < expected:
            return ("warn", "the driver lists %d GPU(s)%s, CUDA opens %d: %d missing for CUDA" % (
                listed, " (%d visible to the job)" % expected if expected != listed else "",
                cuda, expected - cuda),
                "look for the GPU CUDA cannot open: `nvidia-smi -q` (a GPU that 'requires "
                "reset', 'Unknown Error', fallen off the bus: Xid 79) and the kernel log; a GPU "
                "reset (`nvidia-smi -r -i N`) or a reboot; in a container, every /dev/nvidiaN "
                "of the GPUs it is given must be passed in", evidence)
        return ("pass", "CUDA opens the %d GPU(s) the driver lists" % cuda, "", evidence)

    def check_gpu_persistence_mode(self):
        gpus = [g for g in self.job_gpus() if g.get("persistence_mode") is not None]
        if not gpus:
            return ("skip", "persistence mode not read", "", {})
        off = [g["index"] for g in gpus if g["persistence_mode"] == 0]
        evidence = {"gpus": [{"index": g["index"], "persistence_mode": g["persistence_mode"],
                              "compute_mode": g.get("compute_mode")} for g in gpus]}
        if off:
            return ("warn", "GPU %s: persistence mode off (each job pays the driver's start, "
                    "and the GPU's state is reset between jobs)" % ", ".join(
                        str(i) for i in off),
                    "enable it on the host: `systemctl enable --now nvidia-persistenced` (or "
                    "`nvidia-smi -pm 1`, as root)", evidence)
        return ("pass", "persistence mode on", "", evidence)

    def check_gpu_xid_events(self):
        xid = self.gpu_state().get("xid") or {}
        if not xid.get("readable"):
            return ("skip", "kernel log not readable, Xid events unknown (not clean): %s" % (
                xid.get("why") or "not read"), "", {"why": xid.get("why")})
        events = [e for e in xid.get("events") or [] if e.get("this_node")]
        hours = xid.get("window_s", 3600) / 3600.0
        evidence = {"window_s": xid.get("window_s"), "events": events[-20:]}
        critical = [e for e in events if e["kind"] == "critical"]
        if critical:
            last = critical[-1]
            return ("fail", "%d critical Xid event(s) in the last %g h: Xid %d on %s (%s)" % (
                len(critical), hours, last["xid"], last["pci"], last["text"][:80]),
                "reboot the node (a GPU reset, `nvidia-smi -r -i N` with nothing using it, "
                "clears the GPU too, but this check counts the Xid for %g h after it was "
                "logged); look the Xid up in NVIDIA's Xid catalogue; a repeating one needs "
                "service" % hours, evidence)
        app = [e for e in events if e["kind"] == "application"]
        if app:
            return ("warn", "%d application Xid event(s) in the last %g h (Xid %s: a program's "
                    "fault, the GPU is fine)" % (len(app), hours, ", ".join(
                        sorted({str(e["xid"]) for e in app}))),
                    "see the program that faulted (the pid in the kernel log's Xid line)",
                    evidence)
        return ("pass", "no critical Xid event in the last %g h%s" % (
            hours, " (%d informational)" % len(events) if events else ""), "", evidence)
