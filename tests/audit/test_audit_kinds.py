"""One audit over LXC containers, QEMU VMs and Docker/Podman containers inside both."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from tests.audit.support import GPU_OK, audit, rows
from tests.fleet import Fleet

pytestmark = [pytest.mark.sshd, pytest.mark.timeout(180)]


def kinds(report: object) -> list[tuple[str, str, str | None]]:
    return [(n.id, n.kind, n.parent) for n in report.nodes]  # type: ignore[attr-defined]


def test_lxc_vms_and_docker_inside_both_in_one_run(fleet: Fleet) -> None:
    fleet.add_host("pve1", containers="listed", vms="all")
    fleet.add_container("pve1", 101)
    fleet.add_oci("pve1", "docker", "trainer", "no-compiler", vmid=101, mode="listed")
    fleet.add_vm("pve1", 300)
    fleet.add_vm("pve1", 301, "stopped")
    fleet.add_vm("pve1", 302, agent="none")
    fleet.add_vm("pve1", 303, agent="off")
    fleet.add_oci("pve1", "podman", "infer", vmid=300, mode="listed")
    fleet.write_inventory(timeout=30)
    # vms: all cannot carry a VM's oci:, so VM 300 is listed with its podman container.
    data = yaml.safe_load(fleet.inventory.read_text())  # type: ignore[union-attr]
    data["hosts"]["pve1"]["vms"] = [{"vmid": 300, "oci": {"runtime": "podman",
                                                         "containers": ["infer"]}},
                                    301, 302, 303]
    fleet.inventory.write_text(yaml.safe_dump(data))  # type: ignore[union-attr]

    report = audit(fleet)

    assert kinds(report) == [
        ("pve1/101", "lxc", "pve1"),
        ("pve1/101/docker:trainer", "docker", "pve1/101"),
        ("pve1/300", "qemu", "pve1"),
        ("pve1/300/podman:infer", "podman", "pve1/300"),
        ("pve1/301", "qemu", "pve1"),
        ("pve1/302", "qemu", "pve1"),
        ("pve1/303", "qemu", "pve1"),
    ]
    by_id = {n.id: n for n in report.nodes}
    assert (by_id["pve1/101"].status, by_id["pve1/101"].reason) == GPU_OK
    trainer = by_id["pve1/101/docker:trainer"]
    assert (trainer.status, trainer.triton.verdict, trainer.triton.cause) == (
        "fail", "cpu-fallback", "no_c_compiler")
    assert (by_id["pve1/300"].status, by_id["pve1/300"].reason) == GPU_OK
    assert by_id["pve1/300/podman:infer"].triton.verdict == "gpu"
    assert rows(report)[4:] == [
        ("pve1/301", "skipped", "VM stopped"),
        ("pve1/302", "error", "VM 302 has no QEMU guest agent configured: set it with "
                              "`qm set 302 --agent 1` and install qemu-guest-agent in the guest"),
        ("pve1/303", "error", "the QEMU guest agent in VM 303 does not answer: start "
                              "qemu-guest-agent in the guest (or the agent is disabled)"),
    ]
    assert fleet.accepted_logins("pve1") == 1


@pytest.mark.parametrize("pvesh", [True, False], ids=["pvesh", "qm-list"])
def test_discovered_vms_and_docker_containers(fleet: Fleet, pvesh: bool) -> None:
    fleet.add_host("pve1", probe_host=True, vms="all", pvesh=pvesh)
    fleet.add_vm("pve1", 300)
    fleet.add_vm("pve1", 301, "stopped")
    fleet.add_vm("pve1", 9000, "stopped", template=True)
    fleet.add_oci("pve1", "docker", "infer")
    fleet.add_oci("pve1", "docker", "paused", state="paused")
    fleet.add_oci("pve1", "docker", "gone", state="exited")
    fleet.write_inventory(timeout=30)

    report = audit(fleet)

    assert [(n.id, n.status) for n in report.nodes] == [
        ("pve1", "warn"),
        ("pve1/docker:gone", "skipped"),
        ("pve1/docker:infer", "ok"),
        ("pve1/docker:paused", "skipped"),
        ("pve1/300", "ok"),
        ("pve1/301", "skipped"),
        ("pve1/9000", "skipped"),
    ]
    # `docker ps -a`: a stopped container is listed, and skipped (never started).
    assert {n.id: n.reason for n in report.nodes}["pve1/docker:gone"] == "container exited"
    # qm list does not mark templates; pvesh does (a template is never running anyway).
    assert {n.id: n.reason for n in report.nodes}["pve1/9000"] == (
        "template" if pvesh else "VM stopped")


def test_one_odd_discovery_line_is_one_error_node(fleet: Fleet) -> None:
    host = fleet.add_host("pve1", pvesh=False)
    fleet.add_container("pve1", 101)
    fleet.add_container("pve1", 103)
    # A row cut short, as no pct prints it, between two good ones.
    (host.dir / "pct-list-extra").write_text("102        running\n")
    fleet.write_inventory(timeout=30)

    report = audit(fleet)

    assert rows(report) == [
        ("pve1/101", *GPU_OK),
        ("pve1/102", "error", "discovery could not read `pct list` line 4: unexpected line: "
                              "102 running"),
        ("pve1/103", *GPU_OK),
    ]


def test_node_json_has_kind_and_parent(fleet: Fleet, tmp_path: Path) -> None:
    from fleetcheck.render.json import render_json

    fleet.add_host("pve1", containers="listed")
    fleet.add_container("pve1", 101)
    fleet.add_oci("pve1", "docker", "t", vmid=101, mode="listed")
    fleet.write_inventory(timeout=30)
    nodes = json.loads(render_json(audit(fleet)))["nodes"]
    assert [(n["id"], n["kind"], n["parent"], n["vmid"]) for n in nodes] == [
        ("pve1/101", "lxc", "pve1", 101),
        ("pve1/101/docker:t", "docker", "pve1/101", 101),
    ]


def test_a_host_without_ssh_reaches_its_vms_through_the_api(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import asyncio

    from fleetcheck.audit import run_audit
    from fleetcheck.inventory import parse_inventory
    from tests.fakes.pve_api import FIXTURES_DIR, FakePveApi, FakeVm, serve_pve_api

    if not (FIXTURES_DIR / "cluster_resources_vm.json").is_file():
        pytest.skip(f"shared Proxmox fixtures not found at {FIXTURES_DIR}")
    from tests import nodeenv

    node = nodeenv.make_node(tmp_path / "vm200", compiler=False)
    # The agent's environment: no HOME; coreutils' timeout on PATH, no compiler.
    sysbin = tmp_path / "sysbin"
    sysbin.mkdir()
    (sysbin / "timeout").symlink_to(shutil.which("timeout") or "/usr/bin/timeout")
    env = {k: v for k, v in node.env.items() if k != "HOME"}
    env.update(TRITON_HOME=str(tmp_path / "vm200"), PATH=f"{env['PATH']}:{sysbin}")
    with serve_pve_api(FakePveApi(FIXTURES_DIR), tmp_path / "tls") as api:
        monkeypatch.setenv("FLEETCHECK_TEST_PVE_TOKEN", api.secret)
        # cluster_resources_vm.json lists qemu/200 running on pve1.
        api.vms[200] = FakeVm(env=env, cwd=str(tmp_path))
        inventory = parse_inventory(
            f"defaults: {{python: {node.python}}}\n"
            "hosts:\n  pve1:\n    transport: api\n    vms: all\n    timeout: 30\n"
            f"    api: {{url: '{api.url}', user: fleet@pve, token_name: audit,\n"
            f"          token_env: FLEETCHECK_TEST_PVE_TOKEN, verify_tls: '{api.ca_path}'}}\n",
            str(tmp_path / "inv.yaml"))
        report = asyncio.run(run_audit(inventory))
    assert [(n.id, n.kind, n.status, n.triton.cause) for n in report.nodes] == [
        ("pve1/200", "qemu", "fail", "no_c_compiler")]


def test_faults_inside_vms_and_runtimes_are_clear_node_statuses(fleet: Fleet) -> None:
    host = fleet.add_host("pve1", containers="listed", vms="listed")
    fleet.add_vm("pve1", 300, "no-python")
    fleet.add_vm("pve1", 301, "garbage")
    fleet.add_oci("pve1", "docker", "slim", "no-python", mode="listed")
    fleet.add_oci("pve1", "docker", "chatty", "garbage", mode="listed")
    fleet.add_oci("pve1", "docker", "stopped", state="exited", mode="listed")
    fleet.add_container("pve1", 101)
    fleet.add_oci("pve1", "podman", "x", vmid=101, mode="all")
    (host.dir / "containers" / "101" / "oci" / "podman" / "ps-extra").write_text("not json\n")
    fleet.write_inventory(timeout=30)

    report = audit(fleet)

    assert rows(report) == [
        ("pve1/docker:chatty", "error", "probe output is not one JSON document: Expecting "
                                        "value (output begins 'Welcome to container shell!')"),
        ("pve1/docker:slim", "error", "python3 not found in docker container 'slim' on pve1"),
        ("pve1/docker:stopped", "skipped", "container not running"),
        ("pve1/101", *GPU_OK),
        ("pve1/101/podman:unreadable-2", "error", "discovery could not read `podman ps` line 34: "
                                                  "unexpected line: not json"),
        ("pve1/101/podman:x", *GPU_OK),
        ("pve1/300", "error", "python3 not found in VM"),
        ("pve1/301", "error", "probe output is not one JSON document: Expecting value (output "
                              "begins 'Welcome to container shell!')"),
    ]


def test_a_runtime_that_cannot_list_is_one_node(fleet: Fleet) -> None:
    fleet.add_host("pve1", containers="listed", probe_host=True)
    store = fleet.add_oci("pve1", "docker", "a").parent
    (store / "daemon-down").write_text("")
    fleet.write_inventory(timeout=30)

    report = audit(fleet)

    assert rows(report)[1:] == [
        ("pve1/docker:*", "error", "container discovery failed: `docker ps` on pve1: docker "
                                   "daemon on pve1 is not running"),
    ]


def test_vms_and_docker_pass_the_hosts_gatekeeper(fleet: Fleet, tmp_path: Path) -> None:
    from fleetcheck.host_setup import probe_sha256
    from tests.gatekeeper.support import (
        audit_with,
        install_gatekeeper,
        keygen,
        log_lines,
    )

    key = keygen(tmp_path / "audit_ed25519")
    host = fleet.add_host("pve1", containers="listed", vms="listed")
    fleet.add_container("pve1", 101)
    fleet.add_oci("pve1", "docker", "a", vmid=101, mode="all")
    fleet.add_vm("pve1", 300)
    fleet.add_oci("pve1", "podman", "b", vmid=300, mode="listed")
    fleet.add_oci("pve1", "docker", "c", mode="listed")
    log = install_gatekeeper(host, key.with_suffix(".pub"))

    plain = audit_with(fleet, tmp_path / "plain.yaml", None)
    gated = audit_with(fleet, tmp_path / "gated.yaml", key)

    assert rows(gated) == rows(plain)
    assert [node.id for node in gated.nodes] == [
        "pve1/docker:c", "pve1/101", "pve1/101/docker:a", "pve1/300", "pve1/300/podman:b"]
    assert {node.status for node in gated.nodes} == {"ok"}
    # Every probe came compressed (transport/packing.py), pinned by its source's hash.
    digest = f"{probe_sha256()} (zlib)"
    shapes = [line.split(": ")[2] for line in log_lines(log, "allowed")]
    assert sorted(shapes) == sorted([
        "pct exec oci list", f"oci probe sha256 {digest}", f"pct exec probe sha256 {digest}",
        f"pct exec oci probe sha256 {digest}", f"qm guest exec probe sha256 {digest}",
        f"qm guest exec oci probe sha256 {digest}"])
    assert log_lines(log, "refused") == []
