"""Owns how a script meant for `PYTHON - ARGS` travels compressed: `PYTHON -c BOOTSTRAP ARGS`
with zlib(script) on stdin, the script compressed once per run, not once per node.

The probe is 350 KB of source and grows with every release; sent as it is, every node's channel
carries all of it (AES-GCM, asyncssh's packets and the peer's window adjusts, per node, and
every byte through `pct exec`, `qm guest exec` or `docker exec` on the host). Compressed it is a
quarter of that, and what one node costs on the wire stays bounded as the probe grows. The
bootstrap also compiles the script before it runs it: `python -` keeps the whole script's parse
tree until the script ends (CPython frees it after the run), 13 MB of the probe's interpreter
beside the workload's under a job's memory limit; compile() lets it go at once. A transport says
whether its nodes get it packed (`Transport.packs_probe`: those reached over SSH and the local
machine); the Proxmox API's guest agent packs its own way (base64, `qemu_api.py`, the same
compile first).

The node's Python reads stdin to its end, inflates it and runs it as `python -` would: argv[0]
`-`, the file name `<stdin>`, `__main__`'s namespace. A host's gatekeeper (fleetcheck/data/
gatekeeper.py) accepts exactly this bootstrap, inflates stdin within its bound and checks the
SHA-256 of the script itself, so the allow-list `fleetcheck host-setup` installs is the same
for both launches (the bootstrap word is pinned to the gatekeeper's by a test).
"""

from __future__ import annotations

import functools
import zlib

#: Runs the script `s` as `python - ARGS` would (any CPython 3): argv[0] `-`, in `__main__`'s
#: own namespace (a class it defines is found under `__main__`, as pickle and dataclasses look
#: it up), `__file__` and the code's file name `<stdin>`; the text itself is let go first.
RUN_AS_STDIN = ("sys.argv[0]='-';c=compile(s,'<stdin>','exec');del s;"
                "__file__='<stdin>';exec(c)")
#: Reads zlib(script) from stdin to its end and runs it.
ZLIB_BOOTSTRAP = "import sys,zlib;s=zlib.decompress(sys.stdin.buffer.read());" + RUN_AS_STDIN
#: Scripts up to this size go as they are: one window's worth of packets, less than the
#: bootstrap's own cost on the node to save.
PACK_ABOVE = 64 * 1024
#: zlib's level: 6 is within 1% of 9's size (89 KB of the fifth round's 354 KB probe) at a
#: third of its time (11 against 34 ms, once per run).
LEVEL = 6


@functools.lru_cache(maxsize=4)
def zlib_packed(script: bytes) -> bytes:
    """zlib(script), computed once per script (the audit's payload is one bytes object)."""
    return zlib.compress(script, LEVEL)


def packed_launch(argv: list[str], script: bytes) -> tuple[list[str], bytes]:
    """`PYTHON - ARGS` and its script as they travel: `PYTHON -c ZLIB_BOOTSTRAP ARGS` and
    zlib(script) when the script is larger than PACK_ABOVE, else both as given (and an argv
    without the `-` of a script on stdin is never changed)."""
    if len(script) <= PACK_ABOVE or "-" not in argv:
        return argv, script
    at = argv.index("-")
    return [*argv[:at], "-c", ZLIB_BOOTSTRAP, *argv[at + 1:]], zlib_packed(script)
