"""SSH transport: one connection per host (libssh2's or asyncssh's: ssh_libssh2.py), a bounded
number of channels on it."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import random
import shlex
import socket
import sys
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from fleetcheck.budget import CLOSE_WAIT, BudgetFor, NodeBudget, connect_wait
from fleetcheck.failures import GATEKEEPER_REFUSED, JUMP_HOST_KEY, UNREACHABLE, Refusal
from fleetcheck.inventory_data.model import HostSpec
from fleetcheck.transport import libssh2, ssh_libssh2
from fleetcheck.transport.gatekeeper_refusal import refusal_reason
from fleetcheck.transport.interface import (
    OUTPUT_CAP,
    CappedOutput,
    CommandResult,
    RunCommand,
    Transport,
    TransportError,
)
from fleetcheck.transport.ssh_hostkeys import HostKeyPlan
from fleetcheck.transport.ssh_settings import SshFiles, SshSettings

if TYPE_CHECKING:
    import asyncssh

    from fleetcheck.transport.ssh_asyncssh import CappedSession, HandshakeWatch
else:

    class _OnFirstUse:
        """asyncssh, imported when a connection first needs it (sshlib.py): a connection
        libssh2 makes never does."""

        def __getattr__(self, name: str) -> Any:
            from fleetcheck.transport.sshlib import asyncssh as module

            return getattr(module, name)

    asyncssh = _OnFirstUse()


def _asyncssh_side() -> Any:
    """ssh_asyncssh.py, imported on first use (asyncssh with it)."""
    from fleetcheck.transport import ssh_asyncssh

    return ssh_asyncssh


def _raised_by_asyncssh(exc: BaseException, *names: str) -> bool:
    """Whether `exc` is one of asyncssh's `names`: never while asyncssh is not imported, nor
    while another thread is still importing it (sshlib binds it once the import is done; only
    a connection made with a whole asyncssh raises its errors)."""
    module = getattr(sys.modules.get("fleetcheck.transport.sshlib"), "asyncssh", None)
    kinds = tuple(kind for kind in (getattr(module, name, None) for name in names)
                  if isinstance(kind, type))
    return bool(kinds) and isinstance(exc, kinds)

#: Connection attempts in flight at once to one SSH server: below sshd's MaxStartups
#: (10:30:100), which starts dropping unauthenticated connections at random beyond 10.
PER_SERVER_CONNECT_ATTEMPTS = 8
#: ... and fleet-wide. A handshake costs the client a few ms of CPU but several network round
#: trips, so across many servers more of them overlap: 8 fleet-wide made a 20-host gate come
#: up in three waves (bench/results.md).
DEFAULT_CONNECT_ATTEMPTS = 64
RUN_TAG_VAR = "FLEETCHECK_RUN"
#: Tries of a new session on a host's connection: a session whose process just exited may hold
#: its slot for a moment ("delay detach"), so one refused at MaxSessions is tried again.
SESSION_OPEN_ATTEMPTS = 4


async def _session_retry_pause(attempt: int) -> None:
    """The pause after the `attempt`th refused session (0-based): 0.1 s, 0.2 s, 0.3 s."""
    await asyncio.sleep(0.1 * (attempt + 1))

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


def _timeout_text(watch: HandshakeWatch | ssh_libssh2.Watch, seconds: float) -> str:
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
        files: SshFiles | None = None,
    ) -> None:
        self.host = host
        self.budget = budget
        self.options = host.ssh
        self.address = host.address or host.name
        self.output_cap = output_cap
        self._connect_limiter = connect_limiter or ConnectLimiter()
        #: The audit's ssh_config, known_hosts files and keys, read once for all its hosts.
        self.files = files or SshFiles()
        #: What the connection uses (the inventory over ssh_config), known once resolved.
        self.settings: SshSettings | None = None
        self._channels = asyncio.Semaphore(max(1, self.options.max_sessions))
        self._lock = asyncio.Lock()
        self._conn: asyncssh.SSHClientConnection | libssh2.Connection | None = None
        self._failure: TransportError | None = None
        self._closed = False
        #: Marks this transport's remote commands; see remote_command.
        self.tag = os.urandom(8).hex()
        #: Commands given up on (cancelled or timed out) before their exit status arrived.
        self.abandoned = 0
        self._hops: list[asyncssh.SSHClientConnection] = []
        #: What the connection negotiated (key exchange, cipher...), once it is open.
        self.negotiated: dict[str, str] = {}
        #: The client the connection uses, once it is open: "libssh2" or "asyncssh".
        self.client: str | None = None

    def explain_failure(self, result: CommandResult) -> Refusal | None:
        # A host that restricts the audit key (`fleetcheck host-setup`) refuses with its own line.
        gatekept = refusal_reason(result.stderr.decode("utf-8", "replace"), result.returncode)
        return Refusal("error", gatekept, GATEKEEPER_REFUSED) if gatekept is not None else None

    def packs_probe(self) -> bool:
        """Yes: every node's channel would otherwise carry the whole probe's source."""
        return True

    def connection_facts(self) -> dict[str, object]:
        """The effective address, port, user and known_hosts and what was negotiated."""
        if self.settings is None:
            return {}
        facts: dict[str, object] = {
            "address": self.settings.address, "port": self.settings.port,
            "user": self.settings.user, "known_hosts": self.settings.known_hosts[0]}
        if self.settings.proxy_jump:
            facts["proxy_jump"] = self.settings.proxy_jump
        if self.client:
            facts["client"] = self.client
        return {"ssh": {**facts, **self.negotiated}}

    def resolve(self) -> SshSettings:
        """The host's effective settings (ssh_config read at most once per audit)."""
        if self.settings is None:
            try:
                self.settings = self.files.settings(self.host)
            except TransportError as exc:
                # A bad ssh_config line, a known_hosts or key that cannot be read.
                raise TransportError(f"cannot reach {self.host.name}: {exc}",
                                     kind="unreachable") from None
        return self.settings

    @property
    def where(self) -> str:
        if self.settings is not None:
            return self.settings.where
        port = self.options.port or 22
        return f"{self.address}:{port}"

    def server_key(self) -> tuple[object, ...]:
        """The SSH server that counts this host's connection attempts (see ConnectLimiter).

        Through `proxy_jump` every attempt first logs in to the first hop: that sshd is the one
        whose MaxStartups many hosts behind one bastion would meet.
        """
        settings = self.resolve()
        hops = settings.jump_hops()
        if hops:
            return ("jump", hops[0])
        return ("direct", settings.address, settings.port)

    def _connect_kwargs(self, settings: SshSettings, known_hosts: Any) -> dict[str, Any]:
        """Every option asyncssh needs, explicitly: it reads no ssh_config (`config=None`)."""
        kwargs: dict[str, Any] = {
            "config": None,
            "port": settings.port,
            "username": settings.user,
            "known_hosts": known_hosts,
            "connect_timeout": settings.connect_timeout,
            # Dead hosts are noticed by keepalives rather than by hanging until the node timeout.
            "keepalive_interval": 15,
            **self._algorithm_kwargs(settings),
        }
        if settings.host_key_algs:
            kwargs["server_host_key_algs"] = list(settings.host_key_algs)
        if settings.identity_files:
            kwargs["client_keys"] = self.files.client_keys(settings.identity_files,
                                                           settings.named_identity)
        if settings.identities_only:
            # Only the named keys (or the default ones), never the agent's others.
            kwargs["agent_path"] = None
        return kwargs

    def _algorithm_kwargs(self, settings: SshSettings) -> dict[str, Any]:
        """Key exchange, cipher and MAC lists (ssh_config's where it names them) and no
        compression: zlib costs the auditor four to six times the CPU of the whole channel (the
        probe is sent to every node), whatever a `Compression yes` meant for slow links says."""
        return {"kex_algs": list(settings.kex_algs),
                "encryption_algs": list(settings.encryption_algs),
                "mac_algs": list(settings.mac_algs), "compression_algs": None}

    async def connect(self) -> asyncssh.SSHClientConnection | libssh2.Connection:
        """The host's connection, opened on first use; a failure is remembered and re-raised."""
        async with self._lock:
            if self._failure is not None:
                raise self._failure
            if self._conn is not None and not self._conn.is_closed():
                return self._conn
            if isinstance(self._conn, libssh2.Connection):
                self._conn.release()  # lost: its socket and session go before another opens
            if self._closed:
                raise TransportError(f"connection to {self.host.name} closed", kind="error")
            try:
                self._conn = await self._open()
            except TransportError as exc:
                self._failure = exc
                raise
            return self._conn

    def _key_plan(self, settings: SshSettings) -> HostKeyPlan:
        # Under a HostKeyAlias the key is known by that name alone, without a port (OpenSSH).
        port = None if settings.host_key_name != settings.address else settings.port
        return HostKeyPlan.for_host(self.files.known_hosts, settings.known_hosts,
                                    settings.host_key_name, port, settings.host_key_policy)

    async def _open(self) -> asyncssh.SSHClientConnection | libssh2.Connection:
        settings = self.resolve()
        try:
            keys = self._key_plan(settings)
            plan = (ssh_libssh2.plan_for(settings, keys, self.files,
                                         auto=self.options.client == "auto")
                    if self.options.client != "asyncssh" else None)
        except TransportError as exc:
            raise self._unreadable(settings, exc) from None
        handed: socket.socket | None = None
        if isinstance(plan, ssh_libssh2.Plan):
            opened = await self._open_libssh2(settings, keys, plan)
            if isinstance(opened, libssh2.Connection):
                return opened
            handed = opened
        elif plan is not None and self.options.client == "libssh2":
            raise self._not_libssh2(settings, plan)
        try:
            kwargs = self._connect_kwargs(settings, keys.known_hosts)
        except TransportError as exc:
            if handed is not None:
                handed.close()
            raise self._unreadable(settings, exc) from None
        return await self._open_asyncssh(settings, keys, kwargs, handed)

    def _unreadable(self, settings: SshSettings, exc: TransportError) -> TransportError:
        """A known_hosts file or a key that cannot be read."""
        return TransportError(f"cannot reach {self.host.name} ({settings.where}): {exc}",
                              kind="unreachable")

    def _not_libssh2(self, settings: SshSettings, why: object) -> TransportError:
        """`ssh.client: libssh2` for a host libssh2 cannot connect to as asked."""
        return TransportError(f"ssh.client libssh2 cannot connect to {self.host.name} "
                              f"({settings.where}): {why}", kind="unreachable")

    async def _open_libssh2(self, settings: SshSettings, keys: HostKeyPlan,
                            plan: ssh_libssh2.Plan
                            ) -> libssh2.Connection | socket.socket | None:
        """The connection through libssh2; else asyncssh's to make: on the connected socket
        where the server may offer a post-quantum exchange (ssh_libssh2.py), on a new one
        where libssh2 cannot read a key asyncssh read (None; unless `ssh.client: libssh2`
        asked for libssh2 alone)."""
        for attempt in (1, 2):
            watch = ssh_libssh2.Watch()
            try:
                async with self._connect_limiter.slot(self.server_key()):
                    conn = await asyncio.wait_for(
                        ssh_libssh2.connect(plan, settings, keys, watch),
                        connect_wait(settings.connect_timeout))
                break
            except ConnectionResetError:
                # sshd's MaxStartups drops connections before or during key exchange; one
                # retry, then asyncssh's words for it.
                if attempt == 2:
                    raise self._unreachable(
                        libssh2.Libssh2Error(libssh2.ERROR_SOCKET_DISCONNECT, "Connection lost"),
                        keys, watch) from None
                await asyncio.sleep(0.2 + random.random() * 0.5)
            except ssh_libssh2.HandOver as handover:
                return handover.sock
            except libssh2.KeyUnreadable as exc:
                if self.options.client == "libssh2":
                    raise self._not_libssh2(settings, exc) from None
                return None
            except (OSError, libssh2.Libssh2Error, libssh2.HostKeyRefused, libssh2.AuthFailed,
                    asyncio.TimeoutError, ValueError) as exc:
                raise self._unreachable(exc, keys, watch) from None
        self.client = "libssh2"
        self.negotiated = conn.methods()
        return conn

    async def _open_asyncssh(self, settings: SshSettings, keys: HostKeyPlan,
                             kwargs: dict[str, Any], sock: socket.socket | None = None
                             ) -> asyncssh.SSHClientConnection:
        """The connection through asyncssh: on `sock` where libssh2's side connected it and
        handed it over (the first attempt; a retry connects anew)."""
        for attempt in (1, 2):
            if sock is not None:
                kwargs = {**kwargs, "sock": sock}
                sock = None
            else:
                kwargs.pop("sock", None)
            watch = _asyncssh_side().HandshakeWatch()
            try:
                async with self._connect_limiter.slot(self.server_key()):
                    if settings.proxy_jump:
                        kwargs["tunnel"] = await self._jump(settings)
                    conn = await asyncio.wait_for(
                        asyncssh.connect(settings.address, client_factory=watch.itself,
                                         **kwargs),
                        connect_wait(settings.connect_timeout),
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
        self.client = "asyncssh"
        self.negotiated = _asyncssh_side().negotiated(conn, settings.kex_algs)
        return conn

    async def _jump(self, target: SshSettings) -> asyncssh.SSHClientConnection:
        """Connect through the jump hops, each resolved through ssh_config as OpenSSH's `-J`
        does, and given the inventory's key, known_hosts and policy where it names them.

        asyncssh's own `tunnel="user@host"` would check the jump host against the default
        known_hosts and offer only the default keys, not the ones the inventory names.
        """
        conn: asyncssh.SSHClientConnection | None = None
        for hop in target.jump_hops():
            user, _, rest = hop.rpartition("@")
            host, _, port = rest.partition(":")
            watch = _asyncssh_side().HandshakeWatch()
            settings = target
            try:
                settings = self.files.settings(self.host, lookup=host, user=user or None,
                                               port=int(port) if port else None)
                keys = self._key_plan(settings)
                kwargs = self._connect_kwargs(settings, keys.known_hosts)
                if conn is not None:
                    kwargs["tunnel"] = conn
                conn = await asyncio.wait_for(
                    asyncssh.connect(settings.address, client_factory=watch.itself, **kwargs),
                    connect_wait(settings.connect_timeout))
                keys.record(conn.get_server_host_key())
                self._hops.append(conn)
            except (OSError, asyncssh.Error, asyncio.TimeoutError, ValueError,
                    TransportError) as exc:
                refused = _raised_by_asyncssh(exc, "HostKeyNotVerifiable")
                raise TransportError(
                    f"jump host {hop} for {self.host.name} failed: "
                    + self._hop_problem(exc, settings, watch, hop),
                    cause=JUMP_HOST_KEY if refused else (
                        exc.cause if isinstance(exc, TransportError) and exc.cause
                        else UNREACHABLE),
                ) from None
        assert conn is not None
        return conn

    def _hop_problem(
        self, exc: BaseException, settings: SshSettings, watch: HandshakeWatch, hop: str
    ) -> str:
        """What went wrong with a jump host, as the end of a sentence naming it (and where
        ssh_config took it, when that is not what the hop says)."""
        where = "" if hop.rpartition("@")[2] in (settings.where, settings.address) else (
            f" ({settings.user}@{settings.where})")
        if isinstance(exc, TransportError):
            return str(exc)
        if _raised_by_asyncssh(exc, "HostKeyNotVerifiable"):
            return f"its host key is not trusted by {settings.known_hosts[0]}{where}"
        if _raised_by_asyncssh(exc, "PermissionDenied"):
            return f"authentication failed for {settings.user}{where}"
        if isinstance(exc, socket.gaierror):
            return f"cannot resolve {settings.address}: {exc.strerror}"
        if isinstance(exc, ConnectionRefusedError):
            return f"connection refused{where}"
        if isinstance(exc, asyncio.TimeoutError):
            return _timeout_text(watch, settings.connect_timeout) + where
        if _raised_by_asyncssh(exc, "Error"):
            return str(getattr(exc, "reason", exc)) + where
        return (str(exc) or type(exc).__name__) + where

    def _unreachable(
        self, exc: BaseException, keys: HostKeyPlan, watch: HandshakeWatch | ssh_libssh2.Watch
    ) -> TransportError:
        name = self.host.name
        settings = self.resolve()
        where = settings.where
        cause = UNREACHABLE
        if isinstance(exc, libssh2.HostKeyRefused) or \
                _raised_by_asyncssh(exc, "HostKeyNotVerifiable"):
            text = keys.refusal(name, where)
            cause = keys.refusal_cause()
        elif isinstance(exc, libssh2.AuthFailed) or _raised_by_asyncssh(exc, "PermissionDenied"):
            text = f"authentication failed for {settings.user} on {name} ({where})"
        elif isinstance(exc, socket.gaierror):
            text = f"cannot resolve {settings.address} for {name}: {exc.strerror}"
        elif isinstance(exc, ConnectionRefusedError):
            text = f"connection refused by {name} ({where})"
        elif isinstance(exc, asyncio.TimeoutError | TimeoutError):
            text = f"connecting to {name} ({where}) timed out"
            if watch.banner_missing:
                text += ": " + _timeout_text(watch, settings.connect_timeout)
        elif isinstance(exc, libssh2.Libssh2Error) or _raised_by_asyncssh(exc, "Error"):
            text = f"SSH to {name} ({settings.user}@{where}) failed: {getattr(exc, 'reason', exc)}"
        else:
            text = f"cannot reach {name} ({settings.user}@{where}): {exc}"
        return TransportError(text, kind="unreachable", cause=cause)

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
                if isinstance(conn, libssh2.Connection):
                    return await self._run_libssh2(conn, command, input, timeout)
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
        return self._result(
            conn.is_closed(), time.monotonic() - started, timeout, timed_out,
            CommandResult(returncode=session.returncode,
                          stdout=b"".join(session.output.stdout),
                          stderr=b"".join(session.output.stderr),
                          truncated=session.output.truncated,
                          signal=session.signal))

    def _lost(self) -> TransportError:
        """The connection went while a command ran: the command may run on (counted for
        kill_abandoned, which a later connection of this transport's runs at close())."""
        self.abandoned += 1
        return TransportError(f"connection to {self.host.name} lost while the command ran",
                              kind="error")

    def _result(self, closed: bool, elapsed: float, timeout: float, timed_out: bool,
                result: CommandResult) -> CommandResult:
        """A command's result, out of time where the remote `timeout` says so (124; KILL, 137,
        once the time is up); a command that left no status, signal or cut is a lost
        connection where the connection is closed."""
        code = result.returncode
        if code == 124 or (code == 137 and elapsed >= timeout):
            timed_out = True
        if (code is None and not timed_out and not result.truncated and result.signal is None
                and closed):
            raise self._lost()
        return dataclasses.replace(result, timed_out=timed_out)

    async def _run_libssh2(self, conn: libssh2.Connection, command: str, input: bytes | None,
                           timeout: float) -> CommandResult:
        """`_run_channel` on a libssh2 connection: the same bounds, retries and results."""
        started = time.monotonic()
        for attempt in range(SESSION_OPEN_ATTEMPTS):
            job = libssh2.Job(command.encode(), input or b"", CappedOutput(self.output_cap))
            try:
                ended = await conn.run(job, self.budget(timeout).client_wait)
            except libssh2.ConnectionGone as exc:
                raise TransportError(f"connection to {self.host.name} lost: {exc}",
                                     kind="error") from None
            except asyncio.CancelledError:
                self.abandoned += 1  # as on asyncssh's channel: for kill_abandoned at close()
                raise
            if not ended:
                self.abandoned += 1
            if isinstance(job.error, libssh2.ChannelRefused) and \
                    attempt < SESSION_OPEN_ATTEMPTS - 1:
                await _session_retry_pause(attempt)
                continue
            if isinstance(job.error, libssh2.ChannelRefused | libssh2.Libssh2Error):
                raise TransportError(f"{self.host.name} refused a new SSH session: "
                                     f"{job.error}", kind="error")
            if isinstance(job.error, libssh2.ConnectionGone):
                if not job.started:
                    raise TransportError(f"connection to {self.host.name} lost: {job.error}",
                                         kind="error")
                raise self._lost()
            return self._result(
                conn.is_closed(), time.monotonic() - started, timeout, not ended,
                CommandResult(returncode=job.returncode, stdout=b"".join(job.output.stdout),
                              stderr=b"".join(job.output.stderr),
                              truncated=job.output.truncated,
                              signal=job.signal))
        raise AssertionError("unreachable")

    async def _open_channel(
        self, conn: asyncssh.SSHClientConnection, command: str
    ) -> tuple[asyncssh.SSHClientChannel[bytes], CappedSession]:
        capped = _asyncssh_side().CappedSession
        for attempt in range(SESSION_OPEN_ATTEMPTS):
            try:
                chan, session = await conn.create_session(
                    lambda: capped(self.output_cap), command, encoding=None
                )
                assert isinstance(session, capped)
                return chan, session
            except asyncssh.ChannelOpenError as exc:
                if attempt == SESSION_OPEN_ATTEMPTS - 1:
                    raise TransportError(
                        f"{self.host.name} refused a new SSH session: {exc.reason}", kind="error"
                    ) from None
                await _session_retry_pause(attempt)
            except (OSError, asyncssh.Error) as exc:
                raise TransportError(
                    f"connection to {self.host.name} lost: {exc}", kind="error"
                ) from None
        raise AssertionError("unreachable")

    def _pkill(self) -> str:
        # "[N]" keeps the pattern from matching pkill's own command line.
        pattern = f"{RUN_TAG_VAR[:-1]}[{RUN_TAG_VAR[-1]}]={self.tag}"
        return shlex.join(["pkill", "-TERM", "-f", "--", pattern])

    async def kill_abandoned(
        self, conn: asyncssh.SSHClientConnection | libssh2.Connection
    ) -> None:
        """TERM this transport's abandoned remote commands (their `timeout` passes it on)."""
        command = self._pkill()
        if isinstance(conn, libssh2.Connection):
            with contextlib.suppress(libssh2.ConnectionGone):
                # Best effort: the remote `timeout` still ends them.
                await conn.run(libssh2.Job(command.encode(), b"", CappedOutput(4096, 4096)),
                               CLOSE_WAIT)
            self.abandoned = 0
            return
        capped = _asyncssh_side().CappedSession
        try:
            chan, session = await asyncio.wait_for(
                conn.create_session(lambda: capped(4096), command, encoding=None),
                CLOSE_WAIT)
            chan.write_eof()
            assert isinstance(session, capped)
            await asyncio.wait_for(asyncio.shield(session.done), CLOSE_WAIT)
        except (OSError, asyncssh.Error, asyncio.TimeoutError):
            pass  # best effort: the remote `timeout` still ends them
        self.abandoned = 0

    async def close(self) -> None:
        """Stop abandoned remote commands, then close the connection; safe to call twice."""
        self._closed = True
        conn, self._conn = self._conn, None
        if conn is not None and self.abandoned and not conn.is_closed():
            await self.kill_abandoned(conn)
        if isinstance(conn, libssh2.Connection):
            await conn.close(CLOSE_WAIT)
            conn = None
        hops, self._hops = self._hops, []
        for each in [conn, *reversed(hops)]:
            if each is None:
                continue
            each.close()
            try:
                await asyncio.wait_for(each.wait_closed(), CLOSE_WAIT)
            except (asyncio.TimeoutError, OSError, asyncssh.Error):
                pass
