"""Fleet sources end to end over real OpenSSH: a node range of bare-metal GPU servers, an
Ansible inventory, a Proxmox cluster through one API URL (the HTTPS fake)."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest
import yaml

from fleetcheck.audit import run_audit
from fleetcheck.inventory import check_limit, load_inventory
from tests.audit.support import GPU_OK, rows
from tests.fleet import Fleet
from tests.nodeenv import make_node

pytestmark = [pytest.mark.sshd, pytest.mark.timeout(180)]


def test_a_sixteen_node_range_of_gpu_servers_is_sixteen_nodes(fleet: Fleet) -> None:
    # One real sshd plays the sixteen servers: ssh_config maps every gpuNN to it, as a site's
    # ssh_config maps its names to addresses. Eight servers have a compiler, eight lack one.
    server = fleet.add_host("servers", containers="listed")
    healthy = make_node(fleet.root / "node-ok", compiler=True)
    broken = make_node(fleet.root / "node-nocc", compiler=False)
    ssh_config = fleet.root / "ssh_config"
    ssh_config.write_text(f"Host gpu*\n  HostName 127.0.0.1\n  Port {server.port}\n")
    data = {
        "defaults": {
            "probe_host": True,
            "concurrency": 8,
            "timeout": 60,
            "ssh": {"user": "root", "identity_file": str(fleet.client_key),
                    "known_hosts": str(fleet.known_hosts), "config_file": str(ssh_config)},
        },
        "hosts": {
            "gpu[01-08]": {"python": healthy.python, "env": healthy.env, "labels": ["rack-a"]},
            "gpu[09-16]": {"python": broken.python, "env": broken.env, "labels": ["rack-b"]},
        },
    }
    path = fleet.root / "inventory.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    inventory = load_inventory(str(path))

    report = asyncio.run(run_audit(inventory))

    names = [f"gpu{n:02d}" for n in range(1, 17)]
    assert [(n.id, n.kind, n.parent, n.host) for n in report.nodes] == [
        (name, "host", None, name) for name in names]
    assert rows(report)[:8] == [(name, *GPU_OK) for name in names[:8]]
    assert rows(report)[8:] == [
        (name, "fail", "Triton cpu-fallback: no C compiler: CC unset, no gcc or clang on PATH")
        for name in names[8:]]
    assert {n.facts["gpu_count"] for n in report.nodes} == {1}

    limit = ["gpu[01-03,07],gpu1[5-6]"]
    check_limit(inventory, limit)
    limited = asyncio.run(run_audit(inventory, limit=limit))
    assert [n.id for n in limited.nodes] == ["gpu01", "gpu02", "gpu03", "gpu07", "gpu15",
                                             "gpu16"]
    assert fleet.accepted_logins("servers") == 16 + 6


@pytest.mark.parametrize("parser", ["ansible-inventory", "builtin"])
def test_an_ansible_inventory_with_groups_and_group_vars_is_audited(
    fleet: Fleet, parser: str
) -> None:
    if parser == "ansible-inventory" and shutil.which("ansible-inventory") is None:
        pytest.skip("needs ansible-core (scripts/install.sh --dev installs it)")
    server = fleet.add_host("servers", containers="listed")
    healthy = make_node(fleet.root / "node-ok", compiler=True)
    broken = make_node(fleet.root / "node-nocc", compiler=False)
    ansible = fleet.root / "ansible"
    (ansible / "group_vars").mkdir(parents=True)
    (ansible / "hosts.ini").write_text(
        "[trainers]\n"
        f"train[1:3] ansible_host=127.0.0.1 ansible_port={server.port}\n"
        "[inference]\n"
        f"infer1 ansible_host=127.0.0.1 ansible_port={server.port}\n"
        "[gpu:children]\ntrainers\ninference\n")
    (ansible / "group_vars" / "all.yml").write_text(
        f"ansible_user: root\nansible_ssh_private_key_file: {fleet.client_key}\n")
    (ansible / "group_vars" / "trainers.yml").write_text(yaml.safe_dump(
        {"fleetcheck_python": healthy.python, "fleetcheck_env": healthy.env}))
    (ansible / "group_vars" / "inference.yml").write_text(yaml.safe_dump(
        {"fleetcheck_python": broken.python, "fleetcheck_env": broken.env}))
    path = fleet.root / "inventory.yaml"
    path.write_text(yaml.safe_dump({
        "defaults": {"probe_host": True, "timeout": 60,
                     "ssh": {"known_hosts": str(fleet.known_hosts), "config_file": "none"}},
        "sources": [{"ansible": "ansible/hosts.ini", "parser": parser}],
    }, sort_keys=False))
    inventory = load_inventory(str(path))

    report = asyncio.run(run_audit(inventory, limit=["gpu"]))

    assert [(n.id, n.labels) for n in report.nodes] == [
        ("train1", ("gpu", "trainers")), ("train2", ("gpu", "trainers")),
        ("train3", ("gpu", "trainers")), ("infer1", ("gpu", "inference"))]
    assert rows(report) == [
        ("train1", *GPU_OK), ("train2", *GPU_OK), ("train3", *GPU_OK),
        ("infer1", "fail", "Triton cpu-fallback: no C compiler: CC unset, no gcc or clang on "
                           "PATH")]


def test_a_three_node_proxmox_cluster_through_one_api_url(
    fleet: Fleet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.fakes.pve_api import FIXTURES_DIR, FakePveApi, serve_pve_api

    names = ("pve1", "pve2", "pve3")
    hosts = {name: fleet.add_host(name) for name in names}
    fleet.add_container("pve1", 101, "healthy")
    fleet.add_container("pve2", 201, "no-compiler")
    fleet.add_container("pve3", 301, "healthy")
    fleet.add_container("pve3", 302, "stopped")
    api = FakePveApi(FIXTURES_DIR)
    # The cluster as its API tells it: every node by the address corosync knows it by.
    api.overrides["/cluster/status"] = [
        {"type": "cluster", "id": "cluster", "name": "lab", "nodes": 3, "quorate": 1,
         "version": 3},
        *({"type": "node", "id": f"node/{n}", "name": n, "nodeid": i, "ip": "127.0.0.1",
           "local": int(i == 1), "online": 1, "level": ""} for i, n in enumerate(names, 1))]
    api.overrides["/nodes"] = [{"id": f"node/{n}", "node": n, "type": "node",
                                "status": "online", "level": ""} for n in names]
    api.overrides["/cluster/resources?type=vm"] = [
        {"id": "lxc/101", "vmid": 101, "type": "lxc", "node": "pve1", "name": "trainer",
         "status": "running", "template": 0, "tags": "gpu;train"},
        {"id": "lxc/201", "vmid": 201, "type": "lxc", "node": "pve2", "name": "builder",
         "status": "running", "template": 0},
        {"id": "lxc/301", "vmid": 301, "type": "lxc", "node": "pve3", "name": "infer",
         "status": "running", "template": 0, "tags": "gpu"},
        {"id": "lxc/302", "vmid": 302, "type": "lxc", "node": "pve3", "name": "old",
         "status": "stopped", "template": 0}]
    monkeypatch.setenv("FLEETCHECK_TEST_PVE_TOKEN", api.secret)
    with serve_pve_api(api, tmp_path / "tls"):
        path = fleet.root / "inventory.yaml"
        path.write_text(yaml.safe_dump({
            "defaults": {
                "timeout": 60,
                "ssh": {"user": "root", "identity_file": str(fleet.client_key),
                        "known_hosts": str(fleet.known_hosts), "config_file": "none"},
                "api": {"user": "fleet@pve", "token_name": "audit",
                        "token_env": "FLEETCHECK_TEST_PVE_TOKEN"},
            },
            "sources": [{"proxmox": {"url": api.url, "verify_tls": str(api.ca_path)}}],
            # Per-node overrides: here each node's sshd listens on its own port.
            "hosts": {name: {"ssh": {"port": hosts[name].port}} for name in names},
        }, sort_keys=False))
        inventory = load_inventory(str(path))
        report = asyncio.run(run_audit(inventory))

    assert [(n.id, n.name, n.labels) for n in report.nodes] == [
        ("pve1/101", "trainer", ("gpu", "train")),
        ("pve2/201", "builder", ()),
        ("pve3/301", "infer", ("gpu",)),
        ("pve3/302", "old", ())]
    assert rows(report) == [
        ("pve1/101", *GPU_OK),
        ("pve2/201", "fail", "Triton cpu-fallback: no C compiler: CC unset, no gcc or clang on "
                             "PATH"),
        ("pve3/301", *GPU_OK),
        ("pve3/302", "skipped", "container stopped")]
    assert inventory.groups["lab"] == names
