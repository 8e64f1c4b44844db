"""Which SSH client a connection uses (`ssh.client`), and libssh2's own parts: its plan, the
server's identification line read ahead, the hand-over to asyncssh, its absence."""

from __future__ import annotations

import asyncio
import dataclasses
import socket
import subprocess
from pathlib import Path

import pytest

from fleetcheck.inventory_data.model import HostSpec, SshOptions
from fleetcheck.transport import libssh2, ssh_libssh2
from fleetcheck.transport.interface import TransportError
from fleetcheck.transport.ssh import SshTransport
from tests.fleet import Fleet


def host_spec(fleet: Fleet, name: str, **ssh: object) -> HostSpec:
    options = SshOptions(user="root", port=fleet.hosts[name].port,
                         identity_file=str(fleet.client_key),
                         known_hosts=str(fleet.known_hosts), config_file="")
    return HostSpec(name=name, address="127.0.0.1",
                    ssh=dataclasses.replace(options, **ssh))  # type: ignore[arg-type]


def run(transport: SshTransport, argv: list[str]) -> object:
    async def main() -> object:
        try:
            return await transport.run(argv, timeout=20)
        finally:
            await transport.close()

    return asyncio.run(main())


def refusal(transport: SshTransport) -> str:
    with pytest.raises(TransportError) as caught:
        run(transport, ["true"])
    return str(caught.value)


@pytest.mark.parametrize(("banner", "post_quantum", "asyncssh"), [
    # Debian 12 / Proxmox VE 8: no exchange asyncssh has and libssh2 lacks.
    ("SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u3", ("mlkem768x25519-sha256",), False),
    # mlkem768x25519 is OpenSSH's default from 9.9 (Debian 13: 10.0).
    ("SSH-2.0-OpenSSH_9.9", ("mlkem768x25519-sha256",), True),
    ("SSH-2.0-OpenSSH_10.0p2 Debian-7", ("mlkem768x25519-sha256",), True),
    # sntrup761x25519 from 8.5, where this asyncssh has it (liboqs).
    ("SSH-2.0-OpenSSH_8.4p1", ("sntrup761x25519-sha512@openssh.com",), False),
    ("SSH-2.0-OpenSSH_9.2p1", ("sntrup761x25519-sha512@openssh.com",), True),
    # Another server's offers are unknown; nothing post-quantum wanted: libssh2 everywhere.
    ("SSH-2.0-AsyncSSH_2.24.1", ("mlkem768x25519-sha256",), True),
    (None, ("mlkem768x25519-sha256",), True),
    ("SSH-2.0-OpenSSH_10.0", (), False),
])
def test_a_server_that_may_offer_a_post_quantum_exchange_goes_to_asyncssh(
    banner: str | None, post_quantum: tuple[str, ...], asyncssh: bool
) -> None:
    assert ssh_libssh2.prefers_asyncssh(banner, post_quantum) is asyncssh


def test_the_identification_line_is_read_ahead_and_left_unread() -> None:
    async def main() -> tuple[str | None, bytes]:
        ours, theirs = socket.socketpair()
        with ours, theirs:
            ours.setblocking(False)
            theirs.sendall(b"a line before it\r\nSSH-2.0-Open")
            reading = asyncio.ensure_future(ssh_libssh2.peek_banner(ours))
            await asyncio.sleep(0.05)  # the line is half in: still waited for
            assert not reading.done()
            theirs.sendall(b"SSH_9.2p1 Debian\r\nrest")
            banner = await asyncio.wait_for(reading, 10)
            return banner, ours.recv(1024)

    banner, unread = asyncio.run(main())
    assert banner == "SSH-2.0-OpenSSH_9.2p1 Debian"
    assert unread == b"a line before it\r\nSSH-2.0-OpenSSH_9.2p1 Debian\r\nrest"




@pytest.mark.sshd
@pytest.mark.timeout(60)
def test_auto_takes_libssh2_for_this_openssh_and_says_so(fleet: Fleet) -> None:
    fleet.add_host("pve1")
    transport = SshTransport(host_spec(fleet, "pve1"))
    assert run(transport, ["echo", "hi"]).stdout == b"hi\n"  # type: ignore[attr-defined]
    assert transport.client == "libssh2"
    facts = transport.connection_facts()["ssh"]
    assert isinstance(facts, dict)
    assert (facts["client"], facts["cipher"], facts["mac"]) == (
        "libssh2", "aes128-gcm@openssh.com", "aes128-gcm@openssh.com")
    asked = SshTransport(host_spec(fleet, "pve1", client="asyncssh"))
    assert run(asked, ["echo", "hi"]).stdout == b"hi\n"  # type: ignore[attr-defined]
    assert asked.client == "asyncssh"


@pytest.mark.sshd
@pytest.mark.timeout(60)
def test_what_libssh2_cannot_do_is_asyncssh_s_or_an_error_naming_it(
    fleet: Fleet, tmp_path: Path
) -> None:
    host = fleet.add_host("pve1")
    jump = fleet.add_host("jump")
    where = f"127.0.0.1:{host.port}"
    # A ProxyJump: asyncssh's under `auto`; `ssh.client: libssh2` says why not.
    hop = f"root@127.0.0.1:{jump.port}"
    via = SshTransport(host_spec(fleet, "pve1", proxy_jump=hop))
    assert run(via, ["echo", "hopped"]).stdout == b"hopped\n"  # type: ignore[attr-defined]
    assert via.client == "asyncssh"
    assert refusal(SshTransport(host_spec(fleet, "pve1", proxy_jump=hop, client="libssh2"))) \
        == f"ssh.client libssh2 cannot connect to pve1 ({where}): a ProxyJump"
    # A certificate authority in known_hosts (checked by asyncssh's plan alone).
    ca = tmp_path / "ca"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(ca)], check=True)
    known = tmp_path / "known_hosts"
    known.write_text(fleet.known_hosts.read_text()
                     + f"@cert-authority * {ca.with_suffix('.pub').read_text()}")
    trusting = SshTransport(host_spec(fleet, "pve1", known_hosts=str(known)))
    assert run(trusting, ["true"]).returncode == 0  # type: ignore[attr-defined]
    assert trusting.client == "asyncssh"
    assert refusal(SshTransport(host_spec(fleet, "pve1", known_hosts=str(known),
                                          client="libssh2"))) == (
        f"ssh.client libssh2 cannot connect to pve1 ({where}): known_hosts trusts a "
        "certificate authority for it")


@pytest.mark.sshd
@pytest.mark.timeout(60)
def test_without_libssh2_every_host_is_asyncssh_s(
    fleet: Fleet, monkeypatch: pytest.MonkeyPatch
) -> None:
    host = fleet.add_host("pve1")
    monkeypatch.setattr(libssh2, "_LIBRARY", None)
    monkeypatch.setattr(libssh2, "_LIBRARY_PROBLEM", "no libssh2 (the ssh2-python package "
                        "carries one)")
    transport = SshTransport(host_spec(fleet, "pve1"))
    assert run(transport, ["echo", "hi"]).stdout == b"hi\n"  # type: ignore[attr-defined]
    assert transport.client == "asyncssh"
    assert refusal(SshTransport(host_spec(fleet, "pve1", client="libssh2"))) == (
        f"ssh.client libssh2 cannot connect to pve1 (127.0.0.1:{host.port}): no libssh2 (the "
        "ssh2-python package carries one)")


def test_a_library_path_that_does_not_load_is_a_reason_not_a_crash(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(libssh2, "_LIBRARY", None)
    monkeypatch.setattr(libssh2, "_LIBRARY_PROBLEM", None)
    monkeypatch.setenv(libssh2.LIBRARY_VAR, str(tmp_path / "libssh2.so.1"))
    assert libssh2.library() is None
    problem = libssh2.problem()
    assert problem is not None and problem.startswith("libssh2 cannot be used: ")
