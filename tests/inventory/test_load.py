"""Loading inventory.yaml: the resolved dataclasses, and one exact line for each mistake."""

from __future__ import annotations

import os
import pwd
from pathlib import Path
from typing import Any

import pytest

from fleetcheck.inventory import InventoryError, load_inventory, parse_inventory
from fleetcheck.inventory.hostkeys import kind_keys
from fleetcheck.inventory.load import schema_keys
from fleetcheck.inventory_data.model import (
    ApiOptions,
    ContainerSpec,
    HostSpec,
    SshOptions,
    declaration_fields,
)

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "inventory.example.yaml"
#: SSH paths' `~` is the passwd entry's home, as OpenSSH reads it, whatever `HOME` says.
HOME = pwd.getpwuid(os.getuid()).pw_dir

BASE = "hosts:\n  pve1:\n    address: 10.1.2.6\n"

MISTAKES = [
    pytest.param(
        BASE + "    adress: x\n    containers: all\n",
        "inv.yaml:4: hosts.pve1.adress: unknown key (did you mean 'address'?)",
        id="unknown-key",
    ),
    pytest.param(
        "hostz: {}\n",
        "inv.yaml:1: hostz: unknown key (did you mean 'hosts'?)",
        id="unknown-top",
    ),
    pytest.param(
        BASE + "    containers: all\n    frobnicate: 1\n",
        (
            "inv.yaml:5: hosts.pve1.frobnicate: unknown key (valid: address, transport, enabled, "
            "ssh, api, probe_host, containers, vms, oci, kubernetes, python, env, labels, sudo, "
            "timeout)"
        ),
        id="unknown-no-close",
    ),
    pytest.param(
        "defaults:\n  ssh: {port: '22'}\n" + BASE + "    containers: all\n",
        "inv.yaml:2: defaults.ssh.port: must be an integer, got '22'",
        id="wrong-type-port",
    ),
    pytest.param(
        BASE + "    ssh: {port: 70000}\n    containers: all\n",
        "inv.yaml:4: hosts.pve1.ssh.port: must be between 1 and 65535, got 70000",
        id="port-range",
    ),
    pytest.param(
        BASE + "    containers: all\n  pve1:\n    address: 10.1.2.7\n    containers: all\n",
        "inv.yaml:5: hosts.pve1: duplicate host 'pve1' (first defined at line 2)",
        id="dup-host",
    ),
    pytest.param(
        BASE + "    containers:\n      - 101\n      - 102\n      - {vmid: abc}\n",
        "inv.yaml:7: hosts.pve1.containers[2].vmid: must be an integer, got 'abc'",
        id="vmid-str",
    ),
    pytest.param(
        BASE + "    containers: [101, '102']\n",
        "inv.yaml:4: hosts.pve1.containers[1]: must be an integer, got '102'",
        id="vmid-plain-str",
    ),
    pytest.param(
        BASE + "    containers: [99]\n",
        "inv.yaml:4: hosts.pve1.containers[0]: must be between 100 and 999999999, got 99",
        id="vmid-range",
    ),
    pytest.param(
        BASE + "    containers:\n      - 101\n      - {vmid: 101}\n",
        "inv.yaml:6: hosts.pve1.containers[1]: VMID 101 listed twice (first at line 5)",
        id="vmid-dup",
    ),
    pytest.param(
        BASE + "    containers:\n      - {python: /usr/bin/python3}\n",
        "inv.yaml:5: hosts.pve1.containers[0].vmid: missing",
        id="vmid-missing",
    ),
    pytest.param(
        BASE,
        "inv.yaml:2: hosts.pve1: nothing to probe: set containers, vms, oci or probe_host: true "
        "(or defaults.probe_host: true)",
        id="nothing-to-probe",
    ),
    pytest.param(
        "hosts:\n  pve1:\n",
        "inv.yaml:2: hosts.pve1: nothing to probe: set containers, vms, oci or probe_host: true "
        "(or defaults.probe_host: true)",
        id="empty-host",
    ),
    pytest.param(
        BASE + "    containers: some\n",
        "inv.yaml:4: hosts.pve1.containers: must be 'all' or a list of VMIDs, got 'some'",
        id="containers-bad",
    ),
    pytest.param(
        BASE + "    containers: all\n    env: {CUDA_VISIBLE_DEVICES: 0}\n",
        "inv.yaml:5: hosts.pve1.env.CUDA_VISIBLE_DEVICES: must be a string, got 0 (quote it)",
        id="env-not-str",
    ),
    pytest.param(
        BASE + "    containers: all\n    env: {1BAD: x}\n",
        "inv.yaml:5: hosts.pve1.env.1BAD: not a valid environment variable name",
        id="env-bad-name",
    ),
    pytest.param(
        BASE + "    containers: all\n    env: [A]\n",
        "inv.yaml:5: hosts.pve1.env: must be a mapping of NAME: value, got a list",
        id="env-not-map",
    ),
    pytest.param(
        BASE + "    containers: all\n    labels: gpu\n",
        "inv.yaml:5: hosts.pve1.labels: must be a list of labels, e.g. [gpu], got 'gpu'",
        id="labels-not-list",
    ),
    pytest.param(
        BASE + "    containers: all\n    labels: [gpu, 'a b']\n",
        "inv.yaml:5: hosts.pve1.labels[1]: must be a label (letters, digits, _ + . -), got 'a b'",
        id="label-bad",
    ),
    pytest.param(
        BASE + "    containers: all\n    transport: telnet\n",
        "inv.yaml:5: hosts.pve1.transport: must be one of ssh, local, api, got 'telnet'",
        id="transport-bad",
    ),
    pytest.param(
        BASE + "    containers: all\n    sudo: 'yes'\n",
        "inv.yaml:5: hosts.pve1.sudo: must be true or false, got 'yes'",
        id="bool-bad",
    ),
    pytest.param(
        BASE + "    containers: all\n    timeout: 0\n",
        "inv.yaml:5: hosts.pve1.timeout: must be more than 0 seconds, got 0",
        id="timeout-neg",
    ),
    pytest.param(
        "defaults:\n  timeout: 60s\n" + BASE + "    containers: all\n",
        "inv.yaml:2: defaults.timeout: must be a number of seconds, got '60s'",
        id="timeout-str",
    ),
    pytest.param(
        BASE + "    containers: all\n    ssh: {host_key_policy: yes}\n",
        "inv.yaml:5: hosts.pve1.ssh.host_key_policy: must be one of strict, accept-new, got true",
        id="policy-bad",
    ),
    pytest.param(
        BASE + "    containers: all\n    ssh: {client: openssh}\n",
        "inv.yaml:5: hosts.pve1.ssh.client: must be one of auto, libssh2, asyncssh, "
        "got 'openssh'",
        id="ssh-client-bad",
    ),
    pytest.param(
        BASE + "    containers: all\n    python: ~/venv/bin/python3\n",
        (
            "inv.yaml:5: hosts.pve1.python: '~' is not expanded on the node; give an absolute "
            "path: '~/venv/bin/python3'"
        ),
        id="python-tilde",
    ),
    pytest.param(
        "hosts:\n  pve/1:\n    address: x\n    containers: all\n",
        "inv.yaml:2: hosts.pve/1: host name may hold only letters, digits, '_', '.' and '-'",
        id="host-name-bad",
    ),
    pytest.param(
        BASE
        + (
            "    containers: all\n"
            "    api: {url: 'https://x:8006', user: a@pve, token_name: t, token_value: s3cr3t}\n"
        ),
        (
            "inv.yaml:5: hosts.pve1.api.token_value: secrets are not allowed in the inventory; use "
            "token_env (an environment variable) or token_file (a file) instead"
        ),
        id="token-value",
    ),
    pytest.param(
        BASE + "    containers: all\n    ssh: {password: hunter2}\n",
        (
            "inv.yaml:5: hosts.pve1.ssh.password: secrets are not allowed in the inventory; use an "
            "identity_file or ssh-agent instead"
        ),
        id="ssh-password",
    ),
    pytest.param(
        BASE
        + ("    containers: all\n    api: {url: 'https://x:8006', user: a@pve, token_name: t}\n"),
        "inv.yaml:5: hosts.pve1.api: set exactly one of token_env, token_file",
        id="api-no-token",
    ),
    pytest.param(
        BASE
        + (
            "    containers: all\n"
            "    api: {url: 'https://x:8006', user: a@pve, token_name: t,\n"
            "          token_env: A, token_file: f}\n"
        ),
        "inv.yaml:5: hosts.pve1.api: set exactly one of token_env, token_file (both are set)",
        id="api-both-tokens",
    ),
    pytest.param(
        BASE
        + (
            "    containers: all\n"
            "    api: {url: 'http://x:8006', user: a@pve, token_name: t, token_env: A}\n"
        ),
        "inv.yaml:5: hosts.pve1.api.url: must be an https:// URL, got 'http://x:8006'",
        id="api-http",
    ),
    pytest.param(
        BASE + "    containers: all\n    api: {user: a@pve, token_name: t, token_env: A}\n",
        "inv.yaml:5: hosts.pve1.api.url: missing (needed for API discovery)",
        id="api-missing-url",
    ),
    pytest.param(
        BASE
        + (
            "    containers: all\n"
            "    api: {url: 'https://x', user: fleet, token_name: t, token_env: A}\n"
        ),
        "inv.yaml:5: hosts.pve1.api.user: must be USER@REALM (e.g. fleet@pve), got 'fleet'",
        id="api-user",
    ),
    pytest.param(
        BASE
        + (
            "    containers: all\n"
            "    api: {url: 'https://x', user: a@pve, token_name: t, token_env: '$TOKEN'}\n"
        ),
        "inv.yaml:5: hosts.pve1.api.token_env: must be the NAME of an environment variable",
        id="api-token-env-bad",
    ),
    pytest.param(
        "defaults: {}\n",
        "inv.yaml:1: missing key 'hosts'",
        id="hosts-missing",
    ),
    pytest.param(
        "hosts: {}\n",
        "inv.yaml:1: hosts: no hosts defined",
        id="hosts-empty",
    ),
    pytest.param(
        "hosts: [pve1]\n",
        "inv.yaml:1: hosts: must be a mapping of host names, got a list",
        id="hosts-list",
    ),
    pytest.param(
        "- a\n",
        "inv.yaml:1: must be a mapping, got a list",
        id="top-list",
    ),
    pytest.param(
        BASE + "    containers: all\ngroups:\n  g: [pve9]\n",
        "inv.yaml:6: groups.g[0]: no host or group matches (did you mean 'pve1'?)",
        id="group-unknown",
    ),
    pytest.param(
        BASE + "    containers: all\ngroups:\n  pve1: [pve1]\n",
        "inv.yaml:6: groups.pve1: 'pve1' is already a host name",
        id="group-host-clash",
    ),
    pytest.param(
        BASE + "    containers: all\ngroups:\n  a: [pve1, b]\n  b: [a]\n",
        "inv.yaml:6: groups.a[1]: groups include each other: a -> b -> a",
        id="group-cycle",
    ),
    pytest.param(
        BASE + "    containers: all\ngroups:\n  a: ['!pve1']\n",
        "inv.yaml:6: groups.a[0]: groups hold plain patterns; use '!' and '&' in --limit",
        id="group-negation",
    ),
    pytest.param(
        "defaults: {concurrency: 0}\n" + BASE + "    containers: all\n",
        "inv.yaml:1: defaults.concurrency: must be at least 1, got 0",
        id="concurrency",
    ),
    pytest.param(
        "hosts:\n  pve1: {address: x\n",
        "inv.yaml:3:1: YAML syntax error: expected ',' or '}', but got '<stream end>'",
        id="syntax",
    ),
    pytest.param(
        "hosts:\n  pve1:\n    address: x\n   containers: all\n",
        "inv.yaml:4:4: YAML syntax error: expected <block end>, but found '<block mapping start>'",
        id="syntax2",
    ),
    pytest.param(
        "hosts: !!python/object/apply:os.system [ls]\n",
        (
            "inv.yaml:1: hosts: YAML tag !!python/object/apply:os.system is not allowed (plain "
            "data only)"
        ),
        id="tag",
    ),
    pytest.param(
        BASE + "    containers: all\n    address: 10.1.2.7\n",
        "inv.yaml:5: hosts.pve1.address: duplicate key 'address' (first defined at line 3)",
        id="dup-key",
    ),
    pytest.param(
        BASE + "    containers:\n      - {vmid: 101, pyton: x}\n",
        "inv.yaml:5: hosts.pve1.containers[0].pyton: unknown key (did you mean 'python'?)",
        id="container-unknown-key",
    ),
    pytest.param(
        "hosts:\n  pve1:\n    address: '-oProxyCommand=id'\n    containers: all\n",
        "inv.yaml:3: hosts.pve1.address: must not start with '-' (it would read as an ssh "
        "option), got '-oProxyCommand=id'",
        id="address-option",
    ),
    pytest.param(
        "hosts:\n  pve1:\n    address: '1.2.3.4; rm -rf /'\n    containers: all\n",
        "inv.yaml:3: hosts.pve1.address: must be a hostname, an IPv4 or an IPv6 address (no "
        "spaces or shell characters), got '1.2.3.4; rm -rf /'",
        id="address-shell",
    ),
    pytest.param(
        "hosts:\n  pve1:\n    address: pve1 .lan\n    containers: all\n",
        "inv.yaml:3: hosts.pve1.address: must be a hostname, an IPv4 or an IPv6 address (no "
        "spaces or shell characters), got 'pve1 .lan'",
        id="address-space",
    ),
    pytest.param(
        "defaults:\n  ssh:\n    proxy_jump: admin@bastion,-oProxyCommand=id\n"
        + BASE + "    containers: all\n",
        "inv.yaml:3: defaults.ssh.proxy_jump: hop '-oProxyCommand=id': the host must not start "
        "with '-' (it would read as an option)",
        id="jump-option",
    ),
    pytest.param(
        BASE + "    containers: all\n    ssh: {proxy_jump: 'admin@bastion;id'}\n",
        "inv.yaml:5: hosts.pve1.ssh.proxy_jump: hop 'admin@bastion;id': must be "
        "[user@]host[:port], the host a hostname or an IPv4 address",
        id="jump-shell",
    ),
    pytest.param(
        BASE + "    containers: all\n    ssh: {proxy_jump: '-l@bastion'}\n",
        "inv.yaml:5: hosts.pve1.ssh.proxy_jump: hop '-l@bastion': the user may hold only "
        "letters, digits, '.', '_' and '-' (not first)",
        id="jump-user-option",
    ),
    pytest.param(
        BASE + "    containers: all\n    ssh: {proxy_jump: 'bastion:22,,gw'}\n",
        "inv.yaml:5: hosts.pve1.ssh.proxy_jump: hop '': must be [user@]host[:port], the host a "
        "hostname or an IPv4 address",
        id="jump-empty-hop",
    ),
    pytest.param(
        BASE + "    containers: all\n    ssh: {proxy_jump: 'bastion:99999'}\n",
        "inv.yaml:5: hosts.pve1.ssh.proxy_jump: hop 'bastion:99999': the port must be between 1 "
        "and 65535",
        id="jump-port",
    ),
    pytest.param(
        "# only a comment\n",
        "inv.yaml: empty inventory (expected a mapping with a 'hosts' key)",
        id="empty-doc",
    ),
]


@pytest.mark.parametrize(("text", "message"), MISTAKES)
def test_each_mistake_is_one_line_naming_file_line_and_key(text: str, message: str) -> None:
    with pytest.raises(InventoryError) as info:
        parse_inventory(text, "inv.yaml")
    assert str(info.value) == message
    assert info.value.__cause__ is None


FULL = """\
defaults:
  ssh: {user: root, port: 22, identity_file: ~/.ssh/id_ed25519, known_hosts: keys/known_hosts}
  api: {user: fleet@pve, token_name: audit, timeout: 7}
  python: python3
  env: {LANG: C.UTF-8}
  labels: [fleet]
  timeout: 60
  concurrency: 16
  audit_timeout: 300
hosts:
  pve1:
    address: 10.1.2.6
    ssh: {port: 2222, proxy_jump: admin@bastion, host_key_policy: accept-new}
    containers: all
    api: {url: 'https://10.1.2.6:8006', token_env: PVE_TOKEN, verify_tls: ca.pem}
  pve2:
    address: 10.1.2.7
    probe_host: true
    sudo: true
    labels: [gpu, fleet]
    env: {CUDA_HOME: /usr/local/cuda}
    containers:
      - 200
      - {vmid: 201, name: trainer, python: /root/venv/bin/python3, env: {CC: /usr/bin/gcc-12},
         labels: [training], timeout: 120}
  laptop:
    transport: local
  old:
    enabled: false
    address: 10.1.2.9
    ssh: {config_file: none}
    containers: [300]
groups:
  gpu: [label:gpu, pve1]
"""


def test_a_full_inventory_resolves_defaults_then_host_then_container(tmp_path: Path) -> None:
    path = tmp_path / "inv.yaml"
    path.write_text(FULL)
    inventory = load_inventory(str(path))
    pve1, pve2, laptop = inventory.hosts
    assert inventory.path == str(path)
    assert inventory.concurrency == 16
    assert inventory.audit_timeout == 300.0
    assert dict(inventory.groups) == {"gpu": ("label:gpu", "pve1")}
    assert pve1 == HostSpec(
        name="pve1",
        address="10.1.2.6",
        ssh=SshOptions(
            user="root",
            port=2222,
            identity_file=f"{HOME}/.ssh/id_ed25519",
            known_hosts=f"{tmp_path}/keys/known_hosts",
            host_key_policy="accept-new",
            proxy_jump="admin@bastion",
        ),
        containers="all",
        env={"LANG": "C.UTF-8"},
        labels=("fleet",),
        api=ApiOptions(
            url="https://10.1.2.6:8006",
            user="fleet@pve",
            token_name="audit",
            token_env="PVE_TOKEN",
            verify_tls=f"{tmp_path}/ca.pem",
            node="pve1",
            timeout=7.0,
        ),
        origin=f"{path}:11",
    )
    assert pve2.probe_host and pve2.sudo and pve2.api is None
    assert pve2.labels == ("fleet", "gpu")
    assert pve2.env == {"LANG": "C.UTF-8", "CUDA_HOME": "/usr/local/cuda"}
    assert pve2.ssh == SshOptions(
        user="root",
        port=22,
        identity_file=f"{HOME}/.ssh/id_ed25519",
        known_hosts=f"{tmp_path}/keys/known_hosts",
    )
    assert pve2.containers == (
        ContainerSpec(vmid=200),
        ContainerSpec(
            vmid=201,
            python="/root/venv/bin/python3",
            env={"CC": "/usr/bin/gcc-12"},
            labels=("training",),
            name="trainer",
            timeout=120.0,
        ),
    )
    assert (laptop.transport, laptop.address, laptop.probe_host) == ("local", None, True)
    (old,) = inventory.disabled_hosts
    assert (old.name, old.ssh.config_file) == ("old", "")


@pytest.mark.parametrize("address", ["10.1.2.6", "pve1.example.org", "pve1.example.org.",
                                     "gpu_box", "fe80::1", "2001:db8::7", "fe80::1%eth0"])
def test_hostnames_and_ip_literals_are_addresses(address: str) -> None:
    inventory = parse_inventory(
        f"hosts:\n  pve1:\n    address: '{address}'\n    containers: all\n"
        "    ssh: {proxy_jump: 'ops.admin@bastion.example.org:2222,10.0.0.1,gw_2'}\n",
        "inv.yaml")
    (host,) = inventory.hosts
    assert (host.address, host.ssh.proxy_jump) == (
        address, "ops.admin@bastion.example.org:2222,10.0.0.1,gw_2")


def test_unset_ssh_values_stay_none_so_ssh_config_decides() -> None:
    inventory = parse_inventory(BASE + "    containers: all\n", "inv.yaml")
    ssh = inventory.hosts[0].ssh
    assert ssh == SshOptions()
    assert (ssh.user, ssh.port, ssh.identity_file, ssh.known_hosts) == (None, None, None, None)
    assert (ssh.proxy_jump, ssh.config_file) == (None, None)


def test_yaml_merge_keys_may_override_without_counting_as_duplicates() -> None:
    text = (
        "x-common: &common {address: 10.0.0.1, containers: all, timeout: 30}\n"
        "hosts:\n"
        "  pve1: {<<: *common, timeout: 45}\n"
    )
    with pytest.raises(InventoryError) as info:
        parse_inventory(text, "inv.yaml")
    assert str(info.value) == (
        "inv.yaml:1: x-common: unknown key (valid: defaults, hosts, groups, sources)")
    text = "hosts:\n  base: &common {address: 10.0.0.1, containers: all, timeout: 30}\n" + (
        "  pve1: {<<: *common, timeout: 45}\n"
    )
    hosts = parse_inventory(text, "inv.yaml").hosts
    assert [(h.name, h.address, h.timeout) for h in hosts] == [
        ("base", "10.0.0.1", 30.0),
        ("pve1", "10.0.0.1", 45.0),
    ]


def test_missing_file_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "nope.yaml"
    with pytest.raises(InventoryError) as info:
        load_inventory(str(path))
    assert str(info.value) == f"{path}: inventory file not found"


def test_a_directory_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(InventoryError) as info:
        load_inventory(str(tmp_path))
    assert str(info.value) == f"{tmp_path}: cannot read: Is a directory"


def test_an_empty_file_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "inv.yaml"
    path.write_text("")
    with pytest.raises(InventoryError) as info:
        load_inventory(str(path))
    assert str(info.value) == f"{path}: empty inventory (expected a mapping with a 'hosts' key)"


def test_the_example_inventory_loads_with_only_this_machine_enabled() -> None:
    inventory = load_inventory(str(EXAMPLE))
    assert [(h.name, h.transport) for h in inventory.hosts] == [("this-machine", "local")]
    assert [h.name for h in inventory.disabled_hosts] == [
        *(f"train{n:02d}.example.internal" for n in range(1, 5)), "infer1",
        "pve1", "pve2", "pve3", "pve4", "pve5", *(f"gpu{n:02d}" for n in range(1, 17)), "lab",
        "pve6"]
    assert inventory.concurrency == 64
    assert inventory.audit_timeout == 600.0


def _example_keys(node: Any, path: str) -> set[str]:
    """Key paths written in the example, hosts and list items generalised like schema_keys."""
    keys: set[str] = set()
    if isinstance(node, dict):
        for key, value in node.items():
            if path in ("hosts", "groups"):
                child = f"{path}.*"
            elif path.endswith(("sources[].host", "sources[].proxmox")):
                continue  # a source's host settings are hosts.* keys, checked there
            elif path.endswith(".env"):
                continue  # environment variable names are the user's
            else:
                child = f"{path}.{key}" if path else key
            keys.add(child)
            keys |= _example_keys(value, child)
    elif isinstance(node, list) and (path.endswith((".containers", ".vms"))
                                     or path == "sources"):
        for item in node:
            keys |= _example_keys(item, f"{path}[]")
    return keys


def _by_section(key: str) -> str:
    """defaults.ssh.port and hosts.*.ssh.port are one key: ssh.port (same for api, oci)."""
    for section in (".ssh.", ".api.", ".oci."):
        if section in key:
            return section[1:] + key.split(section, 1)[1]
    return key


def test_every_key_of_the_schema_is_used_and_commented_in_the_example() -> None:
    import yaml

    text = EXAMPLE.read_text()
    written = {_by_section(k) for k in _example_keys(yaml.safe_load(text), "")}
    schema = {_by_section(k) for k in schema_keys()}
    assert schema - written == set()
    assert written - schema == {"hosts.*", "groups.*"} - schema
    leaves = {k.rsplit(".", 1)[-1] for k in schema_keys()} - {"*"}
    for leaf in sorted(leaves):
        lines = [ln for ln in text.splitlines() if ln.lstrip(" -{").startswith(f"{leaf}:")]
        assert any("#" in ln for ln in lines), f"{leaf} is never explained by a comment"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (BASE + "    vms: [300, {vmid: x}]\n",
         "inv.yaml:4: hosts.pve1.vms[1].vmid: must be an integer, got 'x'"),
        (BASE + "    containers: [300]\n    vms:\n      - 300\n",
         "inv.yaml:6: hosts.pve1.vms[0]: VMID 300 is also listed under containers"),
        (BASE + "    vms: [{vmid: 300, frob: 1}]\n",
         "inv.yaml:4: hosts.pve1.vms[0].frob: unknown key (valid: vmid, name, python, env, "
         "labels, timeout, oci)"),
        (BASE + "    oci: {runtime: lxd}\n",
         "inv.yaml:4: hosts.pve1.oci.runtime: must be one of docker, podman, got 'lxd'"),
        (BASE + "    oci: {containers: all}\n",
         "inv.yaml:4: hosts.pve1.oci.runtime: missing (docker or podman)"),
        (BASE + "    containers:\n      - vmid: 101\n        oci:\n          runtime: docker\n"
                "          containers: ['-it']\n",
         "inv.yaml:8: hosts.pve1.containers[0].oci.containers[0]: must be a container name "
         "(letters, digits, '_', '.', '-', not '-' first), got '-it'"),
        (BASE + "    oci:\n      runtime: podman\n      containers: [a, {name: a}]\n",
         "inv.yaml:6: hosts.pve1.oci.containers[1]: container 'a' listed twice (first at "
         "line 6)"),
        (BASE + "    oci:\n      runtime: docker\n      containers:\n"
                "        - {name: t, user: 'root; id'}\n",
         "inv.yaml:7: hosts.pve1.oci.containers[0].user: must be NAME, UID, NAME:GROUP or "
         "UID:GID, got 'root; id'"),
        (BASE + "    oci: {runtime: docker, containers: []}\n",
         "inv.yaml:4: hosts.pve1.oci.containers: must be 'all' or a list of container names, "
         "got a list"),
        ("hosts:\n  pve1:\n    transport: api\n    containers: all\n",
         "inv.yaml:4: hosts.pve1.containers: needs SSH: a transport: api host reaches only its "
         "VMs (through the guest agent)"),
        ("hosts:\n  pve1:\n    transport: api\n    vms: all\n",
         "inv.yaml:2: hosts.pve1.api: missing (transport: api needs the API url)"),
    ],
    ids=["vm-vmid", "vm-and-ct", "vm-key", "runtime", "runtime-missing", "oci-name",
         "oci-dup", "oci-user", "oci-empty", "api-containers", "api-missing"],
)
def test_vm_and_oci_mistakes_name_file_line_and_key(text: str, message: str) -> None:
    with pytest.raises(InventoryError) as info:
        parse_inventory(text, "inv.yaml")
    assert str(info.value) == message


def test_vms_and_oci_resolve_into_kinds_ids_and_parents() -> None:
    from fleetcheck.inventory import targets_for_host

    inventory = parse_inventory(
        BASE + "    probe_host: true\n    env: {A: '1'}\n"
        "    oci: {runtime: docker, containers: [infer]}\n"
        "    containers:\n      - vmid: 101\n        oci: {runtime: podman, containers:\n"
        "          [{name: trainer, user: '1000', env: {B: '2'}, python: /opt/py}]}\n"
        "    vms: [{vmid: 300, timeout: 90, oci: {runtime: docker, containers: all}}]\n",
        "inv.yaml")
    nodes = targets_for_host(inventory.hosts[0], None, None)
    assert [(n.id, n.kind, n.parent) for n in nodes] == [
        ("pve1", "host", None),
        ("pve1/docker:infer", "docker", "pve1"),
        ("pve1/101", "lxc", "pve1"),
        ("pve1/101/podman:trainer", "podman", "pve1/101"),
        ("pve1/300", "qemu", "pve1"),
    ]
    trainer = nodes[3]
    assert (trainer.python, dict(trainer.env), trainer.user, trainer.vmid) == (
        "/opt/py", {"A": "1", "B": "2"}, "1000", 101)
    assert nodes[4].timeout == 90


def test_what_each_kind_reads_is_kept_where_the_host_gives_it_back() -> None:
    # One rule, HostSpec's: a kind's key goes into the field of its name where there is one
    # (containers, vms, oci, kubernetes), else into `declarations`; read back the same way.
    inventory = parse_inventory(
        BASE + "    containers: [101]\n    vms: all\n    oci: {runtime: docker}\n", "inv.yaml")
    host = inventory.hosts[0]
    assert [host.declaration(key) for key in ("containers", "vms", "oci")] == [
        host.containers, "all", host.oci]
    assert host.declaration("kubernetes") is None and host.declarations == {}
    declared = {**{key: f"read by {key}" for key in kind_keys()}, "widgets": ("alpha",)}
    built = HostSpec(name="h", address="h", **declaration_fields(declared))
    assert built.declarations == {"widgets": ("alpha",)}
    assert {key: built.declaration(key) for key in declared} == declared
