"""SshTransport against a real OpenSSH sshd on 127.0.0.1: commands, bounds, host keys, errors.

Every test runs with each SSH client (`ssh.client`: libssh2, asyncssh): the same results, the
same refusals in the same words. A ProxyJump is asyncssh's alone (`auto` takes it there).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import re
import socket
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from fleetcheck.inventory_data.model import HostSpec, SshOptions
from fleetcheck.transport.interface import TransportError
from fleetcheck.transport.pct import PctTransport
from fleetcheck.transport.ssh import ConnectLimiter, SshTransport
from tests.fleet import Fleet
from tests.transport import sshd_hosts
from tests.transport.sshd_hosts import run_once, unreachable_message

pytestmark = [pytest.mark.sshd, pytest.mark.timeout(60)]

#: The client the module's tests ask for (`client`, set per test).
CLIENT = ["auto"]


@pytest.fixture(autouse=True, params=["libssh2", "asyncssh"])
def client(request: pytest.FixtureRequest) -> Iterator[str]:
    """Each test once per SSH client."""
    CLIENT[0] = request.param
    yield request.param
    CLIENT[0] = "auto"


def host_spec(fleet: Fleet, name: str, **ssh: object) -> HostSpec:
    """The host with this test's client (`ssh` may name another)."""
    return sshd_hosts.host_spec(fleet, name, **{"client": CLIENT[0], **ssh})


def test_command_output_exit_code_and_binary_input(fleet: Fleet) -> None:
    fleet.add_host("pve1")
    blob = bytes(range(256)) * 4096  # 1 MiB, every byte value

    async def main() -> list[object]:
        transport = SshTransport(host_spec(fleet, "pve1"))
        try:
            return [
                await transport.run(["cat"], input=blob, timeout=20),
                await transport.run(["sh", "-c", "echo out; echo err >&2; exit 3"], timeout=20),
                # No input: stdin is closed, so `cat` ends instead of hanging.
                await transport.run(["cat"], timeout=20),
                # Exits before reading 8 MiB of input: no BrokenPipeError, the result stands.
                await transport.run(["true"], input=b"x" * (8 << 20), timeout=20),
            ]
        finally:
            await transport.close()

    echoed, failed, no_input, early_exit = asyncio.run(main())
    assert (echoed.returncode, echoed.stdout == blob, echoed.timed_out) == (0, True, False)
    assert (failed.returncode, failed.stdout, failed.stderr) == (3, b"out\n", b"err\n")
    assert (no_input.returncode, no_input.stdout) == (0, b"")
    assert (early_exit.returncode, early_exit.stdout) == (0, b"")
    assert fleet.accepted_logins("pve1") == 1


def test_arguments_reach_the_host_verbatim(fleet: Fleet) -> None:
    fleet.add_host("pve1")
    tricky = ["a b", "$(touch /tmp/pwned)", "'quoted'", "semi;colon", "*", ""]
    result = asyncio.run(run_once(SshTransport(host_spec(fleet, "pve1")),
                                  ["printf", "[%s]\\n", *tricky], timeout=20))
    assert result.stdout.decode() == "".join(f"[{arg}]\n" for arg in tricky)  # type: ignore[attr-defined]


def test_output_cap_truncates_and_marks(fleet: Fleet) -> None:
    fleet.add_host("pve1")
    transport = SshTransport(host_spec(fleet, "pve1"), output_cap=1000)
    result = asyncio.run(run_once(transport, ["head", "-c", "10000000", "/dev/zero"], timeout=20))
    assert (result.truncated, len(result.stdout)) == (True, 1000)  # type: ignore[attr-defined]


def test_timeout_kills_the_remote_process(fleet: Fleet) -> None:
    fleet.add_host("pve1")
    marker = f"sleeper-{fleet.mark}"
    argv = ["python3", "-c", "import time; time.sleep(120)", marker]
    result = asyncio.run(run_once(SshTransport(host_spec(fleet, "pve1")), argv, timeout=1))
    assert result.timed_out is True  # type: ignore[attr-defined]
    assert result.returncode == 124  # type: ignore[attr-defined]
    assert fleet.pgrep(re.escape(marker)) == []


def test_a_command_killed_by_a_signal_is_reported_with_it(fleet: Fleet) -> None:
    fleet.add_host("pve1")
    result = asyncio.run(run_once(SshTransport(host_spec(fleet, "pve1")),
                                  ["python3", "-c", "import os; print('dying', flush=True); "
                                   "os.kill(os.getpid(), 9)"], timeout=20))
    # The remote `timeout` passes its child's death on: sshd's exit-signal, no exit status.
    assert (result.returncode, result.signal, result.stdout) == (None, "KILL", b"dying\n")  # type: ignore[attr-defined]


def test_eight_channels_stream_both_ways_at_once(fleet: Fleet) -> None:
    fleet.add_host("pve1")
    # 8 x 4 MiB each way on one connection: the windows fill, the socket's buffer fills (a
    # packet left half sent), and every byte still comes back in order.
    blobs = [bytes([index]) * 1024 + os.urandom(4 << 20) for index in range(8)]

    async def main() -> list[object]:
        transport = SshTransport(host_spec(fleet, "pve1"))
        try:
            return list(await asyncio.gather(*(transport.run(["cat"], input=blob, timeout=60)
                                               for blob in blobs)))
        finally:
            await transport.close()

    results = asyncio.run(main())
    assert [(r.returncode, r.stdout == blob) for r, blob in zip(results, blobs, strict=True)] \
        == [(0, True)] * 8  # type: ignore[attr-defined]


def test_a_command_given_up_on_is_stopped_when_the_connection_closes(fleet: Fleet) -> None:
    fleet.add_host("pve1")
    marker = f"abandoned-{fleet.mark}"

    async def main() -> tuple[int, object]:
        transport = SshTransport(host_spec(fleet, "pve1"))
        try:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(transport.run(
                    ["sh", "-c", "echo started; sleep 120; :", marker], timeout=300), 1.0)
            abandoned = transport.abandoned
            # The connection still serves others while the abandoned command runs on.
            after = await transport.run(["echo", "next"], timeout=20)
        finally:
            await transport.close()
        return abandoned, after

    abandoned, after = asyncio.run(main())
    assert (abandoned, after.stdout) == (1, b"next\n")  # type: ignore[attr-defined]
    # close() TERMed it (kill_abandoned); it is gone within a few seconds, not 300.
    for _ in range(100):
        if not fleet.pgrep(re.escape(marker)):
            break
        time.sleep(0.1)
    assert fleet.pgrep(re.escape(marker)) == []


def test_a_connection_lost_mid_command_is_an_error_then_a_new_one_serves(fleet: Fleet) -> None:
    fleet.add_host("pve1")
    # The command's grandparent is the sshd process serving the connection (sshd runs it
    # under the remote `timeout`): killing it drops the connection mid-command.
    marker = f"orphan-{fleet.mark}"
    argv = ["sh", "-c", "echo started; kill -9 $(ps -o ppid= -p $PPID); sleep 30; :", marker]

    async def main() -> tuple[TransportError, object]:
        transport = SshTransport(host_spec(fleet, "pve1"))
        try:
            with pytest.raises(TransportError) as caught:
                await transport.run(argv, timeout=20)
            return caught.value, await transport.run(["echo", "again"], timeout=20)
        finally:
            await transport.close()

    lost, again = asyncio.run(main())
    assert (lost.kind, str(lost)) == ("error", "connection to pve1 lost while the command ran")
    assert again.stdout == b"again\n"  # type: ignore[attr-defined]
    assert fleet.accepted_logins("pve1") == 2
    # The orphaned command was TERMed through the second connection at close().
    for _ in range(100):
        if not fleet.pgrep(re.escape(marker)):
            break
        time.sleep(0.1)
    assert fleet.pgrep(re.escape(marker)) == []


@pytest.mark.parametrize("kind", [["rsa", "-b", "3072"], ["ecdsa"], ["rsa", "-m", "PEM"]],
                         ids=["rsa", "ecdsa", "rsa-pem"])
def test_each_key_type_and_format_logs_in(fleet: Fleet, tmp_path: Path, kind: list[str]) -> None:
    host = fleet.add_host("pve1")
    key = tmp_path / "id"
    subprocess.run(["ssh-keygen", "-q", "-t", *kind, "-N", "", "-f", str(key)], check=True)
    authorized = host.dir / "sshd" / "authorized_keys"
    authorized.write_text(authorized.read_text() + key.with_suffix(".pub").read_text())
    transport = SshTransport(host_spec(fleet, "pve1", identity_file=str(key)))
    result = asyncio.run(run_once(transport, ["echo", "in"], timeout=20))
    assert (result.returncode, result.stdout) == (0, b"in\n")  # type: ignore[attr-defined]
    assert transport.client == CLIENT[0]


def test_an_idle_connection_the_server_dropped_is_opened_again(fleet: Fleet) -> None:
    fleet.add_host("pve1")
    # The first command's grandparent is the sshd process serving the connection.
    whose = ["sh", "-c", "ps -o ppid= -p $PPID"]

    async def main() -> object:
        transport = SshTransport(host_spec(fleet, "pve1"))
        try:
            first = await transport.run(whose, timeout=20)
            os.kill(int(first.stdout.strip()), 9)
            conn = transport._conn
            assert conn is not None
            for _ in range(200):  # until the hang-up reaches this side (bounded: 10 s)
                if conn.is_closed():
                    break
                await asyncio.sleep(0.05)
            return await transport.run(["echo", "again"], timeout=20)
        finally:
            await transport.close()

    again = asyncio.run(main())
    assert (again.returncode, again.stdout) == (0, b"again\n")  # type: ignore[attr-defined]
    assert fleet.accepted_logins("pve1") == 2


def test_a_name_that_cannot_be_resolved_is_a_sentence(fleet: Fleet) -> None:
    fleet.add_host("pve1")
    spec = dataclasses.replace(host_spec(fleet, "pve1"), address="a" * 64 + ".invalid")
    kind, message = unreachable_message(SshTransport(spec))
    assert kind == "unreachable" and message.startswith("cannot reach pve1"), message


def test_thirty_containers_share_one_connection_within_max_sessions(fleet: Fleet) -> None:
    fleet.add_host("pve1")
    for vmid in range(101, 131):
        fleet.add_container("pve1", vmid, "no-compiler")

    async def main() -> list[object]:
        ssh = SshTransport(host_spec(fleet, "pve1"))
        try:
            # Each command holds its channel for a while, so more than 10 would be open at once
            # without the bound (sshd's MaxSessions 10 refuses the 11th).
            return list(await asyncio.gather(*(
                PctTransport(ssh, vmid).run(["python3", "-c", "import time; time.sleep(0.3); "
                                             f"print({vmid})"], timeout=30)
                for vmid in range(101, 131))))
        finally:
            await ssh.close()

    results = asyncio.run(main())
    assert [r.stdout for r in results] == [f"{v}\n".encode() for v in range(101, 131)]  # type: ignore[attr-defined]
    assert fleet.accepted_logins("pve1") == 1
    assert "open failed" not in fleet.hosts["pve1"].log.read_text()


def test_many_connections_at_once_stay_under_max_startups(fleet: Fleet) -> None:
    fleet.add_host("pve1")
    # 20 inventory hosts on one sshd: 20 connections at once would exceed MaxStartups 10. The
    # fleet-wide bound (64) would let them all start; the per-server bound (8) must not.
    specs = [dataclasses.replace(host_spec(fleet, "pve1"), name=f"alias{i}") for i in range(20)]

    class Counting(ConnectLimiter):
        """The audit's limiter, counting the attempts in flight to each server."""

        def __init__(self) -> None:
            super().__init__()
            self.in_flight: dict[tuple[object, ...], int] = {}
            self.peak = 0

        @contextlib.asynccontextmanager
        async def slot(self, server: tuple[object, ...]) -> AsyncIterator[None]:
            async with super().slot(server):
                self.in_flight[server] = self.in_flight.get(server, 0) + 1
                self.peak = max(self.peak, self.in_flight[server])
                try:
                    yield
                finally:
                    self.in_flight[server] -= 1

    shared = Counting()  # one for the audit, as the transport factory shares it

    async def main() -> list[object]:
        assert shared.fleet_wide > 20
        transports = [SshTransport(spec, connect_limiter=shared) for spec in specs]
        try:
            return list(await asyncio.gather(*(t.run(["echo", "up"], timeout=20)
                                               for t in transports)))
        finally:
            await asyncio.gather(*(t.close() for t in transports))

    results = asyncio.run(main())
    assert [r.stdout for r in results] == [b"up\n"] * 20  # type: ignore[attr-defined]
    assert fleet.accepted_logins("pve1") == 20
    # At most 8 attempts were in flight to the one sshd, below its MaxStartups (10): whether
    # sshd still dropped one depends on when it hears of each login (a loaded machine), and the
    # transport retries that once, so the bound is asserted where it is kept.
    assert shared.peak == shared.per_server == 8


def test_unknown_host_key_is_refused_by_default(fleet: Fleet) -> None:
    host = fleet.add_host("pve1", known="absent")
    kind, message = unreachable_message(SshTransport(host_spec(fleet, "pve1")))
    assert (kind, message) == (
        "unreachable",
        f"host key for pve1 (127.0.0.1:{host.port}) is not in {fleet.known_hosts}")
    assert fleet.known_hosts.read_text() == ""


def test_changed_host_key_is_refused_even_with_accept_new(fleet: Fleet) -> None:
    host = fleet.add_host("pve1", known="wrong")
    before = fleet.known_hosts.read_text()
    for policy in ("strict", "accept-new"):
        transport = SshTransport(host_spec(fleet, "pve1", host_key_policy=policy))
        assert unreachable_message(transport) == (
            "unreachable",
            f"host key for pve1 (127.0.0.1:{host.port}) does not match known_hosts "
            f"{fleet.known_hosts} — possible man-in-the-middle")
    assert fleet.known_hosts.read_text() == before


def test_a_revoked_key_is_refused_though_known_hosts_also_trusts_it(
    fleet: Fleet, tmp_path: Path
) -> None:
    host = fleet.add_host("pve1")
    blob = host.host_key.with_suffix(".pub").read_text().split()[1]
    known = tmp_path / "known_hosts"
    known.write_text(fleet.known_hosts.read_text() + f"@revoked * ssh-ed25519 {blob}\n")
    for policy in ("strict", "accept-new"):
        transport = SshTransport(host_spec(fleet, "pve1", known_hosts=str(known),
                                           host_key_policy=policy))
        kind, message = unreachable_message(transport)
        assert (kind, message.split(" — ")[0]) == (
            "unreachable", f"host key for pve1 (127.0.0.1:{host.port}) does not match "
                           f"known_hosts {known}")
    assert fleet.accepted_logins("pve1") == 0


def test_accept_new_trusts_an_unknown_key_and_records_it(fleet: Fleet) -> None:
    host = fleet.add_host("pve1", known="absent")
    transport = SshTransport(host_spec(fleet, "pve1", host_key_policy="accept-new"))
    result = asyncio.run(run_once(transport, ["echo", "hi"], timeout=10))
    assert result.stdout == b"hi\n"  # type: ignore[attr-defined]
    blob = host.host_key.with_suffix(".pub").read_text().split()[1]
    assert fleet.known_hosts.read_text() == f"[127.0.0.1]:{host.port} ssh-ed25519 {blob}\n"
    # From now on the key is known: strict checking accepts it.
    strict = SshTransport(host_spec(fleet, "pve1"))
    assert asyncio.run(run_once(strict, ["echo", "again"], timeout=10)).stdout == b"again\n"  # type: ignore[attr-defined]


def test_refused_connection_and_failed_auth_are_unreachable(fleet: Fleet, tmp_path: Path) -> None:
    down = fleet.add_host("down", refuse=True)
    up = fleet.add_host("pve1")
    assert unreachable_message(SshTransport(host_spec(fleet, "down"))) == (
        "unreachable", f"connection refused by down (127.0.0.1:{down.port})")
    stranger = tmp_path / "stranger"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(stranger)],
                   check=True)
    transport = SshTransport(host_spec(fleet, "pve1", identity_file=str(stranger)))
    assert unreachable_message(transport) == (
        "unreachable", f"authentication failed for root on pve1 (127.0.0.1:{up.port})")


def test_a_failed_connect_is_remembered_not_retried_per_container(fleet: Fleet) -> None:
    host = fleet.add_host("down", refuse=True)

    async def main() -> list[BaseException | object]:
        ssh = SshTransport(host_spec(fleet, "down"))
        try:
            return list(await asyncio.gather(
                *(PctTransport(ssh, vmid).run(["true"], timeout=5) for vmid in (101, 102, 103)),
                return_exceptions=True))
        finally:
            await ssh.close()

    errors = asyncio.run(main())
    assert [str(e) for e in errors] == [f"connection refused by down (127.0.0.1:{host.port})"] * 3


def test_proxy_jump_uses_the_inventory_keys_and_known_hosts(fleet: Fleet) -> None:
    jump = fleet.add_host("jump")
    fleet.add_host("pve1")
    spec = host_spec(fleet, "pve1", proxy_jump=f"root@127.0.0.1:{jump.port}", client="auto")
    transport = SshTransport(spec)
    result = asyncio.run(run_once(transport, ["echo", "via jump"], timeout=10))
    assert result.stdout == b"via jump\n"  # type: ignore[attr-defined]
    assert transport.client == "asyncssh"
    assert (fleet.accepted_logins("jump"), fleet.accepted_logins("pve1")) == (1, 1)


def test_proxy_jump_failure_names_the_hop(fleet: Fleet) -> None:
    down = fleet.add_host("down", refuse=True)
    fleet.add_host("pve1")
    spec = host_spec(fleet, "pve1", proxy_jump=f"127.0.0.1:{down.port}", client="auto")
    kind, message = unreachable_message(SshTransport(spec))
    assert (kind, message) == (
        "unreachable", f"jump host 127.0.0.1:{down.port} for pve1 failed: connection refused")


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts TCP connections (the kernel's backlog) and never says a word."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        yield int(listener.getsockname()[1])


def test_a_listener_that_is_not_an_ssh_server_is_named_as_such(
    fleet: Fleet, silent_port: int
) -> None:
    fleet.add_host("pve1")
    spec = host_spec(fleet, "pve1", port=silent_port, connect_timeout=1)
    assert unreachable_message(SshTransport(spec)) == (
        "unreachable", f"connecting to pve1 (127.0.0.1:{silent_port}) timed out: "
                       "no SSH banner within 1 s (not an SSH server?)")


def test_a_jump_host_that_does_not_answer_is_a_sentence_naming_it(
    fleet: Fleet, silent_port: int
) -> None:
    fleet.add_host("pve1")
    spec = host_spec(fleet, "pve1", proxy_jump=f"127.0.0.1:{silent_port}", connect_timeout=1,
                     client="auto")
    assert unreachable_message(SshTransport(spec)) == (
        "unreachable", f"jump host 127.0.0.1:{silent_port} for pve1 failed: "
                       "no SSH banner within 1 s (not an SSH server?)")


def test_ssh_config_connect_timeout_and_port_are_the_ones_used(
    fleet: Fleet, silent_port: int, tmp_path: Path
) -> None:
    fleet.add_host("pve1")
    config = tmp_path / "ssh_config"
    config.write_text(f"Host pve1\n    HostName 127.0.0.1\n    Port {silent_port}\n"
                      "    ConnectTimeout 1\n")
    # Nothing about the port or the timeout in the inventory: the ssh_config's are used.
    spec = HostSpec(name="pve1", address="pve1", ssh=SshOptions(
        user="root", identity_file=str(fleet.client_key), known_hosts=str(fleet.known_hosts),
        config_file=str(config), client=CLIENT[0]))
    assert unreachable_message(SshTransport(spec)) == (
        "unreachable", f"connecting to pve1 (127.0.0.1:{silent_port}) timed out: "
                       "no SSH banner within 1 s (not an SSH server?)")


def test_ssh_config_host_key_alias_names_the_key_in_known_hosts(
    fleet: Fleet, tmp_path: Path
) -> None:
    host = fleet.add_host("pve1")
    blob = host.host_key.with_suffix(".pub").read_text().split()[1]
    known = tmp_path / "known_hosts"
    known.write_text(f"pve1-key ssh-ed25519 {blob}\n")
    config = tmp_path / "ssh_config"
    config.write_text(f"Host pve1\n    HostName 127.0.0.1\n    Port {host.port}\n"
                      f"    HostKeyAlias pve1-key\n    UserKnownHostsFile {known}\n")
    spec = HostSpec(name="pve1", address="pve1", ssh=SshOptions(
        user="root", identity_file=str(fleet.client_key), config_file=str(config),
        client=CLIENT[0]))
    result = asyncio.run(run_once(SshTransport(spec), ["echo", "aliased"], timeout=10))
    assert result.stdout == b"aliased\n"  # type: ignore[attr-defined]
    # Without the alias the same file has no key for 127.0.0.1: refused, naming the file.
    config.write_text(config.read_text().replace("    HostKeyAlias pve1-key\n", ""))
    assert unreachable_message(SshTransport(spec)) == (
        "unreachable", f"host key for pve1 (127.0.0.1:{host.port}) is not in {known}")
