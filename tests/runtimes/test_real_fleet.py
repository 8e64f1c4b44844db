"""One audit of the real-runtime fleet: every node's status and reason as the real tools make it.

pve1: LXC 101 (running), 102 (stopped), 109 (no such container), 103 (running; the docker
CLI inside talks to the fleet's dockerd through its socket: `web`, `gone` exited, `frozen`
paused, `ghost` missing), 104 (running; podman inside it, its own containers `inner` and
`inner-gone` exited), 105 (running; a real dockerd of its own inside, its containers `iweb`
and `igone` exited); Docker on the host itself (`containers: all`); VMs (`vms: all`): 301
(a TCG guest with a real qemu-guest-agent), 302 (running, agent never answers), 303 (agent
configured, not running), 304 (no agent configured). pve2: `containers: all` (pct list over
the real LXC containers), Podman on the host (`containers: all`).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetcheck.inventory_data.listings import parse_oci_ps
from fleetcheck.transport.interface import CommandResult
from fleetcheck.transport.oci import oci_exec_failure, oci_list_argv
from tests.runtimes.conftest import Scenario, audit

pytestmark = [pytest.mark.timeout(600)]

EXPECTED: dict[str, tuple[str, str]] = {
    "pve1/102": ("skipped", "container stopped"),
    "pve1/109": ("error", "container 109 does not exist on pve1"),
    "pve1/103/docker:gone": ("skipped", "container not running"),
    "pve1/103/docker:frozen": ("skipped", "container paused"),
    "pve1/103/docker:ghost": ("error", "no docker container 'ghost' on pve1/103"),
    "pve1/docker:gone": ("skipped", "container exited"),
    "pve1/docker:frozen": ("skipped", "container paused"),
    "pve1/104/podman:inner-gone": ("skipped", "container exited"),
    "pve1/105/docker:igone": ("skipped", "container exited"),
    "pve2/102": ("skipped", "container stopped"),
    "pve2/podman:pgone": ("skipped", "container exited"),
    "pve2/podman:pfrozen": ("skipped", "container paused"),
    "pve1/302": ("error", "the QEMU guest agent in VM 302 does not answer: start "
                            "qemu-guest-agent in the guest (or the agent is disabled)"),
    "pve1/303": ("skipped", "VM stopped"),
    "pve1/304": ("error", "VM 304 has no QEMU guest agent configured: set it with "
                            "`qm set 304 --agent 1` and install qemu-guest-agent in the guest"),
}
PROBED = {
    "pve1/101": "lxc", "pve1/103": "lxc", "pve1/104": "lxc", "pve2/101": "lxc",
    "pve2/103": "lxc", "pve2/104": "lxc", "pve2/105": "lxc", "pve1/103/docker:web": "docker",
    "pve1/105": "lxc", "pve1/105/docker:iweb": "docker",
    "pve1/docker:web": "docker", "pve1/104/podman:inner": "podman", "pve2/podman:pweb": "podman",
    "pve1/301": "qemu",
}


def test_one_guest_boot_serves_the_whole_run(scenario: Scenario) -> None:
    # The TCG boot is the fleet's longest part: VM 301's is the only one (302 and 304 start
    # with their CPUs stopped), and its QEMU is the same process since the fleet was made.
    assert scenario.fleet.booted == [301]
    assert scenario.fleet.vms[301].poll() is None


def test_every_real_node_is_in_the_report(scenario: Scenario) -> None:
    missing = sorted((set(EXPECTED) | set(PROBED)) - set(scenario.nodes))
    assert not missing, (missing, sorted(scenario.nodes), scenario.stderr[-2000:])


@pytest.mark.parametrize("node_id", sorted(PROBED))
def test_a_running_node_is_probed(scenario: Scenario, node_id: str) -> None:
    node = scenario.nodes.get(node_id)
    assert node is not None, sorted(scenario.nodes)
    assert node["status"] not in ("error", "unreachable", "skipped"), (node["status"],
                                                                         node["reason"])
    assert node["kind"] == PROBED[node_id]
    assert node["triton"]["verdict"] == "no-gpu"
    # The probe itself knows where it runs, from the signs the real runtime left.
    where = node["facts"]["where"]
    assert where["kind"] == PROBED[node_id], where
    assert node["facts"]["container"] == (None if PROBED[node_id] == "qemu"
                                          else PROBED[node_id])


@pytest.mark.parametrize("node_id", sorted(EXPECTED))
def test_a_refused_node_says_why(scenario: Scenario, node_id: str) -> None:
    node = scenario.nodes.get(node_id)
    assert node is not None, sorted(scenario.nodes)
    status, reason = EXPECTED[node_id]
    assert node["status"] == status, node["reason"]
    assert node["reason"] == reason


@pytest.mark.parametrize(("limit", "calls"), [
    # LXC 103 is listed in the inventory: no pct list, no qm list (vms: all), no docker ps of
    # the host or podman ps of LXC 104; only the one exec.
    ("pve1/103/docker:web", ["pct exec 103 --keep-env 0 -- docker exec"]),
    # The host's own podman on a `containers: all` host: no pct list.
    ("pve2/podman:pweb", []),
    # A VM of a `vms: all` host: its listing is needed, no other.
    ("pve1/301", ["qm list", "qm guest exec 301"]),
])
def test_limit_on_one_nested_node_runs_only_the_discovery_it_needs(
        scenario: Scenario, limit: str, calls: list[str]) -> None:
    fleet = scenario.fleet
    host = fleet.hosts[limit.split("/")[0]]
    log = host.dir / "calls.log"
    log.write_text("")
    _code, report, stderr = audit(scenario.inventory, "--limit", limit)
    assert [node["id"] for node in report["nodes"]] == [limit], stderr[-1500:]
    assert report["nodes"][0]["status"] == "warn"
    ran = log.read_text().splitlines()
    assert len(ran) == len(calls) and all(
        line.startswith(call) for line, call in zip(ran, calls, strict=True)), ran


CLIENTS = [client for client in ("/usr/bin/docker", "/usr/local/bin/docker")
           if Path(client).is_file()]


@pytest.mark.parametrize("client", CLIENTS)
def test_every_docker_client_here_lists_and_refuses_alike(scenario: Scenario,
                                                          client: str) -> None:
    # Debian's 20.10 client and, where installed, a newer one (Docker 28 on these images)
    # against the same 20.10 daemon: the listing parses the same, the refusals read the same.
    fleet = scenario.fleet
    listing = fleet.run([client, *oci_list_argv("docker")[1:]]).stdout
    states = {e.name: e.state for e in parse_oci_ps(listing, "docker")}
    assert {name: states.get(name) for name in ("web", "gone", "frozen")} == {
        "web": "running", "gone": "exited", "frozen": "paused"}
    outcomes = {}
    for name in ("gone", "frozen", "ghost"):
        done = fleet.run([client, "exec", "-i", name, "true"], check=False)
        result = CommandResult(done.returncode, done.stdout.encode(), done.stderr.encode())
        outcomes[name] = oci_exec_failure(result, "docker", name, "pve1")
    assert outcomes == {"gone": ("skipped", "container not running"),
                        "frozen": ("skipped", "container paused"),
                        "ghost": ("error", "no docker container 'ghost' on pve1")}
    # An interpreter that is not there, by path and by name: the 20.10 daemon writes runc's
    # error to the exec's stdout (`stat PATH: no such file or directory`, exit 126), and it
    # reads "not found", as podman's and the VM's do.
    for missing in ("/usr/bin/no-such-python3", "no-such-python3"):
        done = fleet.run([client, "exec", "-i", "web", missing, "-"], check=False)
        result = CommandResult(done.returncode, done.stdout.encode(), done.stderr.encode())
        assert (done.returncode, "OCI runtime exec failed" in done.stdout) == (126, True), done
        assert oci_exec_failure(result, "docker", "web", "pve1") == (
            "error", f"{missing} not found in docker container 'web' on pve1"), done
