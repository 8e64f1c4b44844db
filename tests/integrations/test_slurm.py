"""fleetcheck in a real Slurm (slurmctld + slurmd + munged on this machine), on fake GPU nodes.

The Prolog (examples/slurm-prolog.sh) only probes; slurmd drains the node and requeues the job
held when it fails. The HealthCheckProgram (examples/slurm-healthcheck.sh), run by slurmd
itself every HealthCheckInterval, reads the cached verdict, drains with fleetcheck's reason and
resumes only fleetcheck's own drains.
"""

from __future__ import annotations

import json
import shlex
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.nodeenv import make_node

from .slurmkit import SlurmCluster, skip_without_slurm, write_script

REPO = Path(__file__).resolve().parents[2]
PROLOG = REPO / "examples" / "slurm-prolog.sh"
HEALTHCHECK = REPO / "examples" / "slurm-healthcheck.sh"

#: Seconds between slurmd's health checks here (production: minutes).
INTERVAL = 1

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    skip_without_slurm()
    root = tmp_path_factory.mktemp("slurm")
    bindir = root / "bin"
    bindir.mkdir()
    q = shlex.quote
    # `fleetcheck` on the node: the probe runs in the fake node environment named by node.env
    # (which a test swaps); every other command, the health check's scontrol included, runs
    # in slurmd's own environment.
    write_script(bindir / "fleetcheck",
            f'if [ "$1" = probe ]; then . {q(str(root / "node.env"))}; fi\n'
            f'exec {q(sys.executable)} -m fleetcheck "$@"\n')
    write_script(root / "prolog",
            f"export FLEETCHECK={q(str(bindir / 'fleetcheck'))} FLEETCHECK_SYSLOG=0\n"
            f"export FLEETCHECK_CACHE={q(str(root / 'prolog-cache.json'))}\n"
            f"{q(str(PROLOG))} 2>>{q(str(root / 'prolog.err'))}\n"
            f"rc=$?\necho $rc >> {q(str(root / 'prolog.runs'))}\nexit $rc\n")
    write_script(root / "healthcheck",
            f"export SLURM_CONF={q(str(root / 'slurm.conf'))}\n"
            f"export FLEETCHECK={q(str(bindir / 'fleetcheck'))}\n"
            f"export FLEETCHECK_CACHE={q(str(root / 'node.json'))}\n"
            "start=$(date +%s.%N)\n"
            f"{q(str(HEALTHCHECK))} >/dev/null 2>>{q(str(root / 'healthcheck.err'))}\n"
            f'echo "$start $(date +%s.%N)" >> {q(str(root / "healthcheck.runs"))}\n')
    kit = SlurmCluster(root, extra_conf=[
        f"Prolog={root / 'prolog'}",
        f"HealthCheckProgram={root / 'healthcheck'}",
        f"HealthCheckInterval={INTERVAL}",
        "HealthCheckNodeState=ANY",
    ])
    try:
        kit.start()
        yield kit
    finally:
        kit.stop()


@pytest.fixture
def slurm(cluster: SlurmCluster) -> Iterator[SlurmCluster]:
    (cluster.root / "node.json").unlink(missing_ok=True)
    cluster.reset_node()
    yield cluster
    (cluster.root / "node.json").unlink(missing_ok=True)
    cluster.reset_node()


def use_node(cluster: SlurmCluster, **kwargs: object) -> None:
    """Make the fake GPU node the probe sees; python3 on its PATH is this interpreter."""
    node = make_node(cluster.root / f"node-{time.monotonic_ns()}", **kwargs)  # type: ignore[arg-type]
    write_script(node.bindir / "python3", f'exec {shlex.quote(sys.executable)} "$@"\n')
    lines = [f"export {key}={shlex.quote(value)}" for key, value in node.env.items()]
    tmp = cluster.root / "node.env.tmp"
    tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
    tmp.replace(cluster.root / "node.env")


def probe_to_cache(cluster: SlurmCluster, name: str = "node.json") -> int:
    """What the timer does: probe the node and save its verdict where the health check reads."""
    done = cluster.run(str(cluster.root / "bin" / "fleetcheck"), "probe", "--playbook",
                       "quick", "--cache", str(cluster.root / name))
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode


def health_runs(cluster: SlurmCluster) -> list[float]:
    path = cluster.root / "healthcheck.runs"
    if not path.exists():
        return []
    walls = []
    for line in path.read_text().splitlines():
        start, end = (float(part) for part in line.split())
        walls.append(end - start)
    return walls


def wait_health_runs(cluster: SlurmCluster, count: int) -> None:
    """Wait until slurmd has run the health check `count` more times."""
    before = len(health_runs(cluster))
    deadline = time.monotonic() + 20 * INTERVAL * count
    while len(health_runs(cluster)) < before + count:
        assert time.monotonic() < deadline, "slurmd stopped running the health check"
        time.sleep(0.25)


def test_health_check_drains_with_fleetcheck_reason_and_resumes_its_own_drain(
        slurm: SlurmCluster) -> None:
    use_node(slurm, compiler=False)
    assert probe_to_cache(slurm) == 1
    _state, reason = slurm.wait_for(lambda st, _r: st.startswith("drain"), "fleetcheck drain")
    assert reason.startswith("fleetcheck: no_c_compiler"), reason

    use_node(slurm)
    assert probe_to_cache(slurm) == 0
    _state, reason = slurm.wait_for(lambda st, _r: st == "idle", "fleetcheck resume")
    assert reason == "none"

    walls = health_runs(slurm)
    print(f"\nHealthCheckProgram wall time over {len(walls)} runs by slurmd: "
          f"max {max(walls):.3f} s, mean {sum(walls) / len(walls):.3f} s")
    # slurmd kills a HealthCheckProgram after 60 s; reading the cache must stay far from it.
    assert max(walls) < 60


def test_health_check_leaves_someone_elses_drain(slurm: SlurmCluster) -> None:
    slurm.run("scontrol", "update", f"NodeName={slurm.node}", "State=DRAIN",
              "Reason=disk replaced, burn-in pending")
    use_node(slurm)
    assert probe_to_cache(slurm) == 0
    wait_health_runs(slurm, 2)
    state, reason = slurm.node_state()
    assert state.startswith("drain") and reason == "disk replaced, burn-in pending"

    use_node(slurm, compiler=False)
    assert probe_to_cache(slurm) == 1
    wait_health_runs(slurm, 2)
    assert slurm.node_state()[1] == "disk replaced, burn-in pending"


def test_stale_verdict_changes_nothing(slurm: SlurmCluster) -> None:
    use_node(slurm, compiler=False)
    # Probed aside, then aged and renamed into place: slurmd's health check (every INTERVAL s) never
    # sees the fresh failing verdict.
    assert probe_to_cache(slurm, "fresh.json") == 1
    fresh = slurm.root / "fresh.json"
    document = json.loads(fresh.read_text())
    document["written_at"] -= 7200  # the timer stopped two hours ago
    fresh.write_text(json.dumps(document))
    fresh.replace(slurm.root / "node.json")
    wait_health_runs(slurm, 2)
    state, reason = slurm.node_state()
    # (A `*` is slurmctld's flag for a slurmd slow to answer its ping on a loaded machine.)
    assert (state.rstrip("*"), reason) == ("idle", "none")
    assert "stale" in (slurm.root / "healthcheck.err").read_text()


def test_failing_prolog_blocks_the_job_and_slurm_drains_and_holds(slurm: SlurmCluster) -> None:
    use_node(slurm, compiler=False)
    done = slurm.run("sbatch", "--parsable", "-o", "/dev/null", "--wrap", "true")
    assert done.returncode == 0, done.stderr
    job = done.stdout.strip().split(";")[0]
    _state, reason = slurm.wait_for(lambda st, _r: st.startswith("drain"), "prolog drain")
    assert reason == "Prolog error"
    shown = slurm.run("scontrol", "show", "job", job).stdout
    assert "JobState=PENDING" in shown and "held" in shown, shown
    assert (slurm.root / "prolog.runs").read_text().split()[-1] == "1"
    cached = json.loads((slurm.root / "prolog-cache.json").read_text())
    assert cached["exit_code"] == 1
    assert cached["node"]["triton"]["cause"] == "no_c_compiler"
    # The Prolog called no Slurm command; its log line names the cause for the admin.
    assert "probe failed; blocking the job" in (slurm.root / "prolog.err").read_text()


def test_passing_prolog_lets_the_job_run(slurm: SlurmCluster) -> None:
    use_node(slurm)
    done = slurm.run("sbatch", "--parsable", "-o", "/dev/null", "--wrap", "true")
    assert done.returncode == 0, done.stderr
    job = done.stdout.strip().split(";")[0]
    deadline = time.monotonic() + 60
    shown = ""
    while time.monotonic() < deadline:
        shown = slurm.run("scontrol", "show", "job", job).stdout
        if "JobState=COMPLETED" in shown:
            break
        time.sleep(0.25)
    assert "JobState=COMPLETED" in shown, shown + slurm.logs()
    assert (slurm.root / "prolog.runs").read_text().split()[-1] == "0"
    assert slurm.node_state()[0] == "idle"
