"""fleetcheck across a real Slurm allocation: four Slurm nodes on this host (one slurmd each).

A job's whole node set is gated by examples/slurm-prologslurmctld.sh, run by slurmctld itself
(`fleetcheck gate INVENTORY --nodes "$SLURM_JOB_NODELIST"`): a job whose nodes disagree, or
with one failing node, is requeued held with fleetcheck's reason in `scontrol show job`.

`srun -N4 … fleetcheck probe --format json` writes one node document per task (srun's own
`--output=DIR/%N-%t.json`: %N is the host name, the same for every node here, so the task
number keeps the files apart), and `fleetcheck merge DIR` must give the report a direct
`fleetcheck audit` of the same four nodes gives: the same statuses, causes and fleet checks.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.contracts import validated_json
from tests.nodeenv import make_node

from .slurmkit import SlurmCluster, skip_without_slurm, write_script

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
PROLOG_SLURMCTLD = REPO / "examples" / "slurm-prologslurmctld.sh"
NODES = ("gpu01", "gpu02", "gpu03", "gpu04")
#: Each node's fake environment: two healthy, one without a C compiler (Triton falls back),
#: one with another torch (a fleet mismatch).
NODE_KINDS: dict[str, dict[str, Any]] = {
    "gpu01": {}, "gpu02": {}, "gpu03": {"compiler": False},
    "gpu04": {"torch": "2.10.0+cu130"},
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    skip_without_slurm()
    root = tmp_path_factory.mktemp("slurmfleet")
    (root / "nodes").mkdir()
    bindir = root / "bin"
    bindir.mkdir()
    q = shlex.quote
    # `fleetcheck` on a node: the probe runs in that Slurm node's own fake environment.
    write_script(bindir / "fleetcheck",
            f'if [ "$1" = probe ]; then . {q(str(root / "nodes"))}/"$SLURMD_NODENAME.env"; fi\n'
            f'exec {q(sys.executable)} -m fleetcheck "$@"\n')
    # The job gate, on only while a test writes gate.on (the srun test gates nothing).
    write_script(root / "prologslurmctld",
            f"[ -e {q(str(root / 'gate.on'))} ] || exit 0\n"
            f"export FLEETCHECK={q(str(bindir / 'fleetcheck'))} FLEETCHECK_SYSLOG=0\n"
            f"export FLEETCHECK_INVENTORY={q(str(root / 'inventory.yaml'))}\n"
            f"export SLURM_CONF={q(str(root / 'slurm.conf'))} FLEETCHECK_TIMEOUT=120\n"
            f"[ -e {q(str(root / 'gate.documents'))} ] && "
            f"export FLEETCHECK_DOCUMENTS={q(str(root / 'documents'))}\n"
            "start=$(date +%s.%N)\n"
            f"{q(str(PROLOG_SLURMCTLD))} 2>>{q(str(root / 'gate.err'))}\n"
            f'rc=$?\necho "$rc $start $(date +%s.%N)" >> {q(str(root / "gate.runs"))}\n'
            "exit $rc\n")
    kit = SlurmCluster(root, names=NODES, extra_conf=[
        f"PrologSlurmctld={root / 'prologslurmctld'}", "PrologEpilogTimeout=180"])
    try:
        kit.start()
        yield kit
    finally:
        kit.stop()


def make_fleet(cluster: SlurmCluster, kinds: dict[str, dict[str, Any]] | None = None
               ) -> dict[str, dict[str, str]]:
    """Build each node's environment and the inventory reaching them (local transport, each
    host in its node's environment); return the inventory's hosts."""
    hosts = {}
    for name, kind in (kinds or NODE_KINDS).items():
        node = make_node(cluster.root / "nodes" / f"{name}-{time.monotonic_ns()}", **kind)
        python3 = node.bindir / "python3"
        write_script(python3, f'exec {shlex.quote(sys.executable)} "$@"\n')
        lines = [f"export {key}={shlex.quote(value)}" for key, value in node.env.items()]
        (cluster.root / "nodes" / f"{name}.env").write_text("\n".join(lines) + "\n")
        hosts[name] = {"transport": "local", "probe_host": True, "timeout": 100,
                       "python": str(python3), "env": node.env}
    (cluster.root / "inventory.yaml").write_text(yaml.safe_dump({"hosts": hosts}))
    return hosts


def run(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=180, check=False,
                          env=env)


def comparable(report: dict[str, Any]) -> dict[str, Any]:
    return {
        "nodes": sorted((n["id"], n["status"], n["reason"], n["triton"]["verdict"],
                         n["triton"]["cause"]) for n in report["nodes"]),
        "fleet": [(c["id"], c["status"], c["summary"]) for c in report["fleet_checks"]],
        "summary": report["summary"],
    }


def test_srun_fan_out_merges_into_the_direct_audits_report(cluster: SlurmCluster,
                                                           tmp_path: Path) -> None:
    make_fleet(cluster)
    docs = tmp_path / "docs"
    docs.mkdir()
    fleetcheck = str(cluster.root / "bin" / "fleetcheck")
    done = run("srun", "-N", str(len(NODES)), "--ntasks-per-node=1",
               f"--output={docs}/%N-%t.json", fleetcheck, "probe", "--format", "json",
               env=cluster.env)
    # gpu03 fails its probe (exit 1), so the step does too; every document is written anyway.
    assert done.returncode == 1, done.stderr + cluster.logs()
    files = sorted(docs.iterdir())
    assert len(files) == len(NODES)
    documents = [json.loads(path.read_text()) for path in files]
    assert {d["schema"] for d in documents} == {"fleetcheck.node/1"}
    assert sorted(d["origin"]["slurm_node"] for d in documents) == list(NODES)
    assert len({d["origin"]["slurm_job"] for d in documents}) == 1

    merged_path = tmp_path / "merged.json"
    merged_run = run(sys.executable, "-m", "fleetcheck", "merge", str(docs), "--format",
                     "json", "-o", str(merged_path))
    assert merged_run.returncode == 1, merged_run.stderr
    assert merged_run.stderr == ""

    inventory = cluster.root / "inventory.yaml"
    direct_path = tmp_path / "direct.json"
    direct = run(sys.executable, "-m", "fleetcheck", "audit", str(inventory), "--format",
                 "json", "-o", str(direct_path), "--no-progress")
    assert direct.returncode == 1, direct.stderr

    merged = json.loads(merged_path.read_text())
    audited = json.loads(direct_path.read_text())
    assert comparable(merged) == comparable(audited)
    statuses = {node: status for node, status, *_ in comparable(merged)["nodes"]}
    assert statuses == {"gpu01": "ok", "gpu02": "ok", "gpu03": "fail", "gpu04": "ok"}
    assert [c["id"] for c in merged["fleet_checks"]] == ["fleet_torch_mismatch"]

    # The same documents through stdin, concatenated as `cat` gives them, and as a tarball.
    joined = b"".join(path.read_bytes() for path in files)
    piped = subprocess.run([sys.executable, "-m", "fleetcheck", "merge", "-", "--format",
                            "json"], input=joined, capture_output=True, timeout=120,
                           check=False)
    assert comparable(json.loads(piped.stdout)) == comparable(merged)
    tarball = tmp_path / "docs.tar.gz"
    assert run("tar", "-C", str(docs), "-czf", str(tarball), ".").returncode == 0
    packed = run(sys.executable, "-m", "fleetcheck", "merge", str(tarball), "--format", "json")
    assert comparable(json.loads(packed.stdout)) == comparable(merged)


def test_srun_fan_out_of_the_bare_probe_script_merges_into_the_direct_audits_report(
        cluster: SlurmCluster, tmp_path: Path) -> None:
    """No fleetcheck on the nodes: `srun … python3 - < probe.py`, the script as `fleetcheck
    probe --script` prints it, its documents merged where fleetcheck is installed."""
    if shutil.which("unshare") is None:
        pytest.skip("needs unshare (util-linux) to give each Slurm node its own host name")
    hosts = make_fleet(cluster)
    q = shlex.quote
    nodes = cluster.root / "nodes"
    bare = tmp_path / "bin"
    bare.mkdir()
    # Each Slurm node is a machine of its own: its host name (a UTS namespace, as root), its
    # environment, its interpreter, which is all the script needs.
    for name in NODES:
        write_script(nodes / f"{name}.bare", f"/bin/hostname {q(name)}\n"
                     f". {q(str(nodes / (name + '.env')))}\n"
                     f'exec {q(hosts[name]["python"])} "$@"\n')
    write_script(bare / "python3", f'exec unshare --uts /bin/sh {q(str(nodes))}/'
                 '"$SLURMD_NODENAME.bare" "$@"\n')
    script = tmp_path / "probe.py"
    made = run(sys.executable, "-m", "fleetcheck", "probe", "--script")
    assert made.returncode == 0, made.stderr
    script.write_text(made.stdout)
    docs = tmp_path / "docs"
    docs.mkdir()
    env = {**cluster.env, "PATH": f"{bare}:{cluster.env['PATH']}"}
    with script.open("rb") as source:
        done = subprocess.run(["srun", "-N", str(len(NODES)), "--ntasks-per-node=1",
                               f"--output={docs}/%N-%t.json", "python3", "-"], stdin=source,
                              capture_output=True, text=True, timeout=180, check=False, env=env)
    # gpu03's probe fails (exit 1), so the step does too; every document is written anyway.
    assert done.returncode == 1, done.stderr + cluster.logs()
    files = sorted(docs.iterdir())
    documents = [validated_json(path.read_text(), "probe") for path in files]
    assert sorted(d["facts"]["hostname"] for d in documents) == list(NODES)

    merged_path = tmp_path / "merged.json"
    merged_run = run(sys.executable, "-m", "fleetcheck", "merge", str(docs), "--format",
                     "json", "-o", str(merged_path))
    assert (merged_run.returncode, merged_run.stderr) == (1, "")
    direct_path = tmp_path / "direct.json"
    direct = run(sys.executable, "-m", "fleetcheck", "audit", str(cluster.root / "inventory.yaml"),
                 "--format", "json", "-o", str(direct_path), "--no-progress")
    assert direct.returncode == 1, direct.stderr
    merged = validated_json(merged_path.read_text(), "audit")
    assert comparable(merged) == comparable(validated_json(direct_path.read_text(), "audit"))
    statuses = {node: status for node, status, *_ in comparable(merged)["nodes"]}
    assert statuses == {"gpu01": "ok", "gpu02": "ok", "gpu03": "fail", "gpu04": "ok"}
    assert [c["id"] for c in merged["fleet_checks"]] == ["fleet_torch_mismatch"]

    # The gate of a job on them, from the same documents, probing nothing.
    gate = run(sys.executable, "-m", "fleetcheck", "gate", "--documents", str(docs), "--nodes",
               "gpu[01-04]", "--playbook", "default")
    assert gate.returncode == 1, gate.stderr
    assert gate.stderr.startswith("gpu03: fail: Triton cpu-fallback: no C compiler"), gate.stderr


def submit(cluster: SlurmCluster) -> str:
    done = cluster.run("sbatch", "--parsable", "-N", str(len(NODES)), "-o", "/dev/null",
                       "--wrap", "true")
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().split(";")[0]


def wait_job(cluster: SlurmCluster, job: str, ready: str, limit: float = 240) -> str:
    """`scontrol show job` once it shows `ready` (bounded; the gate probes four nodes)."""
    deadline = time.monotonic() + limit
    shown = ""
    while time.monotonic() < deadline:
        shown = cluster.run("scontrol", "show", "job", job).stdout
        if ready in shown:
            return shown
        time.sleep(0.5)
    raise AssertionError(f"job {job} never showed {ready}:\n{shown}\n{cluster.logs()}\n"
                         + (cluster.root / "gate.err").read_text(errors="replace"))


@pytest.fixture
def gated(cluster: SlurmCluster) -> Iterator[SlurmCluster]:
    (cluster.root / "gate.on").touch()
    try:
        yield cluster
    finally:
        (cluster.root / "gate.on").unlink()
        cluster.reset_node()


def gate_runs(cluster: SlurmCluster) -> list[tuple[int, float]]:
    path = cluster.root / "gate.runs"
    runs = []
    for line in path.read_text().splitlines() if path.exists() else []:
        rc, start, end = line.split()
        runs.append((int(rc), float(end) - float(start)))
    return runs


def test_a_consistent_job_starts_after_the_gate(gated: SlurmCluster) -> None:
    make_fleet(gated, {name: {} for name in NODES})
    job = submit(gated)
    wait_job(gated, job, "JobState=COMPLETED")
    assert gate_runs(gated)[-1][0] == 0


@pytest.mark.parametrize(("kinds", "reason"), [
    ({"gpu04": {"torch": "2.10.0+cu130"}},
     "Comment=fleetcheck: fleet: fail: torch version differs across the selection: "
     "2.11.0+cu130 on 3 (gpu01, gpu02, gpu03); 2.10.0+cu130 on 1 (gpu04)"),
    ({"gpu03": {"compiler": False}}, "Comment=fleetcheck: gpu03: fail: Triton cpu-fallback"),
])
def test_an_inconsistent_or_failing_node_holds_the_whole_job_with_a_reason(
        gated: SlurmCluster, kinds: dict[str, dict[str, Any]], reason: str) -> None:
    make_fleet(gated, {name: kinds.get(name, {}) for name in NODES})
    job = submit(gated)
    shown = wait_job(gated, job, "Comment=fleetcheck:")
    shown = wait_job(gated, job, "JobState=PENDING")
    assert reason in shown, shown
    # Held, not merely requeued: it does not come back to the gate every requeue interval.
    assert "Priority=0 " in shown and "Reason=JobHeldAdmin" in shown, shown
    rc, wall = gate_runs(gated)[-1]
    assert rc == 1
    print(f"\nPrologSlurmctld (the gate over {len(NODES)} nodes) took {wall:.1f} s")
    # No node was drained: the job waits; the nodes stay for other jobs.
    assert {gated.node_state(name)[0] for name in NODES} <= {"idle", "mixed", "completing"}


@pytest.mark.parametrize(("bound", "kept"), [(None, 1), ("2", 2), ("50%", 2)])
def test_the_drain_bound_holds_under_a_fleet_wide_failure(
        cluster: SlurmCluster, tmp_path: Path, bound: str | None, kept: int) -> None:
    # One bad image everywhere: every node's cached verdict fails at once.
    node = make_node(tmp_path / "bad-image", compiler=False)
    cache = tmp_path / "node.json"
    probe = run(sys.executable, "-m", "fleetcheck", "probe", "--python", node.python,
                "--playbook", "quick", "--cache", str(cache), env={**os.environ, **node.env})
    assert probe.returncode == 1, probe.stderr
    argv = [sys.executable, "-m", "fleetcheck", "health", "--slurm", "--cache", str(cache)]
    if bound is not None:
        argv += ["--max-out", bound]
    try:
        # As slurmd runs its HealthCheckProgram: on every node at the same moment.
        checks = {name: subprocess.Popen([*argv, "--node", name], env=cluster.env, text=True,
                                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                  for name in NODES}
        results = {name: check.communicate(timeout=120) for name, check in checks.items()}
        assert {name: check.returncode for name, check in checks.items()} == dict.fromkeys(
            NODES, 1)
        states = {name: cluster.node_state(name) for name in NODES}
        drained = sorted(name for name, (state, _r) in states.items()
                         if state.startswith("drain"))
        assert len(drained) == kept, (states, results)
        for name in NODES:
            err = results[name][1].splitlines()
            assert len(err) == 1, err
            if name in drained:
                assert states[name][1].startswith("fleetcheck: no_c_compiler"), states[name]
                assert err[0].startswith(f"fleetcheck: health: drained {name}: "), err
            else:
                # Left as it was: idle, no reason; and the one line says why. (A `*` is
                # slurmctld's flag for a slurmd slow to answer its ping on a loaded machine.)
                assert (states[name][0].rstrip("*"), states[name][1]) == ("idle", "none"), \
                    states[name]
                assert err[0].startswith(f"fleetcheck: health: not draining {name}: "), err
                assert f"--max-out {bound or '10%'}: at most {kept} of 4 at once" in err[0], err
    finally:
        cluster.reset_node()


def test_the_gate_from_node_documents_holds_an_inconsistent_job_without_probing(
        gated: SlurmCluster) -> None:
    # Each node's own timer wrote its document (with the gate's playbook) into a shared folder.
    make_fleet(gated, {name: {"torch": "2.10.0+cu130"} if name == "gpu02" else {}
                       for name in NODES})
    documents = gated.root / "documents"
    documents.mkdir(exist_ok=True)
    for name in NODES:
        done = run(str(gated.root / "bin" / "fleetcheck"), "probe", "--playbook",
                   "pre-training", "--format", "json", "-o", str(documents / f"{name}.json"),
                   env={**gated.env, "SLURMD_NODENAME": name})
        assert done.returncode == 0, done.stderr
    (gated.root / "gate.documents").touch()
    try:
        job = submit(gated)
        shown = wait_job(gated, job, "Comment=fleetcheck:")
        shown = wait_job(gated, job, "JobState=PENDING")
    finally:
        (gated.root / "gate.documents").unlink()
    assert ("Comment=fleetcheck: fleet: fail: torch version differs across the selection: "
            "2.11.0+cu130 on 3 (gpu01, gpu03, gpu04); 2.10.0+cu130 on 1 (gpu02)") in shown, shown
    assert "Priority=0 " in shown and "Reason=JobHeldAdmin" in shown, shown
    rc, wall = gate_runs(gated)[-1]
    print(f"\nPrologSlurmctld from {len(NODES)} node documents took {wall:.2f} s")
    assert rc == 1
