"""Where a probe run's time and memory go: the built probe run in this interpreter with its
helpers timed (start, end, collected), the stack's stages stamped as they are emitted, the
probe's own steps timed, and the summed memory of the whole process tree sampled.

    python bench/probe_profile.py [probe.py] [probe args...] > profile.json
    python bench/probe_profile.py --tree -- CMD ARGS...   # peak memory and wall of any command

Output: one JSON object (stdout). A benchmark tool for the device (docs/probe-performance.md),
never part of the probe or the tests.
"""

import json
import os
import subprocess
import sys
import threading
import time

PAGE = os.sysconf("SC_PAGE_SIZE")


def children_of(root):
    """Every live descendant pid of `root` (from /proc/*/stat's ppid)."""
    parents = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as handle:
                text = handle.read()
        except OSError:
            continue
        fields = text.rsplit(")", 1)[-1].split()
        parents.setdefault(int(fields[1]), []).append(int(name))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        for child in parents.get(pid, ()):
            found.append(child)
            todo.append(child)
    return found


def memory_of(pid):
    """(rss, pss) bytes of one process, zeros when it is gone."""
    rss = pss = 0
    try:
        with open(f"/proc/{pid}/smaps_rollup") as handle:
            for line in handle:
                if line.startswith("Rss:"):
                    rss = int(line.split()[1]) * 1024
                elif line.startswith("Pss:"):
                    pss = int(line.split()[1]) * 1024
    except OSError:
        try:
            with open(f"/proc/{pid}/statm") as handle:
                rss = int(handle.read().split()[1]) * PAGE
        except OSError:
            pass
    return rss, pss


class Sampler(threading.Thread):
    """The tree's summed RSS and PSS every 20 ms; peaks kept."""

    def __init__(self, root, include_root):
        super().__init__(daemon=True)
        self.root, self.include_root = root, include_root
        self.peak_rss = self.peak_pss = self.peak_procs = 0
        self.stop = threading.Event()

    def run(self):
        while not self.stop.is_set():
            pids = children_of(self.root) + ([self.root] if self.include_root else [])
            rss = pss = 0
            for pid in pids:
                one = memory_of(pid)
                rss += one[0]
                pss += one[1]
            self.peak_rss = max(self.peak_rss, rss)
            self.peak_pss = max(self.peak_pss, pss)
            self.peak_procs = max(self.peak_procs, len(pids))
            self.stop.wait(0.02)


def tree(argv):
    """Run a command; its wall seconds and its tree's peak memory."""
    started = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL)
    sampler = Sampler(proc.pid, True)
    sampler.start()
    rc = proc.wait()
    wall = time.monotonic() - started
    sampler.stop.set()
    sampler.join()
    return {"argv": argv[:3], "rc": rc, "wall_s": round(wall, 3),
            "peak_rss_mb": round(sampler.peak_rss / 2 ** 20, 1),
            "peak_pss_mb": round(sampler.peak_pss / 2 ** 20, 1), "peak_procs": sampler.peak_procs}


def profile(path, args):
    t0 = time.monotonic()
    wall0 = time.time()
    events = []
    namespace = {"__name__": "fleetcheck_probe_profiled"}
    with open(path) as handle:
        source = handle.read()
    exec(compile(source, path, "exec"), namespace)
    events.append(["probe code loaded", round(time.monotonic() - t0, 3)])
    spawned = namespace["Spawned"]
    start, result = spawned._start, spawned.result

    def timed_start(self, env, cwd):
        self.profile_start = time.monotonic() - t0
        start(self, env, cwd)
        if self.proc is not None:
            proc = self.proc

            def watch():
                try:
                    os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
                except OSError:
                    pass
                self.profile_exit = time.monotonic() - t0
            threading.Thread(target=watch, daemon=True).start()

    def timed_result(self):
        begin = time.monotonic() - t0
        out = result(self)
        if not hasattr(self, "profile_end"):
            self.profile_end = time.monotonic() - t0
            argv = [a if len(a) < 60 else a[:40] + "..." for a in self.argv[:3]]
            events.append({"helper": argv, "start": round(self.profile_start, 3),
                           "exit": round(getattr(self, "profile_exit", -1), 3),
                           "collect_begin": round(begin, 3),
                           "collected": round(self.profile_end, 3), "rc": out.get("rc")})
        return out
    spawned._start, spawned.result = timed_start, timed_result
    # The stack's stages stamped with the wall clock when emitted.
    for name in ("STACK_SCRIPT", "DEEP_SCRIPT"):
        namespace[name] = namespace[name].replace(
            'data["stage"] = stage', 'data["stage"] = stage; data["t_wall"] = '
            '__import__("time").time()', 1)
    probe_class = namespace["Probe"]
    for attr in ("gather", "run_checks", "verdict", "frameworks", "test_compile",
                 "collect_cuda", "wait_gpu_state", "start_gpu_state", "workload_pyinfo",
                 "find_compiler", "assemble_facts", "start_compile"):
        method = getattr(probe_class, attr, None)
        if method is None:
            continue

        def wrapped(self, *a, _method=method, _name=attr, **k):
            begin = time.monotonic() - t0
            try:
                return _method(self, *a, **k)
            finally:
                events.append(["probe." + _name, round(begin, 3),
                               round(time.monotonic() - t0, 3)])
        setattr(probe_class, attr, wrapped)
    stages = {}
    stage_lines = namespace["stage_lines"]

    def stamped(text):
        found = stage_lines(text)
        for name, data in found.items():
            if isinstance(data, dict) and "t_wall" in data:
                stages[name] = {"at": round(data["t_wall"] - wall0, 3),
                                "seconds": data.get("seconds"),
                                "import_s": data.get("import_s"), "cache": data.get("cache")}
        return found
    namespace["stage_lines"] = stamped
    sampler = Sampler(os.getpid(), True)
    sampler.start()
    real_stdout = sys.stdout
    sys.stdout = open(os.devnull, "w")
    try:
        namespace["main"](args)
    finally:
        sys.stdout = real_stdout
    total = time.monotonic() - t0
    sampler.stop.set()
    sampler.join()
    return {"total_s": round(total, 3), "events": events, "stages": stages,
            "peak_rss_mb": round(sampler.peak_rss / 2 ** 20, 1),
            "peak_pss_mb": round(sampler.peak_pss / 2 ** 20, 1),
            "peak_procs": sampler.peak_procs}


def main(argv):
    if argv[:1] == ["--tree"]:
        rest = argv[1:]
        if rest[:1] == ["--"]:
            rest = rest[1:]
        print(json.dumps(tree(rest)))
        return 0
    path = argv[0] if argv and argv[0].endswith(".py") else os.path.join(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fleetcheck", "probe",
        "probe.py")
    args = argv[1:] if argv and argv[0].endswith(".py") else argv
    print(json.dumps(profile(path, args), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
