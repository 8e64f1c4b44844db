"""Proposed auditor fixes, applied in-process to measure them before they are made for real.

Selected with BENCH_FIXES=json,hostfirst,gcm (comma list) when fleetcheck runs through
bench/fleetcheck_with_probe.py. Each patch is the smallest change that tests one idea:

- json:      render the audit JSON with one compact line per node. `json.dumps(indent=2)`
             takes Python's pure-Python encoder (the C encoder has no indent), and that was
             the largest single item of the auditor's CPU profile.
- hostfirst: a node waits for a channel of its host before it takes one of the global
             `concurrency` slots, so that slots are not held by nodes queued behind their
             host's `max_sessions`. Measured: no gain (500 containers, 5 s sleeping probe:
             48.0 s against 48.5 s); the global slots were already busy.
- gcm:       prefer aes128-gcm@openssh.com over chacha20-poly1305 (asyncssh builds two
             cipher contexts per chacha20 packet; AES-GCM is one AEAD call with AES-NI).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

FIXES = ("json", "hostfirst", "gcm")


def _fix_json() -> None:
    import fleetcheck.render.json as render_json
    import fleetcheck.reportio as reportio

    def dumps_report(report: Any) -> str:
        data = reportio.report_to_dict(report)
        nodes = data.pop("nodes")
        head = json.dumps(data, indent=2, ensure_ascii=False)
        body = ",\n".join("    " + json.dumps(node, ensure_ascii=False) for node in nodes)
        return f'{head[:-2]},\n  "nodes": [\n{body}\n  ]\n}}\n'

    reportio.dumps_report = dumps_report
    render_json.dumps_report = dumps_report  # type: ignore[attr-defined]


def _fix_hostfirst() -> None:
    from fleetcheck import audit

    original = audit.AuditRun._probe
    gates: dict[str, asyncio.Semaphore] = {}

    async def _probe(self: Any, target: Any, host_transport: Any) -> None:
        size = max(1, target.host.ssh.max_sessions)
        gate = gates.setdefault(target.host.name, asyncio.Semaphore(size))
        async with gate:
            await original(self, target, host_transport)

    audit.AuditRun._probe = _probe  # type: ignore[method-assign]


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
