"""The asyncssh side of an SSH connection: its session's output and status, its handshake watch,
what it negotiated. Imported by ssh.py only for a connection asyncssh makes, so that a gate to
hosts libssh2 connects to never imports asyncssh (bench/results.md)."""

from __future__ import annotations

import asyncio

from fleetcheck.transport.interface import CappedOutput
from fleetcheck.transport.sshlib import asyncssh


class CappedSession(asyncssh.SSHClientSession[bytes]):
    """Collects stdout and stderr up to a cap; closes the channel when stdout overflows."""

    def __init__(self, cap: int) -> None:
        self.output = CappedOutput(cap)
        self.returncode: int | None = None
        self.signal: str | None = None
        self.chan: asyncssh.SSHClientChannel[bytes] | None = None
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def connection_made(self, chan: asyncssh.SSHClientChannel[bytes]) -> None:
        self.chan = chan

    def data_received(self, data: bytes, datatype: asyncssh.DataType) -> None:
        if datatype == asyncssh.EXTENDED_DATA_STDERR:
            self.output.err(data)
        elif not self.output.out(data) and self.chan is not None:
            self.chan.close()

    def exit_status_received(self, status: int) -> None:
        self.returncode = status

    def exit_signal_received(
        self, signal: str, core_dumped: bool, msg: str, lang: str
    ) -> None:
        self.signal = signal

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_result(None)


class HandshakeWatch(asyncssh.SSHClient):
    """Notes whether a connection got as far as TCP, and whether the server then sent a banner."""

    def __init__(self) -> None:
        self.conn: asyncssh.SSHClientConnection | None = None

    def itself(self) -> HandshakeWatch:
        """The client factory asyncssh calls: this watch is the connection's client."""
        return self

    def connection_made(self, conn: asyncssh.SSHClientConnection) -> None:
        self.conn = conn

    @property
    def banner_missing(self) -> bool:
        """TCP connected, yet no "SSH-2.0-..." line came back: something else listens there."""
        return self.conn is not None and not self.conn.get_extra_info("server_version")


def _name_list(payload: bytes, offset: int) -> tuple[list[str], int]:
    size = int.from_bytes(payload[offset:offset + 4], "big")
    names = payload[offset + 4:offset + 4 + size].decode("ascii", "replace")
    return [name for name in names.split(",") if name], offset + 4 + size


def negotiated(conn: asyncssh.SSHClientConnection, offered: tuple[str, ...]) -> dict[str, str]:
    """The key exchange, cipher and MAC one connection uses.

    asyncssh reports the cipher and MAC (`get_extra_info`) but not the key exchange; SSH picks
    the client's first algorithm the server also offers (RFC 4253 7.1), so it is read from the
    server's KEXINIT (kept by asyncssh for the exchange hash) against what was offered.
    """
    found = {"cipher": str(conn.get_extra_info("send_cipher") or ""),
             "mac": str(conn.get_extra_info("send_mac") or "")}
    kexinit = getattr(conn, "_server_kexinit", None)
    if isinstance(kexinit, bytes) and len(kexinit) > 21:
        # byte SSH_MSG_KEXINIT, 16 bytes of cookie, then the key exchange name-list.
        server, _ = _name_list(kexinit, 17)
        chosen = next((alg for alg in offered if alg in server), None)
        if chosen is not None:
            found["kex"] = chosen
    return {key: value for key, value in found.items() if value}
