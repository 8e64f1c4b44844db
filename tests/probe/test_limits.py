"""Limits named as limits: a step that fails with EMFILE, EAGAIN, EFBIG, ENOMEM or a kill by
the cgroup's OOM killer names that limit (its value, where it comes from, the fix that raises
it there); a check that failed only because of it says so; the probe survives the limit and
prints its document.

The rlimits are real (`prlimit` on the probe's process; RLIMIT_NPROC as a uid of its own, the
kernel ignoring it for root), and so are the failures they cause where a real tool meets them
(gcc and ld under `ulimit -f`, ldconfig under `ulimit -n`, fork under `ulimit -u`). The cgroup's
files and its OOM kill are the sysroot's (FLEETCHECK_SYSROOT prefixes the probe's /proc and
/sys reads): a stub that bumps memory.events' oom_kill and kills itself with SIGKILL, as the
kernel does.
"""

from __future__ import annotations

import errno
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from fleetcheck.probe.parts.core import base, spawn
from fleetcheck.probe.parts.core.assembly import Probe
from fleetcheck.probe.parts.core.spawn import Deadline, Spawned, stage_answer
from fleetcheck.probe.parts.evaluation import objects
from fleetcheck.probe.parts.evaluation.diagnose import diagnoses
from fleetcheck.probe.parts.evaluation.objects import (
    START_TASKS,
    cuda_limit,
    explain,
    limit_owner,
    read_limits,
    task_headroom,
    user_tasks,
)
from tests.nodeenv import GCC, NodeEnv, make_node, run_probe

#: A uid of the test's own, so that RLIMIT_NPROC (the user's processes) counts the probe's only.
OTHER_UID = 4243
#: A Slurm job's step, and the job's cgroup that holds its memory limit (cgroup v2).
JOB = "/system.slice/slurmstepd.scope/job_42"
STEP = JOB + "/step_0"


def prlimit(*limits: str) -> list[str]:
    found = shutil.which("prlimit")
    if not found:
        pytest.skip("no prlimit (util-linux) here")
    return [found, *limits, "--"]


def checks(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {check["id"]: check for check in doc["checks"]}


def ldconfig_only(node: NodeEnv) -> NodeEnv:
    """The node as a real one is: the loader finds libcuda (a default dir; here LD_PRELOAD),
    and Triton only through `ldconfig -p` (no LD_LIBRARY_PATH)."""
    env = {k: v for k, v in node.env.items() if k != "LD_LIBRARY_PATH"}
    env["LD_PRELOAD"] = str(node.root / "lib" / "libcuda.so.1")
    return replace(node, env=env)


def hungry_gcc(node: NodeEnv, files: int = 40) -> None:
    """A gcc that needs `files` open files before it runs the real one (as a compiler wrapper
    or an LTO build does): under a lower open-file limit it fails with the kernel's EMFILE,
    in gcc's words."""
    gcc = node.bindir / "gcc"
    gcc.unlink()
    gcc.write_text(
        f"#!{sys.executable}\nimport os, sys\n"
        f"try:\n    held = [os.open(os.devnull, os.O_RDONLY) for _ in range({files})]\n"
        "except OSError as e:\n"
        "    sys.stderr.write('gcc: fatal error: cannot open %s: %s\\ncompilation terminated.\\n'"
        " % (os.devnull, e.strerror))\n    sys.exit(1)\n"
        f"os.execv({GCC!r}, [{GCC!r}] + sys.argv[1:])\n")
    gcc.chmod(0o755)


def test_an_open_files_limit_is_the_cause_not_the_linker_cache(tmp_path: Path) -> None:
    # The H100's case: `ulimit -n 16`. The probe's own `ldconfig -p` found no fd for its pipes
    # (its helpers' pipes held them), and the node got libcuda_not_in_ldcache, "run ldconfig".
    # The workload's build does fail for the limit (its compiler needs more files): that is the
    # cause, with the limit's value and where it comes from.
    node = ldconfig_only(make_node(tmp_path / "node"))
    hungry_gcc(node)
    rc, doc, _ = run_probe(node, prefix=prlimit("--nofile=16"))
    by_id, triton = checks(doc), doc["triton"]
    assert isinstance(triton, dict)
    # The probe's own `ldconfig -p` runs (its start is tried again as its other helpers end);
    # where it still cannot start it, the check says so and names the limit: never a fail.
    ldcache = by_id["libcuda_not_in_ldcache"]
    assert ldcache["status"] == "pass" or (ldcache["status"], ldcache["evidence"]["matches"]) == (
        "error", "open_files_limit"), ldcache
    assert (rc, triton["verdict"], triton["cause"]) == (1, "cpu-fallback", "open_files_limit")
    assert "raise NOFILE (ulimit -n)=16 (soft = hard limit; inherited from" in triton["fix"]
    assert "ulimit -n 65536" in triton["fix"]
    target = by_id["triton_target"]
    assert target["evidence"]["matches"] == "open_files_limit"
    assert target["evidence"]["object"]["value"] == "16"
    assert "Too many open files" in target["summary"]
    facts = doc["facts"]
    assert isinstance(facts, dict) and facts["limits"]["NOFILE"]["soft"] == 16
    # No limit: the same node builds.
    rc, doc, _ = run_probe(node)
    assert isinstance(doc["triton"], dict) and doc["triton"]["verdict"] == "gpu"


@pytest.mark.parametrize(("where", "said", "fix"), [
    ({"container": "docker"}, "the Docker container's (docker run --ulimit",
     "docker run --ulimit nofile=65536:65536"),
    ({"env": {"SLURM_JOB_ID": "4242"}}, "propagated by Slurm (job 4242) from the shell that "
     "submitted it (PropagateResourceLimits)", "ulimit -n 65536 in the shell that runs "
     "sbatch/srun"),
], ids=["docker", "slurm"])
def test_the_limit_says_where_it_comes_from_and_how_to_raise_it_there(
        tmp_path: Path, where: dict[str, Any], said: str, fix: str) -> None:
    node = make_node(tmp_path / "node", **where)
    hungry_gcc(node)
    _, doc, _ = run_probe(node, prefix=prlimit("--nofile=16"))
    triton = doc["triton"]
    assert isinstance(triton, dict)
    assert (triton["verdict"], triton["cause"]) == ("cpu-fallback", "open_files_limit")
    assert said in triton["fix"] and fix in triton["fix"], triton["fix"]
    facts = doc["facts"]
    assert isinstance(facts, dict) and said in facts["limits"]["NOFILE"]["source"]


@pytest.fixture
def other_user(tmp_path: Path) -> Iterator[tuple[Path, list[str], str]]:
    """(a dir for the node, the prefix that runs the probe as a user of its own, its Python).

    RLIMIT_NPROC is not enforced for root: as root the probe runs as OTHER_UID (setpriv), in a
    dir that uid can reach, with the system's Python (the suite's may live under root's 0700
    home); as another user, as that user."""
    if os.geteuid() != 0:
        yield tmp_path, [], sys.executable
        return
    setpriv = shutil.which("setpriv")
    python = "/usr/bin/python3"
    if not setpriv or not Path(python).exists():
        pytest.skip("needs setpriv and /usr/bin/python3 to run as another uid")
    root = Path(tempfile.mkdtemp(prefix="fleetcheck-nproc-"))
    try:
        root.chmod(0o755)
        prefix = [setpriv, f"--reuid={OTHER_UID}", f"--regid={OTHER_UID}", "--clear-groups"]
        if subprocess.run([*prefix, python, "-c", "pass"], capture_output=True).returncode:
            pytest.skip("the system's Python is not usable by another uid here")
        yield root, prefix, python
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_a_job_that_cannot_start_a_process_names_the_process_limit(
        other_user: tuple[Path, list[str], str]) -> None:
    # The H100's case: under `ulimit -u` every check was "cannot run the workload interpreter:
    # BlockingIOError: [Errno 11]", the verdict unknown with cause zero_active_drivers and no
    # fix. Now the probe, which can start no process at all (nor a thread), still prints its
    # document; every check it could not evaluate names the limit, and none blames anything else.
    base_dir, as_user, python = other_user
    node = make_node(base_dir / "node")
    if as_user:
        subprocess.run(["chown", "-R", f"{OTHER_UID}:{OTHER_UID}", str(node.root)], check=True)
    rc, doc, _ = run_probe(node, prefix=[*as_user, *prlimit("--nproc=1")], python=python)
    by_id, triton = checks(doc), doc["triton"]
    assert isinstance(triton, dict)
    assert triton["verdict"] in ("unknown", "cpu-fallback"), triton
    assert not [c["id"] for c in by_id.values() if c["status"] == "fail"
                and (c["evidence"] or {}).get("matches") not in ("process_limit",)]
    assert rc in (1, 3) and doc["status"] in ("error", "fail")
    assert "NPROC (ulimit -u) = 1" in str(doc["reason"])
    stack = by_id["torch_cuda"]
    assert stack["status"] == "error"
    assert stack["summary"].startswith("not evaluated: this job cannot start a process")
    assert stack["evidence"]["matches"] == "process_limit"
    assert "raise NPROC (ulimit -u)=1" in stack["fix"] and "ulimit -u unlimited" in stack["fix"]
    assert "NPROC (ulimit -u) = 1" in by_id["zero_active_drivers"]["summary"]
    facts = doc["facts"]
    assert isinstance(facts, dict) and facts["limits"]["NPROC"]["soft"] == 1


#: The workload's own first step, as the job runs it.
OWN_START = "import torch, triton; triton.runtime.driver.active.get_current_target()"


@pytest.mark.parametrize("nproc, works", [(20, False), (40, True)])
def test_under_a_tight_process_limit_the_workloads_start_runs_alone_and_first(
        other_user: tuple[Path, list[str], str], nproc: int, works: bool) -> None:
    """The H100's case: under `ulimit -u 12` the workload's own start failed (torch's cuInit
    304: "0 active drivers") while the probe said gpu: its driver layer's cuInit, made first in
    a thread beside torch's import, had taken the tasks the driver needs, and torch's thread
    pools made do with fewer. Here torch's import starts 16 threads (as many as it can) and
    cuInit 4 of the driver's (304 where one is refused): under NPROC 20 the workload's own
    start fails (17 tasks, then the driver's fourth refused) and the probe must not say gpu;
    under NPROC 40, still tight enough that the probe runs the workload's start alone and in
    its order, both work. (On this stub the earlier probe failed too, its own compiler unable
    to fork first: the false gpu itself is the H100's evidence, docs/validation.md.)"""
    base_dir, as_user, python = other_user
    if not as_user:
        pytest.skip("RLIMIT_NPROC counts every task of this user: needs root, to run as a uid "
                    "of the test's own")
    # A uid of this case's own: RLIMIT_NPROC counts every task of the uid, and the other cases
    # (and the other limit tests) may run at the same time on other workers.
    uid = OTHER_UID + nproc
    as_user = [arg.replace(str(OTHER_UID), str(uid)) for arg in as_user]
    # A warm cache, as on the H100: the workload's start builds nothing.
    node = make_node(base_dir / "node", torch_threads=16, driver_threads=4, warm_cache=True)
    subprocess.run(["chown", "-R", f"{uid}:{uid}", str(node.root)], check=True)
    limit = [*as_user, *prlimit(f"--nproc={nproc}")]
    truth = subprocess.run([*limit, python, "-c", OWN_START], env=node.env, cwd=node.root,
                           capture_output=True, text=True, timeout=60)
    assert (truth.returncode == 0) == works, truth.stderr[-2000:]
    if not works:
        assert "0 active drivers" in truth.stderr, truth.stderr[-2000:]
    _, doc, _ = run_probe(node, prefix=limit, python=python)
    triton, facts = doc["triton"], doc["facts"]
    assert isinstance(triton, dict) and isinstance(facts, dict)
    assert facts["probe_cost"]["workload_alone"] is True
    if works:
        # (torch.compile's user-name lookup fails for this uid with no passwd entry: status
        # fail, the verdict gpu.)
        assert (triton["verdict"], triton["cause"]) == ("gpu", None), doc["reason"]
    else:
        assert triton["verdict"] != "gpu", doc["reason"]
        assert triton["cause"] == "process_limit", (triton, doc["reason"])
        # Which step meets the limit first (the driver's cuInit, a helper's start) words it.
        assert re.search(rf"NPROC \(ulimit -u\) (of|=) {nproc}\b", str(doc["reason"])), doc[
            "reason"]


def test_the_task_headroom_is_the_least_of_the_cgroups_pids_limits(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pids.max less pids.current at each level up the tree (a Slurm job's, its step's), the
    least; none set: no headroom to judge (NPROC is not counted for root, nor above 65536)."""
    soft = resource.getrlimit(resource.RLIMIT_NPROC)[0]
    if os.getuid() != 0 and soft != resource.RLIM_INFINITY and soft <= 1 << 16:
        pytest.skip("this user's own RLIMIT_NPROC counts too")
    monkeypatch.setattr(base, "SYSROOT", str(tmp_path))
    (tmp_path / "proc/self").mkdir(parents=True)
    (tmp_path / "proc/self/cgroup").write_text(f"0::{STEP}\n")
    job, step = tmp_path / ("sys/fs/cgroup" + JOB), tmp_path / ("sys/fs/cgroup" + STEP)
    step.mkdir(parents=True)
    assert task_headroom() is None
    (step / "pids.max").write_text("max\n")
    (job / "pids.max").write_text("100\n")
    (job / "pids.current").write_text("70\n")
    assert task_headroom() == 30 < START_TASKS
    (step / "pids.max").write_text("20\n")
    (step / "pids.current").write_text("15\n")
    assert task_headroom() == 5
    (job / "pids.max").write_text("max\n")
    (step / "pids.max").write_text("4096\n")
    assert task_headroom() == 4081 > START_TASKS


def test_a_roomy_nproc_is_judged_without_reading_every_process(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A user's RLIMIT_NPROC of 4096 (a distribution's default for logins): where every task
    of the system leaves room enough, that bound is the headroom and no process's status is
    read; near it, this user's own tasks are counted."""
    monkeypatch.setattr(base, "SYSROOT", str(tmp_path))
    monkeypatch.setattr(objects.os, "getuid", lambda: 1000)
    monkeypatch.setattr(objects.resource, "getrlimit", lambda which: (4096, 4096))
    monkeypatch.setattr(objects, "own_cgroup", lambda: None)
    counted: list[int] = []
    monkeypatch.setattr(objects, "user_tasks", lambda: counted.append(1) or 40)
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc/loadavg").write_text("0.52 0.58 0.59 3/612 48211\n")
    assert (objects.task_headroom(), counted) == (4096 - 612, [])
    (tmp_path / "proc/loadavg").write_text("0.52 0.58 0.59 3/4060 48211\n")
    assert (objects.task_headroom(), counted) == (4096 - 40, [1])
    (tmp_path / "proc/loadavg").unlink()
    assert objects.task_headroom() == 4096 - 40


def test_without_a_tight_process_limit_the_driver_layer_runs_beside_the_imports(
        tmp_path: Path) -> None:
    node = make_node(tmp_path / "node", torch_threads=4, driver_threads=4)
    rc, doc, _ = run_probe(node)
    facts = doc["facts"]
    assert isinstance(facts, dict) and facts["probe_cost"]["workload_alone"] is False
    assert (rc, doc["triton"]) == (0, {"verdict": "gpu", "backend": "cuda", "cause": None,
                                       "fix": ""})


def oom_node(root: Path, kill: bool = True) -> NodeEnv:
    """A node in Slurm job 42's step cgroup, the job's memory.max 8 GiB; its workload
    interpreter is killed by SIGKILL as it imports torch, the cgroup's memory.events counting
    the OOM kill when `kill` (else some other SIGKILL, the count unchanged and the peak far
    below the limit)."""
    node = make_node(root)
    sysroot = node.sysroot
    (sysroot / "proc/self").mkdir(parents=True, exist_ok=True)
    (sysroot / "proc/self/cgroup").write_text(f"0::{STEP}\n")
    job = sysroot / ("sys/fs/cgroup" + JOB)
    job.mkdir(parents=True)
    (job / "memory.max").write_text(f"{8 << 30}\n")
    (job / "memory.current").write_text(f"{1 << 30}\n")
    (job / "memory.peak").write_text(f"{(8 << 30) - (1 << 20) if kill else 2 << 30}\n")
    step = sysroot / ("sys/fs/cgroup" + STEP)
    step.mkdir(parents=True)
    (step / "memory.max").write_text("max\n")
    events = step / "memory.events"
    events.write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 0\noom_group_kill 0\n")
    bump = (f"with open({str(events)!r}) as f:\n    t = f.read()\n"
            f"with open({str(events)!r}, 'w') as f:\n"
            "    f.write(t.replace('oom_kill 0', 'oom_kill 1'))\n") if kill else ""
    init = node.site / "torch" / "__init__.py"
    init.write_text(bump + "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n"
                    + init.read_text())
    return node


def test_an_oom_kill_of_the_probes_interpreter_names_the_jobs_memory_limit(
        tmp_path: Path) -> None:
    # The H100's case: the workload ran within the job's memory.max; the probe's interpreter
    # (beside the probe's other processes) was killed: verdict unknown, no fix. The probe needed
    # more memory than the job it vouches for: never a cpu-fallback of the workload, the limit
    # named with its value, its cgroup and who sets it.
    rc, doc, _ = run_probe(oom_node(tmp_path / "node"))
    by_id, triton = checks(doc), doc["triton"]
    assert isinstance(triton, dict)
    assert (rc, triton["verdict"], doc["status"]) == (3, "unknown", "error")
    assert not [c["id"] for c in by_id.values() if c["status"] == "fail"]
    target = by_id["triton_target"]
    assert target["status"] == "error"
    assert target["evidence"]["matches"] == "memory_cgroup_limit"
    assert target["evidence"]["oom_kill"] == [0, 1]
    assert "killed by the cgroup's OOM killer" in target["summary"]
    path = f"/sys/fs/cgroup{JOB}/memory.max"
    assert f"{path} is 8 GiB" in target["fix"] and "Slurm job 42's cgroup" in target["fix"]
    assert "sbatch --mem=" in target["fix"]
    assert path in str(doc["reason"]) and "the workload itself is untested" in str(
        doc["reason"])
    facts = doc["facts"]
    assert isinstance(facts, dict) and facts["limits"]["memory.max"]["soft"] == 8 << 30


def test_a_sigkill_that_no_oom_kill_counted_names_no_limit(tmp_path: Path) -> None:
    _, doc, _ = run_probe(oom_node(tmp_path / "node", kill=False))
    target = checks(doc)["triton_target"]
    assert target["status"] == "error"
    assert "matches" not in (target["evidence"] or {})
    assert "rc -9" in target["summary"]


def test_a_file_size_limit_is_named_from_lds_signal(tmp_path: Path) -> None:
    # `ulimit -f 4`: ld is killed by SIGXFSZ writing Triton's module ("ld terminated with
    # signal 25 [File size limit exceeded]", gcc's own words).
    node = make_node(tmp_path / "node")
    rc, doc, _ = run_probe(node, prefix=prlimit("--fsize=4096"))
    triton = doc["triton"]
    assert isinstance(triton, dict)
    assert (rc, triton["verdict"], triton["cause"]) == (1, "cpu-fallback", "file_size_limit")
    assert "raise FSIZE (ulimit -f)=4 KiB" in triton["fix"]
    assert "ulimit -f unlimited" in triton["fix"]
    assert "signal 25" in checks(doc)["triton_target"]["summary"]


def test_a_compiler_out_of_memory_under_an_address_space_limit_names_the_limit(
        tmp_path: Path) -> None:
    # `ulimit -v`: the compiler's allocation fails (cc1's own words); the limit, with its value,
    # not "the compiler was killed".
    node = make_node(tmp_path / "node")
    gcc = node.bindir / "gcc"
    gcc.unlink()
    gcc.write_text(f"#!{sys.executable}\nimport os, sys\n"
                   "try:\n    block = bytearray(8 << 30)\nexcept MemoryError:\n"
                   "    sys.stderr.write('cc1: out of memory allocating 8589934592 bytes after a "
                   "total of 1327104 bytes\\n')\n    sys.exit(1)\n"
                   f"os.execv({GCC!r}, [{GCC!r}] + sys.argv[1:])\n")
    gcc.chmod(0o755)
    rc, doc, _ = run_probe(node, prefix=prlimit(f"--as={4 << 30}"))
    triton = doc["triton"]
    assert isinstance(triton, dict)
    assert (rc, triton["verdict"], triton["cause"]) == (1, "cpu-fallback", "address_space_limit")
    assert "AS (ulimit -v)=4 GiB (4194304 KiB)" in triton["fix"]


# --- the parts: the errno's limit, where it comes from, the probe's own processes ---------

def test_each_errno_names_its_limit_the_likeliest_first() -> None:
    limits = {"NPROC": {"soft": 64, "hard": 64, "shell": "ulimit -u"},
              "pids.max": {"soft": 32, "path": "/sys/fs/cgroup/job/pids.max", "current": 31},
              "FSIZE": {"soft": 4096, "hard": 4096, "shell": "ulimit -f"},
              "memory.max": {"soft": 8 << 30, "path": "/sys/fs/cgroup/job/memory.max",
                             "current": 8 << 30},
              "AS": {"soft": 64 << 30, "hard": 64 << 30, "shell": "ulimit -v"},
              "fs.file-max": {"soft": 100000, "path": "/proc/sys/fs/file-max", "current": 99990}}

    def first(errno_name: str, with_limits: dict[str, Any]) -> str:
        return explain(errno_name, None, "", None, with_limits)[0][0]

    assert first("EAGAIN", limits) == "process_limit"
    assert explain("EAGAIN", None, "", None, limits)[0][1]["limit"] == (
        "/sys/fs/cgroup/job/pids.max")  # the cgroup's count is at its limit
    relaxed = dict(limits, **{"pids.max": dict(limits["pids.max"], soft=4096, current=10)})
    assert explain("EAGAIN", None, "", None, relaxed)[0][1]["limit"] == "NPROC (ulimit -u)"
    # ENOMEM: the cgroup's memory at its limit comes before a far address-space limit.
    assert first("ENOMEM", limits) == "memory_cgroup_limit"
    assert first("ENOMEM", {"AS": limits["AS"]}) == "address_space_limit"
    assert first("EFBIG", limits) == "file_size_limit"
    assert first("ENFILE", limits) == "file_table_limit"
    # No limit set: the generic cause, never an invented limit.
    assert [c for c, _ in explain("EMFILE", None, "", None, {})] == ["process_limits"]


@pytest.mark.parametrize(("group", "env", "owner"), [
    ("/system.slice/slurmstepd.scope/job_42/step_0", {}, ("slurm", "42")),
    ("/user.slice/user-1000.slice/session-3.scope", {"SLURM_JOB_ID": "7"}, ("slurm", "7")),
    ("/system.slice/docker-" + "ab" * 32 + ".scope", {}, ("docker", None)),
    ("/kubepods.slice/kubepods-burstable.slice/cri-containerd-ab.scope", {},
     ("kubernetes", None)),
    ("/system.slice/jupyterhub.service", {}, ("unit", "jupyterhub.service")),
    ("/system.slice/jupyterhub.service/notebook-7.scope", {}, ("unit", "notebook-7.scope")),
    ("/user.slice/user-1000.slice/session-3.scope", {}, ("login", "user-1000.slice")),
    ("/user.slice/user-1000.slice/user@1000.service/app.slice/run-r1.scope", {},
     ("login", "user-1000.slice")),
])
def test_who_sets_the_limits_is_read_from_the_cgroup_and_the_environment(
        group: str, env: dict[str, str], owner: tuple[str, str | None]) -> None:
    assert limit_owner(group, env) == owner


def test_a_process_s_rlimits_are_its_service_s_not_a_scope_s() -> None:
    group = "/system.slice/jupyterhub.service/notebook-7.scope"
    assert limit_owner(group, {}, rlimits=True) == ("unit", "jupyterhub.service")
    assert limit_owner("/system.slice/run-r1.scope", {}, rlimits=True) == (None, None)


def test_a_cgroup_limit_is_read_with_its_use_and_its_owner(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "proc/self").mkdir(parents=True)
    (tmp_path / "proc/self/cgroup").write_text("0::/system.slice/docker-abc.scope\n")
    group = tmp_path / "sys/fs/cgroup/system.slice/docker-abc.scope"
    group.mkdir(parents=True)
    (group / "pids.max").write_text("64\n")
    (group / "pids.current").write_text("63\n")
    (group / "memory.max").write_text("max\n")
    monkeypatch.setattr(base, "SYSROOT", str(tmp_path))
    limits = read_limits()
    assert "memory.max" not in limits
    pids = limits["pids.max"]
    assert (pids["soft"], pids["current"], pids["by"]) == (64, 63, ["docker", None])
    assert pids["path"] == "/sys/fs/cgroup/system.slice/docker-abc.scope/pids.max"
    cause, values = explain("EAGAIN", None, "", None, {"pids.max": pids})[0]
    assert cause == "process_limit" and values["value"] == "64 (63 in use)"
    assert values["how"] == "docker run --pids-limit=<a larger count> (or -1)"


def test_a_start_the_limit_refuses_is_recorded_with_its_errno_and_alone() -> None:
    # Real: no fd is left for the pipes (RLIMIT_NOFILE at the fds already open), and the probe
    # holds no other helper: the job itself cannot start a process.
    code = ("import json, os, resource, sys\n"
            "from fleetcheck.probe.parts.core.spawn import Spawned\n"
            "n = len(os.listdir('/proc/self/fd'))\n"
            "resource.setrlimit(resource.RLIMIT_NOFILE, (n, n))\n"
            "r = Spawned([sys.executable, '-c', 'pass'], 10).result()\n"
            "print(json.dumps([r['errno'], r['alone'], r['error']]))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[2], timeout=60)
    assert done.returncode == 0, done.stderr
    errno_name, alone, error = json.loads(done.stdout)
    assert (errno_name, alone) == ("EMFILE", True)
    assert "Too many open files" in error


def test_a_refused_start_is_tried_again_when_the_probes_other_helper_ends(
        monkeypatch: pytest.MonkeyPatch) -> None:
    other = Spawned([sys.executable, "-c", "import time; time.sleep(0.3)"], 30)
    real_popen = subprocess.Popen
    calls = []

    def refused_while_the_other_runs(*args: Any, **kwargs: Any) -> subprocess.Popen[bytes]:
        calls.append(other.proc is not None and other.proc.poll() is None)
        if calls[-1]:
            raise OSError(errno.EMFILE, os.strerror(errno.EMFILE))
        return real_popen(*args, **kwargs)

    monkeypatch.setattr(spawn.subprocess, "Popen", refused_while_the_other_runs)
    result = Spawned([sys.executable, "-c", "print('ok')"], 30).result()
    assert calls[0] and not calls[-1]
    assert (result["rc"], result["stdout"].strip(), result["errno"]) == (0, "ok", None)
    assert other.result()["rc"] == 0


def test_a_refused_start_while_the_other_helper_runs_on_is_not_alone(
        monkeypatch: pytest.MonkeyPatch) -> None:
    other = Spawned([sys.executable, "-c", "import time; time.sleep(30)"], 30)

    def refused(*args: Any, **kwargs: Any) -> subprocess.Popen[bytes]:
        raise OSError(errno.EAGAIN, os.strerror(errno.EAGAIN))

    monkeypatch.setattr(spawn.subprocess, "Popen", refused)
    try:
        result = Spawned([sys.executable, "-c", "pass"], 0.4).result()
    finally:
        other.kill()
        other.result()
    assert (result["errno"], result["alone"]) == ("EAGAIN", False)
    assert stage_answer(result, "libcuda probe") == {
        "error": "BlockingIOError: [Errno 11] Resource temporarily unavailable",
        "errno": "EAGAIN", "alone": False}


def test_a_helper_whose_reader_thread_is_refused_is_read_when_collected(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # The job's process limit counts threads: "can't start new thread" must not end the probe.
    def no_thread(self: Any) -> None:
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(spawn, "READER", spawn.Reader())
    monkeypatch.setattr(spawn.threading.Thread, "start", no_thread)
    result = Spawned([sys.executable, "-c", "import sys; print('x' * 200000); "
                      "sys.stderr.write('said')"], 30).result()
    assert (result["rc"], len(result["stdout"].strip()), result["stderr"]) == (0, 200000, "said")


def test_a_helper_read_when_collected_is_not_held_by_what_it_left_running(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # On the H100 under `ulimit -u 12`: no reader thread, and a process the stack left behind
    # held its pipes: the helper is collected once it has ended, not at its timeout.
    def no_thread(self: Any) -> None:
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(spawn, "READER", spawn.Reader())
    monkeypatch.setattr(spawn.threading.Thread, "start", no_thread)
    helper = Spawned(["/bin/sh", "-c", "sleep 120 & echo started"], 30)
    try:
        result = helper.result()
    finally:
        helper.kill()  # its group: the sleep it left
    assert (result["rc"], result["timed_out"], result["stdout"].strip()) == (0, False, "started")


def test_a_helper_the_oom_killer_killed_is_recorded(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "proc/self").mkdir(parents=True)
    (tmp_path / "proc/self/cgroup").write_text("0::/job\n")
    events = tmp_path / "sys/fs/cgroup/job/memory.events"
    events.parent.mkdir(parents=True)
    events.write_text("oom 0\noom_kill 2\n")
    monkeypatch.setattr(base, "SYSROOT", str(tmp_path))
    code = (f"import os, signal\nopen({str(events)!r}, 'w').write('oom 1\\noom_kill 3\\n')\n"
            "os.kill(os.getpid(), signal.SIGKILL)\n")
    result = Spawned([sys.executable, "-c", code], 30).result()
    assert (result["rc"], result["oom_kill"]) == (-signal.SIGKILL, [2, 3])
    answer = stage_answer(result, "libcuda probe")
    assert answer["error"] == ("killed by SIGKILL (rc -9) by the cgroup's OOM killer, "
                               "no output")
    # A SIGKILL the count did not see is not the OOM killer's.
    result = Spawned([sys.executable, "-c", "import os, signal; "
                      "os.kill(os.getpid(), signal.SIGKILL)"], 30).result()
    assert (result["rc"], result["oom_kill"]) == (-signal.SIGKILL, None)


def test_a_tools_limit_text_names_the_limit_before_the_tool() -> None:
    limits = {"AS": {"soft": 4 << 30, "hard": 4 << 30, "shell": "ulimit -v"},
              "FSIZE": {"soft": 4096, "hard": None, "shell": "ulimit -f"},
              "memory.max": {"soft": 8 << 30, "path": "/sys/fs/cgroup/job/memory.max"}}
    node = {"limits": limits}

    def named(stderr: str, with_node: dict[str, Any] | None = None) -> list[str]:
        failure = {"error": "CalledProcessError", "compiler": [
            {"argv": ["gcc"], "rc": 1, "stderr": stderr}]}
        return [cause for cause, _, _ in diagnoses(failure, {"tmp": ["/tmp"]}, with_node)]

    assert named("cc1: out of memory allocating 65536 bytes after a total of 1 bytes\n",
                 node)[:3] == ["address_space_limit", "memory_cgroup_limit", "compiler_killed"]
    assert named("gcc: fatal error: Killed signal terminated program cc1\n", node)[:2] == [
        "memory_cgroup_limit", "compiler_killed"]
    assert named("collect2: fatal error: ld terminated with signal 25 [File size limit "
                 "exceeded]\n", node)[0] == "file_size_limit"
    # No limit set: the tool's own text, as before.
    assert named("gcc: fatal error: Killed signal terminated program cc1\n")[0] == (
        "compiler_killed")


def test_cuda_errors_an_os_refusal_gives_name_a_tight_limit() -> None:
    # Seen on an H100 (driver 580): cuInit 304 (CUDA_ERROR_OPERATING_SYSTEM) under `ulimit -u
    # 12`, 6 and 3 (the driver's threads), 100 (CUDA_ERROR_NO_DEVICE) under `ulimit -n 12`.
    tasks = user_tasks()
    assert tasks is not None and tasks >= 1  # this test's own process at least
    tight = {"NPROC": {"soft": tasks + 1, "hard": tasks + 1, "shell": "ulimit -u"},
             "NOFILE": {"soft": 1024, "hard": 1024, "shell": "ulimit -n"}}
    def named(code: int, limits: dict[str, Any], nodes_open: bool = True) -> str | None:
        found = cuda_limit(code, limits, nodes_open)
        return found[0] if found else None

    found = cuda_limit(304, tight, True)
    assert found is not None and found[0] == "process_limit"
    assert found[1]["value"].startswith(f"{tasks + 1} (")
    pids = {"pids.max": {"soft": 40, "current": 30, "path": "/sys/fs/cgroup/job/pids.max"}}
    assert named(304, pids) == "process_limit"
    files = {"NOFILE": {"soft": 12, "hard": 12, "shell": "ulimit -n"}}
    assert named(304, files) == named(100, files) == "open_files_limit"
    # No device and device nodes that do not open: the nodes, not the limit.
    assert named(100, files, nodes_open=False) is None
    # Limits with room to spare explain nothing; nor does another error.
    roomy = {"NPROC": {"soft": 1 << 20, "hard": 1 << 20, "shell": "ulimit -u"},
             "NOFILE": {"soft": 1024, "hard": 1024, "shell": "ulimit -n"},
             "pids.max": {"soft": 4096, "current": 30, "path": "/sys/fs/cgroup/job/pids.max"}}
    assert named(304, roomy) is None
    assert named(999, files) is None


def probe_with(tmp_path: Path, ld_result: dict[str, Any], limits: dict[str, Any]) -> Any:
    """A Probe with only what the ldconfig checks read (parts level, no node)."""
    probe = Probe(False, Deadline(30), None, str(tmp_path))
    probe.vendor = "nvidia"
    probe.env = {"PATH": os.defpath}
    probe.facts = {"python": {}, "os": {}}
    probe.stages = {}
    probe.cuda_info = {"loaded": "/usr/lib/x86_64-linux-gnu/libcuda.so.1"}
    probe.limits = limits
    probe.ld_result = dict({"rc": None, "stdout": "", "stderr": "", "timed_out": False,
                            "error": None, "errno": None, "alone": None, "oom_kill": None},
                           **ld_result)
    return probe


NOFILE_16 = {"NOFILE": {"soft": 16, "hard": 16, "shell": "ulimit -n", "source": "soft = hard "
                        "limit; the login's (pam_limits: /etc/security/limits.conf)",
                        "by": ["login", "user-1000.slice"]}}


def test_an_ldconfig_the_probe_could_not_start_beside_its_helpers_is_not_evaluated(
        tmp_path: Path) -> None:
    probe = probe_with(tmp_path, {"error": "OSError: [Errno 24] Too many open files",
                                  "errno": "EMFILE", "alone": False}, NOFILE_16)
    status, summary, fix, evidence = probe.check_libcuda_not_in_ldcache()
    assert status == "error"
    assert summary.startswith("not evaluated: the probe could not start /sbin/ldconfig -p "
                              "while its other helpers ran")
    assert "NOFILE (ulimit -n) = 16 (soft = hard limit; the login's" in summary
    assert evidence["matches"] == "open_files_limit"
    assert "hard nofile 65536' in /etc/security/limits.conf" in fix
    assert probe.check_ldcache_stale_libcuda_entry()[0] == "skip"


def test_an_ldconfig_that_fails_for_the_limit_fails_triton_for_the_limit(
        tmp_path: Path) -> None:
    # The real ldconfig under `ulimit -n 3`: Triton's own `ldconfig -p` fails the same way.
    ldconfig = "/sbin/ldconfig"
    if not os.access(ldconfig, os.X_OK):
        pytest.skip("no /sbin/ldconfig here")
    done = subprocess.run([*prlimit("--nofile=3"), ldconfig, "-p"], capture_output=True,
                          text=True, env={"LC_ALL": "C", "PATH": os.defpath})
    assert "Too many open files" in done.stderr
    probe = probe_with(tmp_path, {"rc": done.returncode, "stdout": done.stdout,
                                  "stderr": done.stderr}, NOFILE_16)
    status, summary, fix, evidence = probe.check_libcuda_not_in_ldcache()
    assert (status, evidence["matches"]) == ("fail", "open_files_limit")
    assert "cannot run in this job" in summary and "= 16" in summary
    assert fix.startswith("raise NOFILE (ulimit -n)=16")
    # A cache that is not there is still that, whatever the limits.
    missing = ("/sbin/ldconfig: Can't open cache file /etc/ld.so.cache\n: No such file or "
               "directory\n")
    probe = probe_with(tmp_path, {"rc": 1, "stderr": missing}, NOFILE_16)
    assert probe.check_libcuda_not_in_ldcache()[3]["matches"] == "ld_so_cache_missing"


def test_an_unknown_verdict_names_the_limit_that_stopped_the_probe(tmp_path: Path) -> None:
    probe = probe_with(tmp_path, {}, NOFILE_16)
    stopped = {"id": "torch_cuda", "status": "error", "summary": "not evaluated: ...",
               "fix": "raise NOFILE (ulimit -n)=16 (...): ulimit -n 65536",
               "evidence": {"matches": "open_files_limit"}}
    first = {"id": "zero_active_drivers", "status": "error", "summary": "libcuda probe failed",
             "fix": "", "evidence": {}}
    assert probe.unknown_verdict([first, stopped], first) == {
        "verdict": "unknown", "backend": None, "cause": "open_files_limit",
        "fix": "the job's open-file limit (ulimit -n): raise NOFILE (ulimit -n)=16 (...): "
               "ulimit -n 65536"}
    assert probe.unknown_verdict([first], first)["cause"] == "zero_active_drivers"


def test_the_verdict_of_a_probe_the_limit_stopped_is_unknown_naming_the_limit(
        tmp_path: Path) -> None:
    _, doc, _ = run_probe(oom_node(tmp_path / "node"))
    triton = doc["triton"]
    assert isinstance(triton, dict)
    assert (triton["verdict"], triton["cause"]) == ("unknown", "memory_cgroup_limit")
    assert "sbatch --mem=" in triton["fix"]


def test_cuinit_and_torch_failing_under_a_tight_limit_name_the_limit(tmp_path: Path) -> None:
    """cuInit 304 / torch's "Error 304: OS call failed" under `ulimit -n 12` (seen on an H100):
    the open-file limit with its value, never the driver layer."""
    files = {"NOFILE": {"soft": 12, "hard": 12, "shell": "ulimit -n", "source": "soft = hard "
                        "limit; the login's (pam_limits: /etc/security/limits.conf)"}}
    probe = probe_with(tmp_path, {}, files)
    probe.statuses = {"dev_nodes_missing": "pass"}
    probe.cuda_info = {"loaded": "/usr/lib/x86_64-linux-gnu/libcuda.so.1", "init": 304,
                       "init_name": "CUDA_ERROR_OPERATING_SYSTEM"}
    probe.proc = {"gpus": ["0000:18:00.0"]}
    probe.dev_names = ["nvidia0", "nvidiactl", "nvidia-uvm"]
    status, summary, fix, evidence = probe.check_zero_active_drivers()
    assert (status, evidence.get("matches")) == ("fail", "open_files_limit"), summary
    assert "ulimit -n" in summary and "12" in summary and "raise" in fix
    probe.stages = {"meta": {"torch_dir": "/site/torch"}, "torch": {
        "version": "2.11.0+cu130", "cuda": "13.0", "cuda_available": False, "warnings": [
            "CUDA initialization: Unexpected error from cudaGetDeviceCount(). Error 304: OS "
            "call failed or operation not supported on this OS"]}}
    status, summary, fix, evidence = probe.check_torch_cuda()
    assert (status, evidence.get("matches")) == ("fail", "open_files_limit"), summary
    assert "driver layer" not in fix
