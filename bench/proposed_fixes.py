"""Proposed auditor fixes, applied in-process to measure them before they are made for real.

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

from typing import Any

FIXES = ("gcm",)


def _fix_gcm() -> None:
    from fleetcheck.transport import ssh

    original = ssh.SshTransport._connect_kwargs

    def _connect_kwargs(self: Any, known_hosts: Any) -> dict[str, Any]:
        kwargs = original(self, known_hosts)
        kwargs["encryption_algs"] = ["aes128-gcm@openssh.com", "aes256-gcm@openssh.com",
                                     "chacha20-poly1305@openssh.com", "aes128-ctr"]
        return kwargs

    ssh.SshTransport._connect_kwargs = _connect_kwargs  # type: ignore[method-assign]


def apply(names: str) -> list[str]:
    applied = []
    for name in filter(None, (part.strip() for part in names.split(","))):
        if name not in FIXES:
            raise SystemExit(f"unknown fix {name!r}; one of {', '.join(FIXES)}")
        globals()[f"_fix_{name}"]()
        applied.append(name)
    return applied
