"""The built-in inventory: this machine only, through the local transport (`fleetcheck audit`
without an INVENTORY)."""

from __future__ import annotations

import socket

from fleetcheck.inventory_data.model import HostSpec, Inventory


def builtin_inventory() -> Inventory:
    """This machine, probed as its own host; its path, as a report names it, is no file
    (`fix` refuses to reach nodes through it)."""
    host = HostSpec(name=socket.gethostname() or "localhost", address=None, transport="local",
                    probe_host=True)
    return Inventory(path="<built-in: this machine>", hosts=(host,))
