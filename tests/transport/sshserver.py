"""asyncssh's in-process server for the fast SSH cases: a `handler` plays the remote side."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from fleetcheck.inventory_data.model import HostSpec, SshOptions
from fleetcheck.transport.sshlib import asyncssh

Handler = Callable[[asyncssh.SSHServerProcess[bytes]], Any]


class FakeHost:
    """An asyncssh server on 127.0.0.1:0 whose `handler` plays the remote side."""

    def __init__(self, tmp_path: Path, handler: Handler, *, refuse_sessions: bool = False):
        self.tmp_path = tmp_path
        self.handler = handler
        self.refuse_sessions = refuse_sessions
        self.commands: list[str] = []
        self.connections = 0

    async def __aenter__(self) -> HostSpec:
        host_key = asyncssh.generate_private_key("ssh-ed25519")
        client_key = asyncssh.generate_private_key("ssh-ed25519")
        client_key.write_private_key(str(self.tmp_path / "id"))
        fake = self

        class Server(asyncssh.SSHServer):
            def connection_made(self, conn: asyncssh.SSHServerConnection) -> None:
                fake.connections += 1

            def session_requested(self) -> bool:
                if fake.refuse_sessions:
                    # What OpenSSH answers past MaxSessions.
                    raise asyncssh.ChannelOpenError(asyncssh.OPEN_CONNECT_FAILED, "open failed")
                return True

        async def process(proc: asyncssh.SSHServerProcess[bytes]) -> None:
            self.commands.append(proc.command or "")
            await self.handler(proc)

        self.server = await asyncssh.listen(
            "127.0.0.1", 0, server_host_keys=[host_key], server_factory=Server,
            authorized_client_keys=asyncssh.import_authorized_keys(
                client_key.export_public_key().decode()),
            # Without a process_factory the Server's session_requested decides.
            process_factory=None if self.refuse_sessions else process, encoding=None)
        port = self.server.get_port()
        known = self.tmp_path / "known_hosts"
        known.write_text(f"[127.0.0.1]:{port} {host_key.export_public_key().decode()}")
        return HostSpec(name="pve1", address="127.0.0.1", ssh=SshOptions(
            user="root", port=port, identity_file=str(self.tmp_path / "id"),
            known_hosts=str(known), config_file=""))

    async def __aexit__(self, *exc: object) -> None:
        self.server.close()
        await self.server.wait_closed()


async def echo_stdin(proc: asyncssh.SSHServerProcess[bytes]) -> None:
    data = await proc.stdin.read()
    proc.stdout.write(data)
    proc.stderr.write(b"note\n")
    proc.exit(7)
