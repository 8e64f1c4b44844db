"""`kubernetes:` hosts in the inventory: their keys, mistakes, and --limit over pod ids."""

from __future__ import annotations

import pytest

from fleetcheck.inventory import InventoryError, check_limit, matches_limit, parse_inventory
from fleetcheck.inventory_data.model import KubernetesSpec

BASE = "hosts:\n  lab:\n    kubernetes:\n"


def test_a_cluster_entry_runs_kubectl_here_and_probes_only_pods() -> None:
    inventory = parse_inventory(
        "defaults: {probe_host: true}\n" + BASE + "      context: lab\n"
        "      namespaces: [training, inference]\n      selector: app=trainer\n"
        "      container: main\n    python: /opt/conda/bin/python3\n"
        "  bastion:\n    address: 10.0.0.5\n    kubernetes: {namespaces: all, container: all}\n",
        "inv.yaml")
    lab, bastion = inventory.hosts
    assert (lab.transport, lab.address, lab.probe_host, lab.python) == (
        "local", None, False, "/opt/conda/bin/python3")
    assert lab.kubernetes == KubernetesSpec(context="lab", namespaces=("training", "inference"),
                                            selector="app=trainer", container="main")
    # With an address kubectl runs there, over SSH; its kubeconfig is a path there.
    assert (bastion.transport, bastion.address, bastion.probe_host) == ("ssh", "10.0.0.5",
                                                                        False)
    assert bastion.kubernetes == KubernetesSpec(namespaces="all", container="all")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (BASE + "      namespaces: Training\n",
         "inv.yaml:4: hosts.lab.kubernetes.namespaces: must be 'all' or a list of namespaces, "
         "got 'Training'"),
        (BASE + "      namespaces: [Training]\n",
         "inv.yaml:4: hosts.lab.kubernetes.namespaces[0]: must be a Kubernetes name (lower-case "
         "letters, digits and '-', at most 63), got 'Training'"),
        (BASE + "      contxt: lab\n",
         "inv.yaml:4: hosts.lab.kubernetes.contxt: unknown key (did you mean 'context'?)"),
        (BASE + "      selector: '-oyaml'\n",
         "inv.yaml:4: hosts.lab.kubernetes.selector: must not start with '-'"),
        ("hosts:\n  lab:\n    transport: api\n    kubernetes: {}\n",
         "inv.yaml:4: hosts.lab.kubernetes: needs SSH: a transport: api host reaches only its "
         "VMs (through the guest agent)"),
    ],
)
def test_mistakes(text: str, message: str) -> None:
    with pytest.raises(InventoryError) as info:
        parse_inventory(text, "inv.yaml")
    assert str(info.value) == message


def test_limit_patterns_over_pod_ids() -> None:
    inventory = parse_inventory(BASE + "      namespaces: all\n", "inv.yaml")
    patterns = ["lab/training", "lab/*/infer-*", "!lab/training/old-0"]
    check_limit(inventory, patterns)
    ids = ["lab/training/trainer-0", "lab/training/old-0", "lab/inference/infer-1",
           "lab/inference/other", "lab/training/trainer-0/main"]
    assert [i for i in ids if matches_limit(i, (), patterns)] == [
        "lab/training/trainer-0", "lab/inference/infer-1", "lab/training/trainer-0/main"]
