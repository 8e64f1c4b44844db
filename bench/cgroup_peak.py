"""What a command's peak memory is made of: the command run in a cgroup v2 of its own (as a
job's limit would count it), its memory.current sampled every few milliseconds, and at each new
high the cgroup's memory.stat and each of its processes' resident memory kept.

    python bench/cgroup_peak.py [--limit BYTES] [--stdin FILE] -- CMD ARGS...

Output: one JSON object (stdout): memory.peak, oom_kill, the breakdown at the sampled high
(anon, file, kernel, ... from memory.stat; per process: its command, RssAnon, RssFile,
RssShmem) and the command's rc. Needs root (a cgroup under /sys/fs/cgroup). A benchmark tool
for the device (docs/probe-performance.md), never part of the probe or the tests.
"""

import json
import os
import subprocess
import sys
import time

ROOT = "/sys/fs/cgroup"
STAT_KEYS = ("anon", "file", "kernel", "kernel_stack", "pagetables", "sock", "shmem",
             "file_mapped", "slab", "percpu")


def read(path):
    with open(path) as handle:
        return handle.read()


def process_memory(pid):
    """(command, {RssAnon, RssFile, RssShmem} kB) of one process; None when it is gone."""
    try:
        status = read(f"/proc/{pid}/status")
        cmd = read(f"/proc/{pid}/cmdline").split("\0")
    except OSError:
        return None
    fields = {}
    for line in status.splitlines():
        key, _, value = line.partition(":")
        if key in ("RssAnon", "RssFile", "RssShmem"):
            fields[key] = int(value.split()[0])
    label = " ".join(a if len(a) < 40 else a[:30] + "..." for a in cmd[:3] if a)
    return label, fields


def main(argv):
    limit = stdin = None
    while argv and argv[0] != "--":
        if argv[0] == "--limit":
            limit, argv = argv[1], argv[2:]
        elif argv[0] == "--stdin":
            stdin, argv = argv[1], argv[2:]
        else:
            sys.exit("usage: cgroup_peak.py [--limit BYTES] [--stdin FILE] -- CMD ARGS...")
    argv = argv[1:]
    group = os.path.join(ROOT, f"fleetcheck-peak-{os.getpid()}")
    os.mkdir(group)
    try:
        if limit:
            with open(os.path.join(group, "memory.max"), "w") as handle:
                handle.write(limit)
        procs = os.path.join(group, "cgroup.procs")

        def enter():
            with open(procs, "w") as handle:
                handle.write(str(os.getpid()))
        started = time.monotonic()
        with open(stdin or os.devnull, "rb") as given:
            proc = subprocess.Popen(argv, stdin=given, stdout=subprocess.PIPE,
                                    stderr=subprocess.DEVNULL, preexec_fn=enter)
        high, breakdown = 0, {}
        out = []
        import threading
        reader = threading.Thread(target=lambda: out.append(proc.stdout.read()), daemon=True)
        reader.start()
        while proc.poll() is None:
            try:
                current = int(read(os.path.join(group, "memory.current")))
            except (OSError, ValueError):
                break
            if current > high:
                high = current
                stat = {}
                for line in read(os.path.join(group, "memory.stat")).splitlines():
                    key, _, value = line.partition(" ")
                    if key in STAT_KEYS:
                        stat[key] = round(int(value) / 2 ** 20, 1)
                each = []
                for pid in read(procs).split():
                    found = process_memory(pid)
                    if found:
                        label, fields = found
                        each.append({"cmd": label, **{k: round(v / 1024, 1)
                                                      for k, v in fields.items()}})
                breakdown = {"at_s": round(time.monotonic() - started, 3),
                             "current_mb": round(current / 2 ** 20, 1), "stat_mb": stat,
                             "processes": each}
            time.sleep(0.004)
        rc = proc.wait()
        reader.join(5)
        try:
            events = dict(line.split() for line in read(os.path.join(group, "memory.events"))
                          .splitlines())
            peak = round(int(read(os.path.join(group, "memory.peak"))) / 2 ** 20, 1)
        except OSError:  # not cgroup v2, or a kernel without memory.peak
            events, peak = {}, None
        result = {"argv": argv[:3], "rc": rc,
                  "wall_s": round(time.monotonic() - started, 3), "peak_mb": peak,
                  "oom_kill": int(events.get("oom_kill", 0)), "sampled_high": breakdown}
        text = (out[0] if out else b"").decode("utf-8", "replace")
        try:
            verdict = json.loads(text)
            result["verdict"] = verdict.get("triton", {}).get("verdict") if isinstance(
                verdict.get("triton"), dict) else verdict.get("triton")
        except ValueError:
            pass
        print(json.dumps(result))
    finally:
        for _ in range(50):
            try:
                os.rmdir(group)
                break
            except OSError:
                time.sleep(0.1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
