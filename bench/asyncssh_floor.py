"""The asyncssh floor: the least an asyncssh program does to run the probe on every node.

Usage: python bench/asyncssh_floor.py SPEC.json
SPEC: {"nodes": [[host, port], ...], "user": ..., "identity_file": ..., "known_hosts": ...,
       "command": "python3 - ARGS", "stdin": "/path/probe.py", "concurrency": 64}
Prints one line: `ok=<nodes whose output is a JSON object> total=<n>`.

One connection per node, `conn.run(command, input=probe)`, as many at once as fleetcheck
runs (64), with what fleetcheck negotiates with OpenSSH 9.2 pinned (curve25519-sha256,
aes128-gcm@openssh.com, no compression) and the same host key check (known_hosts) and key,
each read once (given as paths, asyncssh reads and parses both again for every connection:
O(nodes) per connection, 11 ms per node at 500 nodes on the 2-core machine).
No inventory, no verdict, no report, no remote `timeout`: what is left of fleetcheck's
auditor CPU above this is fleetcheck's own (bench/results.md, "Fifth round").
"""

from __future__ import annotations

import asyncio
import json
import sys

import asyncssh

KEX = ["curve25519-sha256"]
CIPHERS = ["aes128-gcm@openssh.com"]


async def probe(host: str, port: int, spec: dict[str, object], probe_text: bytes,
                slots: asyncio.Semaphore, keys: object, known: object) -> bool:
    async with slots:
        try:
            async with asyncssh.connect(
                    host, port, username=str(spec["user"]), config=None, client_keys=keys,
                    known_hosts=known, kex_algs=KEX, encryption_algs=CIPHERS,
                    compression_algs=None) as conn:
                done = await conn.run(str(spec["command"]), input=probe_text, encoding=None)
        except (OSError, asyncssh.Error):
            return False
    stdout = done.stdout if isinstance(done.stdout, bytes) else b""
    return stdout.lstrip().startswith(b"{")


async def main(spec_path: str) -> int:
    with open(spec_path) as handle:
        spec = json.load(handle)
    with open(spec["stdin"], "rb") as handle:
        probe_text = handle.read()
    slots = asyncio.Semaphore(int(spec.get("concurrency", 64)))
    keys = asyncssh.load_keypairs([spec["identity_file"]])
    known = asyncssh.read_known_hosts(spec["known_hosts"])
    results = await asyncio.gather(*(probe(host, int(port), spec, probe_text, slots, keys,
                                           known) for host, port in spec["nodes"]))
    print(f"ok={sum(results)} total={len(results)}")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1])))
