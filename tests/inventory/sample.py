"""A sample inventory of three hosts (a Proxmox host listing its containers, one naming them
with sudo, the local machine), parsed once for the tests of discovery and of the LXC kind."""

from __future__ import annotations

from fleetcheck.inventory import parse_inventory

INVENTORY = parse_inventory(
    """\
defaults:
  env: {LANG: C.UTF-8}
  labels: [fleet]
  timeout: 60
hosts:
  pve1:
    address: 10.1.2.6
    probe_host: true
    python: /usr/bin/python3
    env: {CUDA_HOME: /usr/local/cuda}
    labels: [gpu]
    containers: all
  pve2:
    address: 10.1.2.7
    sudo: true
    timeout: 90
    containers:
      - 200
      - {vmid: 201, name: trainer, python: /root/venv/bin/python3,
         env: {LANG: en_US.UTF-8, CC: gcc-12}, labels: [training, gpu], timeout: 120}
  here:
    transport: local
""",
    "inv.yaml",
)
PVE1, PVE2, HERE = INVENTORY.hosts
