"""Which cipher, MAC and compression an SSH connection negotiates, and who decides.

fleetcheck prefers AES-GCM, keeps chacha20-poly1305 and the ctr modes as fallbacks, leaves
ciphers and MACs to the user's ssh_config when it names them, and keeps compression off even
where the config asks for it. Read on the
server's side of asyncssh's in-process server: what the client actually sent with.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from fleetcheck.inventory_data.model import HostSpec, SshOptions
from fleetcheck.transport.interface import TransportError
from fleetcheck.transport.ssh import SshTransport
from fleetcheck.transport.ssh_settings import key_exchanges
from fleetcheck.transport.sshlib import asyncssh

pytestmark = pytest.mark.timeout(30)


async def _negotiated(
    tmp_path: Path, *, config: str | None = None, with_client: bool = False,
    client: str = "asyncssh", **server_algs: Any,
) -> dict[str, str]:
    """Run one command from SshTransport; the algorithms the server saw it send with (and,
    `with_client`, what the transport recorded: client_kex, client_cipher, client_mac)."""
    host_key = asyncssh.generate_private_key("ssh-ed25519")
    client_key = asyncssh.generate_private_key("ssh-ed25519")
    client_key.write_private_key(str(tmp_path / "id"))
    seen: dict[str, str] = {}

    async def process(proc: asyncssh.SSHServerProcess[bytes]) -> None:
        conn = proc.channel.get_connection()
        for what in ("cipher", "mac", "compression"):
            seen[what] = conn.get_extra_info(f"recv_{what}")
        await proc.stdin.read()
        proc.stdout.write(b"ok")
        proc.exit(0)

    server = await asyncssh.listen(
        "127.0.0.1", 0, server_host_keys=[host_key],
        authorized_client_keys=asyncssh.import_authorized_keys(
            client_key.export_public_key().decode()),
        process_factory=process, encoding=None, **server_algs)
    try:
        port = server.get_port()
        known = tmp_path / "known_hosts"
        known.write_text(f"[127.0.0.1]:{port} {host_key.export_public_key().decode()}")
        config_file = ""
        if config is not None:
            (tmp_path / "ssh_config").write_text(config)
            config_file = str(tmp_path / "ssh_config")
        spec = HostSpec(name="pve1", address="127.0.0.1", ssh=SshOptions(
            user="root", port=port, identity_file=str(tmp_path / "id"),
            known_hosts=str(known), config_file=config_file, client=client))
        ssh = SshTransport(spec)
        try:
            result = await ssh.run(["true"], input=b"x", timeout=10)
        finally:
            await ssh.close()
        assert result.stdout == b"ok"
        if with_client:
            seen.update({f"client_{key}": value for key, value in ssh.negotiated.items()})
    finally:
        server.close()
        await server.wait_closed()
    return seen


def test_aes_gcm_is_preferred_and_compression_is_off(tmp_path: Path) -> None:
    # The server offers asyncssh's defaults, chacha20 and zlib among them, chacha20 first.
    seen = asyncio.run(_negotiated(tmp_path, with_client=True))
    # An AEAD cipher is its own MAC: asyncssh reports the cipher's name for both.
    assert {key: seen[key] for key in ("cipher", "mac", "compression")} == {
        "cipher": "aes128-gcm@openssh.com", "mac": "aes128-gcm@openssh.com",
        "compression": "none"}
    # What the transport records is what the server saw.
    assert (seen["client_cipher"], seen["client_mac"]) == (seen["cipher"], seen["mac"])


def test_the_post_quantum_key_exchange_is_negotiated_where_both_sides_have_it(
    tmp_path: Path,
) -> None:
    hybrids = [alg for alg in key_exchanges() if alg.startswith(("mlkem", "sntrup"))]
    if not hybrids:
        pytest.skip("this asyncssh build has no post-quantum key exchange")
    # The server offers asyncssh's defaults: the hybrid comes first on both sides.
    assert asyncio.run(_negotiated(tmp_path, with_client=True))["client_kex"] == hybrids[0]
    # A server without it: the next common one, as RFC 4253 picks it.
    classic = asyncio.run(_negotiated(tmp_path, with_client=True,
                                      kex_algs=["ecdh-sha2-nistp256", "curve25519-sha256"]))
    assert classic["client_kex"] == "curve25519-sha256"
    # An ssh_config KexAlgorithms edits the list as OpenSSH does (`-` removes).
    removed = asyncio.run(_negotiated(tmp_path, with_client=True, config="Host 127.0.0.1\n"
                                      "  KexAlgorithms -mlkem*,sntrup*,curve25519*\n"))
    assert removed["client_kex"] == next(
        alg for alg in key_exchanges()
        if not alg.startswith(("mlkem", "sntrup", "curve25519")))


def test_a_host_without_gcm_falls_back_to_chacha_then_ctr(tmp_path: Path) -> None:
    chacha = asyncio.run(_negotiated(
        tmp_path, encryption_algs=["chacha20-poly1305@openssh.com", "aes256-ctr"]))
    assert chacha["cipher"] == "chacha20-poly1305@openssh.com"
    ctr = asyncio.run(_negotiated(
        tmp_path, encryption_algs=["aes256-ctr"], mac_algs=["hmac-sha2-512", "hmac-sha1"]))
    assert (ctr["cipher"], ctr["mac"]) == ("aes256-ctr", "hmac-sha2-512")


def test_the_users_ssh_config_decides_ciphers_and_macs_not_compression(tmp_path: Path) -> None:
    seen = asyncio.run(_negotiated(
        tmp_path, config="Host 127.0.0.1\n  Ciphers aes256-ctr\n  MACs hmac-sha1\n"
                         "  Compression yes\n"))
    assert seen == {"cipher": "aes256-ctr", "mac": "hmac-sha1", "compression": "none"}
    # A block for another host leaves the preference in place.
    other = asyncio.run(_negotiated(tmp_path, config="Host elsewhere\n  Ciphers aes256-ctr\n"))
    assert (other["cipher"], other["compression"]) == ("aes128-gcm@openssh.com", "none")


def test_a_broken_ssh_config_is_one_line_on_the_node(tmp_path: Path) -> None:
    with pytest.raises(TransportError) as caught:
        asyncio.run(_negotiated(tmp_path, config="Host 127.0.0.1\n  Ciphers\n"))
    assert caught.value.kind == "unreachable"
    assert str(caught.value) == (
        f"cannot reach pve1: ssh_config {tmp_path / 'ssh_config'} line 2: Ciphers needs a value")
