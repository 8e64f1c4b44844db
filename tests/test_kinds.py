"""The node-kind registry: one line per kind, each kind found, chained and expanded by name."""

from __future__ import annotations

import pytest

from fleetcheck import kinds
from fleetcheck.inventory_data.model import ContainerSpec, HostSpec, OciContainerSpec, OciSpec
from fleetcheck.kinds.base import NodeKind
from fleetcheck.transport.interface import Transport
from fleetcheck.transport.local import LocalTransport
from fleetcheck.transport.oci import OciTransport
from fleetcheck.transport.pct import PctTransport

HOST = HostSpec(name="pve1", address="192.0.2.1", probe_host=True,
                containers=(ContainerSpec(vmid=101, oci=OciSpec(
                    "docker", (OciContainerSpec(name="vllm"),))),),
                oci=OciSpec("podman", (OciContainerSpec(name="tgi"),)))


@pytest.mark.parametrize("name", kinds.NODE_KINDS)
def test_every_registry_line_names_its_kind(name: str) -> None:
    kind = kinds.kind(name)
    assert isinstance(kind, NodeKind)
    assert kind.name == name
    assert all(parent in kinds.NODE_KINDS for parent in kind.runs_in)


def test_an_unknown_kind_is_none_and_a_lookup_error() -> None:
    assert kinds.find("pod-of-another-version") is None
    assert kinds.depth("pod-of-another-version") == 1
    with pytest.raises(KeyError):
        kinds.kind("pod-of-another-version")


def test_the_root_and_a_node_without_a_kind_are_the_registry_s_answers() -> None:
    assert kinds.root() is kinds.kind("host") and kinds.root().runs_in == ()
    # A guest of the host has the host as its parent; a container in any node does not.
    assert [name for name in kinds.NODE_KINDS if kinds.runs_on_root(name)] == [
        "lxc", "qemu", "pod"]
    assert not kinds.runs_on_root("pod-of-another-version")
    # A report from before kinds: a VMID was an LXC container, none the host itself.
    assert (kinds.default_kind(None), kinds.default_kind(101)) == ("host", "lxc")


def test_children_follow_registry_order_and_nest() -> None:
    root = kinds.host_target(HOST)
    assert [k.name for k in kinds.children_kinds(root)] == [
        "docker", "podman", "lxc", "qemu", "pod"]
    ids = [node.id for node in kinds.expand(root)]
    assert ids == ["pve1/podman:tgi", "pve1/101", "pve1/101/docker:vllm"]


def test_a_nested_container_is_wrapped_by_each_kind_of_its_chain() -> None:
    root = kinds.host_target(HOST)
    vllm = next(node for node in kinds.expand(root) if node.id.endswith("vllm"))
    assert [k.name for k in kinds.chain(vllm)] == ["host", "lxc", "docker"]
    host: Transport = LocalTransport()
    transport = kinds.open_transport(vllm, host)
    assert isinstance(transport, OciTransport)
    assert isinstance(transport.outer, PctTransport) and transport.outer.outer is host


def test_needs_listing_looks_at_every_level() -> None:
    assert not kinds.needs_listing(HOST)
    deep = HostSpec(name="pve1", address="192.0.2.1",
                    containers=(ContainerSpec(vmid=101, oci=OciSpec("docker", "all")),))
    assert kinds.needs_listing(deep)
    assert kinds.needs_listing(HostSpec(name="pve1", address="192.0.2.1", vms="all"))
