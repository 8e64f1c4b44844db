"""Owns the libssh2 client: the library found and bound, one connection, its channels.

Why: an SSH handshake in asyncssh's Python costs the auditor about 10 ms of CPU, in libssh2's C
about 3 (bench/ssh_client_cpu.py); for a fleet that is most of the auditor's CPU per node, and
asyncssh's import is most of a gate's start. `transport/ssh.py` decides, per host, which client
a connection uses (`ssh.client`, docs/transports.md); this module is the libssh2 side of it.

The library is the libssh2 that the `ssh2-python` wheel carries (1.11, built with OpenSSL),
else a system libssh2 of at least 1.11 in the ld cache. It is called through ctypes, not
through ssh2-python's own binding: that binding's `get_exit_signal` passes libssh2 no length
pointers and so always answers "no signal", and a command killed by a signal (the OOM killer's
KILL) would read as one that exited 0.

A connection is non-blocking and driven from the audit's event loop by one pump: libssh2 allows
one packet in flight from a session, so after a call that left part of a packet unsent
(`block_directions` OUTBOUND) only that caller's same call is retried until it is out; a channel
open (a session-wide state in libssh2) runs one at a time; and after any call that read from the
socket, every channel is given another turn, because the packets it read may be another
channel's.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import glob
import importlib.util
import ipaddress
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fleetcheck.transport.sshlib import in_ld_cache

#: The least libssh2 used: 1.11.0 has strict key exchange (CVE-2023-48795), AES-GCM, the EtM
#: MACs, and OpenSSH private keys with OpenSSL.
MIN_VERSION = 0x010B00
#: The environment variable that names the libssh2 shared library to use instead of looking.
LIBRARY_VAR = "FLEETCHECK_LIBSSH2"

EAGAIN = -37
#: libssh2's error codes this module tells apart (libssh2.h).
ERROR_BANNER_RECV = -2
ERROR_SOCKET_SEND = -7
ERROR_TIMEOUT = -9
ERROR_SOCKET_DISCONNECT = -13
ERROR_FILE = -16
ERROR_AUTHENTICATION_FAILED = -18
ERROR_PUBLICKEY_UNVERIFIED = -19
ERROR_CHANNEL_FAILURE = -21
ERROR_CHANNEL_REQUEST_DENIED = -22
ERROR_CHANNEL_CLOSED = -26
ERROR_CHANNEL_EOF_SENT = -27
ERROR_SOCKET_RECV = -43
#: A socket error or the peer's disconnect: the transport is gone.
SOCKET_ERRORS = frozenset({ERROR_BANNER_RECV, ERROR_SOCKET_SEND, ERROR_SOCKET_DISCONNECT,
                           ERROR_SOCKET_RECV})

METHOD_KEX, METHOD_HOSTKEY, METHOD_CRYPT_CS, METHOD_CRYPT_SC, METHOD_MAC_CS = range(5)
BLOCK_INBOUND = 1
BLOCK_OUTBOUND = 2
STDERR_STREAM = 1
WINDOW = 2 * 1024 * 1024
PACKET = 32768
READ_CHUNK = 65536
#: SSH_DISCONNECT_BY_APPLICATION
DISCONNECT_BY_APPLICATION = 11


class Libssh2Error(Exception):
    """libssh2 refused a call: `code` is its error number, the text its own message."""

    def __init__(self, code: int, text: str) -> None:
        super().__init__(text)
        self.code = code
        self.reason = text


class HostKeyRefused(Exception):
    """The server's key is not one known_hosts trusts for it (or is revoked there)."""


class AuthFailed(Exception):
    """No key was accepted."""


class KeyUnreadable(Exception):
    """libssh2 cannot read a key that asyncssh did: the connection is made with asyncssh."""


class ChannelRefused(Exception):
    """The server refused a new session (MaxSessions): worth a short retry."""


class ConnectionGone(Exception):
    """The connection ended (a socket error, the server's disconnect, keepalives unanswered)."""


_VP = ctypes.c_void_p
_CP = ctypes.c_char_p
_I = ctypes.c_int
_U = ctypes.c_uint
_SZ = ctypes.c_size_t
_SSZ = ctypes.c_ssize_t

#: name: (restype, argtypes) of every libssh2 function used.
_SIGNATURES: dict[str, tuple[object, list[object]]] = {
    "libssh2_version": (_CP, [_I]),
    "libssh2_session_init_ex": (_VP, [_VP, _VP, _VP, _VP]),
    "libssh2_session_set_blocking": (None, [_VP, _I]),
    "libssh2_session_method_pref": (_I, [_VP, _I, _CP]),
    "libssh2_session_methods": (_CP, [_VP, _I]),
    "libssh2_session_supported_algs": (_I, [_VP, _I, ctypes.POINTER(ctypes.POINTER(_CP))]),
    "libssh2_session_handshake": (_I, [_VP, _I]),
    "libssh2_session_hostkey": (_VP, [_VP, ctypes.POINTER(_SZ), ctypes.POINTER(_I)]),
    "libssh2_session_banner_get": (_CP, [_VP]),
    "libssh2_session_block_directions": (_I, [_VP]),
    "libssh2_session_last_error": (_I, [_VP, ctypes.POINTER(_CP), ctypes.POINTER(_I), _I]),
    "libssh2_session_last_errno": (_I, [_VP]),
    "libssh2_session_disconnect_ex": (_I, [_VP, _I, _CP, _CP]),
    "libssh2_session_free": (_I, [_VP]),
    "libssh2_userauth_publickey_frommemory": (
        _I, [_VP, _CP, _SZ, _CP, _SZ, _CP, _SZ, _CP]),
    "libssh2_channel_open_ex": (_VP, [_VP, _CP, _U, _U, _U, _CP, _U]),
    "libssh2_channel_process_startup": (_I, [_VP, _CP, _U, _CP, _U]),
    "libssh2_channel_read_ex": (_SSZ, [_VP, _I, _VP, _SZ]),
    "libssh2_channel_write_ex": (_SSZ, [_VP, _I, _VP, _SZ]),
    "libssh2_channel_send_eof": (_I, [_VP]),
    "libssh2_channel_eof": (_I, [_VP]),
    "libssh2_channel_close": (_I, [_VP]),
    "libssh2_channel_get_exit_status": (_I, [_VP]),
    "libssh2_channel_get_exit_signal": (
        _I, [_VP, ctypes.POINTER(_VP), ctypes.POINTER(_SZ), _VP, _VP, _VP, _VP]),
    "libssh2_channel_free": (_I, [_VP]),
    "libssh2_free": (None, [_VP, _VP]),
}


def _wheel_library() -> str | None:
    """The libssh2 that the ssh2-python wheel vendors (auditwheel's `ssh2_python.libs`), its
    libcrypto loaded first so that the dynamic loader finds it by its (renamed) soname."""
    spec = importlib.util.find_spec("ssh2")
    if spec is None or not spec.submodule_search_locations:
        return None
    for package in spec.submodule_search_locations:
        libs = os.path.join(os.path.dirname(package), "ssh2_python.libs")
        found = sorted(glob.glob(os.path.join(libs, "libssh2*.so*")))
        if found:
            for crypto in sorted(glob.glob(os.path.join(libs, "libcrypto*.so*"))):
                ctypes.CDLL(crypto)
            return found[0]
    return None


def _system_library() -> str | None:
    """libssh2 in the ld cache, found without `find_library`'s compiler runs."""
    try:
        with open("/etc/ld.so.cache", "rb") as handle:
            cache = handle.read()
    except OSError:
        return None
    return "libssh2.so.1" if in_ld_cache("ssh2", cache) else None


class Library:
    """libssh2, loaded and bound, with the algorithms it offers."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.c = ctypes.CDLL(path)
        for name, (restype, argtypes) in _SIGNATURES.items():
            function = getattr(self.c, name)
            function.restype = restype
            function.argtypes = argtypes
        version = self.c.libssh2_version(0)
        self.version: str = version.decode("ascii") if version else "?"
        if not self.c.libssh2_version(MIN_VERSION):
            raise OSError(f"libssh2 {self.version} is older than 1.11.0")
        self.supported = self._supported()
        #: What channels read into, one for every connection: each read is copied out before
        #: the next (one event loop, one thread), and 500 connections hold 500 sockets, not
        #: 500 read buffers.
        self.buffer = ctypes.create_string_buffer(READ_CHUNK)

    def _supported(self) -> dict[int, tuple[str, ...]]:
        session = self.c.libssh2_session_init_ex(None, None, None, None)
        if not session:
            raise OSError("libssh2 could not start a session")
        try:
            found: dict[int, tuple[str, ...]] = {}
            for method in (METHOD_KEX, METHOD_HOSTKEY, METHOD_CRYPT_CS, METHOD_MAC_CS):
                names = ctypes.POINTER(_CP)()
                count = self.c.libssh2_session_supported_algs(session, method,
                                                              ctypes.byref(names))
                found[method] = tuple(names[i].decode("ascii") for i in range(max(count, 0)))
                if count > 0:
                    self.c.libssh2_free(session, names)
            return found
        finally:
            self.c.libssh2_session_free(session)


_LIBRARY: Library | None = None
_LIBRARY_PROBLEM: str | None = None


def library() -> Library | None:
    """libssh2, loaded on first use; None where there is none usable (`problem()` says why)."""
    global _LIBRARY, _LIBRARY_PROBLEM
    if _LIBRARY is None and _LIBRARY_PROBLEM is None:
        try:
            path = os.environ.get(LIBRARY_VAR) or _wheel_library() or _system_library()
            if path is None:
                _LIBRARY_PROBLEM = "no libssh2 (the ssh2-python package carries one)"
            else:
                _LIBRARY = Library(path)
        except (OSError, AttributeError, ImportError, ValueError) as exc:
            _LIBRARY_PROBLEM = f"libssh2 cannot be used: {exc}"
    return _LIBRARY


def problem() -> str | None:
    """Why `library()` is None."""
    library()
    return _LIBRARY_PROBLEM


def _string(blob: bytes, offset: int) -> tuple[bytes, int]:
    size = int.from_bytes(blob[offset:offset + 4], "big")
    return blob[offset + 4:offset + 4 + size], offset + 4 + size


def key_type(blob: bytes) -> str:
    """The key type a public key blob names first ("ssh-ed25519", "ssh-rsa"...)."""
    return _string(blob, 0)[0].decode("ascii", "replace")


@dataclass
class Job:
    """One command on one channel: its input, what it printed, and how it ended."""

    command: bytes
    input: bytes
    cap: int
    stderr_cap: int
    stdout: list[bytes] = field(default_factory=list)
    stderr: list[bytes] = field(default_factory=list)
    stdout_size: int = 0
    stderr_size: int = 0
    truncated: bool = False
    returncode: int | None = None
    signal: str | None = None
    #: "queued", "opening", "exec", "run", "close", "done"
    state: str = "queued"
    channel: int | None = None
    sent: int = 0
    input_buffer: ctypes.Array[ctypes.c_char] | None = None
    eof_sent: bool = False
    #: Given up on by its caller: closed without reading further, its process left running.
    abandoned: bool = False
    #: Why the command could not be started; the channel is closed, then the caller told.
    failed: BaseException | None = None
    #: Set when the job ends: None, or the exception its caller gets.
    done: asyncio.Future[BaseException | None] | None = None
    error: BaseException | None = None


class Connection:
    """One libssh2 session over one TCP connection, its channels driven from the event loop."""

    def __init__(self, lib: Library, sock: socket.socket) -> None:
        self.lib = lib
        self.c = lib.c
        self.sock = sock
        self.loop = asyncio.get_running_loop()
        self.session: int | None = self.c.libssh2_session_init_ex(None, None, None, None)
        if not self.session:
            raise OSError("libssh2 could not start a session")
        self.c.libssh2_session_set_blocking(self.session, 0)
        self.jobs: list[Job] = []
        #: The job whose call left a packet half sent: only it may call until it is out.
        self._owner: Job | None = None
        #: The job opening a channel (libssh2 keeps one open's state per session).
        self._opener: Job | None = None
        self._buffer = lib.buffer
        self._waiter: asyncio.Future[str] | None = None
        #: The socket is registered for reading; the waiter wants it read.
        self._watching = False
        self._want_read = False
        self._kicked = False
        self._pump: asyncio.Task[None] | None = None
        self._closed = False
        self.failure: BaseException | None = None
        self.banner_seen = False

    # -- low level ----------------------------------------------------------------------

    def _error(self, code: int) -> Libssh2Error:
        text = ctypes.c_char_p()
        size = ctypes.c_int()
        self.c.libssh2_session_last_error(self.session, ctypes.byref(text), ctypes.byref(size),
                                          0)
        message = text.value.decode("utf-8", "replace") if text.value else f"error {code}"
        return Libssh2Error(code, message)

    def _blocked(self) -> int:
        return int(self.c.libssh2_session_block_directions(self.session))

    async def _wait(self, directions: int, timeout: float | None = None) -> str:
        """Until the socket can be read ("socket"; or written, for OUTBOUND), a job is
        submitted or given up ("kick"; only where `directions` is 0), or `timeout` passes.

        The socket stays registered for reading from one wait to the next (a connection waits
        twenty-odd times, and each registration is two epoll_ctl calls); it is let go when it
        turns readable with no one waiting for it (`_readable`)."""
        future: asyncio.Future[str] = self.loop.create_future()
        self._waiter = future
        self._want_read = bool(directions & BLOCK_INBOUND)
        if self._want_read and not self._watching:
            self.loop.add_reader(self.sock.fileno(), self._readable)
            self._watching = True
        writing = bool(directions & BLOCK_OUTBOUND)
        if writing:
            self.loop.add_writer(self.sock.fileno(), self._wake, "socket")
        timer = (self.loop.call_later(timeout, self._wake, "timeout") if timeout is not None
                 else None)
        try:
            return await future
        finally:
            self._waiter = None
            self._want_read = False
            if timer is not None:
                timer.cancel()
            if writing:
                self.loop.remove_writer(self.sock.fileno())

    def _wake(self, why: str) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(why)

    def _readable(self) -> None:
        if self._want_read and self._waiter is not None and not self._waiter.done():
            self._waiter.set_result("socket")
        elif not self._want_read:
            # Readable, and no one reads (the pump idles, or waits for a job): watching on
            # would call this again at every turn of the loop.
            self._unwatch()

    def _unwatch(self) -> None:
        if self._watching:
            self.loop.remove_reader(self.sock.fileno())
            self._watching = False

    def _kick(self) -> None:
        self._kicked = True
        self._wake("kick")

    async def _call(self, function: Callable[[], int]) -> int:
        """A call made until it no longer would block (handshake and login, one at a time)."""
        while True:
            rc = function()
            if rc != EAGAIN:
                return rc
            await self._wait(self._blocked() or BLOCK_INBOUND)

    # -- opening ------------------------------------------------------------------------

    def prefer(self, method: int, names: tuple[str, ...] | list[str]) -> None:
        """Offer `names` for `method`, both directions for a cipher or MAC (the client's
        order is the preference)."""
        rc = self.c.libssh2_session_method_pref(self.session, method,
                                                ",".join(names).encode("ascii"))
        if rc < 0:
            raise self._error(rc)
        if method in (METHOD_CRYPT_CS, METHOD_MAC_CS):
            rc = self.c.libssh2_session_method_pref(self.session, method + 1,
                                                    ",".join(names).encode("ascii"))
            if rc < 0:
                raise self._error(rc)

    async def handshake(self) -> None:
        """The key exchange; a reset or a close before it ends raises ConnectionResetError."""
        fd = self.sock.fileno()
        rc = await self._call(lambda: self.c.libssh2_session_handshake(self.session, fd))
        self.banner_seen = self.banner()
        if rc in SOCKET_ERRORS:
            raise ConnectionResetError(self._error(rc).reason)
        if rc < 0:
            raise self._error(rc)

    def banner(self) -> bool:
        """Whether the server's "SSH-2.0-..." line has come."""
        if self.session is None:
            return self.banner_seen
        return self.banner_seen or self.c.libssh2_session_banner_get(self.session) is not None

    def host_key(self) -> bytes:
        size = ctypes.c_size_t()
        kind = ctypes.c_int()
        pointer = self.c.libssh2_session_hostkey(self.session, ctypes.byref(size),
                                                 ctypes.byref(kind))
        if not pointer:
            raise self._error(self.c.libssh2_session_last_errno(self.session))
        return ctypes.string_at(pointer, size.value)

    def methods(self) -> dict[str, str]:
        """The key exchange, cipher and MAC negotiated; with an AEAD cipher, which carries its
        own tag, the MAC is the cipher (as asyncssh names it)."""
        found = {}
        for name, method in (("kex", METHOD_KEX), ("cipher", METHOD_CRYPT_CS),
                             ("mac", METHOD_MAC_CS)):
            value = self.c.libssh2_session_methods(self.session, method)
            if value:
                found[name] = value.decode("ascii", "replace")
        if any(aead in found.get("cipher", "") for aead in ("-gcm@", "poly1305")):
            found["mac"] = found["cipher"]
        return found

    async def login(self, user: str, keys: list[tuple[str, bytes]]) -> None:
        """Public-key login with each key in turn; AuthFailed when none is accepted."""
        name = user.encode()
        for path, data in keys:
            def attempt(data: bytes = data) -> int:
                return int(self.c.libssh2_userauth_publickey_frommemory(
                    self.session, name, len(name), None, 0, data, len(data), b""))
            rc = await self._call(attempt)
            if rc == 0:
                return
            if rc in SOCKET_ERRORS:
                raise ConnectionResetError(self._error(rc).reason)
            if rc == ERROR_FILE:
                raise KeyUnreadable(f"libssh2 cannot read {path}: {self._error(rc).reason}")
            if rc not in (ERROR_AUTHENTICATION_FAILED, ERROR_PUBLICKEY_UNVERIFIED):
                raise self._error(rc)
        raise AuthFailed("no key was accepted")

    def start(self) -> None:
        """Logged in: the pump starts."""
        self._pump = self.loop.create_task(self._run_pump())

    # -- commands -----------------------------------------------------------------------

    def submit(self, job: Job) -> None:
        """Run `job`; its `done` future is set when it has ended (or failed)."""
        if self.failure is not None:
            raise ConnectionGone(str(self.failure))
        if self._closed:
            raise ConnectionGone("closed")
        job.done = self.loop.create_future()
        self.jobs.append(job)
        self._kick()

    def abandon(self, job: Job) -> None:
        """The caller no longer waits: the channel is closed, its process left to the remote
        `timeout` (and `kill_abandoned`)."""
        if job.state != "done":
            job.abandoned = True
            self._kick()

    def _finish(self, job: Job, error: BaseException | None = None, *,
                free: bool = True) -> None:
        if job.channel is not None and free:
            self.c.libssh2_channel_free(job.channel)
        job.channel = None
        job.input_buffer = None
        job.state = "done"
        job.error = error
        if job in self.jobs:
            self.jobs.remove(job)
        if self._opener is job:
            self._opener = None
        if self._owner is job:
            self._owner = None
        if job.done is not None and not job.done.done():
            job.done.set_result(error)

    def _note(self, job: Job, rc: int) -> bool:
        """After a call of `job`'s: whether it would block; who may call next."""
        if rc == EAGAIN:
            if self._owner is None and self._blocked() & BLOCK_OUTBOUND:
                self._owner = job
            return True
        if self._owner is job:
            self._owner = None
        return False

    def _check(self, rc: int) -> None:
        if rc in SOCKET_ERRORS:
            raise ConnectionGone(self._error(rc).reason)

    def _step(self, job: Job) -> bool:
        """Advance `job` as far as it goes without blocking; whether it moved at all."""
        moved = False
        c = self.c
        while True:
            if job.state == "queued":
                if job.abandoned:
                    self._finish(job)
                    return True
                if self._opener is not None:
                    return moved
                self._opener = job
                job.state = "opening"
            if job.state == "opening":
                kind = b"session"
                channel = c.libssh2_channel_open_ex(self.session, kind, len(kind), WINDOW,
                                                    PACKET, None, 0)
                if not channel:
                    rc = c.libssh2_session_last_errno(self.session)
                    if self._note(job, rc):
                        return moved
                    self._opener = None
                    self._check(rc)
                    error = self._error(rc)
                    self._finish(job, ChannelRefused(error.reason)
                                 if rc == ERROR_CHANNEL_FAILURE else error)
                    return True
                self._note(job, 0)
                self._opener = None
                job.channel = channel
                job.state = "close" if job.abandoned else "exec"
                moved = True
            if job.state == "exec" and job.abandoned and self._owner is not job:
                job.state = "close"
            if job.state == "exec":
                rc = c.libssh2_channel_process_startup(job.channel, b"exec", 4, job.command,
                                                       len(job.command))
                if self._note(job, rc):
                    return moved
                self._check(rc)
                job.state = "run"
                if rc < 0:
                    # Refused (a forced command's server, a subsystem policy): closed first,
                    # so that no close packet is left for `_finish` to send.
                    job.failed = self._error(rc)
                    job.state = "close"
                moved = True
            if job.state == "run":
                moved = self._run_step(job) or moved
                if job.state == "run":
                    return moved
            if job.state == "close":
                rc = c.libssh2_channel_close(job.channel)
                if rc == EAGAIN and self._note(job, rc) and self._owner is job:
                    return moved
                self._check(rc)
                if rc == EAGAIN and not (job.abandoned or job.truncated
                                         or job.failed is not None):
                    return moved  # the close is out: the remote's own close is awaited
                if rc == EAGAIN:
                    # Cut off, given up or refused: nothing more is read. sshd answers a close
                    # only once the command has exited, so the channel is left to the session
                    # (freed with it) rather than waited for.
                    self._finish(job, job.failed, free=False)
                    return True
                if not (job.abandoned or job.truncated or job.failed is not None):
                    self._exit(job)
                self._finish(job, job.failed)
                return True
            if job.state == "done":
                return moved

    def _run_step(self, job: Job) -> bool:
        """Input out, output in, until nothing moves; then "close" once the remote's EOF is in
        (or at once when the output passed its cap or the caller gave up)."""
        c = self.c
        moved = False
        if job.abandoned and self._owner is not job:
            job.state = "close"
            return True
        if job.sent < len(job.input) and job.input_buffer is None:
            # Written from one copy in place (libssh2 copies what it takes into its packet).
            job.input_buffer = ctypes.create_string_buffer(job.input, len(job.input))
        while job.sent < len(job.input):
            assert job.input_buffer is not None
            written = c.libssh2_channel_write_ex(job.channel, 0,
                                                 ctypes.addressof(job.input_buffer) + job.sent,
                                                 min(len(job.input) - job.sent, WINDOW))
            if self._note(job, written if written == EAGAIN else 0):
                break
            if written < 0:
                self._check(written)
                # The command exited before reading all its input; its output still tells why.
                job.sent = len(job.input)
                job.eof_sent = True
                break
            job.sent += written
            moved = True
        if self._owner is job:
            return moved
        if job.sent >= len(job.input) and not job.eof_sent:
            rc = c.libssh2_channel_send_eof(job.channel)
            if self._note(job, rc):
                return moved
            self._check(rc)
            job.eof_sent = True
            moved = True
        for stream in (0, STDERR_STREAM):
            while True:
                size = c.libssh2_channel_read_ex(job.channel, stream, self._buffer, READ_CHUNK)
                if self._note(job, size if size == EAGAIN else 0):
                    break
                if size <= 0:
                    self._check(size)
                    break
                moved = True
                self._keep(job, stream, ctypes.string_at(self._buffer, size))
                if job.truncated:
                    job.state = "close"
                    return True
            if self._owner is job:
                return moved
        if c.libssh2_channel_eof(job.channel) == 1:
            job.state = "close"
            moved = True
        return moved

    def _keep(self, job: Job, stream: int, data: bytes) -> None:
        if stream == STDERR_STREAM:
            if job.stderr_size < job.stderr_cap:
                job.stderr.append(data[:job.stderr_cap - job.stderr_size])
            job.stderr_size += len(data)
            return
        room = job.cap - job.stdout_size
        if len(data) > room:
            job.stdout.append(data[:room])
            job.stdout_size = job.cap
            job.truncated = True
            return
        job.stdout.append(data)
        job.stdout_size += len(data)

    def _exit(self, job: Job) -> None:
        """The exit status, or the signal that ended the command (then no status)."""
        name = ctypes.c_void_p()
        size = ctypes.c_size_t()
        rc = self.c.libssh2_channel_get_exit_signal(job.channel, ctypes.byref(name),
                                                    ctypes.byref(size), None, None, None, None)
        if rc == 0 and name.value:
            job.signal = ctypes.string_at(name.value, size.value).decode("ascii", "replace")
            self.c.libssh2_free(self.session, name)
            return
        job.returncode = int(self.c.libssh2_channel_get_exit_status(job.channel))

    def _sweep(self) -> bool:
        """One turn for every job (only the owner of a half-sent packet while there is one);
        whether any moved."""
        moved = False
        for job in list(self.jobs):
            if self._owner is not None and self._owner is not job:
                continue
            if self._step(job):
                moved = True
        return moved

    async def _run_pump(self) -> None:
        try:
            while not self._closed:
                self._kicked = False
                while self._sweep():
                    pass
                if self._kicked:
                    continue
                # Nothing to do: wait for a job; else for the socket (reading always: the
                # server may send at any time; writing while a packet is half out).
                await self._wait(self._blocked() | BLOCK_INBOUND if self.jobs else 0)
        except ConnectionGone as exc:
            self._fail(exc)
        except Libssh2Error as exc:
            self._fail(ConnectionGone(exc.reason))

    def _fail(self, exc: BaseException) -> None:
        self.failure = exc
        for job in list(self.jobs):
            self._finish(job, ConnectionGone(str(exc)), free=False)

    def is_closed(self) -> bool:
        return self._closed or self.failure is not None

    async def close(self, wait: float) -> None:
        """Disconnect (politely, within `wait` s) and free the session; safe to call twice."""
        if self.session is None:
            return
        self._closed = True
        self._kick()
        if self._pump is not None:
            self._pump.cancel()
            await asyncio.gather(self._pump, return_exceptions=True)
        # A packet half sent blocks every other, the goodbye too: then none is said.
        half_sent = self._owner is not None
        for job in list(self.jobs):
            self._finish(job, ConnectionGone("closed"), free=False)
        if self.failure is None and not half_sent:
            deadline = time.monotonic() + wait
            while True:
                rc = self.c.libssh2_session_disconnect_ex(
                    self.session, DISCONNECT_BY_APPLICATION, b"closed", b"")
                left = deadline - time.monotonic()
                if rc != EAGAIN or left <= 0:
                    break
                await self._wait(self._blocked() or BLOCK_OUTBOUND, left)
        self.release()

    def release(self) -> None:
        """Free the session and close the socket at once (no goodbye): shut down first, so
        that freeing its channels sends nothing and waits for nothing."""
        if self.session is None:
            return
        if self._pump is not None:
            self._pump.cancel()
        session, self.session = self.session, None
        self._unwatch()
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        for _ in range(3):
            if self.c.libssh2_session_free(session) != EAGAIN:
                break
        self.sock.close()

#: TCP keepalives: a dead host is noticed after KEEPALIVE_IDLE + KEEPALIVE_COUNT *
#: KEEPALIVE_INTERVAL s of silence, as asyncssh's 15 s keepalives x 3 notice it. The kernel sends
#: them: libssh2's own keepalive request cannot be retried once half sent (its packet is on
#: libssh2's stack), which would stall the session's every later packet.
KEEPALIVE_IDLE = 15
KEEPALIVE_INTERVAL = 15
KEEPALIVE_COUNT = 3


def _keepalive(sock: socket.socket) -> None:
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for option, value in (("TCP_KEEPIDLE", KEEPALIVE_IDLE), ("TCP_KEEPINTVL", KEEPALIVE_INTERVAL),
                          ("TCP_KEEPCNT", KEEPALIVE_COUNT)):
        if hasattr(socket, option):
            sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, option), value)


async def open_socket(address: str, port: int) -> socket.socket:
    """A connected non-blocking TCP socket to `address` (each of its addresses in turn)."""
    loop = asyncio.get_running_loop()
    try:
        ipaddress.ip_address(address)
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        candidates: list[tuple[int, Any]] = [(family, (address, port))]
    except ValueError:
        infos = await loop.getaddrinfo(address, port, type=socket.SOCK_STREAM)
        candidates = [(info[0], info[4]) for info in infos]
    last: OSError | None = None
    for kind, where in candidates:
        sock = socket.socket(kind, socket.SOCK_STREAM)
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        _keepalive(sock)
        try:
            await loop.sock_connect(sock, where)
            return sock
        except OSError as exc:
            sock.close()
            last = exc
        except BaseException:
            sock.close()
            raise
    assert last is not None
    raise last
