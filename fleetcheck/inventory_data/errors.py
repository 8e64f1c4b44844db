"""The inventory stage's exceptions: one for the file and --limit, one for discovery."""

from __future__ import annotations

from fleetcheck.errors import FleetcheckError


class InventoryError(FleetcheckError):
    """The inventory file or a --limit pattern is wrong; the message is one line.

    For a mistake in the file it reads "FILE:LINE: KEY: problem", e.g.
    ``inv.yaml:7: hosts.pve1.containers[2].vmid: must be an integer, got 'abc'``.
    The CLI prints it as is and exits 2.
    """



class DiscoveryError(FleetcheckError):
    """Listing a host's containers failed (Proxmox API or `pct list` output).

    The message is one line, names the host and never contains a secret.
    """

    def __init__(self, message: str, host: str = "", *, cause: str | None = None) -> None:
        super().__init__(message)
        self.host = host
        #: The failure's id (`fleetcheck/failures.py`) when one is known where it happened.
        self.cause = cause
