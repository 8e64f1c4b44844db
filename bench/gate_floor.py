"""The gate's floor: the least an asyncssh program does to run one probe on every node and say
whether all passed.

Usage: python bench/gate_floor.py SPEC.json
SPEC: {"hosts": [[name, port, [vmid, ...]], ...], "user": ..., "identity_file": ...,
       "known_hosts": ..., "stdin": "/path/probe.py", "timeout": 120}

What any gate built on asyncssh must do, and nothing else: start Python, import asyncssh, read
the key and known_hosts once, open one connection per host (as fleetcheck does: 127.0.0.1 on
the host's port, what fleetcheck negotiates with OpenSSH 9.2 pinned, the same host key check),
run each container's `pct exec VMID -- python3 -` on it with the probe as its input, read every
reply, print one line, exit. No inventory file, no ssh_config, no budget, no verdicts.

With BENCH_TIMES=FILE, writes {"started", "ended", "nodes": [[id, start, end], ...]} on the
monotonic clock, as bench/fleetcheck_with_probe.py does for fleetcheck: bench/gate_latency.py
compares the two, run in turn on one fleet.
"""

from __future__ import annotations

import time

STARTED = time.monotonic()

import asyncio  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402

# asyncssh as fleetcheck imports it (without find_library's compiler run and X.509): the
# least cost of the import, not a floor raised by seven processes at start.
from fleetcheck.transport.sshlib import asyncssh  # noqa: E402

KEX = ["curve25519-sha256"]
CIPHERS = ["aes128-gcm@openssh.com"]
Times = list[tuple[str, float, float]]


async def host(name: str, port: int, vmids: list[int], spec: dict[str, object], probe: bytes,
               keys: object, known: object, times: Times) -> list[bool]:
    try:
        conn = await asyncssh.connect(
            "127.0.0.1", port, username=str(spec["user"]), config=None, client_keys=keys,
            known_hosts=known, kex_algs=KEX, encryption_algs=CIPHERS, compression_algs=None)
    except (OSError, asyncssh.Error):
        return [False] * len(vmids)

    async def node(vmid: int) -> bool:
        started = time.monotonic()
        try:
            done = await conn.run(f"pct exec {vmid} -- python3 -", input=probe, encoding=None,
                                  timeout=float(str(spec.get("timeout", 120))))
        except (OSError, asyncssh.Error):
            return False
        finally:
            times.append((f"{name}/{vmid}", started, time.monotonic()))
        stdout = done.stdout if isinstance(done.stdout, bytes) else b""
        return stdout.lstrip().startswith(b"{")

    async with conn:
        return list(await asyncio.gather(*(node(vmid) for vmid in vmids)))


async def main(spec_path: str, times: Times) -> int:
    with open(spec_path) as handle:
        spec = json.load(handle)
    with open(str(spec["stdin"]), "rb") as handle:
        probe = handle.read()
    keys = asyncssh.load_keypairs([spec["identity_file"]])
    known = asyncssh.read_known_hosts(spec["known_hosts"])
    results = await asyncio.gather(*(host(name, int(port), list(vmids), spec, probe, keys,
                                          known, times) for name, port, vmids in spec["hosts"]))
    every = [ok for one in results for ok in one]
    print(f"ok={sum(every)} total={len(every)}")
    return 0 if all(every) else 1


if __name__ == "__main__":
    node_times: Times = []
    code = asyncio.run(main(sys.argv[1], node_times))
    if os.environ.get("BENCH_TIMES"):
        with open(os.environ["BENCH_TIMES"], "w") as out:
            json.dump({"started": STARTED, "ended": time.monotonic(), "nodes": node_times}, out)
    # As fleetcheck ends (cli.finish): flushed, then gone without the interpreter's teardown.
    sys.stdout.flush()
    os._exit(code)
