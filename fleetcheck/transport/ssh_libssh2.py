"""Owns the libssh2 side of an SSH connection: whether libssh2 can do what a host's settings
ask, and the connection opened with it as `ssh.py` opens asyncssh's (the same host-key plan,
keys, algorithms and refusals).

`ssh.client: auto` (the default) takes libssh2 where it can do everything the settings ask,
and asyncssh otherwise: a ProxyJump, a known_hosts certificate authority, a key with a
certificate or of a type libssh2 has not, no key file (the agent's keys), or an ssh_config
algorithm list none of whose entries libssh2 has.

libssh2 has no post-quantum key exchange (mlkem768x25519, sntrup761x25519); asyncssh has
mlkem768x25519 (and sntrup761x25519 with liboqs). So `auto` reads the server's identification
line before libssh2 does (`MSG_PEEK`: it stays unread), and a server that offers one of those
which asyncssh has here gets the same socket handed to asyncssh: OpenSSH from 9.9 (mlkem768x25519
by default), from 8.5 where asyncssh has sntrup761x25519, and any server that is not OpenSSH
(its offers unknown). An OpenSSH before those, the fleets of Debian 12 and Proxmox VE 8
(OpenSSH 9.2), is libssh2's. `ssh.client: libssh2` skips that reading, for a fleet that trades
the post-quantum exchange for the CPU; a `KexAlgorithms` without them needs no such reading.
"""

from __future__ import annotations

import asyncio
import re
import socket
from dataclasses import dataclass

from fleetcheck.transport import libssh2
from fleetcheck.transport.ssh_hostkeys import HostKeyPlan
from fleetcheck.transport.ssh_settings import SshFiles, SshSettings, default_host_key_algs

#: A known key's type -> the host-key algorithms that prove it.
_KEY_TYPE_OF = {"rsa-sha2-512": "ssh-rsa", "rsa-sha2-256": "ssh-rsa"}


@dataclass(frozen=True)
class Plan:
    """What one libssh2 connection offers and logs in with."""

    lib: libssh2.Library
    kex: tuple[str, ...]
    ciphers: tuple[str, ...]
    macs: tuple[str, ...]
    host_key_algs: tuple[str, ...]
    key_files: tuple[tuple[str, bytes], ...]
    #: The post-quantum exchanges asyncssh would offer (ssh_config's list or its own): a
    #: server that has one goes to asyncssh (see above). Empty: libssh2 whatever the server.
    post_quantum: tuple[str, ...] = ()


#: The key exchanges libssh2 lacks that keep a server's recording of today's traffic from being
#: decrypted later: OpenSSH's defaults from 9.9 (mlkem768x25519) and 8.5 (sntrup761x25519).
_POST_QUANTUM = {"mlkem768x25519-sha256": (9, 9), "sntrup761x25519-sha512": (8, 5),
                 "sntrup761x25519-sha512@openssh.com": (8, 5)}
_OPENSSH = re.compile(r"SSH-2\.0-OpenSSH_(\d+)\.(\d+)")


def prefers_asyncssh(banner: str | None, post_quantum: tuple[str, ...]) -> bool:
    """Whether a server that sent `banner` may offer one of `post_quantum` (see above)."""
    if not post_quantum:
        return False
    found = _OPENSSH.match(banner or "")
    if found is None:
        return True
    version = (int(found.group(1)), int(found.group(2)))
    return any(version >= _POST_QUANTUM.get(alg, (0, 0)) for alg in post_quantum)


#: Most bytes read ahead for the identification line (RFC 4253 4.2: 255 bytes a line, and
#: lines before it are allowed).
_PEEK = 4096


async def peek_banner(sock: socket.socket) -> str | None:
    """The server's "SSH-2.0-..." line, left unread on the socket; None where the server
    closed first or sent no such line in its first bytes."""
    loop = asyncio.get_running_loop()
    seen = -1
    while True:
        ready: asyncio.Future[None] = loop.create_future()

        def wake(ready: asyncio.Future[None] = ready) -> None:
            if not ready.done():
                ready.set_result(None)

        loop.add_reader(sock.fileno(), wake)
        try:
            await ready
        finally:
            loop.remove_reader(sock.fileno())
        data = sock.recv(_PEEK, socket.MSG_PEEK)
        if not data:
            return None
        for line in data.split(b"\n")[:-1]:
            if line.startswith(b"SSH-"):
                return line.rstrip(b"\r").decode("ascii", "replace")
        if len(data) >= _PEEK:
            return None
        if len(data) == seen:
            # Part of a line is in and still readable: the rest is waited for, not spun on.
            await asyncio.sleep(0.005)
        seen = len(data)


class HandOver(Exception):
    """The server may offer a post-quantum exchange: asyncssh takes the connected socket."""

    def __init__(self, sock: socket.socket) -> None:
        super().__init__("post-quantum key exchange offered")
        self.sock = sock


def _offered(option: str, wanted: tuple[str, ...], supported: tuple[str, ...]
             ) -> tuple[str, ...] | str:
    chosen = tuple(alg for alg in wanted if alg in supported)
    return chosen or f"none of {option} {','.join(wanted)} is one libssh2 has"


def plan_for(settings: SshSettings, keys: HostKeyPlan, files: SshFiles, *,
             check_post_quantum: bool = True) -> Plan | str:
    """libssh2's plan for this connection, or why libssh2 cannot make it as asyncssh would;
    `check_post_quantum` False (`ssh.client: libssh2`): libssh2 whatever the server offers."""
    lib = libssh2.library()
    if lib is None:
        return libssh2.problem() or "no libssh2"
    if settings.proxy_jump:
        return "a ProxyJump"
    if any(keys.matched[1]) or any(part for part in keys.matched[3:]):
        return "known_hosts trusts a certificate authority for it"
    key_files = files.key_files(settings.identity_files, settings.named_identity)
    if isinstance(key_files, str):
        return key_files
    supported = lib.supported
    kex = _offered("KexAlgorithms", settings.kex_algs, supported[libssh2.METHOD_KEX])
    ciphers = _offered("Ciphers", settings.encryption_algs, supported[libssh2.METHOD_CRYPT_CS])
    macs = _offered("MACs", settings.mac_algs, supported[libssh2.METHOD_MAC_CS])
    wanted = settings.host_key_algs or default_host_key_algs()
    known = keys.key_types() if not keys.trust_new else []
    host_key_algs = tuple(
        alg for alg in wanted
        if alg in supported[libssh2.METHOD_HOSTKEY] and "-cert-v01@" not in alg
        and (not known or _KEY_TYPE_OF.get(alg, alg) in known))
    for problem in (kex, ciphers, macs):
        if isinstance(problem, str):
            return problem
    if not host_key_algs:
        return ("no host-key algorithm libssh2 has for the keys known_hosts holds for it"
                if known else "none of HostKeyAlgorithms is one libssh2 has")
    assert not isinstance(kex, str) and not isinstance(ciphers, str)
    assert not isinstance(macs, str)
    post_quantum = tuple(alg for alg in settings.kex_algs if alg in _POST_QUANTUM)
    return Plan(lib, kex, ciphers, macs, host_key_algs, tuple(key_files),
                post_quantum if check_post_quantum else ())


class Watch:
    """How far a libssh2 connection got: TCP, then the server's banner."""

    def __init__(self) -> None:
        self.connected = False
        self.conn: libssh2.Connection | None = None

    @property
    def banner_missing(self) -> bool:
        """TCP connected, yet no "SSH-2.0-..." line came back: something else listens there."""
        return self.connected and (self.conn is None or not self.conn.banner())


async def connect(plan: Plan, settings: SshSettings, keys: HostKeyPlan,
                  watch: Watch) -> libssh2.Connection:
    """A logged-in libssh2 connection, its host key checked against `keys` (and recorded where
    a new key is trusted); anything short of that is released at once."""
    sock = await libssh2.open_socket(settings.address, settings.port)
    watch.connected = True
    try:
        if plan.post_quantum and prefers_asyncssh(await peek_banner(sock),
                                                  plan.post_quantum):
            raise HandOver(sock)
        conn = libssh2.Connection(plan.lib, sock)
    except HandOver:
        raise
    except BaseException:
        sock.close()
        raise
    watch.conn = conn
    try:
        conn.prefer(libssh2.METHOD_KEX, plan.kex)
        conn.prefer(libssh2.METHOD_HOSTKEY, plan.host_key_algs)
        conn.prefer(libssh2.METHOD_CRYPT_CS, plan.ciphers)
        conn.prefer(libssh2.METHOD_MAC_CS, plan.macs)
        await conn.handshake()
        blob = conn.host_key()
        if not keys.accepts(blob):
            raise libssh2.HostKeyRefused(libssh2.key_type(blob))
        await conn.login(settings.user, list(plan.key_files))
        keys.record_blob(blob)
        conn.start()
        return conn
    except BaseException:
        conn.release()
        raise
