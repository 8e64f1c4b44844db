"""Owns the libssh2 side of an SSH connection: whether libssh2 can do what a host's settings
ask, and the connection opened with it as `ssh.py` opens asyncssh's (the same host-key plan,
keys, algorithms and refusals).

`ssh.client: auto` (the default) takes libssh2 where it can do everything the settings ask,
and asyncssh otherwise: a ProxyJump, a known_hosts certificate authority, a key with a
certificate or of a type libssh2 has not, no key file (the agent's keys), or an ssh_config
algorithm list none of whose entries libssh2 has.

`auto` also reads the server's identification line before libssh2 does (`MSG_PEEK`: it stays
unread) and hands the same socket to asyncssh for any server but OpenSSH's sshd, the one libssh2
is proven against here (libssh2 cannot tell an exit status never sent from 0), and for an
OpenSSH that may offer a post-quantum key exchange that asyncssh has and libssh2 has not
(mlkem768x25519, and sntrup761x25519 where asyncssh has liboqs): OpenSSH from 9.9
(mlkem768x25519 by default), from 8.5 for sntrup761x25519. An OpenSSH before those, the fleets
of Debian 12 and Proxmox VE 8 (OpenSSH 9.2), is libssh2's. `ssh.client: libssh2` skips that
reading, for a fleet that trades the post-quantum exchange for the CPU.
"""

from __future__ import annotations

import concurrent.futures
import functools
import re
import select
import socket
import time
from dataclasses import dataclass

from fleetcheck.transport import libssh2
from fleetcheck.transport.ldcache import in_ld_cache, read_ld_cache
from fleetcheck.transport.ssh_hostkeys import HostKeyPlan
from fleetcheck.transport.ssh_settings import (
    PREFERRED_CIPHERS,
    PREFERRED_MACS,
    SshFiles,
    SshSettings,
)

#: A known key's type -> the host-key algorithms that prove it.
_KEY_TYPE_OF = {"rsa-sha2-512": "ssh-rsa", "rsa-sha2-256": "ssh-rsa"}

#: What a libssh2 connection offers where ssh_config names no list: asyncssh's own default
#: order of the algorithms libssh2 has (tests/transport/test_ssh_libssh2.py holds it to
#: asyncssh's), so that a host negotiates what it would with asyncssh, without importing it.
KEY_EXCHANGES = (
    "curve25519-sha256", "curve25519-sha256@libssh.org", "ecdh-sha2-nistp521",
    "ecdh-sha2-nistp384", "ecdh-sha2-nistp256", "diffie-hellman-group-exchange-sha256",
    "diffie-hellman-group14-sha256", "diffie-hellman-group16-sha512",
    "diffie-hellman-group18-sha512", "diffie-hellman-group14-sha1",
)
HOST_KEY_ALGORITHMS = (
    "rsa-sha2-256", "rsa-sha2-512", "ssh-rsa", "ssh-ed25519", "ecdsa-sha2-nistp521",
    "ecdsa-sha2-nistp384", "ecdsa-sha2-nistp256",
)


@dataclass(frozen=True)
class Plan:
    """What one libssh2 connection offers and logs in with."""

    lib: libssh2.Library
    kex: tuple[str, ...]
    ciphers: tuple[str, ...]
    macs: tuple[str, ...]
    host_key_algs: tuple[str, ...]
    key_files: tuple[tuple[str, bytes], ...]
    #: `ssh.client: auto`: the server's identification line decides (see above); False
    #: (`ssh.client: libssh2`): libssh2 whatever the server.
    auto: bool = True
    #: The post-quantum exchanges asyncssh would offer from ssh_config's list; None: its own
    #: defaults, asked only where the server's version makes them matter (`default_post_quantum`).
    post_quantum: tuple[str, ...] | None = ()


#: The key exchanges libssh2 lacks that keep a server's recording of today's traffic from being
#: decrypted later: OpenSSH's defaults from 9.9 (mlkem768x25519) and 8.5 (sntrup761x25519).
_POST_QUANTUM = {"mlkem768x25519-sha256": (9, 9), "sntrup761x25519-sha512": (8, 5),
                 "sntrup761x25519-sha512@openssh.com": (8, 5)}
_OPENSSH = re.compile(r"SSH-2\.0-OpenSSH_(\d+)\.(\d+)")


def prefers_asyncssh(banner: str | None, post_quantum: tuple[str, ...]) -> bool:
    """Whether a server that sent `banner` is asyncssh's under `auto`: any server but OpenSSH
    (libssh2 is proven against OpenSSH's sshd alone; one that sent no exit status would read
    as 0 there), and an OpenSSH that may offer one of `post_quantum` (see above)."""
    version = _openssh_version(banner)
    if version is None:
        return True
    return any(version >= _POST_QUANTUM.get(alg, (0, 0)) for alg in post_quantum)


def _openssh_version(banner: str | None) -> tuple[int, int] | None:
    found = _OPENSSH.match(banner or "")
    return (int(found.group(1)), int(found.group(2))) if found else None


@functools.cache
def _liboqs_may_be_found() -> bool:
    """Whether asyncssh may find liboqs: it looks in the ld cache alone (sshlib.py). Read once
    per process, not at every connection."""
    cache = read_ld_cache()
    return in_ld_cache("oqs", cache) or in_ld_cache("liboqs", cache)


@functools.cache
def _asyncssh_post_quantum() -> tuple[str, ...]:
    """The post-quantum exchanges among asyncssh's own defaults (asyncssh imported)."""
    from fleetcheck.transport.ssh_settings import key_exchanges

    return tuple(alg for alg in key_exchanges() if alg in _POST_QUANTUM)


def default_post_quantum(banner: str | None) -> tuple[str, ...]:
    """The post-quantum exchanges of asyncssh's own defaults that a server of `banner` may
    offer too; asyncssh is imported to ask only where one may be both: OpenSSH from 9.9
    (mlkem768x25519, through `cryptography`), or from 8.5 where liboqs may be in the ld cache
    (sntrup761x25519: asyncssh finds liboqs there, or not at all; sshlib.py)."""
    version = _openssh_version(banner)
    if version is None or version < (8, 5) or (version < (9, 9) and not _liboqs_may_be_found()):
        return ()
    return _asyncssh_post_quantum()


#: Most bytes read ahead for the identification line (RFC 4253 4.2: 255 bytes a line, and
#: lines before it are allowed).
_PEEK = 4096


def peek_banner(sock: socket.socket, deadline: float,
                opening: libssh2.Opening | None = None) -> str | None:
    """The server's "SSH-2.0-..." line, left unread on the socket; None where the first
    `_PEEK` bytes hold none. TimeoutError at `deadline`; ConnectionResetError where the server
    hangs up first (sshd's MaxStartups says "Exceeded MaxStartups" and closes: retried, as a
    reset is); ConnectionAbortedError once `opening` is given up."""
    poller = select.poll()
    poller.register(sock, select.POLLIN | libssh2.HUNG_UP)
    while True:
        if opening is not None and opening.cancelled:
            raise ConnectionAbortedError("given up")
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("no SSH banner")
        events = 0
        for _, happened in poller.poll(left * 1000):
            events |= happened
        if not events:
            continue
        try:
            data = sock.recv(_PEEK, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        except BlockingIOError:
            data = None
        if data == b"":
            raise ConnectionResetError("the server closed the connection before its banner")
        for line in (data or b"").split(b"\n")[:-1]:
            if line.startswith(b"SSH-"):
                return line.rstrip(b"\r").decode("ascii", "replace")
        if data is not None and len(data) >= _PEEK:
            return None
        if events & libssh2.HUNG_UP:
            first = (data or b"").split(b"\n")[0].strip().decode("ascii", "replace")[:80]
            raise ConnectionResetError(first or "the server hung up before its banner")
        # Part of a line is in: a peek would return it at once again; the rest is waited for.
        time.sleep(min(0.005, max(0.0, left)))


class HandOver(Exception):
    """The server is asyncssh's under `auto` (`prefers_asyncssh`): it takes the connected
    socket."""

    def __init__(self, sock: socket.socket) -> None:
        super().__init__("the server is asyncssh's")
        self.sock = sock


def _offered(option: str, wanted: tuple[str, ...], supported: tuple[str, ...]
             ) -> tuple[str, ...] | str:
    chosen = tuple(alg for alg in wanted if alg in supported)
    return chosen or f"none of {option} {','.join(wanted)} is one libssh2 has"


def plan_for(settings: SshSettings, keys: HostKeyPlan, files: SshFiles, *,
             auto: bool = True) -> Plan | str:
    """libssh2's plan for this connection, or why libssh2 cannot make it as asyncssh would;
    `auto` False (`ssh.client: libssh2`): libssh2 whatever the server."""
    lib = libssh2.library()
    if lib is None:
        return libssh2.problem() or "no libssh2"
    if settings.proxy_jump:
        return "a ProxyJump"
    if keys.authorities:
        return "known_hosts trusts a certificate authority for it"
    key_files = files.key_files(settings.identity_files, settings.named_identity)
    if not key_files:
        return "no key file to log in with (the agent's keys)"
    for path, _, algorithms in key_files:
        for algorithm in algorithms:
            if "-cert-v01@" in algorithm:
                return f"{path} comes with a certificate"
            if algorithm not in libssh2.KEY_TYPES:
                return f"{path} is an {algorithm} key"
    supported = lib.supported
    # ssh_config's lists as asyncssh reads them; else fleetcheck's own, without asyncssh.
    kex = _offered("KexAlgorithms", settings.kex_algs if settings.kex_setting is not None
                   else KEY_EXCHANGES, supported[libssh2.METHOD_KEX])
    ciphers = _offered("Ciphers", settings.encryption_algs
                       if settings.cipher_setting is not None else PREFERRED_CIPHERS,
                       supported[libssh2.METHOD_CRYPT_CS])
    macs = _offered("MACs", settings.mac_algs if settings.mac_setting is not None
                    else PREFERRED_MACS, supported[libssh2.METHOD_MAC_CS])
    wanted = settings.host_key_algs or HOST_KEY_ALGORITHMS
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
    post_quantum = (tuple(alg for alg in settings.kex_algs if alg in _POST_QUANTUM)
                    if settings.kex_setting is not None else None)
    return Plan(lib, kex, ciphers, macs, host_key_algs,
                tuple((path, data) for path, data, _ in key_files), auto, post_quantum)


class Watch:
    """How far a libssh2 connection got: TCP, then the server's banner; written by the opener
    thread, read by the loop's (never through libssh2, which the thread may still be in)."""

    def __init__(self) -> None:
        self.connected = False
        self.banner_seen = False

    @property
    def banner_missing(self) -> bool:
        """TCP connected, yet no "SSH-2.0-..." line came back: something else listens there."""
        return self.connected and not self.banner_seen


def _open(plan: Plan, settings: SshSettings, keys: HostKeyPlan, watch: Watch,
          opening: libssh2.Opening) -> libssh2.Connection:
    """The whole opening, blocking, on an opener thread: TCP, the server's line read ahead,
    key exchange, the host key checked against `keys`, login."""
    deadline = time.monotonic() + settings.connect_timeout
    sock = libssh2.connect_socket(settings.address, settings.port, settings.connect_timeout,
                                  opening)
    watch.connected = True
    try:
        banner = peek_banner(sock, deadline, opening)
        watch.banner_seen = banner is not None
        if plan.auto and prefers_asyncssh(banner, plan.post_quantum
                                          if plan.post_quantum is not None
                                          else default_post_quantum(banner)):
            sock.setblocking(False)
            raise HandOver(sock)
        conn = libssh2.Connection(plan.lib, sock)
    except HandOver:
        raise
    except BaseException:
        sock.close()
        raise
    try:
        conn.prefer(libssh2.METHOD_KEX, plan.kex)
        conn.prefer(libssh2.METHOD_HOSTKEY, plan.host_key_algs)
        conn.prefer(libssh2.METHOD_CRYPT_CS, plan.ciphers)
        conn.prefer(libssh2.METHOD_MAC_CS, plan.macs)
        conn.server_key = conn.open(keys.accepts, settings.user, list(plan.key_files),
                                    max(0.001, deadline - time.monotonic()))
        return conn
    except BaseException:
        conn.release()
        raise


def _let_go(done: concurrent.futures.Future[libssh2.Connection]) -> None:
    """What an opening whose caller gave up left: its connection, or a handed-over socket."""
    if done.cancelled():
        return
    error = done.exception()
    if isinstance(error, HandOver):
        error.sock.close()
    elif error is None:
        done.result().release()


async def connect(plan: Plan, settings: SshSettings, keys: HostKeyPlan,
                  watch: Watch) -> libssh2.Connection:
    """A logged-in libssh2 connection, its host key checked against `keys` (and recorded where
    a new key is trusted), driven by this event loop from now on; opened on a thread
    (`libssh2.open_connection`). HandOver where asyncssh takes the socket instead."""
    conn = await libssh2.open_connection(
        libssh2.Opening(), lambda token: _open(plan, settings, keys, watch, token), _let_go)
    try:
        keys.record_blob(conn.server_key)
    except BaseException:
        conn.release()
        raise
    conn.start()
    return conn
