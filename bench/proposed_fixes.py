"""Auditor variants, injected as a transport factory, measured side by side with fleetcheck.

Selected with BENCH_FIXES=NAME (comma list) when fleetcheck runs through
bench/fleetcheck_with_probe.py. Each patch is the smallest change that tests one idea. Three
that were measured here are now fleetcheck's own code: the audit JSON written one compact line
per node by json's C encoder, a node taking its host's session before a fleet-wide slot, and
AES-GCM preferred over chacha20-poly1305 (bench/results.md has those measurements). What is
left is the way back, to measure what the cipher preference bought:

- chacha:    asyncssh's own cipher order, chacha20-poly1305 first (what fleetcheck used
             before: three cipher contexts and a Poly1305 per packet in asyncssh).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fleetcheck.inventory_data.model import HostSpec
from fleetcheck.transport.factory import TransportFactory
from fleetcheck.transport.interface import Transport
from fleetcheck.transport.ssh import ConnectLimiter, SshTransport
from fleetcheck.transport.ssh_settings import SshSettings

FIXES = ("chacha",)


class _ChachaFirstSsh(SshTransport):
    def _algorithm_kwargs(self, settings: SshSettings) -> dict[str, Any]:
        # asyncssh's defaults: chacha20-poly1305 first, compression none first.
        return {}


class FixedTransports(TransportFactory):
    """fleetcheck's transport factory with the chosen fixes, handed to the audit (no patching)."""

    def __init__(self, fixes: Sequence[str]) -> None:
        super().__init__()
        self.fixes = tuple(fixes)

    def ssh_transport(self, host: HostSpec, connects: ConnectLimiter) -> Transport:
        if "chacha" in self.fixes:
            return _ChachaFirstSsh(host, connect_limiter=connects, files=self.ssh_files)
        return super().ssh_transport(host, connects)


def transport_factory(names: str) -> FixedTransports:
    """The factory for BENCH_FIXES=NAME,...; an unknown name ends the run with the list."""
    chosen = [name for name in (part.strip() for part in names.split(",")) if name]
    for name in chosen:
        if name not in FIXES:
            raise SystemExit(f"unknown fix {name!r}; one of {', '.join(FIXES)}")
    return FixedTransports(chosen)
