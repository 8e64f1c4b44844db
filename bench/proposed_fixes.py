"""Proposed auditor fixes, injected as a transport factory, measured before they are made.

Selected with BENCH_FIXES=gcm (comma list) when fleetcheck runs through
bench/fleetcheck_with_probe.py. Each patch is the smallest change that tests one idea. Two
that were measured here are now fleetcheck's own code: the audit JSON written one compact line
per node by json's C encoder, and a node taking its host's session before a fleet-wide slot
(bench/results.md has those measurements). What is left:

- gcm:       prefer aes128-gcm@openssh.com over chacha20-poly1305 (asyncssh builds two
             cipher contexts per chacha20 packet; AES-GCM is one AEAD call with AES-NI).
             Measured: no gain on this machine.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from fleetcheck.inventory.model import HostSpec
from fleetcheck.transport.factory import TransportFactory
from fleetcheck.transport.interface import Transport
from fleetcheck.transport.ssh import SshTransport

FIXES = ("gcm",)


GCM_FIRST = ["aes128-gcm@openssh.com", "aes256-gcm@openssh.com",
             "chacha20-poly1305@openssh.com", "aes128-ctr"]


class _GcmFirstSsh(SshTransport):
    def _connect_kwargs(self, known_hosts: Any) -> dict[str, Any]:
        kwargs = super()._connect_kwargs(known_hosts)
        kwargs["encryption_algs"] = GCM_FIRST
        return kwargs


class FixedTransports(TransportFactory):
    """fleetcheck's transport factory with the chosen fixes, handed to the audit (no patching)."""

    def __init__(self, fixes: Sequence[str]) -> None:
        super().__init__()
        self.fixes = tuple(fixes)

    def ssh_transport(self, host: HostSpec, connects: asyncio.Semaphore) -> Transport:
        if "gcm" in self.fixes:
            return _GcmFirstSsh(host, connect_limiter=connects)
        return super().ssh_transport(host, connects)


def transport_factory(names: str) -> FixedTransports:
    """The factory for BENCH_FIXES=NAME,...; an unknown name ends the run with the list."""
    chosen = [name for name in (part.strip() for part in names.split(",")) if name]
    for name in chosen:
        if name not in FIXES:
            raise SystemExit(f"unknown fix {name!r}; one of {', '.join(FIXES)}")
    return FixedTransports(chosen)
