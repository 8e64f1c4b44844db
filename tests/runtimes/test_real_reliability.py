"""Reliability on the real runtimes: many containers at once, nodes that go away mid-probe,
and nothing left running afterwards, as each runtime's own ps/top shows it.

Runs after test_real_fleet.py on the same session fleet (its one audit is done first: the
`scenario` fixture); the test that kills the VM is moved last (conftest), as the VM is shared.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest

from tests.runtimes.conftest import FIFTY, PROBED_PROCESSES, ROOT, Scenario
from tests.runtimes.fleet import RealFleet, new_processes, processes

pytestmark = [pytest.mark.timeout(900)]

SLOW = ("#!/bin/sh\n# stands in for the interpreter: the probe's stdin is read by nobody\n"
        "exec python3 -c 'import time; time.sleep(300)' {mark}\n")


def test_the_scenario_leaves_nothing_running(scenario: Scenario) -> None:
    fleet = scenario.fleet
    after = processes(fleet, **PROBED_PROCESSES, host=fleet.hosts["pve1"])
    assert set(after) == set(scenario.before)
    # LXC 104's ps also shows the podman containers inside it (their PID namespaces are
    # below its own): `inner`, where a probe ran too.
    assert new_processes(scenario.before, after) == {}


def test_fifty_containers_across_the_runtimes_at_once(scenario: Scenario) -> None:
    # The scenario's one audit has them all at once beside the rest of the fleet
    # (conftest.FIFTY: 20 LXC containers found by pve2's pct list, 15 Docker ones by pve1's
    # docker ps, 15 Podman ones by pve2's podman ps).
    wanted = ([f"pve2/{vmid}" for vmid in FIFTY["lxc"]]
              + [f"pve1/docker:{name}" for name in FIFTY["docker"]]
              + [f"pve2/podman:{name}" for name in FIFTY["podman"]])
    nodes = {node_id: scenario.nodes[node_id] for node_id in wanted if node_id in scenario.nodes}
    assert sorted(nodes) == sorted(wanted), (sorted(scenario.nodes), scenario.stderr[-1500:])
    bad = {i: (n["status"], n["reason"]) for i, n in nodes.items()
           if n["status"] in ("error", "unreachable", "skipped")}
    assert bad == {}
    assert {node["kind"] for node in nodes.values()} == {"lxc", "docker", "podman"}
    # Probed at once: their probes' durations add up to more than the whole audit took,
    # which probes one after the other could not do.
    took = (datetime.fromisoformat(scenario.report["finished_at"])
            - datetime.fromisoformat(scenario.report["started_at"])).total_seconds()
    assert sum(node["duration_s"] for node in nodes.values()) > took


def _wait_for(fleet: RealFleet, marks: list[str], seconds: float) -> list[str]:
    """The marks not yet seen in any process's command line after `seconds` (bounded poll)."""
    deadline = time.monotonic() + seconds
    while True:
        seen = set()
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    cmdline = (entry / "cmdline").read_bytes().decode(errors="replace")
                except OSError:
                    continue
                seen |= {mark for mark in marks if mark in cmdline}
        missing = [mark for mark in marks if mark not in seen]
        if not missing or time.monotonic() > deadline:
            return missing
        time.sleep(0.2)


def _wait_in_vm(fleet: RealFleet, mark: str, seconds: float) -> bool:
    """Whether `pgrep -f MARK` in VM 301 (through pve1's qm) found it within `seconds`."""
    qm = str(fleet.hosts["pve1"].dir / "bin" / "qm")
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        reply = fleet.run([qm, "guest", "exec", "301", "--", "pgrep", "-f", mark], check=False)
        if '"exitcode" : 0' in reply.stdout:
            return True
        time.sleep(0.5)
    return False


@pytest.mark.kills_the_vm
def test_nodes_that_go_away_while_probed(scenario: Scenario) -> None:
    """An LXC container stopped, dockerd restarted and the VM killed while their probes run:
    each is one clear node, the audit ends without waiting for the node timeout, and nothing
    is left running (the VM is not restarted: this test runs last)."""
    fleet = scenario.fleet
    fleet.lxc(140)
    # Named python3 (the inventory and the gatekeeper take an interpreter by that name).
    slow_lxc = fleet.state / "lxc" / "140" / "rootfs" / "root" / "slow" / "python3"
    slow_lxc.parent.mkdir()
    slow_lxc.write_text(SLOW.format(mark="slowmark-lxc"))
    slow_lxc.chmod(0o755)
    fleet.docker_run("slowd")
    fleet.run(["docker", "exec", "-i", "slowd", "sh", "-c",
               "mkdir /slow && cat > /slow/python3 && chmod 755 /slow/python3"],
              input=SLOW.format(mark="slowmark-docker").encode())
    pve1 = fleet.hosts["pve1"]
    fleet.run([str(pve1.dir / "bin" / "qm"), "guest", "exec", "301", "--pass-stdin", "1", "--",
               "sh", "-c", "mkdir -p /tmp/slow && cat > /tmp/slow/python3 && "
               "chmod 755 /tmp/slow/python3"],
              input=SLOW.format(mark="slowmark-vm").encode())
    fleet.podman_run("slowp")
    fleet.run(["podman", "exec", "-i", "slowp", "sh", "-c",
               "mkdir -p /slowp && cat > /slowp/python3 && chmod 755 /slowp/python3"],
              input=SLOW.format(mark="slowmark-podman").encode())
    pve6 = fleet.add_host("pve6")
    pve6.entry = {"oci": {"runtime": "podman",
                          "containers": [{"name": "slowp", "python": "/slowp/python3"}]}}
    pve5 = fleet.add_host("pve5")
    for vmid in (301,):
        fleet.vm_config(pve5, vmid, agent=1)
    pve5.entry = {
        "containers": [{"vmid": 140, "python": "/root/slow/python3"}],
        "oci": {"runtime": "docker",
                "containers": [{"name": "slowd", "python": "/slow/python3"}]},
        "vms": [{"vmid": 301, "python": "/tmp/slow/python3"}],
    }
    inventory = fleet.inventory(fleet.root / "going.yaml", timeout=200)
    child = subprocess.Popen(
        [sys.executable, "-m", "fleetcheck", "audit", str(inventory), "--limit", "pve5,pve6",
         "--format", "json"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True)
    try:
        missing = _wait_for(fleet, ["slowmark-lxc", "slowmark-docker", "slowmark-podman"], 120)
        if missing:
            child.kill()
            out, err = child.communicate()
            pytest.fail(f"the probes never started ({missing}): {out[-1500:]} {err[-800:]}")
        # The guest's processes are not in this machine's /proc: its agent is asked.
        assert _wait_in_vm(fleet, "slowmark-vm", 120), "the VM's probe never started"
        fleet.lxc_stop(140)
        fleet.run(["podman", "stop", "-t", "0", "slowp"])
        fleet.restart_dockerd()
        fleet.kill_vm(301)
        out, err = child.communicate(timeout=170)
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()
    nodes = {node["id"]: node for node in json.loads(out)["nodes"]}
    got = {node_id: (node["status"], node["reason"]) for node_id, node in nodes.items()}
    assert sorted(got) == ["pve5/140", "pve5/301", "pve5/docker:slowd",
                           "pve6/podman:slowp"], err[-1500:]
    # Each is one node in error, its reason from what the real tools did: lxc-attach killed
    # with the container (137, no word) and `pct status` saying stopped; the docker CLI's
    # exec killed with its container as dockerd stopped (137, no word) and `docker inspect`
    # saying exited, or, when inspect met the daemon still restarting, the plain status;
    # qm finding the agent gone (or, a moment later, the VM: then skipped).
    assert got["pve5/140"] == ("error", "container 140 stopped while probed (lxc-attach was "
                                        "killed with it)")
    # podman has no daemon to lose: its exec killed with the container (137, no word) and
    # `podman inspect` saying exited, or stopped when it asks before podman's clean-up of the
    # container is done (podman 4's state between the two; seen under load).
    assert got["pve6/podman:slowp"] in {
        ("error", f"podman container 'slowp' on pve6 stopped while probed (podman inspect: "
                  f"{state})") for state in ("exited", "stopped")}
    assert got["pve5/docker:slowd"] in {
        ("error", "docker container 'slowd' on pve5 stopped while probed (docker inspect: "
                  "exited; it stopped, or its daemon restarted)"),
        ("error", "probe exited with status 137: no output")}
    assert got["pve5/301"] in {
        ("error", "the QEMU guest agent in VM 301 does not answer: start qemu-guest-agent in "
                  "the guest (or the agent is disabled)"),
        ("error", "VM 301 went away while probed: its QEMU closed the guest agent's connection "
                  "(VM stopped or killed)"),
        ("skipped", "VM stopped")}
    # Nothing of theirs runs any more (the VM is gone; the runtimes' own views of the rest).
    assert _wait_for(fleet, ["slowmark-lxc", "slowmark-docker", "slowmark-podman"], 0) == [
        "slowmark-lxc", "slowmark-docker", "slowmark-podman"]
    assert "slowd" not in fleet.run(["docker", "ps", "--format", "{{.Names}}"]).stdout.split()
    assert fleet.run(["lxc-info", "-n", "140", "-s"]).stdout.split()[-1] == "STOPPED"
    assert "slowp" not in fleet.run(["podman", "ps", "--format", "{{.Names}}"]).stdout.split()
