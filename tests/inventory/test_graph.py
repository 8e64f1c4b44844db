"""`fleetcheck inventory`: the tree and the JSON, exactly, without connecting anywhere."""

from __future__ import annotations

import json

from fleetcheck.inventory import inventory_to_json, parse_inventory, render_inventory_graph

TEXT = """\
defaults:
  ssh: {user: root}
  labels: [fleet]
hosts:
  pve1:
    address: 10.1.2.6
    ssh: {port: 2222, proxy_jump: admin@bastion}
    labels: [gpu]
    containers: all
  pve2:
    address: 10.1.2.7
    ssh: {user: audit, host_key_policy: accept-new}
    sudo: true
    probe_host: true
    containers:
      - 200
      - {vmid: 201, name: trainer, python: /root/venv/bin/python3, env: {CC: gcc-12}}
  pve3:
    address: 10.1.2.8
    containers: all
    api: {url: 'https://10.1.2.8:8006', user: fleet@pve, token_name: audit, token_env: PVE_TOKEN}
  here:
    transport: local
  old:
    enabled: false
    address: 10.1.2.9
    probe_host: true
groups:
  gpu: [label:gpu]
"""
INVENTORY = parse_inventory(TEXT, "inv.yaml")

EXPECTED_TREE = """\
inv.yaml: 5 hosts (1 disabled), concurrency 64, audit timeout none
pve1  ssh root@10.1.2.6:2222 via admin@bastion
└── pve1/*  all: discovered at audit time via pct list  labels=fleet,gpu
pve2  ssh audit@10.1.2.7 (port from ssh_config) host keys accept-new  sudo -n pct
├── pve2  (the host itself)  python=python3  timeout=60s  labels=fleet
├── pve2/200  python=python3  timeout=60s  labels=fleet
└── pve2/201  name=trainer  python=/root/venv/bin/python3  timeout=60s  env=CC  labels=fleet
pve3  ssh root@10.1.2.8 (port from ssh_config)  api https://10.1.2.8:8006 node pve3
└── pve3/*  all: discovered at audit time via the Proxmox API  labels=fleet
here  local (this machine, no SSH)
└── here  (the host itself)  python=python3  timeout=60s  labels=fleet
old  ssh root@10.1.2.9 (port from ssh_config)  [disabled: not audited]
└── old  (the host itself)  python=python3  timeout=60s  labels=fleet
groups
└── gpu: label:gpu
"""


def test_the_tree() -> None:
    assert render_inventory_graph(INVENTORY) == EXPECTED_TREE


def test_the_json_form() -> None:
    data = inventory_to_json(INVENTORY)
    assert json.loads(json.dumps(data)) == data
    assert {k: data[k] for k in ("schema", "path", "concurrency", "audit_timeout", "groups")} == {
        "schema": "fleetcheck.inventory/1",
        "path": "inv.yaml",
        "concurrency": 64,
        "audit_timeout": None,
        "groups": {"gpu": ["label:gpu"]},
    }
    hosts = {h["name"]: h for h in data["hosts"]}
    assert [(h["name"], h["enabled"], h["discovery"]) for h in data["hosts"]] == [
        ("pve1", True, "pct list"),
        ("pve2", True, None),
        ("pve3", True, "api"),
        ("here", True, None),
        ("old", False, None),
    ]
    assert hosts["pve1"]["ssh"] == {
        "user": "root",
        "port": 2222,
        "identity_file": None,
        "known_hosts": None,
        "host_key_policy": None,
        "proxy_jump": "admin@bastion",
        "config_file": None,
        "connect_timeout": None,
        "max_sessions": 8,
        "client": "auto",
    }
    assert (hosts["pve1"]["containers"], hosts["pve1"]["nodes"]) == ("all", [])
    assert hosts["pve2"]["nodes"][2] == {
        "id": "pve2/201",
        "kind": "lxc",
        "parent": "pve2",
        "vmid": 201,
        "name": "trainer",
        "python": "/root/venv/bin/python3",
        "env": {"CC": "gcc-12"},
        "labels": ["fleet"],
        "timeout": 60.0,
    }
    assert hosts["pve3"]["api"] == {
        "url": "https://10.1.2.8:8006",
        "user": "fleet@pve",
        "token_name": "audit",
        "token_env": "PVE_TOKEN",
        "token_file": None,
        "verify_tls": True,
        "node": "pve3",
        "timeout": 10.0,
    }
    assert [n["id"] for n in hosts["here"]["nodes"]] == ["here"]
