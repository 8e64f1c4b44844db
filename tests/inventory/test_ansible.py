"""Ansible inventories as a source: the real ansible-inventory and the built-in reader agree."""

from __future__ import annotations

import ast
import os
import pwd
import shutil
from pathlib import Path

import pytest

from fleetcheck.inventory import InventoryError, check_limit, load_inventory, matches_limit
from fleetcheck.inventory.ansible import read_ansible_inventory
from fleetcheck.inventory.ansible_static import expand_hostname_range, ini_value
from fleetcheck.inventory.sources import SourceProblem, proxy_jump_of

ANSIBLE = shutil.which("ansible-inventory")
needs_ansible = pytest.mark.skipif(
    ANSIBLE is None, reason="needs ansible-core (scripts/install.sh --dev installs it)")

INI = """\
# GPU fleet, as the site's playbooks know it
bastion ansible_host=203.0.113.5 ansible_connection=ssh

[gpu]
gpu[01:16] ansible_user=audit
gpu-special:2222 ansible_host=10.0.0.9 fleetcheck_labels='["special"]'

[pve]
pve1 ansible_host=10.1.2.6 fleetcheck_containers=all fleetcheck_probe_host=False
pve2 ansible_host=10.1.2.7 ansible_python_interpreter=auto_silent

[windows]
win1 ansible_connection=winrm

[gpu:vars]
ansible_ssh_common_args='-o ProxyJump=admin@bastion.example.internal:22'
fleetcheck_timeout=90

[datacenter:children]
gpu
pve
"""
GROUP_VARS = {
    "all.yml": "ansible_user: root\nfleetcheck_env: {CUDA_HOME: /usr/local/cuda}\n",
    "gpu.yml": "fleetcheck_python: /opt/venv/bin/python3\n"
               "ansible_ssh_private_key_file: ~/.ssh/gpu_ed25519\n",
    "pve/main.yml": "ansible_user: audit\nfleetcheck_sudo: true\n",
}
HOST_VARS = {"pve2.yml": "fleetcheck_vms: all\nansible_port: 2200\n"}


def write_ansible(root: Path, text: str = INI, name: str = "hosts.ini") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for folder, files in (("group_vars", GROUP_VARS), ("host_vars", HOST_VARS)):
        for file, body in files.items():
            path = root / folder / file
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(body)
    (root / name).write_text(text)
    return root / name


def fleet_yaml(tmp_path: Path, source: str, extra: str = "") -> Path:
    path = tmp_path / "fleet.yaml"
    path.write_text(f"defaults:\n  probe_host: true\nsources:\n{source}{extra}")
    return path


def described(path: Path) -> list[tuple[object, ...]]:
    inventory = load_inventory(str(path))
    return [(h.name, h.address, h.ssh.user, h.ssh.port, h.ssh.identity_file, h.ssh.proxy_jump,
             h.python, dict(h.env), h.labels, h.timeout, h.sudo, h.probe_host, h.containers,
             h.vms) for h in inventory.hosts]


#: An SSH path's `~` is the passwd entry's home, as OpenSSH reads it, whatever `HOME` says.
GPU_KEY = f"{pwd.getpwuid(os.getuid()).pw_dir}/.ssh/gpu_ed25519"
JUMP = "admin@bastion.example.internal:22"
ENV = {"CUDA_HOME": "/usr/local/cuda"}
EXPECTED = [
    ("bastion", "203.0.113.5", "root", None, None, None, "python3", ENV, (), 60.0, False,
     True, (), ()),
    *[(f"gpu{n:02d}", f"gpu{n:02d}", "audit", None, GPU_KEY, JUMP, "/opt/venv/bin/python3",
       ENV, ("datacenter", "gpu"), 90.0, False, True, (), ()) for n in range(1, 17)],
    ("gpu-special", "10.0.0.9", "root", 2222, GPU_KEY, JUMP, "/opt/venv/bin/python3", ENV,
     ("datacenter", "gpu", "special"), 90.0, False, True, (), ()),
    ("pve1", "10.1.2.6", "audit", None, None, None, "python3", ENV, ("datacenter", "pve"),
     60.0, True, False, "all", ()),
    ("pve2", "10.1.2.7", "audit", 2200, None, None, "python3", ENV, ("datacenter", "pve"),
     60.0, True, True, (), "all"),
]


@needs_ansible
@pytest.mark.parametrize("parser", ["ansible-inventory", "builtin"])
def test_an_ini_inventory_with_groups_group_vars_and_a_range(tmp_path: Path, parser: str) -> None:
    write_ansible(tmp_path / "ansible")
    path = fleet_yaml(tmp_path, f"  - ansible: ansible/hosts.ini\n    parser: {parser}\n")

    assert described(path) == EXPECTED
    inventory = load_inventory(str(path))
    assert inventory.groups["gpu"] == (*(f"gpu{n:02d}" for n in range(1, 17)), "gpu-special")
    assert set(inventory.groups) == {"datacenter", "gpu", "pve"}
    assert inventory.warnings == (
        "ansible/hosts.ini: host win1 left out: ansible_connection 'winrm' is not SSH "
        "(fleetcheck reaches hosts over SSH)",)
    check_limit(inventory, ["gpu,!gpu[02-16]"])
    assert [h.name for h in inventory.hosts if matches_limit(
        h.name, h.labels, ["gpu,!gpu[02-16]"], inventory.groups)] == ["gpu01", "gpu-special"]
    assert inventory.hosts[1].origin == f"{path}:4 (ansible/hosts.ini)"


YAML_INVENTORY = """\
all:
  hosts:
    bastion: {ansible_host: 203.0.113.5}
  children:
    datacenter:
      children:
        gpu:
          hosts:
            gpu[01:16]: {ansible_user: audit}
            gpu-special: {ansible_host: 10.0.0.9, ansible_port: 2222,
                          fleetcheck_labels: [special]}
          vars:
            ansible_ssh_common_args: -o ProxyJump=admin@bastion.example.internal:22
            fleetcheck_timeout: 90
        pve:
          hosts:
            pve1: {ansible_host: 10.1.2.6, fleetcheck_containers: all,
                   fleetcheck_probe_host: false}
            pve2: {ansible_host: 10.1.2.7}
    windows:
      hosts:
        win1: {ansible_connection: winrm}
"""


@needs_ansible
@pytest.mark.parametrize("parser", ["ansible-inventory", "builtin"])
def test_a_yaml_inventory_reads_the_same(tmp_path: Path, parser: str) -> None:
    write_ansible(tmp_path / "ansible", YAML_INVENTORY, "hosts.yml")
    path = fleet_yaml(tmp_path, f"  - ansible: ansible/hosts.yml\n    parser: {parser}\n")
    assert described(path) == EXPECTED


@needs_ansible
def test_both_readers_give_the_same_variables(tmp_path: Path) -> None:
    source = write_ansible(tmp_path / "ansible")
    real = read_ansible_inventory(str(source), "ansible-inventory")
    ours = read_ansible_inventory(str(source), "builtin")
    assert (real.parser, ours.parser) == ("ansible-inventory", "builtin")
    assert ours.hosts == real.hosts
    assert ours.groups == real.groups


def test_the_inventory_entry_refines_a_source_host_and_groups_select(tmp_path: Path) -> None:
    write_ansible(tmp_path / "ansible")
    path = fleet_yaml(tmp_path, "  - ansible: ansible/hosts.ini\n    parser: builtin\n"
                                "    groups: [pve]\n    host: {timeout: 30}\n",
                      "hosts:\n  pve2:\n    ssh: {user: root}\n    labels: [a100]\n")
    inventory = load_inventory(str(path))
    assert [(h.name, h.ssh.user, h.ssh.port, h.labels, h.timeout) for h in inventory.hosts] == [
        ("pve1", "audit", None, ("datacenter", "pve"), 30.0),
        ("pve2", "root", 2200, ("datacenter", "pve", "a100"), 30.0),
    ]


@pytest.mark.parametrize(
    ("ini", "source", "message"),
    [
        ("gpu1 fleetcheck_pyton=/usr/bin/python3\n", "",
         "fleet.yaml:4: sources[0].ansible: ansible/hosts.ini: host gpu1: fleetcheck_pyton: not "
         "an inventory key (did you mean fleetcheck_python?)"),
        ("gpu1 fleetcheck_timeout=soon\n", "",
         "fleet.yaml:4: sources[0].ansible: ansible/hosts.ini: host gpu1: fleetcheck_timeout: "
         "must be a number of seconds, got 'soon'"),
        ("gpu1 ansible_port=x\n", "",
         "fleet.yaml:4: sources[0].ansible: ansible/hosts.ini: host gpu1: ansible_port: must "
         "be an integer, got 'x'"),
        ("gpu1 ansible_host='{{ lookup(\"env\", \"IP\") }}'\n", "",
         "fleet.yaml:4: sources[0].ansible: ansible/hosts.ini: host gpu1: ansible_host: "
         "'{{ lookup(\"env\", \"IP\") }}' is a Jinja template, which fleetcheck does not "
         "evaluate; give the value itself"),
        ("gpu1 'ansible_ssh_common_args=-o ProxyCommand=\"nc %h %p\"'\n", "",
         "fleet.yaml:4: sources[0].ansible: ansible/hosts.ini: host gpu1: "
         "ansible_ssh_common_args: ProxyCommand 'nc %h %p' is not an `ssh -W %h:%p HOST` "
         "jump; use ProxyJump (ssh -J) instead"),
        ("[gpu:vars]\nx=1\n", "",
         "fleet.yaml:4: sources[0].ansible: ANSIBLE/hosts.ini:1: section [gpu:vars] is not "
         "valid for undefined group 'gpu'"),
        ("[gpu]\ngpu1\n[pve]\npve1\n", "    groups: [gpux]\n",
         "fleet.yaml:6: sources[0].groups[0]: no group 'gpux' in ansible/hosts.ini (groups: "
         "gpu, pve)"),
        ("gpu1 fleetcheck_ssh='{\"prot\": 2}'\n", "",
         "fleet.yaml:4: sources[0].ansible: ansible/hosts.ini: host gpu1: fleetcheck_ssh.prot: "
         "unknown key (did you mean 'port'?)"),
    ],
    ids=["typo", "type", "port", "jinja", "proxycommand", "undefined-group", "groups",
         "nested"],
)
def test_mistakes_are_one_line_in_the_sources_terms(
    tmp_path: Path, ini: str, source: str, message: str
) -> None:
    write_ansible(tmp_path / "ansible", ini)
    path = fleet_yaml(tmp_path, "  - ansible: ansible/hosts.ini\n    parser: builtin\n" + source)
    with pytest.raises(InventoryError) as info:
        load_inventory(str(path))
    assert str(info.value) == message.replace("fleet.yaml", str(path)).replace(
        "ANSIBLE", str(tmp_path / "ansible"))


def test_dynamic_sources_without_ansible_are_a_clear_error(tmp_path: Path) -> None:
    plugin = tmp_path / "proxmox.yml"
    plugin.write_text("plugin: community.proxmox.proxmox\nurl: https://pve1:8006\n")
    script = tmp_path / "inventory.py"
    script.write_text("#!/usr/bin/env python3\nprint('{}')\n")
    script.chmod(0o755)
    for source, problem in [
        (plugin, f"{plugin}: a dynamic inventory (plugin: community.proxmox.proxmox) needs "
                 "Ansible: install ansible-core"),
        (script, f"{script}: an executable is a dynamic inventory script; install "
                 "ansible-core"),
        (tmp_path, f"{tmp_path}: an inventory directory needs Ansible: install ansible-core"),
    ]:
        path = fleet_yaml(tmp_path, f"  - ansible: {source}\n    parser: builtin\n")
        with pytest.raises(InventoryError) as info:
            load_inventory(str(path))
        assert str(info.value).startswith(f"{path}:4: sources[0].ansible: {problem}")


@needs_ansible
def test_ansible_inventorys_own_refusal_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "hosts.ini").write_text("[gpu\nhost1\n")
    path = fleet_yaml(tmp_path, "  - ansible: hosts.ini\n")
    with pytest.raises(InventoryError) as info:
        load_inventory(str(path))
    text = str(info.value)
    assert text.startswith(f"{path}:4: sources[0].ansible: {tmp_path}/hosts.ini: "
                           "ansible-inventory failed: ")
    assert "\n" not in text and "Failed to parse inventory with 'ini' plugin" in text


def test_ansible_ranges_values_and_jumps() -> None:
    assert expand_hostname_range("gpu[01:03]") == ["gpu01", "gpu02", "gpu03"]
    assert expand_hostname_range("n[1:9:4]-[a:b]") == ["n1-a", "n1-b", "n5-a", "n5-b",
                                                       "n9-a", "n9-b"]
    with pytest.raises(ValueError, match="equal-length"):
        expand_hostname_range("gpu[01:100]")
    assert (ini_value("2222"), ini_value("True"), ini_value("a b"), ini_value("[1]")) == (
        2222, True, "a b", [1])
    for args, jump in [("-o ProxyJump=admin@bastion:2222", "admin@bastion:2222"),
                       ("-J jump1,jump2", "jump1,jump2"),
                       ("-o 'ProxyCommand=ssh -W %h:%p -q -p 2200 admin@bastion'",
                        "admin@bastion:2200"),
                       ("-o StrictHostKeyChecking=no", None)]:
        assert proxy_jump_of("ansible_ssh_common_args", args) == jump
    with pytest.raises(SourceProblem):
        proxy_jump_of("ansible_ssh_common_args", "-o 'ProxyCommand=nc %h %p'")


def test_an_ini_value_survives_cpythons_spurious_ast_failure(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # CPython 3.11 before 3.11.8 (Debian 12's 3.11.2): an ast.parse that the garbage collector
    # runs during literal_eval's own fails the outer one (gh-106905); the next parse succeeds.
    # Any other SystemError is not hidden.
    real = ast.literal_eval
    failures = ["AST constructor recursion depth mismatch (before=150, after=200)"]

    def flaky(text: str) -> object:
        if failures:
            raise SystemError(failures.pop())
        return real(text)

    monkeypatch.setattr(ast, "literal_eval", flaky)
    assert ini_value("2222") == 2222
    failures.append("something else")
    with pytest.raises(SystemError, match="something else"):
        ini_value("2222")
