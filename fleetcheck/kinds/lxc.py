"""The LXC container kind: `HOST/VMID` under a Proxmox host's `containers:`, reached with
`pct exec` through the host's transport (`transport/pct.py`, which words pct's refusals),
listed with `pct list` when neither the API nor pvesh answers."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from fleetcheck.inventory_data.listings import parse_pct_list
from fleetcheck.inventory_data.model import ALL_CONTAINERS, DiscoveredContainer, HostSpec, Target
from fleetcheck.kinds.base import GatekeeperWrapper
from fleetcheck.kinds.proxmox import PVESH_GET, ProxmoxGuestKind
from fleetcheck.transport.pct import PctTransport, pve_list_argv

if TYPE_CHECKING:
    from fleetcheck.budget import BudgetFor
    from fleetcheck.report.content import Check, NodeResult
    from fleetcheck.transport.interface import Transport


def pct_list_argv(host: HostSpec) -> list[str]:
    """The command that lists a host's containers."""
    return pve_list_argv("pct", sudo=host.sudo)


def discovery_method(host: HostSpec) -> str | None:
    """How `containers: all` is listed for `host`: "api", "pct list", or None (listed)."""
    if host.containers != ALL_CONTAINERS:
        return None
    return "api" if host.api is not None else "pct list"


_LISTED_VIA = {"api": "the Proxmox API", "pct list": "pct list", None: ""}


class LxcKind(ProxmoxGuestKind):
    # `pct exec VMID --keep-env 0 --` (`pct_exec_argv`); `pct list`, and `pct status VMID`,
    # asked after a probe killed without a word (`PctTransport`).
    gatekeeper_wrapper = GatekeeperWrapper(
        "pct exec", ["pct", "exec", ("WORD", "VMID"), "--keep-env", "0", "--"])
    gatekeeper_commands: ClassVar[Mapping[str, list[Any]]] = {
        **PVESH_GET,
        "pct list": ["pct", "list"],
        "pct status": ["pct", "status", ("WORD", "VMID")],
    }

    def transport(self, target: Target, outer: Transport, budget: BudgetFor) -> Transport:
        del budget  # pct exec has no wait of its own: the host transport's bounds it
        assert target.vmid is not None
        host = target.host
        return PctTransport(outer, target.vmid, sudo=host.sudo, host_name=host.name)

    def listed_words(self, host: HostSpec) -> str:
        labels = f"  labels={','.join(host.labels)}" if host.labels else ""
        return f"all: discovered at audit time via {_LISTED_VIA[discovery_method(host)]}{labels}"

    def inventory_json(self, host: HostSpec) -> dict[str, Any]:
        return {**super().inventory_json(host), "discovery": discovery_method(host)}

    where_name = "lxc"

    def gpu_passthrough(self, node: NodeResult, check: Check, vendor: str
                        ) -> tuple[str, ...] | None:
        """The container's config lines (/etc/pve/lxc/VMID.conf) that bind the GPU nodes."""
        vmid = node.vmid
        if vmid is None:
            return None  # a host the probe found inside a container: not ours to configure
        head = (f"# on {node.host}: append to /etc/pve/lxc/{vmid}.conf, then "
                f"pct stop {vmid} && pct start {vmid}")
        if vendor == "amd":
            major = check.evidence.get("kfd_major")
            if not isinstance(major, str) or not major.isdigit():
                major = "<major of kfd in the host's /proc/devices>"
            return (head,
                    f"lxc.cgroup2.devices.allow: c {major}:* rwm",
                    "lxc.cgroup2.devices.allow: c 226:* rwm",
                    "lxc.mount.entry: /dev/kfd dev/kfd none bind,optional,create=file",
                    "lxc.mount.entry: /dev/dri dev/dri none bind,optional,create=dir",
                    "# the workload user needs the nodes' groups (render, video) or mode 0666")
        found = node.facts.get("gpu_count")
        count = found if isinstance(found, int) and 0 < found <= 64 else 1
        lines = [head,
                 "lxc.cgroup2.devices.allow: c 195:* rwm",
                 "lxc.cgroup2.devices.allow: c <major of nvidia-uvm in the host's /proc/devices>"
                 ":* rwm"]
        lines += [f"lxc.mount.entry: /dev/nvidia{i} dev/nvidia{i} none bind,optional,"
                  "create=file" for i in range(count)]
        lines += [f"lxc.mount.entry: /dev/{name} dev/{name} none bind,optional,create=file"
                  for name in ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools")]
        return tuple(lines)

    def where_it_runs(self, node: NodeResult) -> str:
        return (f"inside LXC container {node.vmid} on {node.host}, as root, "
                f"through `pct exec {node.vmid}`")

    def describe(self, target: Target) -> str | None:
        return f"name={target.name}" if target.name != target.id else None


LXC = LxcKind("lxc", key="containers", noun="container", default_name="CT{vmid}", tool="pct",
              parse_listing=parse_pct_list)


async def pct_list(host: HostSpec, transport: Transport) -> list[DiscoveredContainer]:
    """The containers `pct list` shows on `host`; DiscoveryError saying why when it fails."""
    return await LXC.tool_list(host, transport)
