"""The gatekeeper as sshd's forced command: real OpenSSH, a real audit, forbidden requests.

Each host of the loopback fleet gets the gatekeeper the way an operator installs it
(`fleetcheck host-setup --key KEY.pub | python3 -` run on the host), which puts a
`restrict,command="..."` line for a second, restricted audit key beside the fleet's plain key.
The same fleet is audited with both keys and must give the same report; then forbidden requests
go through the restricted key, each one written so that it would leave a marker file if any part
of it ran.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import socket
import subprocess
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from fleetcheck.host_setup import probe_sha256, script_module
from fleetcheck.probe import probe_source
from fleetcheck.report.content import Report
from fleetcheck.transport.sshlib import asyncssh
from tests.audit.support import rows
from tests.fleet import Fleet, FleetHost, free_port
from tests.gatekeeper.support import audit_with, install_gatekeeper, keygen, log_lines

pytestmark = [pytest.mark.sshd, pytest.mark.timeout(240)]

GK = script_module()
PROBE = probe_source().encode()
REFUSED_LINE = b"fleetcheck-gatekeeper: refused: "


def test_the_audit_passes_through_the_restricted_key(fleet: Fleet, tmp_path: Path) -> None:
    key = keygen(tmp_path / "audit_ed25519")
    fleet.add_host("pve1", probe_host=True)
    fleet.add_container("pve1", 101, "healthy")
    fleet.add_container("pve1", 102, "no-compiler")
    fleet.add_container("pve1", 103, "stopped")
    fleet.add_container("pve1", 104, "no-python")
    fleet.add_host("pve2", sudo=True, containers="listed")
    fleet.add_container("pve2", 201, "healthy")
    logs = {name: install_gatekeeper(host, key.with_suffix(".pub"))
            for name, host in fleet.hosts.items()}
    env = {"env": {"FLEETCHECK_NOTE": "a b; $(touch x)"}}

    plain = audit_with(fleet, tmp_path / "plain.yaml", None, **env)
    gated = audit_with(fleet, tmp_path / "gated.yaml", key, **env)

    assert rows(gated) == rows(plain)
    # The host's own probe judges this machine (no GPU stand-in there): compare, not fix.
    assert [node.status for node in gated.nodes][1:] == ["ok", "fail", "skipped", "error", "ok"]
    def verdicts(report: Report) -> list[list[tuple[str, str, str]]]:
        # Evidence holds timings, and the free-space checks' summaries the disk's free MiB at
        # that moment (the audits run one after the other); the checks' outcomes must agree.
        return [[(c.id, c.status, re.sub(r"[\d.]+ MiB free", "N MiB free", c.summary))
                 for c in node.checks] for node in report.nodes]

    assert verdicts(gated) == verdicts(plain)
    shapes = [line.split(": ")[2] for log in logs.values() for line in log_lines(log, "allowed")]
    # The probe comes compressed (transport/packing.py); its source's hash is what is pinned.
    digest = f"{probe_sha256()} (zlib)"
    assert sorted(shapes) == sorted([
        # Discovery asks pvesh first (names, tags, templates); pct list only when it fails.
        "pvesh get", f"host probe sha256 {digest}",
        # 101, 102 and 104 on pve1 (103 is stopped: pct refuses it), pve2/201 through sudo -n.
        *[f"pct exec probe sha256 {digest}"] * 4,
    ])
    assert all(log_lines(log, "refused") == [] for log in logs.values())


def test_a_refused_probe_is_a_node_error_naming_the_gatekeeper(
    fleet: Fleet, tmp_path: Path
) -> None:
    key = keygen(tmp_path / "audit_ed25519")
    fleet.add_host("pve1", probe_host=True)
    fleet.add_container("pve1", 101, "healthy")
    install_gatekeeper(fleet.hosts["pve1"], key.with_suffix(".pub"))
    # A host set up for an older probe and not for this one (the upgrade step skipped).
    allow = fleet.hosts["pve1"].dir / "gatekeeper" / "probe.sha256"
    allow.write_text("0" * 64 + "  # fleetcheck 0.0.9 probe\n")

    report = audit_with(fleet, tmp_path / "gated.yaml", key)

    reason = (f"refused by the host's fleetcheck gatekeeper: probe sha256 {probe_sha256()[:16]}... "
              f"is not in {allow}")
    assert rows(report) == [("pve1", "error", reason), ("pve1/101", "error", reason)]


class Listener:
    """A TCP port on 127.0.0.1 that counts connections (none may arrive through the key)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.port = int(self.sock.getsockname()[1])
        self.accepted = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            with contextlib.suppress(OSError):
                conn, _ = self.sock.accept()
                self.accepted += 1
                conn.close()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)
        self.sock.close()


def forbidden_requests(marks: Path) -> list[tuple[str, bytes]]:
    """(request, stdin): each would create a file under `marks` (or run code) if it ran."""
    m = str(marks)
    wrap = "timeout -k 5 30 "
    pct = wrap + "pct exec 101 --keep-env 0 -- "
    trojan = f"open({m + '/trojan'!r}, 'w')\n".encode() + PROBE
    one_byte = PROBE[:100] + bytes([PROBE[100] ^ 0x20]) + PROBE[101:]
    write = f"python3 -c \"open('{m}/%s', 'w')\""
    return [
        (f"touch {m}/1", b""), (f"sh -c 'touch {m}/2'", b""), ("id", b""),
        (f"cat /etc/shadow > {m}/3", b""), (f"{wrap}pct list; touch {m}/4", b""),
        (f"{wrap}pct list && touch {m}/5", b""), (f"{wrap}pct list | tee {m}/6", b""),
        (f"{wrap}pct list > {m}/7", b""), (f"{wrap}pct list $(touch {m}/8)", b""),
        (f"{wrap}pct list `touch {m}/9`", b""), (f"{wrap}pct list\ntouch {m}/10", b""),
        (f"{wrap}pct list || touch {m}/11", b""), (f"pct list & touch {m}/12", b""),
        (pct + f"touch {m}/13", b""), (pct + f"sh -c 'touch {m}/14'", b""),
        (pct + write % 15, b""), (pct + f"python3 {m}/16.py", b""),
        (pct + f"perl -e 'open(F,\">{m}/17\")'", b""),
        (pct + "bash -", f"touch {m}/18\n".encode()),
        (pct + "/bin/sh -", f"touch {m}/19\n".encode()),
        (pct + "python3 -", trojan), (pct + "python3 - --deadline 25", one_byte),
        (pct + "python3 - --deadline 25", PROBE + b"\n"),
        (pct + "python3 - --deadline 25", PROBE[:-1]),
        (pct + "python3 - --deadline 25", b""),
        (wrap + "python3 - --deadline 25", trojan),
        (pct + f"env LD_PRELOAD={m}/20.so python3 - --deadline 25", PROBE),
        (pct + f"env PYTHONPATH={m} python3 - --deadline 25", PROBE),
        (pct + f"env PYTHONSTARTUP={m}/21.py python3 - --deadline 25", PROBE),
        (pct + f"env -S 'touch {m}/22' python3 -", PROBE),
        (pct + "python3 - --deadline 25 --evil", PROBE),
        (pct + "python3 - --python /bin/sh", PROBE),
        (pct + "/usr/../usr/bin/python3 -", PROBE),
        (pct + f"python3 -c \"open('{m}/23','w')\" -", PROBE),
        (wrap + "pct exec 101 --keep-env 1 -- python3 -", PROBE),
        (wrap + "pct exec 101 -- python3 -", PROBE),
        (wrap + "pct exec '101;touch' --keep-env 0 -- python3 -", PROBE),
        (wrap + "pct enter 101", b""), ("pct enter 101", b""),
        (wrap + f"pct push 101 /etc/hostname {m}/24", b""),
        (wrap + f"pct pull 101 /etc/hostname {m}/25", b""),
        (wrap + "pct set 101 --memory 1", b""), (wrap + "pct destroy 101", b""),
        (wrap + "pct console 101", b""),
        ("timeout -s KILL 30 pct list", b""), (wrap + "sudo -n sh -c id", b""),
        (wrap + "sudo pct list", b""),
        (wrap + f"qm guest exec 101 -- touch {m}/26", b""),
        (wrap + "pvesh get /access/users", b""),
        (wrap + "pvesh set /nodes/pve1/lxc/101/config --memory 1", b""),
        (wrap + f"docker run --rm -v /:/host alpine touch /host{m}/27", b""),
        (wrap + "docker exec -i --privileged c python3 -", PROBE),
        ("pkill -f sshd", b""), (f"scp -t {m}/28", b"C0644 1 x\nx\0"),
        ("rsync --server -e.LsfxC . /tmp", b""), (wrap + "x" * 9000, b""),
    ]


async def _asyncssh_requests(
    port: int, key: Path, known_hosts: Path, requests: list[tuple[str, bytes]],
    listener: Listener, unix_path: Path,
) -> tuple[list[asyncssh.SSHCompletedProcess], list[str]]:
    """Each request on its own session of one connection; then forwarding attempts."""
    results = []
    sshd_refusals = []
    async with asyncssh.connect("127.0.0.1", port, username="root", client_keys=[str(key)],
                                known_hosts=str(known_hosts), config=None) as conn:
        for command, stdin in requests:
            # asyncssh sends no EOF after empty input: stdin from /dev/null closes it.
            given: dict[str, Any] = {"input": stdin} if stdin else {"stdin": asyncssh.DEVNULL}
            results.append(await asyncio.wait_for(
                conn.run(command, check=False, encoding=None, **given), 20))
        # A shell (no command at all), the way `ssh host` logs in.
        results.append(await asyncio.wait_for(
            conn.run(input=b"touch shell-mark\n", check=False, encoding=None), 20))
        attempts: list[tuple[str, Callable[[], Awaitable[object]]]] = [
            ("direct-tcpip (-L)", lambda: conn.open_connection("127.0.0.1", listener.port)),
            ("tcpip-forward (-R)", lambda: conn.forward_remote_port(
                "127.0.0.1", 0, "127.0.0.1", listener.port)),
            ("direct-streamlocal", lambda: conn.open_unix_connection(str(unix_path))),
            ("pty-req (-t)", lambda: conn.create_process("timeout -k 5 30 pct list",
                                                         term_type="xterm")),
            ("sftp subsystem", conn.start_sftp_client),
        ]
        for name, attempt in attempts:
            try:
                await asyncio.wait_for(attempt(), 20)
            except Exception as exc:  # asyncssh's listen error is not an asyncssh.Error
                sshd_refusals.append(f"{name}: {type(exc).__name__}: {exc}")
    return results, sshd_refusals


def openssh(host: FleetHost, fleet: Fleet, key: Path, *options: str, command: list[str],
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    argv = ["ssh", "-F", "/dev/null", "-i", str(key), "-p", str(host.port),
            "-o", f"UserKnownHostsFile={fleet.known_hosts}", "-o", "StrictHostKeyChecking=yes",
            "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes", *options, "root@127.0.0.1",
            *command]
    return subprocess.run(argv, capture_output=True, timeout=30, stdin=subprocess.DEVNULL,
                          env={**os.environ, **(env or {})})


def test_forbidden_requests_are_refused_and_leave_nothing(fleet: Fleet, tmp_path: Path) -> None:
    key = keygen(tmp_path / "audit_ed25519")
    host = fleet.add_host("pve1")
    fleet.add_container("pve1", 101, "healthy")
    log = install_gatekeeper(host, key.with_suffix(".pub"))
    marks = tmp_path / "marks"
    marks.mkdir()
    (marks / "16.py").write_text(f"open({str(marks / 'ran-16')!r}, 'w')\n")
    requests = forbidden_requests(marks)
    listener = Listener()
    unix_path = tmp_path / "unix.sock"
    unix = socket.socket(socket.AF_UNIX)
    unix.bind(str(unix_path))
    unix.listen(1)
    agent = subprocess.Popen(["ssh-agent", "-D", "-a", str(tmp_path / "agent.sock")],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        results, sshd_refusals = asyncio.run(_asyncssh_requests(
            host.port, key, fleet.known_hosts, requests, listener, unix_path))
        touch = [f"touch {marks}/ssh"]
        clients = {
            "-t (PTY)": openssh(host, fleet, key, "-tt", command=touch),
            "-X (X11)": openssh(host, fleet, key, "-X", command=touch,
                                env={"DISPLAY": "127.0.0.1:0"}),
            "-A (agent)": openssh(host, fleet, key, "-A", command=touch,
                                  env={"SSH_AUTH_SOCK": str(tmp_path / "agent.sock")}),
            "-L": openssh(host, fleet, key, "-L",
                          f"127.0.0.1:{free_port()}:127.0.0.1:{listener.port}", command=touch),
            "-R": openssh(host, fleet, key, "-o", "ExitOnForwardFailure=yes", "-R",
                          f"0:127.0.0.1:{listener.port}", command=touch),
            "-D": openssh(host, fleet, key, "-D", f"127.0.0.1:{free_port()}", command=touch),
            "plain": openssh(host, fleet, key, command=touch),
        }
    finally:
        agent.terminate()
        agent.wait(5)
        listener.close()
        unix.close()

    # Every session request reached the gatekeeper and was refused: status 77, one line.
    assert len(results) == len(requests) + 1 >= 50
    for (command, _), result in zip([*requests, ("<shell>", b"")], results, strict=True):
        assert result.exit_status == GK.EXIT_REFUSED, (command, result.stderr)
        assert result.stdout == b"", command
        assert result.stderr.startswith(REFUSED_LINE) and result.stderr.count(b"\n") == 1
    # sshd itself refused what `restrict` forbids, before any command.
    assert [line.split(":")[0] for line in sshd_refusals] == [
        "direct-tcpip (-L)", "tcpip-forward (-R)", "direct-streamlocal", "pty-req (-t)",
        "sftp subsystem"]
    assert b"PTY allocation request failed" in clients["-t (PTY)"].stderr
    assert b"X11 forwarding request failed" in clients["-X (X11)"].stderr
    assert b"remote port forwarding failed" in clients["-R"].stderr
    for name, client in clients.items():
        if name == "-R":
            # ExitOnForwardFailure: the client gives up once sshd refuses the forward.
            assert client.returncode == 255, (name, client.stderr)
            assert REFUSED_LINE not in client.stderr
        elif name == "-t (PTY)":
            # `ssh -tt` asks for the command anyway, then ends with 255 for the lost PTY; the
            # gatekeeper refused the command all the same (its log line is counted below).
            assert client.returncode == 255, (name, client.stderr)
        else:
            assert client.returncode == GK.EXIT_REFUSED, (name, client.stderr)
            assert REFUSED_LINE in client.stderr
    assert listener.accepted == 0
    # Logged: one refusal per gatekeeper run, nothing allowed; nothing ran, nothing is left.
    refused = log_lines(log, "refused")
    gatekeeper_runs = len(results) + len(clients) - 1  # all but -R reached the gatekeeper
    assert len(refused) == gatekeeper_runs
    assert log_lines(log, "allowed") == []
    assert sorted(path.name for path in marks.iterdir()) == ["16.py"]
    assert not (host.dir / "shell-mark").exists()
    assert fleet.wait_no_leftovers(20) == []
    assert fleet.pgrep(str(marks)) == []
