"""Which SSH client a connection uses (`ssh.client`), and libssh2's own parts: its plan, the
server's identification line read ahead, the hand-over to asyncssh, its absence."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import ctypes
import errno
import os
import select
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from fleetcheck.transport import libssh2, ssh_libssh2
from fleetcheck.transport.interface import CappedOutput
from fleetcheck.transport.ssh import SshTransport
from tests.fleet import Fleet
from tests.transport.sshd_hosts import host_spec, run_once, unreachable_message


def run(transport: SshTransport, argv: list[str]) -> object:
    return asyncio.run(run_once(transport, argv, timeout=20))


def refusal(transport: SshTransport) -> str:
    return unreachable_message(transport)[1]


@pytest.mark.parametrize(("banner", "post_quantum", "asyncssh"), [
    # Debian 12 / Proxmox VE 8: no exchange asyncssh has and libssh2 lacks.
    ("SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u3", ("mlkem768x25519-sha256",), False),
    # mlkem768x25519 is OpenSSH's default from 9.9 (Debian 13: 10.0).
    ("SSH-2.0-OpenSSH_9.9", ("mlkem768x25519-sha256",), True),
    ("SSH-2.0-OpenSSH_10.0p2 Debian-7", ("mlkem768x25519-sha256",), True),
    # sntrup761x25519 from 8.5, where this asyncssh has it (liboqs).
    ("SSH-2.0-OpenSSH_8.4p1", ("sntrup761x25519-sha512@openssh.com",), False),
    ("SSH-2.0-OpenSSH_9.2p1", ("sntrup761x25519-sha512@openssh.com",), True),
    # Nothing post-quantum wanted: any OpenSSH is libssh2's.
    ("SSH-2.0-OpenSSH_10.0", (), False),
    # Any other server is asyncssh's (libssh2 is proven against OpenSSH's sshd alone).
    ("SSH-2.0-AsyncSSH_2.24.1", ("mlkem768x25519-sha256",), True),
    ("SSH-2.0-dropbear_2022.83", (), True),
    (None, (), True),
])
def test_a_server_other_than_openssh_or_one_offering_post_quantum_goes_to_asyncssh(
    banner: str | None, post_quantum: tuple[str, ...], asyncssh: bool
) -> None:
    assert ssh_libssh2.prefers_asyncssh(banner, post_quantum) is asyncssh


def test_the_identification_line_is_read_ahead_and_left_unread() -> None:
    ours, theirs = socket.socketpair()
    with ours, theirs, concurrent.futures.ThreadPoolExecutor(1) as pool:
        theirs.sendall(b"a line before it\r\nSSH-2.0-Open")
        reading = pool.submit(ssh_libssh2.peek_banner, ours, time.monotonic() + 30)
        time.sleep(0.05)
        assert not reading.done()  # the line is half in: still waited for
        theirs.sendall(b"SSH_9.2p1 Debian\r\nrest")
        assert reading.result(timeout=30) == "SSH-2.0-OpenSSH_9.2p1 Debian"
        ours.settimeout(5)
        assert ours.recv(1024) == b"a line before it\r\nSSH-2.0-OpenSSH_9.2p1 Debian\r\nrest"


def test_a_server_that_says_nothing_is_waited_for_until_the_deadline() -> None:
    ours, theirs = socket.socketpair()
    with ours, theirs, pytest.raises(TimeoutError):
        ssh_libssh2.peek_banner(ours, time.monotonic() + 0.2)


def test_a_server_that_hangs_up_before_its_banner_is_a_reset_to_retry() -> None:
    ours, theirs = socket.socketpair()
    with ours, theirs:
        # What sshd says past MaxStartups, before it closes: a reset, retried as one.
        theirs.sendall(b"Exceeded MaxStartups\r\n")
        theirs.shutdown(socket.SHUT_WR)
        with pytest.raises(ConnectionResetError, match="Exceeded MaxStartups"):
            ssh_libssh2.peek_banner(ours, time.monotonic() + 30)


def test_a_line_that_is_not_ssh_is_waited_past_only_until_the_deadline() -> None:
    ours, theirs = socket.socketpair()
    with ours, theirs:
        theirs.sendall(b"220 mail.example ESMTP\r\n")
        with pytest.raises(TimeoutError):
            ssh_libssh2.peek_banner(ours, time.monotonic() + 0.3)


def test_a_peek_given_up_on_ends() -> None:
    ours, theirs = socket.socketpair()
    opening = libssh2.Opening()
    with ours, theirs, concurrent.futures.ThreadPoolExecutor(1) as pool:
        theirs.sendall(b"half a li")
        reading = pool.submit(ssh_libssh2.peek_banner, ours, time.monotonic() + 60, opening)
        opening.cancel()
        with pytest.raises(ConnectionAbortedError):
            reading.result(timeout=30)


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


#: libssh2's send callback (LIBSSH2_SEND_FUNC) and its type number.
SEND_FUNC = ctypes.CFUNCTYPE(ctypes.c_ssize_t, ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t,
                             ctypes.c_int, ctypes.c_void_p)
CALLBACK_SEND = 5


@pytest.fixture
def full_send_buffer(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, int]]:
    """Once a connection is logged in, every packet's first send() meets a full socket buffer
    (EAGAIN, nothing sent), as the kernel answers on a slow link: libssh2 keeps the packet half
    sent (OUTBOUND), and only the call that left it may go on until it is out."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.send.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    libc.send.restype = ctypes.c_ssize_t
    state = {"refused": 0, "next": 1}

    def send(fd: int, buffer: int, length: int, flags: int, abstract: int) -> int:
        if state["next"]:
            state["next"] = 0
            state["refused"] += 1
            return -errno.EAGAIN
        state["next"] = 1
        sent = libc.send(fd, buffer, length, flags)
        return int(sent) if sent >= 0 else -ctypes.get_errno()

    callback = SEND_FUNC(send)
    started = libssh2.Connection.start

    def start(self: libssh2.Connection) -> None:
        started(self)
        self.c.libssh2_session_callback_set2(self.session, CALLBACK_SEND,
                                             ctypes.cast(callback, ctypes.c_void_p))

    monkeypatch.setattr(libssh2.Connection, "start", start)
    yield state


@pytest.mark.sshd
@pytest.mark.timeout(120)
def test_packets_left_half_sent_go_out_first_and_nothing_stalls(
    fleet: Fleet, full_send_buffer: dict[str, int]
) -> None:
    fleet.add_host("pve1")
    blob = os.urandom(1 << 20)

    async def main() -> tuple[list[object], object, int]:
        transport = SshTransport(host_spec(fleet, "pve1", client="libssh2"))
        try:
            # Each half-sent packet is a different call's: the exec request, input (window
            # after window), its EOF, a read's window adjust (1 MiB back), the close.
            results = list(await asyncio.gather(
                transport.run(["cat"], input=blob, timeout=60),
                transport.run(["sh", "-c", "echo out; echo err >&2; exit 3"], timeout=60),
                transport.run(["head", "-c", "3000000", "/dev/zero"], timeout=60)))
            # Given up on while running: its close goes out, the connection serves on at once
            # (were it held until the command ended, the next would run out of time).
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(transport.run(["sleep", "300"], timeout=600), 0.5)
            after = await transport.run(["echo", "next"], timeout=30)
            return results, after, transport.abandoned
        finally:
            await transport.close()

    (echoed, failed, zeros), after, abandoned = asyncio.run(main())
    assert (echoed.returncode, echoed.stdout == blob) == (0, True)  # type: ignore[attr-defined]
    assert (failed.returncode, failed.stdout, failed.stderr) == (3, b"out\n", b"err\n")  # type: ignore[attr-defined]
    assert (zeros.returncode, len(zeros.stdout)) == (0, 3000000)  # type: ignore[attr-defined]
    assert (after.returncode, after.stdout, after.timed_out, abandoned) == (  # type: ignore[attr-defined]
        0, b"next\n", False, 1)
    assert full_send_buffer["refused"] > 50


@pytest.mark.sshd
@pytest.mark.timeout(120)
def test_packets_another_call_read_off_the_socket_are_still_read(
    fleet: Fleet, monkeypatch: pytest.MonkeyPatch
) -> None:
    fleet.add_host("pve1")
    # The command's last packets (its output, EOF, exit status, close) arrive between two
    # calls of one sweep: after its stdout read found nothing, before its stderr read, which
    # takes them off the socket into libssh2's queue and returns nothing itself. The socket
    # will not turn readable for them again: the sweep must go on because bytes came in.
    read = libssh2.Connection._read
    armed = {"stderr": False, "waited": False}

    def racing_read(self: libssh2.Connection, job: libssh2.Job, stream: int) -> str:
        outcome = read(self, job, stream)
        if stream == libssh2.STDERR_STREAM and outcome == "moved":
            armed["stderr"] = True
        elif stream == 0 and outcome == "blocked" and armed["stderr"] and not armed["waited"]:
            armed["waited"] = True
            select.select([self.sock], [], [], 30)  # the last packets are arriving
            time.sleep(0.3)
        return outcome

    monkeypatch.setattr(libssh2.Connection, "_read", racing_read)
    transport = SshTransport(host_spec(fleet, "pve1", client="libssh2"))
    result = run(transport, ["sh", "-c", "echo err >&2; sleep 0.5; echo out"])
    assert armed["waited"]
    assert (result.returncode, result.stdout, result.stderr, result.timed_out) == (  # type: ignore[attr-defined]
        0, b"out\n", b"err\n", False)


@pytest.mark.sshd
@pytest.mark.timeout(120)
def test_an_exit_status_that_comes_after_the_eof_is_waited_for(fleet: Fleet) -> None:
    fleet.add_host("pve1")
    # Straight on the connection, without the remote `timeout` (which holds the output open
    # until the command exits): this command's EOF comes a second before its exit status,
    # while another channel's output keeps the connection busy. libssh2's channel_close
    # returns once it has read any packet, of any channel: the status is in only with the
    # remote's close.
    quiet = libssh2.Job(b"exec >&- 2>&-; sleep 1; exit 3", b"", CappedOutput(4096, 4096))
    chatty = libssh2.Job(b"for i in $(seq 20); do echo $i; sleep 0.1; done", b"",
                         CappedOutput(4096, 4096))

    async def main() -> None:
        transport = SshTransport(host_spec(fleet, "pve1", client="libssh2"))
        try:
            conn = await transport.connect()
            assert isinstance(conn, libssh2.Connection)
            conn.submit(quiet)
            conn.submit(chatty)
            await asyncio.wait_for(asyncio.gather(quiet.done, chatty.done), 60)  # type: ignore[arg-type]
        finally:
            await transport.close()

    asyncio.run(main())
    assert (quiet.returncode, quiet.signal, quiet.error) == (3, None, None)
    assert (chatty.returncode, len(b"".join(chatty.output.stdout).split())) == (0, 20)


def test_the_lists_offered_without_asyncssh_are_asyncssh_s_own_order() -> None:
    # Where ssh_config names no list, libssh2 offers fleetcheck's own: asyncssh's defaults in
    # asyncssh's order (so a host negotiates what it would with asyncssh), asyncssh unread.
    from fleetcheck.transport.ssh_settings import _host_key_algs, key_exchanges

    for ours, theirs in ((ssh_libssh2.KEY_EXCHANGES, key_exchanges()),
                         (ssh_libssh2.HOST_KEY_ALGORITHMS, _host_key_algs(True))):
        common = [alg for alg in theirs if alg in ours]
        assert common == [alg for alg in ours if alg in common]
        assert len(common) >= len(ours) - 1, set(ours) - set(common)


@pytest.mark.parametrize(("banner", "asked"), [
    ("SSH-2.0-OpenSSH_8.4p1", False),            # no post-quantum exchange from this server
    ("SSH-2.0-dropbear_2022.83", False),         # not OpenSSH: asyncssh's anyway
    ("SSH-2.0-OpenSSH_9.9", True),               # mlkem768x25519: asyncssh is asked
])
def test_asyncssh_is_asked_for_its_post_quantum_offer_only_where_it_matters(
        banner: str, asked: bool) -> None:
    from fleetcheck.transport.ssh_settings import key_exchanges

    offer = ssh_libssh2.default_post_quantum(banner)
    if asked:
        assert offer == tuple(alg for alg in key_exchanges()
                              if alg in ("mlkem768x25519-sha256", "sntrup761x25519-sha512",
                                         "sntrup761x25519-sha512@openssh.com"))
    else:
        assert offer == ()


def test_openssh_9_2_without_liboqs_is_libssh2_s_without_asking_asyncssh(monkeypatch) -> None:
    # sntrup761x25519 (OpenSSH from 8.5) is asyncssh's only where liboqs is: not in this ld
    # cache, so the question is answered without importing asyncssh.
    read_once = ssh_libssh2._liboqs_may_be_found  # the ld cache is read once per process
    monkeypatch.setattr(ssh_libssh2, "read_ld_cache", lambda: b"libc.so.6 libssl.so.3")
    read_once.cache_clear()
    assert ssh_libssh2.default_post_quantum("SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u3") == ()
    monkeypatch.setattr(ssh_libssh2, "read_ld_cache", lambda: b"liboqs.so.5")
    read_once.cache_clear()
    from fleetcheck.transport.ssh_settings import key_exchanges

    assert ssh_libssh2.default_post_quantum("SSH-2.0-OpenSSH_9.2p1") == tuple(
        alg for alg in key_exchanges() if alg.startswith(("mlkem768x25519", "sntrup761")))
    read_once.cache_clear()  # the real ld cache's answer for the tests after this one
