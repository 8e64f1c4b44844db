"""SSH transport: one asyncssh connection per host, a bounded number of channels on it."""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import os
import random
import shlex
import socket
import time
from collections.abc import AsyncIterator
from typing import Any

from fleetcheck.gatekeeper import refusal_reason
from fleetcheck.inventory.model import HostSpec
from fleetcheck.transport.interface import (
    OUTPUT_CAP,
    STDERR_CAP,
    BudgetFor,
    CommandResult,
    NodeBudget,
    RunCommand,
    Transport,
    TransportError,
)
from fleetcheck.transport.ssh_hostkeys import HostKeyPlan, known_hosts_path
from fleetcheck.transport.sshlib import asyncssh

#: Connection attempts in flight at once to one SSH server: below sshd's MaxStartups
#: (10:30:100), which starts dropping unauthenticated connections at random beyond 10.
PER_SERVER_CONNECT_ATTEMPTS = 8
#: ... and fleet-wide. A handshake costs the client a few ms of CPU but several network round
#: trips, so across many servers more of them overlap: 8 fleet-wide made a 20-host gate come
#: up in three waves (bench/results.md).
DEFAULT_CONNECT_ATTEMPTS = 64
RUN_TAG_VAR = "FLEETCHECK_RUN"

#: Cipher preference, first match wins (the client's order decides in SSH). AES-GCM runs on the
#: CPU's AES instructions through OpenSSL and costs asyncssh one AEAD call per packet, where its
#: chacha20-poly1305 builds three cipher contexts and a Poly1305 per packet: about 45% less
#: client CPU per node (bench/results.md). chacha20 and the ctr modes stay as fallbacks so that
#: a host restricted to them still connects.
PREFERRED_CIPHERS = (
    "aes128-gcm@openssh.com", "aes256-gcm@openssh.com", "chacha20-poly1305@openssh.com",
    "aes128-ctr", "aes192-ctr", "aes256-ctr",
)
#: MACs matter only on the ctr fallback (AEAD ciphers carry their own tag); hmac-sha2-256-etm
#: first because umac exists only where asyncssh finds libnettle.
PREFERRED_MACS = (
    "hmac-sha2-256-etm@openssh.com", "umac-64-etm@openssh.com",
    "hmac-sha2-512-etm@openssh.com", "umac-128-etm@openssh.com",
    "hmac-sha2-256", "hmac-sha2-512", "hmac-sha1-etm@openssh.com", "hmac-sha1",
)


def _available(preferred: tuple[str, ...], offered: list[bytes]) -> list[str]:
    """The preferred algorithms this asyncssh build offers, in preference order."""
    names = {alg.decode("ascii") for alg in offered}
    return [alg for alg in preferred if alg in names]


def algorithm_kwargs(config: Any) -> dict[str, Any]:
    """asyncssh's cipher, MAC and compression arguments for a host's matched ssh_config.

    An explicit argument overrides the user's ssh_config in asyncssh, so the cipher and MAC
    preferences are set only where the config has no `Ciphers` or `MACs` line for the host.
    Compression is off whatever the config says: zlib costs the auditor four to six times the
    CPU of the whole channel (the probe is sent to every node), and a `Compression yes` meant
    for slow interactive links would otherwise apply to every audit.
    """
    kwargs: dict[str, Any] = {"compression_algs": None}
    if config.get("Ciphers") is None:
        kwargs["encryption_algs"] = _available(
            PREFERRED_CIPHERS, asyncssh.encryption.get_encryption_algs())
    if config.get("MACs") is None:
        kwargs["mac_algs"] = _available(PREFERRED_MACS, asyncssh.mac.get_mac_algs())
    return kwargs


def remote_command(
    argv: list[str], timeout: float, tag: str = "", *, budget: BudgetFor = NodeBudget
) -> str:
    """The one place argv becomes a remote command line: quoted, under the host's `timeout`.

    A client-side timeout does not stop a remote process (it is reparented to init and keeps
    running), so the host's coreutils `timeout` bounds it: TERM at `timeout`, KILL 5 s later.
    `tag` lands in the `timeout` process's command line (as an `env` assignment) so that the
    commands of an aborted audit can be found and stopped early (see `kill_abandoned`).
    """
    tagged = ["env", f"{RUN_TAG_VAR}={tag}", *argv] if tag else argv
    limits = budget(timeout)
    return shlex.join(["timeout", "-k", str(limits.kill_after), f"{limits.remote_timeout:g}",
                       *tagged])


class _CappedSession(asyncssh.SSHClientSession[bytes]):
    """Collects stdout and stderr up to a cap; closes the channel when stdout overflows."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.stdout: list[bytes] = []
        self.stderr: list[bytes] = []
        self.stdout_size = 0
        self.stderr_size = 0
        self.truncated = False
        self.returncode: int | None = None
        self.signal: str | None = None
        self.chan: asyncssh.SSHClientChannel[bytes] | None = None
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def connection_made(self, chan: asyncssh.SSHClientChannel[bytes]) -> None:
        self.chan = chan

    def data_received(self, data: bytes, datatype: asyncssh.DataType) -> None:
        if datatype == asyncssh.EXTENDED_DATA_STDERR:
            if self.stderr_size < STDERR_CAP:
                self.stderr.append(data[: STDERR_CAP - self.stderr_size])
                self.stderr_size += len(data)
            return
        room = self.cap - self.stdout_size
        if len(data) > room:
            self.stdout.append(data[:room])
            self.stdout_size = self.cap
            self.truncated = True
            if self.chan is not None:
                self.chan.close()
            return
        self.stdout.append(data)
        self.stdout_size += len(data)

    def exit_status_received(self, status: int) -> None:
        self.returncode = status

    def exit_signal_received(
        self, signal: str, core_dumped: bool, msg: str, lang: str
    ) -> None:
        self.signal = signal

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_result(None)


class _HandshakeWatch(asyncssh.SSHClient):
    """Notes whether a connection got as far as TCP, and whether the server then sent a banner."""

    def __init__(self) -> None:
        self.conn: asyncssh.SSHClientConnection | None = None

    def itself(self) -> _HandshakeWatch:
        """The client factory asyncssh calls: this watch is the connection's client."""
        return self

    def connection_made(self, conn: asyncssh.SSHClientConnection) -> None:
        self.conn = conn

    @property
    def banner_missing(self) -> bool:
        """TCP connected, yet no "SSH-2.0-..." line came back: something else listens there."""
        return self.conn is not None and not self.conn.get_extra_info("server_version")


def _timeout_text(watch: _HandshakeWatch, seconds: float) -> str:
    if watch.banner_missing:
        return f"no SSH banner within {seconds:g} s (not an SSH server?)"
    return f"no answer within {seconds:g} s"


class ConnectLimiter:
    """Bounds connection attempts in flight: per SSH server (the sshd whose MaxStartups counts
    them) and fleet-wide. One per audit, shared by its transports, used inside its event loop.
    """

    def __init__(self, fleet_wide: int = DEFAULT_CONNECT_ATTEMPTS,
                 per_server: int = PER_SERVER_CONNECT_ATTEMPTS) -> None:
        self.fleet_wide = max(1, fleet_wide)
        self.per_server = max(1, min(per_server, self.fleet_wide))
        self._fleet = asyncio.Semaphore(self.fleet_wide)
        self._servers: dict[tuple[object, ...], asyncio.Semaphore] = {}

    @contextlib.asynccontextmanager
    async def slot(self, server: tuple[object, ...]) -> AsyncIterator[None]:
        """Hold one attempt's place for `server` (its own bound first, then the fleet's)."""
        mine = self._servers.get(server)
        if mine is None:
            mine = self._servers[server] = asyncio.Semaphore(self.per_server)
        async with mine, self._fleet:
            yield


class SshTransport(Transport):
    """Commands on one host over one shared SSH connection, at most `max_sessions` at once."""

    def __init__(
        self,
        host: HostSpec,
        *,
        connect_limiter: ConnectLimiter | None = None,
        output_cap: int = OUTPUT_CAP,
        budget: BudgetFor = NodeBudget,
    ) -> None:
        self.host = host
        self.budget = budget
        self.options = host.ssh
        self.address = host.address or host.name
        self.output_cap = output_cap
        self._connect_limiter = connect_limiter or ConnectLimiter()
        self._channels = asyncio.Semaphore(max(1, self.options.max_sessions))
        self._lock = asyncio.Lock()
        self._conn: asyncssh.SSHClientConnection | None = None
        self._failure: TransportError | None = None
        self._closed = False
        #: Marks this transport's remote commands; see remote_command.
        self.tag = os.urandom(8).hex()
        #: Commands given up on (cancelled or timed out) before their exit status arrived.
        self.abandoned = 0
        self._hops: list[asyncssh.SSHClientConnection] = []

    def explain_failure(self, result: CommandResult) -> tuple[str, str] | None:
        # A host that restricts the audit key (`fleetcheck host-setup`) refuses with its own line.
        gatekept = refusal_reason(result.stderr.decode("utf-8", "replace"), result.returncode)
        return ("error", gatekept) if gatekept is not None else None

    @property
    def where(self) -> str:
        port = self.options.port or 22
        return f"{self.address}:{port}"

    def server_key(self) -> tuple[object, ...]:
        """The SSH server that counts this host's connection attempts (see ConnectLimiter).

        Through `proxy_jump` every attempt first logs in to the first hop: that sshd is the one
        whose MaxStartups many hosts behind one bastion would meet.
        """
        hops = self._jump_hops()
        if hops:
            return ("jump", hops[0])
        return ("direct", self.address, self.options.port or 22)

    def _jump_hops(self) -> list[str]:
        """`proxy_jump`'s hops in order (`[user@]host[:port]` each), none without it."""
        if not self.options.proxy_jump:
            return []
        return [hop.strip() for hop in self.options.proxy_jump.split(",")]

    def _connect_kwargs(self, known_hosts: Any) -> dict[str, Any]:
        options = self.options
        kwargs: dict[str, Any] = {
            "known_hosts": known_hosts,
            "connect_timeout": options.connect_timeout,
            # Dead hosts are noticed by keepalives rather than by hanging until the node timeout.
            "keepalive_interval": 15,
        }
        if options.user:
            kwargs["username"] = options.user
        if options.port:
            kwargs["port"] = options.port
        if options.identity_file:
            kwargs["client_keys"] = [os.path.expanduser(options.identity_file)]
        if options.config_file == "":
            kwargs["config"] = None
        elif options.config_file is not None:
            kwargs["config"] = [os.path.expanduser(options.config_file)]
        return kwargs

    def _with_algorithms(
        self, kwargs: dict[str, Any], host: str, port: int | None
    ) -> dict[str, Any]:
        """`kwargs` plus the cipher preference, read against the ssh_config asyncssh will use."""
        if "config" in kwargs:
            paths = kwargs["config"] or []
        else:
            # asyncssh's own default: ~/.ssh/config when it is readable.
            default = os.path.expanduser("~/.ssh/config")
            paths = [default] if os.access(default, os.R_OK) else []
        try:
            local_user = getpass.getuser()
        except (KeyError, OSError):
            local_user = ""
        config = asyncssh.config.SSHClientConfig.load(
            None, paths, False, False, False, local_user, kwargs.get("username", ()), host,
            port or ())
        return {**kwargs, **algorithm_kwargs(config)}

    async def connect(self) -> asyncssh.SSHClientConnection:
        """The host's connection, opened on first use; a failure is remembered and re-raised."""
        async with self._lock:
            if self._failure is not None:
                raise self._failure
            if self._conn is not None and not self._conn.is_closed():
                return self._conn
            if self._closed:
                raise TransportError(f"connection to {self.host.name} closed", kind="error")
            try:
                self._conn = await self._open()
            except TransportError as exc:
                self._failure = exc
                raise
            return self._conn

    async def _open(self) -> asyncssh.SSHClientConnection:
        keys = HostKeyPlan.for_host(self.options, self.address)
        try:
            kwargs = self._with_algorithms(
                self._connect_kwargs(keys.known_hosts), self.address, self.options.port)
        except (OSError, asyncssh.Error, ValueError) as exc:
            raise self._unreachable(exc, keys, _HandshakeWatch()) from None
        for attempt in (1, 2):
            watch = _HandshakeWatch()
            try:
                async with self._connect_limiter.slot(self.server_key()):
                    if self.options.proxy_jump:
                        kwargs["tunnel"] = await self._jump(keys.path)
                    conn = await asyncio.wait_for(
                        asyncssh.connect(self.address, client_factory=watch.itself, **kwargs),
                        self.options.connect_timeout + 1.0,
                    )
                break
            except (ConnectionResetError, asyncssh.ConnectionLost) as exc:
                # sshd's MaxStartups drops connections during key exchange; one retry.
                if attempt == 2:
                    raise self._unreachable(exc, keys, watch) from None
                await asyncio.sleep(0.2 + random.random() * 0.5)
            except (OSError, asyncssh.Error, asyncio.TimeoutError, ValueError) as exc:
                raise self._unreachable(exc, keys, watch) from None
        keys.record(conn.get_server_host_key())
        return conn

    async def _jump(self, known_hosts: str) -> asyncssh.SSHClientConnection:
        """Connect through `proxy_jump` hops with this host's key, config and known_hosts.

        asyncssh's own `tunnel="user@host"` would check the jump host against the default
        known_hosts and offer only the default keys, not the ones the inventory names.
        """
        assert self.options.proxy_jump
        conn: asyncssh.SSHClientConnection | None = None
        for hop in self._jump_hops():
            user, _, rest = hop.rpartition("@")
            host, _, port = rest.partition(":")
            kwargs = self._connect_kwargs(known_hosts)
            kwargs.pop("port", None)
            kwargs.pop("username", None)
            if user:
                kwargs["username"] = user
            if port:
                kwargs["port"] = int(port)
            if conn is not None:
                kwargs["tunnel"] = conn
            watch = _HandshakeWatch()
            try:
                kwargs = self._with_algorithms(kwargs, host, kwargs.get("port"))
                conn = await asyncio.wait_for(
                    asyncssh.connect(host, client_factory=watch.itself, **kwargs),
                    self.options.connect_timeout + 1.0)
                self._hops.append(conn)
            except (OSError, asyncssh.Error, asyncio.TimeoutError, ValueError) as exc:
                raise TransportError(
                    f"jump host {hop} for {self.host.name} failed: "
                    + self._hop_problem(exc, kwargs.get("username"), watch)
                ) from None
        assert conn is not None
        return conn

    def _hop_problem(
        self, exc: BaseException, user: str | None, watch: _HandshakeWatch
    ) -> str:
        """What went wrong with a jump host, as the end of a sentence naming it."""
        if isinstance(exc, asyncssh.HostKeyNotVerifiable):
            return f"its host key is not trusted by {known_hosts_path(self.options)}"
        if isinstance(exc, asyncssh.PermissionDenied):
            return f"authentication failed for {user or 'the configured user'}"
        if isinstance(exc, socket.gaierror):
            return f"cannot resolve it: {exc.strerror}"
        if isinstance(exc, ConnectionRefusedError):
            return "connection refused"
        if isinstance(exc, asyncio.TimeoutError):
            return _timeout_text(watch, self.options.connect_timeout)
        if isinstance(exc, asyncssh.Error):
            return str(exc.reason)
        return str(exc) or type(exc).__name__

    def _unreachable(
        self, exc: BaseException, keys: HostKeyPlan, watch: _HandshakeWatch
    ) -> TransportError:
        name = self.host.name
        if isinstance(exc, asyncssh.HostKeyNotVerifiable):
            text = keys.refusal(name, self.where)
        elif isinstance(exc, asyncssh.PermissionDenied):
            user = self.options.user or "the configured user"
            text = f"authentication failed for {user} on {name} ({self.where})"
        elif isinstance(exc, socket.gaierror):
            text = f"cannot resolve {self.address} for {name}: {exc.strerror}"
        elif isinstance(exc, ConnectionRefusedError):
            text = f"connection refused by {name} ({self.where})"
        elif isinstance(exc, asyncio.TimeoutError):
            text = f"connecting to {name} ({self.where}) timed out"
            if watch.banner_missing:
                text += ": " + _timeout_text(watch, self.options.connect_timeout)
        elif isinstance(exc, asyncssh.Error):
            text = f"SSH to {name} ({self.where}) failed: {exc.reason}"
        else:
            text = f"cannot reach {name} ({self.where}): {exc}"
        return TransportError(text, kind="unreachable")

    async def run(
        self, argv: list[str], *, input: bytes | None = None, timeout: float
    ) -> CommandResult:
        async with self.session() as run:
            return await run(argv, input=input, timeout=timeout)

    @contextlib.asynccontextmanager
    async def session(self) -> AsyncIterator[RunCommand]:
        """The connection (opened if need be), then one of the host's `max_sessions` slots."""
        conn = await self.connect()
        async with self._channels:

            async def run(
                argv: list[str], *, input: bytes | None = None, timeout: float
            ) -> CommandResult:
                command = remote_command(argv, timeout, self.tag, budget=self.budget)
                return await self._run_channel(conn, command, input, timeout)

            yield run

    async def _run_channel(
        self, conn: asyncssh.SSHClientConnection, command: str, input: bytes | None,
        timeout: float,
    ) -> CommandResult:
        started = time.monotonic()
        chan, session = await self._open_channel(conn, command)
        try:
            if input:
                chan.write(input)
            chan.write_eof()
        except (BrokenPipeError, OSError, asyncssh.Error):
            # The command exited before reading its input; its output still tells why.
            pass
        timed_out = False
        try:
            await asyncio.wait_for(
                asyncio.shield(session.done), self.budget(timeout).client_wait
            )
        except asyncio.TimeoutError:
            timed_out = True
        finally:
            if not session.done.done():
                # Cancelled or out of time: closing the channel does not end the remote
                # process, so count it for kill_abandoned at close().
                self.abandoned += 1
                chan.close()
        elapsed = time.monotonic() - started
        code = session.returncode
        if code == 124 or (code == 137 and elapsed >= timeout):
            timed_out = True
        if code is None and not timed_out and not session.truncated and session.signal is None:
            if conn.is_closed():
                raise TransportError(
                    f"connection to {self.host.name} lost while the command ran", kind="error"
                )
        return CommandResult(
            returncode=code,
            stdout=b"".join(session.stdout),
            stderr=b"".join(session.stderr),
            timed_out=timed_out,
            truncated=session.truncated,
            signal=session.signal,
        )

    async def _open_channel(
        self, conn: asyncssh.SSHClientConnection, command: str
    ) -> tuple[asyncssh.SSHClientChannel[bytes], _CappedSession]:
        # A session whose process just exited may hold its slot for a moment ("delay detach"),
        # so an open refused at MaxSessions is retried a few times before giving up.
        for attempt in range(4):
            try:
                chan, session = await conn.create_session(
                    lambda: _CappedSession(self.output_cap), command, encoding=None
                )
                assert isinstance(session, _CappedSession)
                return chan, session
            except asyncssh.ChannelOpenError as exc:
                if attempt == 3:
                    raise TransportError(
                        f"{self.host.name} refused a new SSH session: {exc.reason}", kind="error"
                    ) from None
                await asyncio.sleep(0.1 * (attempt + 1))
            except (OSError, asyncssh.Error) as exc:
                raise TransportError(
                    f"connection to {self.host.name} lost: {exc}", kind="error"
                ) from None
        raise AssertionError("unreachable")

    async def kill_abandoned(self, conn: asyncssh.SSHClientConnection) -> None:
        """TERM this transport's abandoned remote commands (their `timeout` passes it on)."""
        # "[N]" keeps the pattern from matching pkill's own command line.
        pattern = f"{RUN_TAG_VAR[:-1]}[{RUN_TAG_VAR[-1]}]={self.tag}"
        command = shlex.join(["pkill", "-TERM", "-f", "--", pattern])
        try:
            chan, session = await asyncio.wait_for(
                conn.create_session(lambda: _CappedSession(4096), command, encoding=None), 5)
            chan.write_eof()
            assert isinstance(session, _CappedSession)
            await asyncio.wait_for(asyncio.shield(session.done), 5)
        except (OSError, asyncssh.Error, asyncio.TimeoutError):
            pass  # best effort: the remote `timeout` still ends them
        self.abandoned = 0

    async def close(self) -> None:
        """Stop abandoned remote commands, then close the connection; safe to call twice."""
        self._closed = True
        conn, self._conn = self._conn, None
        if conn is not None and self.abandoned and not conn.is_closed():
            await self.kill_abandoned(conn)
        hops, self._hops = self._hops, []
        for each in [conn, *reversed(hops)]:
            if each is None:
                continue
            each.close()
            try:
                await asyncio.wait_for(each.wait_closed(), 5)
            except (asyncio.TimeoutError, OSError, asyncssh.Error):
                pass
