"""Owns the libssh2 client: the library found and bound, one connection, its channels.

Why: an SSH handshake in asyncssh's Python costs the auditor about 10 ms of CPU, in libssh2's C
about 3 (bench/ssh_client_cpu.py); for a fleet that is most of the auditor's CPU per node, and
asyncssh's import is most of a gate's start. `transport/ssh.py` decides, per host, which client
a connection uses (`ssh.client`, docs/transports.md); this module is the libssh2 side of it.

The library is the libssh2 that the `ssh2-python` wheel carries (1.11.1, built with OpenSSL),
else a system libssh2 of at least 1.11.1 in the ld cache. It is called through ctypes, not
through ssh2-python's own binding: that binding's `get_exit_signal` passes libssh2 no length
pointers and so always answers "no signal", and a command killed by a signal (the OOM killer's
KILL) would read as one that exited 0.

A connection is opened blocking on an opener thread (`open_connection`), then driven by the
audit's event loop through callbacks (`Connection._drive`): libssh2 allows one packet in flight
from a session, so after a call that left part of a packet unsent (`block_directions` OUTBOUND)
only that same call is made again until it is out; a channel open (a session-wide state in
libssh2) runs one at a time; and after any call that read from the socket, every channel is
given another turn, because the packets it read may be another channel's.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import ctypes
import errno
import glob
import importlib.util
import os
import select
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from fleetcheck.transport.interface import CappedOutput
from fleetcheck.transport.ldcache import in_ld_cache, read_ld_cache

#: The least libssh2 used: 1.11.0 has strict key exchange (CVE-2023-48795), AES-GCM, the EtM
#: MACs, and OpenSSH private keys with OpenSSL; 1.11.1 `libssh2_session_callback_set2`.
MIN_VERSION = 0x010B01
#: The environment variable that names the libssh2 shared library to use instead of looking.
LIBRARY_VAR = "FLEETCHECK_LIBSSH2"

#: The key types libssh2 logs in with from a file (OpenSSL's build: no FIDO keys).
KEY_TYPES = frozenset({"ssh-ed25519", "ssh-rsa", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384",
                       "ecdsa-sha2-nistp521"})

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
#: The owner names of the two reads (`Connection._owner`): stdout's and stderr's.
READ_OPS = ("read0", "read1")
#: poll(2) events of a socket its peer closed (POLLRDHUP: its FIN, with data still unread).
HUNG_UP = select.POLLHUP | select.POLLERR | getattr(select, "POLLRDHUP", 0)
#: Most sweeps of one `_drive` before the loop gets its turn (others' timers and sockets).
MAX_SWEEPS = 64
#: libssh2's recv callback (LIBSSH2_RECV_FUNC) and its type number.
_RECV_FUNC = ctypes.CFUNCTYPE(ctypes.c_ssize_t, ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t,
                              ctypes.c_int, ctypes.c_void_p)
CALLBACK_RECV = 6
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
    "libssh2_session_set_timeout": (None, [_VP, ctypes.c_long]),
    "libssh2_session_method_pref": (_I, [_VP, _I, _CP]),
    "libssh2_session_methods": (_CP, [_VP, _I]),
    "libssh2_session_supported_algs": (_I, [_VP, _I, ctypes.POINTER(ctypes.POINTER(_CP))]),
    "libssh2_session_handshake": (_I, [_VP, _I]),
    "libssh2_session_hostkey": (_VP, [_VP, ctypes.POINTER(_SZ), ctypes.POINTER(_I)]),
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
    "libssh2_channel_wait_closed": (_I, [_VP]),
    "libssh2_channel_get_exit_status": (_I, [_VP]),
    "libssh2_channel_get_exit_signal": (
        _I, [_VP, ctypes.POINTER(_VP), ctypes.POINTER(_SZ), _VP, _VP, _VP, _VP]),
    "libssh2_channel_free": (_I, [_VP]),
    "libssh2_free": (None, [_VP, _VP]),
    "libssh2_session_callback_set2": (_VP, [_VP, _I, _VP]),
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
    cache = read_ld_cache()
    return "libssh2.so.1" if cache is not None and in_ld_cache("ssh2", cache) else None


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
            raise OSError(f"libssh2 {self.version} is older than 1.11.1")
        self.supported = self._supported()
        #: What channels read into, one for every connection: each read is copied out before
        #: the next (one event loop, one thread), and 500 connections hold 500 sockets, not
        #: 500 read buffers.
        self.buffer = ctypes.create_string_buffer(READ_CHUNK)
        #: The C library's recv(2), which `Connection._recv` gives libssh2.
        self.recv = ctypes.CDLL(None, use_errno=True).recv
        self.recv.restype = _SSZ
        self.recv.argtypes = [_I, _VP, _SZ, _I]

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


@dataclass
class Job:
    """One command on one channel: its input, what it printed, and how it ended."""

    command: bytes
    input: bytes
    #: What it printed, kept up to the caps.
    output: CappedOutput
    returncode: int | None = None
    signal: str | None = None
    #: "queued", "opening", "exec", "run", "close", "closing", "done"
    state: str = "queued"
    channel: int | None = None
    sent: int = 0
    input_buffer: ctypes.Array[ctypes.c_char] | None = None
    eof_sent: bool = False
    #: Given up on by its caller: closed without reading further, its process left running.
    abandoned: bool = False
    #: Why the command could not be started; the channel is closed, then the caller told.
    failed: BaseException | None = None
    #: Its exec request went out: the command may be running on the node.
    started: bool = False
    #: Set when the job has ended; `error` says how it failed, if it did.
    done: asyncio.Future[None] | None = None
    error: BaseException | None = None


class Connection:
    """One libssh2 session over one TCP connection, its channels driven from the event loop."""

    def __init__(self, lib: Library, sock: socket.socket) -> None:
        self.lib = lib
        self.c = lib.c
        self.sock = sock
        #: The event loop that drives it once it is open (`start`); opened on a thread.
        self.loop: asyncio.AbstractEventLoop | None = None
        self.session: int | None = self.c.libssh2_session_init_ex(None, None, None, None)
        if not self.session:
            raise OSError("libssh2 could not start a session")
        self.c.libssh2_session_set_blocking(self.session, 0)
        self.jobs: list[Job] = []
        #: The job, and its call, that left a packet half sent: only that call is made until
        #: the packet is out.
        self._owner: tuple[Job, str] | None = None
        #: The job opening a channel (libssh2 keeps one open's state per session).
        self._opener: Job | None = None
        self._buffer = lib.buffer
        #: The socket is registered with the event loop for reading, for writing; a sweep is
        #: scheduled.
        self._reading = False
        self._writing = False
        self._scheduled = False
        self._closed = False
        self.failure: BaseException | None = None
        #: The server's host key (its wire blob), once `open` checked it.
        self.server_key = b""
        #: Bytes read from the socket since the loop drives it (`_recv`), and its buffer.
        self.received = 0
        self._recv_callback: Any = None

    # -- low level ----------------------------------------------------------------------

    @property
    def _ev(self) -> asyncio.AbstractEventLoop:
        assert self.loop is not None, "a libssh2 connection is driven once started"
        return self.loop

    def _error(self, code: int) -> Libssh2Error:
        text = ctypes.c_char_p()
        size = ctypes.c_int()
        self.c.libssh2_session_last_error(self.session, ctypes.byref(text), ctypes.byref(size),
                                          0)
        message = text.value.decode("utf-8", "replace") if text.value else f"error {code}"
        return Libssh2Error(code, message)

    def _blocked(self) -> int:
        return int(self.c.libssh2_session_block_directions(self.session))

    def _watch(self, reading: bool, writing: bool) -> None:
        """The socket registered with the event loop for what is wanted now, and only that: a
        readable socket that nothing reads would call `_drive` at every turn of the loop."""
        fd = self.sock.fileno()
        if reading != self._reading:
            if reading:
                self._ev.add_reader(fd, self._drive)
            else:
                self._ev.remove_reader(fd)
            self._reading = reading
        if writing != self._writing:
            if writing:
                self._ev.add_writer(fd, self._drive)
            else:
                self._ev.remove_writer(fd)
            self._writing = writing

    def _schedule(self) -> None:
        """A sweep at the loop's next turn (not inside the caller's own call)."""
        if not self._scheduled:
            self._scheduled = True
            self._ev.call_soon(self._drive)

    # -- opening ------------------------------------------------------------------------

    def prefer(self, method: int, names: tuple[str, ...] | list[str]) -> None:
        """Offer `names` for `method`, both directions for a cipher or MAC (the client's
        order is the preference)."""
        listed = ",".join(names).encode("ascii")
        # The server-to-client method of a cipher or MAC is the next number.
        for each in (method, method + 1) if method in (METHOD_CRYPT_CS, METHOD_MAC_CS) else (
                method,):
            rc = self.c.libssh2_session_method_pref(self.session, each, listed)
            if rc < 0:
                raise self._error(rc)

    def open(self, accept: Callable[[bytes], bool], user: str,
             keys: list[tuple[str, bytes]], timeout: float) -> bytes:
        """Key exchange, the server's key checked by `accept`, then public-key login with each
        key in turn; the server's key (its wire blob) when logged in.

        Blocking, on an opener thread (`open_connection`, `OPENER_THREADS`): libssh2 waits in
        its own poll() for the twenty-odd round trips of a handshake and a login, in C, where
        the event loop would take a few turns of Python for each (about 1 ms of CPU a
        connection). Bounded by `timeout` (libssh2's session timeout: LIBSSH2_ERROR_TIMEOUT,
        raised as TimeoutError); the socket's shutdown (`Opening.cancel`) ends it at once. A
        reset or a close before the key exchange ends raises ConnectionResetError (sshd's
        MaxStartups: retried)."""
        c = self.c
        c.libssh2_session_set_blocking(self.session, 1)
        c.libssh2_session_set_timeout(self.session, max(1, int(timeout * 1000)))
        try:
            self._opened(c.libssh2_session_handshake(self.session, self.sock.fileno()))
            blob = self.host_key()
            if not accept(blob):
                raise HostKeyRefused()
            name = user.encode()
            for path, data in keys:
                rc = c.libssh2_userauth_publickey_frommemory(
                    self.session, name, len(name), None, 0, data, len(data), b"")
                if rc == 0:
                    return blob
                if rc == ERROR_FILE:
                    raise KeyUnreadable(f"libssh2 cannot read {path}: {self._error(rc).reason}")
                if rc not in (ERROR_AUTHENTICATION_FAILED, ERROR_PUBLICKEY_UNVERIFIED):
                    self._opened(rc)
            raise AuthFailed("no key was accepted")
        finally:
            if self.session is not None:
                c.libssh2_session_set_timeout(self.session, 0)
                c.libssh2_session_set_blocking(self.session, 0)

    def _opened(self, rc: int) -> None:
        """What a handshake's or a login's return code means."""
        if rc >= 0:
            return
        if rc == ERROR_TIMEOUT:
            raise TimeoutError(self._error(rc).reason)
        if rc in SOCKET_ERRORS:
            raise ConnectionResetError(self._error(rc).reason)
        raise self._error(rc)

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

    def start(self) -> None:
        """Logged in: the event loop drives it from now on (`_drive`)."""
        self.loop = asyncio.get_running_loop()
        self.sock.setblocking(False)  # libssh2 set the descriptor so already
        self._recv_callback = _RECV_FUNC(self._recv)
        self.c.libssh2_session_callback_set2(self.session, CALLBACK_RECV,
                                             ctypes.cast(self._recv_callback, ctypes.c_void_p))

    # -- commands -----------------------------------------------------------------------

    def submit(self, job: Job) -> None:
        """Run `job`; its `done` future is set when it has ended (or failed)."""
        if self.failure is not None:
            raise ConnectionGone(str(self.failure))
        if self._closed:
            raise ConnectionGone("closed")
        job.done = self._ev.create_future()
        self.jobs.append(job)
        self._schedule()

    async def run(self, job: Job, wait: float) -> bool:
        """`job` submitted and waited for, `wait` s at most: whether it ended (its `error` says
        how, if it failed). One it did not end, or whose caller is cancelled, is given up
        (`abandon`). ConnectionGone where the connection is gone already."""
        self.submit(job)
        assert job.done is not None
        try:
            await asyncio.wait_for(asyncio.shield(job.done), wait)
        except asyncio.TimeoutError:
            pass
        finally:
            ended = job.done.done()
            if not ended:
                self.abandon(job)
        return ended

    def abandon(self, job: Job) -> None:
        """The caller no longer waits: the channel is closed, its process left to the remote
        `timeout` (and `kill_abandoned`)."""
        if job.state != "done":
            job.abandoned = True
            self._schedule()

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
        if self._owns(job):
            self._owner = None
        if job.done is not None and not job.done.done():
            job.done.set_result(None)

    def _note(self, job: Job, op: str, rc: int) -> bool:
        """After `job`'s call `op`: whether it would block. A packet left half sent (OUTBOUND)
        belongs to the call that was made last, whatever it returned (a read may send a
        window adjust, or answer the server's request); until it is out, only that call is
        made again (libssh2 refuses any other packet: `send_existing`)."""
        if self._blocked() & BLOCK_OUTBOUND:
            if self._owner is None:
                self._owner = (job, op)
        elif self._owner is not None and self._owner[0] is job:
            self._owner = None
        return rc == EAGAIN

    def _owns(self, job: Job) -> bool:
        return self._owner is not None and self._owner[0] is job

    def _gone(self, rc: int) -> ConnectionGone:
        """An error no channel survives: the socket's, or one of the transport's (decryption,
        a key re-exchange, the protocol) passed on by whatever call met it."""
        return ConnectionGone(self._error(rc).reason)

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
                rc = 0 if channel else c.libssh2_session_last_errno(self.session)
                if self._note(job, "open", rc):
                    return moved
                self._opener = None
                if not channel:
                    if rc != ERROR_CHANNEL_FAILURE:
                        raise self._gone(rc)
                    self._finish(job, ChannelRefused(self._error(rc).reason))
                    return True
                job.channel = channel
                job.state = "close" if job.abandoned else "exec"
                moved = True
            if job.state == "exec" and job.abandoned and not self._owns(job):
                job.state = "close"
            if job.state == "exec":
                job.started = True
                rc = c.libssh2_channel_process_startup(job.channel, b"exec", 4, job.command,
                                                       len(job.command))
                if self._note(job, "exec", rc):
                    return moved
                job.state = "run"
                if rc < 0:
                    if rc not in (ERROR_CHANNEL_REQUEST_DENIED, ERROR_CHANNEL_FAILURE):
                        raise self._gone(rc)
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
                if self._note(job, "close", rc) and self._owns(job):
                    return moved
                if rc < 0 and rc != EAGAIN:
                    raise self._gone(rc)
                if job.abandoned or job.output.truncated or job.failed is not None:
                    # Cut off, given up or refused: nothing more is read. sshd answers a close
                    # only once the command has exited, so the channel is left to the session
                    # (freed with it) rather than waited for.
                    self._finish(job, job.failed, free=rc != EAGAIN)
                    return True
                if rc == EAGAIN:
                    return moved  # our close is out; the remote's own is awaited
                job.state = "closing"
                moved = True
            if job.state == "closing":
                # channel_close returns once it has read any one packet, of any channel: the
                # command's exit status (or signal) is in only once the remote's close is, as
                # sshd sends them before it.
                rc = c.libssh2_channel_wait_closed(job.channel)
                if self._note(job, "closed", rc):
                    return moved
                if rc < 0:
                    raise self._gone(rc)
                self._exit(job)
                self._finish(job)
                return True
            if job.state == "done":
                return moved

    def _write(self, job: Job) -> str:
        """Some of the input out: "moved", "blocked" or "done" (all out, or the command
        stopped reading)."""
        if job.sent >= len(job.input):
            return "done"
        if job.input_buffer is None:
            # Written from one copy in place (libssh2 copies what it takes into its packet).
            job.input_buffer = ctypes.create_string_buffer(job.input, len(job.input))
        rc = self.c.libssh2_channel_write_ex(job.channel, 0,
                                             ctypes.addressof(job.input_buffer) + job.sent,
                                             min(len(job.input) - job.sent, WINDOW))
        if self._note(job, "write", rc):
            return "blocked"
        if rc < 0:
            if rc not in (ERROR_CHANNEL_EOF_SENT, ERROR_CHANNEL_CLOSED):
                raise self._gone(rc)
            # The command exited before reading all its input; its output still tells why.
            job.sent = len(job.input)
            job.eof_sent = True
            return "done"
        job.sent += rc
        return "moved"

    def _eof(self, job: Job) -> str:
        """The input's end, once all of it is out: "moved", "blocked" or "done"."""
        if job.eof_sent or job.sent < len(job.input):
            return "done"
        rc = self.c.libssh2_channel_send_eof(job.channel)
        if self._note(job, "eof", rc):
            return "blocked"
        if rc < 0 and rc not in (ERROR_CHANNEL_EOF_SENT, ERROR_CHANNEL_CLOSED):
            raise self._gone(rc)
        job.eof_sent = True
        job.input_buffer = None
        return "moved"

    def _read(self, job: Job, stream: int) -> str:
        """Output of `stream` in: "moved", "blocked" or "done" (none queued, the remote's
        EOF)."""
        size = self.c.libssh2_channel_read_ex(job.channel, stream, self._buffer, READ_CHUNK)
        if self._note(job, READ_OPS[stream], size):
            return "blocked"
        if size < 0:
            raise self._gone(size)
        if size == 0:
            return "done"
        data = ctypes.string_at(self._buffer, size)
        if stream == STDERR_STREAM:
            job.output.err(data)
        else:
            job.output.out(data)
        return "moved"

    def _run_step(self, job: Job) -> bool:
        """Input out, output in, until nothing moves; then "close" once the remote's EOF is in
        (or at once when the output passed its cap or the caller gave up). The call that left
        a packet half sent, if it is this job's, is made again first."""
        moved = False
        if self._owns(job):
            assert self._owner is not None
            op = self._owner[1]
            again = (self._write(job) if op == "write" else self._eof(job) if op == "eof"
                     else self._read(job, 0 if op == READ_OPS[0] else STDERR_STREAM))
            if self._owns(job):
                return False
            moved = again == "moved"
        if job.abandoned:
            job.state = "close"
            return True
        while (wrote := self._write(job)) == "moved":
            moved = True
        if wrote == "blocked" and self._owns(job):
            return moved
        ended = self._eof(job)
        if ended == "blocked" and self._owns(job):
            return moved
        moved = moved or ended == "moved"
        for stream in (0, STDERR_STREAM):
            while (read := self._read(job, stream)) == "moved":
                moved = True
                if job.output.truncated:
                    job.state = "close"
                    return True
            if read == "blocked" and self._owns(job):
                return moved
        if self.c.libssh2_channel_eof(job.channel) == 1:
            job.state = "close"
            moved = True
        return moved

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
        if rc == 0:
            # OpenSSH's sshd sends one of exit-status and exit-signal for every command it ran
            # (`auto` takes libssh2 for OpenSSH alone: libssh2 reads a status never sent as 0).
            job.returncode = int(self.c.libssh2_channel_get_exit_status(job.channel))

    def _sweep(self) -> bool:
        """One turn for every job (only the owner of a half-sent packet while there is one);
        whether any moved."""
        moved = False
        for job in list(self.jobs):
            if self._owner is not None and self._owner[0] is not job:
                continue
            if self._step(job):
                moved = True
        return moved

    def _drive(self) -> None:
        """Every job as far as it goes, then the socket watched for what would move them next:
        reading while there are jobs, writing while a packet is half out (and then only
        writing: the half-sent packet goes first). Called by the event loop when the socket is
        ready, and after a job is submitted or given up.

        Sweeps go on while a job moved or bytes came in (`_recv`): a call that read from the
        socket may have queued another channel's packets, whose turn in this sweep had passed,
        and the socket will not turn readable for them again."""
        self._scheduled = False
        if self.session is None or self.failure is not None or self._closed:
            return
        try:
            for _ in range(MAX_SWEEPS):
                received = self.received
                if not self._sweep() and self.received == received:
                    break
            else:
                self._schedule()  # still moving: on after the loop's other work
            half_sent = bool(self.jobs) and bool(self._blocked() & BLOCK_OUTBOUND)
            self._watch(bool(self.jobs) and not half_sent, half_sent)
        except ConnectionGone as exc:
            self._fail(exc)
        except Libssh2Error as exc:
            self._fail(ConnectionGone(exc.reason))
        except Exception as exc:  # noqa: BLE001  (an event-loop callback: nothing else sees it)
            self._fail(ConnectionGone(f"{type(exc).__name__}: {exc}"))

    def _recv(self, fd: int, buffer: int, length: int, flags: int, abstract: int) -> int:
        """libssh2's recv (LIBSSH2_CALLBACK_RECV, once the connection is driven by the loop):
        the C library's, into libssh2's buffer, its bytes counted (`received`); -errno as
        libssh2's own returns (no Python exception on the way: most calls find nothing)."""
        got = int(self.lib.recv(fd, buffer, length, flags))
        if got < 0:
            code = ctypes.get_errno()
            return -errno.EAGAIN if code in (errno.EAGAIN, errno.EINTR) else -code
        self.received += got
        return got

    def _fail(self, exc: BaseException) -> None:
        self.failure = exc
        with contextlib.suppress(OSError, ValueError, RuntimeError):
            self._watch(False, False)
        for job in list(self.jobs):
            self._finish(job, ConnectionGone(str(exc)), free=False)

    def is_closed(self) -> bool:
        """Closed, failed, or (idle, so nothing reads it) its socket hung up by the server: an
        idle connection's loss is noticed here, before a command is given to it."""
        if self._closed or self.failure is not None:
            return True
        if not self.jobs and self.loop is not None and self.session is not None:
            poller = select.poll()
            poller.register(self.sock, HUNG_UP)
            if any(events & HUNG_UP for _, events in poller.poll(0)):
                self._fail(ConnectionGone("closed by the server"))
                return True
        return False

    async def close(self, wait: float) -> None:
        """Disconnect (politely, within `wait` s) and free the session; safe to call twice."""
        if self.session is None:
            return
        self._closed = True
        if self.loop is not None:
            self._watch(False, False)
        # A packet half sent blocks every other, the goodbye too: then none is said.
        half_sent = bool(self._blocked() & BLOCK_OUTBOUND)
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
                await self._ready(left)
        self.release()

    async def _ready(self, timeout: float) -> None:
        """Until the socket can be written (or read, where that is what blocks), or
        `timeout` passes: the disconnect's wait, the one the event loop makes for it."""
        future: asyncio.Future[None] = self._ev.create_future()
        fd = self.sock.fileno()

        def ready() -> None:
            if not future.done():
                future.set_result(None)

        inbound = bool(self._blocked() & BLOCK_INBOUND)
        (self._ev.add_reader if inbound else self._ev.add_writer)(fd, ready)
        try:
            await asyncio.wait_for(future, timeout)
        except asyncio.TimeoutError:
            pass
        finally:
            (self._ev.remove_reader if inbound else self._ev.remove_writer)(fd)

    def release(self) -> None:
        """Free the session and close the socket at once (no goodbye): shut down first, so
        that freeing its channels sends nothing and waits for nothing."""
        if self.session is None:
            return
        session, self.session = self.session, None
        if self.loop is not None and not self.loop.is_closed():
            self._watch(False, False)
        _shutdown(self.sock)
        for _ in range(3):
            if self.c.libssh2_session_free(session) != EAGAIN:
                break
        self.sock.close()

#: Threads that open connections (`open_connection`): as many as connection attempts may be in
#: flight fleet-wide (transport/ssh.py's DEFAULT_CONNECT_ATTEMPTS); each waits in C almost all
#: the time (the server's fork, key exchange and login), holding no Python lock.
OPENER_THREADS = 64
_OPENERS: concurrent.futures.ThreadPoolExecutor | None = None
_OPENERS_LOCK = threading.Lock()


def _openers() -> concurrent.futures.ThreadPoolExecutor:
    global _OPENERS
    with _OPENERS_LOCK:
        if _OPENERS is None:
            _OPENERS = concurrent.futures.ThreadPoolExecutor(
                OPENER_THREADS, thread_name_prefix="fleetcheck-ssh-open")
        return _OPENERS


class Opening:
    """One connection being opened on a thread, and what to stop if its caller gives up: the
    socket is shut down (libssh2's wait ends at once) and whatever the thread opened is let go
    when it returns."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self.cancelled = False

    def adopt(self, sock: socket.socket) -> None:
        """The thread's socket, connected: shut down at once if the caller gave up already."""
        with self._lock:
            self._sock = sock
            if self.cancelled:
                _shutdown(sock)

    def cancel(self) -> None:
        with self._lock:
            self.cancelled = True
            if self._sock is not None:
                _shutdown(self._sock)


def _shutdown(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


T = TypeVar("T")


async def open_connection(opening: Opening, open_it: Callable[[Opening], T],
                          let_go: Callable[[concurrent.futures.Future[T]], None]) -> T:
    """`open_it(opening)` on an opener thread; if the caller is cancelled meanwhile, the
    thread is stopped (`Opening.cancel`) and `let_go` is given its outcome once it ends
    (whatever it opened, or an exception holding something to close)."""
    future = _openers().submit(open_it, opening)
    try:
        return await asyncio.wrap_future(future)
    except asyncio.CancelledError:
        opening.cancel()
        future.add_done_callback(let_go)
        raise


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


def connect_socket(address: str, port: int, timeout: float,
                   opening: Opening) -> socket.socket:
    """A connected TCP socket to `address` (each of its addresses in turn), blocking, within
    `timeout` s; handed to `opening` as soon as it exists."""
    last: OSError | None = None
    deadline = time.monotonic() + timeout
    for kind, _, _, _, where in socket.getaddrinfo(address, port, type=socket.SOCK_STREAM):
        sock = socket.socket(kind, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            _keepalive(sock)
            opening.adopt(sock)
            sock.settimeout(max(0.001, deadline - time.monotonic()))
            sock.connect(where)
            return sock
        except TimeoutError:
            sock.close()
            raise
        except OSError as exc:
            sock.close()
            last = exc
            if opening.cancelled:
                raise
        except BaseException:
            sock.close()
            raise
    assert last is not None
    raise last
