"""The QEMU VM kind: `HOST/VMID` under a Proxmox host's `vms:`, reached through its guest
agent: `qm guest exec` through the host's transport (`transport/qemu.py`), or the API's
`agent/exec` for a `transport: api` host (`transport/qemu_api.py`); listed with `qm list`
when neither the API nor pvesh answers."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from fleetcheck.inventory_data.listings import parse_qm_list
from fleetcheck.inventory_data.model import Target
from fleetcheck.kinds.base import GatekeeperWrapper
from fleetcheck.kinds.proxmox import PVESH_GET, ProxmoxGuestKind
from fleetcheck.transport.qemu import QemuTransport

if TYPE_CHECKING:
    from fleetcheck.budget import BudgetFor
    from fleetcheck.report.content import NodeResult
    from fleetcheck.transport.interface import Transport


class QemuKind(ProxmoxGuestKind):
    #: A `transport: api` host reaches its VMs through the API's guest agent, without a shell.
    needs_shell = False

    # `qm guest exec VMID --pass-stdin 1 --timeout N -- timeout -k K T` (`qm_exec_argv`,
    # `guest_command`: the VM bounds the guest command itself, the agent cannot kill); `qm list`.
    gatekeeper_wrapper = GatekeeperWrapper(
        "qm guest exec", ["qm", "guest", "exec", ("WORD", "VMID"), "--pass-stdin", "1",
                          "--timeout", ("WORD", "INT"), "--",
                          "timeout", "-k", ("WORD", "INT"), ("WORD", "SECONDS")])
    gatekeeper_commands: ClassVar[Mapping[str, list[Any]]] = {
        **PVESH_GET,
        "qm list": ["qm", "list"],
    }

    def transport(self, target: Target, outer: Transport, budget: BudgetFor) -> Transport:
        assert target.vmid is not None
        if target.host.transport == "api":
            # Only an api host's VMs need the API's client (and its packings' lzma).
            from fleetcheck.transport.qemu_api import ApiHostTransport, QemuApiTransport

            if isinstance(outer, ApiHostTransport):
                return QemuApiTransport(outer.agent, target.vmid, budget=budget)
        host = target.host
        return QemuTransport(outer, target.vmid, sudo=host.sudo, host_name=host.name,
                             budget=budget)

    def where_it_runs(self, node: NodeResult) -> str:
        return (f"inside VM {node.vmid} on {node.host}, as root, "
                f"through the QEMU guest agent (`qm guest exec {node.vmid}`)")

    def describe(self, target: Target) -> str | None:
        return "(VM, guest agent)"


QEMU = QemuKind("qemu", key="vms", noun="VM", default_name="VM {vmid}", tool="qm",
                parse_listing=parse_qm_list)
