"""The gatekeeper's grammar, probe pinning and logging, in-process (no sshd): fast cases.

Accepted requests are built by fleetcheck's own code (remote_command, pct_exec_argv,
probe_argv), so a change in what the audit sends that the grammar does not follow fails here.
"""

from __future__ import annotations

import hashlib
import io
import os
import shlex
import zlib
from pathlib import Path
from typing import Any

import pytest

from fleetcheck.host_setup import probe_sha256, script_module
from fleetcheck.inventory_data.model import HostSpec
from fleetcheck.probe import probe_source
from fleetcheck.transport.gatekeeper_refusal import shipped_script
from fleetcheck.transport.packing import ZLIB_BOOTSTRAP, zlib_packed
from fleetcheck.transport.pct import pct_exec_argv
from tests.gatekeeper.audit_requests import ACCEPTED, packed, probe, wrapped

GK = script_module()
PROBE = probe_source().encode()

W = "timeout -k 5 30 "
PCT = W + "pct exec 101 --keep-env 0 -- "
#: Requests refused by the grammar alone (the probe's hash is checked only after it).
REFUSED = [
    "", "   ", "sh", "bash -i", "id", "cat /etc/shadow", "pct list",
    W + "pct list; id", W + "pct list && id", W + "pct list | tee x", W + "pct list > x",
    W + "pct list $(id)", W + "pct list `id`", W + "pct list\nid", W + "pct list\x1b",
    W + "'pct list'", W + "pct enter 101", W + "pct push 101 /etc/passwd /root/p",
    W + "pct pull 101 /etc/shadow s", W + "pct set 101 --memory 1", W + "pct destroy 101",
    W + "pct console 101", W + "pct start 101", PCT + "id", PCT + "sh -c id",
    PCT + "python3 -c 'import os'", PCT + "python3 /root/x.py", PCT + "perl -e 1",
    # -c runs the one bootstrap, whole, and nothing else; never both forms at once.
    PCT + "python3 -c " + shlex.quote(ZLIB_BOOTSTRAP + ";import os"),
    PCT + "python3 -c " + shlex.quote(ZLIB_BOOTSTRAP[:-1]),
    PCT + "python3 -c " + shlex.quote(ZLIB_BOOTSTRAP) + " -",
    PCT + "python3 - -c " + shlex.quote(ZLIB_BOOTSTRAP),
    PCT + "env PYTHONSTARTUP=/x python3 -c " + shlex.quote(ZLIB_BOOTSTRAP),
    PCT + "bash -", PCT + "/bin/sh -", PCT + "node -", PCT + "python3x -",
    PCT + "/usr/../usr/bin/python3 -", PCT + "python3 - --evil",
    PCT + "python3 - --python /bin/sh/../python3", PCT + "env LD_PRELOAD=/x.so python3 -",
    PCT + "env PYTHONSTARTUP=/x python3 -", PCT + "env PYTHONPATH=/x python3 -",
    PCT + "/tmp/x/python3 -", PCT + "/dev/shm/python3 -", PCT + "python3 - --python /tmp/python3",
    PCT + "env PATH=/usr/bin:/var/tmp/x python3 -", W + "pct list\x85",
    PCT + "env -S 'python3 -' python3 -", PCT + "/bin/sh -c 'exec \"$0\" \"$@\"' python3 -",
    W + "pct exec 101 --keep-env 1 -- python3 -", W + "pct exec 101 -- python3 -",
    W + "pct exec 10 --keep-env 0 -- python3 -", W + "pct exec '101;id' --keep-env 0 -- python3 -",
    "timeout -s KILL 30 pct list", "timeout -k 5 30 env FLEETCHECK_RUN=x;id pct list",
    W + "sudo pct list", W + "sudo -n -u nobody pct list", W + "sudo -n sh -c id",
    W + "qm guest exec 101 -- sh -c id", W + "qm terminal 101", W + "qm guest passwd 101 root",
    W + "pvesh get /access/users", W + "pvesh set /nodes/pve1/lxc/101/config",
    W + "pvesh create /nodes/pve1/lxc", W + "pvesh get /nodes/pve1/lxc",
    W + "docker run --privileged -v /:/h alpine", W + "docker exec -i --privileged c python3 -",
    W + "docker exec -it c python3 -", W + "docker exec -i c sh", W + "docker ps",
    W + "docker inspect c", W + "docker inspect --format '{{json .Config.Env}}' c",
    W + "podman inspect --format {{.State.Status}} c d", W + "pct status 10",
    W + "pct status 101 --verbose",
    "pkill -f sshd", "pkill -KILL -f -- FLEETCHECK_RU[N]=abc", "scp -t /tmp",
    "rsync --server -e.LsfxC . /tmp", "internal-sftp", "sftp", W + "x" * 9000,
]


@pytest.mark.parametrize(("request_line", "runs_probe"), ACCEPTED)
def test_audit_requests_are_accepted(request_line: str, runs_probe: bool) -> None:
    words, _shape, probe_flag = GK.parse_request(request_line)
    assert words == shlex.split(request_line)
    assert probe_flag is runs_probe


@pytest.mark.parametrize("request_line", REFUSED)
def test_other_requests_are_refused(request_line: str) -> None:
    with pytest.raises(GK.Refused):
        GK.parse_request(request_line)


def test_grammar_tables_are_one_place() -> None:
    # Every shape name is unique and each shape ends in a word or marker the matcher knows.
    assert set(GK.SHAPES) == {*GK.INNER_SHAPES, "cleanup"}
    for name, shape in GK.SHAPES.items():
        assert shape[0] in ("timeout", "pkill"), name


class Exec:
    """Stands in for os.execvp: records the argv and what its stdin holds."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[str], bytes]] = []

    def __call__(self, file: str, argv: list[str]) -> None:
        with os.fdopen(os.dup(0), "rb") as stdin:
            self.calls.append((file, argv, stdin.read()))


@pytest.fixture
def allow(tmp_path: Path) -> Path:
    path = tmp_path / "probe.sha256"
    path.write_text(f"# pinned\n{probe_sha256()}  # fleetcheck\n")
    return path


def run_gate(request_line: str, stdin: bytes, allow: Path, log: Path) -> tuple[int, Exec]:
    execvp = Exec()
    saved = os.dup(0)
    try:
        code = GK.gate(["--allow", str(allow), "--log", str(log)],
                       {"SSH_ORIGINAL_COMMAND": request_line, "SSH_CLIENT": "127.0.0.9 5 22"},
                       io.BytesIO(stdin), GK.Log(str(log), "127.0.0.9 5 22"), execvp=execvp)
    finally:
        os.dup2(saved, 0)
        os.close(saved)
    return code, execvp


def test_pinned_probe_runs_with_its_exact_bytes(allow: Path, tmp_path: Path) -> None:
    log = tmp_path / "gk.log"
    line = wrapped(pct_exec_argv(101, probe()))
    code, execvp = run_gate(line, PROBE, allow, log)
    assert code == 0
    assert execvp.calls == [("timeout", shlex.split(line), PROBE)]
    text = log.read_text()
    assert f"allowed from 127.0.0.9: pct exec probe sha256 {probe_sha256()}" in text


def flipped(data: bytes, at: int) -> bytes:
    return data[:at] + bytes([data[at] ^ 0x01]) + data[at + 1:]


@pytest.mark.parametrize("changed", [
    flipped(PROBE, 0), flipped(PROBE, len(PROBE) // 2), flipped(PROBE, len(PROBE) - 1),
    PROBE + b"\n", PROBE[:-1], b"", b"import os; os.system('id')\n",
], ids=["first-byte", "middle-byte", "last-byte", "appended", "truncated", "empty", "trojan"])
def test_any_other_probe_is_refused(changed: bytes, allow: Path, tmp_path: Path) -> None:
    log = tmp_path / "gk.log"
    code, execvp = run_gate(wrapped(pct_exec_argv(101, probe())), changed, allow, log)
    assert (code, execvp.calls) == (GK.EXIT_REFUSED, [])
    digest = hashlib.sha256(changed).hexdigest()
    refused = f"refused from 127.0.0.9: probe sha256 {digest[:16]}... is not in {allow}"
    assert refused in log.read_text()


def test_the_bootstrap_is_the_one_the_audit_sends() -> None:
    # The installed script and the shipped file accept exactly fleetcheck's bootstrap word.
    assert GK.PROBE_BOOTSTRAP == shipped_script().PROBE_BOOTSTRAP == ZLIB_BOOTSTRAP


def test_a_compressed_pinned_probe_runs_with_its_exact_bytes(allow: Path, tmp_path: Path) -> None:
    # The source's hash is the one pinned (the allow-list does not change); the command gets
    # the compressed bytes the bootstrap inflates, exactly those that were checked.
    log = tmp_path / "gk.log"
    line = wrapped(pct_exec_argv(101, packed(probe())))
    data = zlib_packed(PROBE)
    code, execvp = run_gate(line, data, allow, log)
    assert code == 0
    assert execvp.calls == [("timeout", shlex.split(line), data)]
    assert f"allowed from 127.0.0.9: pct exec probe sha256 {probe_sha256()} (zlib)" in \
        log.read_text()


@pytest.mark.parametrize(("stdin", "refusal"), [
    (zlib.compress(PROBE + b"\n"), "probe sha256 "),
    (zlib.compress(b"import os; os.system('id')\n"), "probe sha256 "),
    (PROBE, "probe on stdin is not zlib data"),
    (b"", "probe on stdin is not one whole zlib stream"),
    (zlib.compress(PROBE)[:-4], "probe on stdin is not one whole zlib stream"),
    (zlib.compress(PROBE) + zlib.compress(b"import os"), "not one whole zlib stream"),
    # Within the bound on the wire, far beyond it inflated: never inflated past the bound.
    (zlib.compress(b"#" * (8 << 20), 9), "larger than 1048576 bytes once inflated"),
], ids=["changed", "trojan", "not-zlib", "empty", "truncated", "two-streams", "bomb"])
def test_any_other_compressed_probe_is_refused(stdin: bytes, refusal: str, allow: Path,
                                               tmp_path: Path) -> None:
    log = tmp_path / "gk.log"
    code, execvp = run_gate(wrapped(packed(probe())), stdin, allow, log)
    assert (code, execvp.calls) == (GK.EXIT_REFUSED, [])
    assert refusal in log.read_text()


def test_oversized_stdin_and_missing_allow_list_are_refused(tmp_path: Path, allow: Path,
                                                             capsys: Any) -> None:
    log = tmp_path / "gk.log"
    line = wrapped(probe())
    code, execvp = run_gate(line, b"#" * (GK.PROBE_MAX + 1), allow, log)
    assert (code, execvp.calls) == (GK.EXIT_REFUSED, [])
    code, execvp = run_gate(line, PROBE, tmp_path / "absent", log)
    assert (code, execvp.calls) == (GK.EXIT_REFUSED, [])
    err = capsys.readouterr().err.splitlines()
    assert err[0] == (f"fleetcheck-gatekeeper: refused: probe on stdin larger than "
                      f"{GK.PROBE_MAX} bytes")
    assert err[1].startswith("fleetcheck-gatekeeper: refused: cannot read the probe allow-list")


def test_discovery_gets_no_stdin(allow: Path, tmp_path: Path) -> None:
    code, execvp = run_gate(wrapped(["pct", "list"]), b"ignored", allow, tmp_path / "gk.log")
    assert code == 0
    assert execvp.calls[0][2] == b""


def test_syslog_is_the_default_and_never_fails(monkeypatch: Any) -> None:
    sent: list[tuple[int, str]] = []
    import syslog

    monkeypatch.setattr(syslog, "syslog", lambda priority, line: sent.append((priority, line)))
    GK.Log(None)("refused", "not a command an audit sends: id")
    assert sent == [(syslog.LOG_WARNING, "refused from local: not a command an audit sends: id")]
    GK.Log("/nonexistent-dir/gk.log")("refused", "x")  # unwritable: no exception


def test_a_stdin_never_closed_is_refused_in_bounded_time() -> None:
    read, write = os.pipe()
    try:
        with os.fdopen(read, "rb", buffering=0) as stream:
            os.write(write, b"part of a probe")
            with pytest.raises(GK.Refused, match=r"stdin not closed within 0\.2 s"):
                GK.read_probe(stream, seconds=0.2)
    finally:
        os.close(write)


def test_the_audit_reports_a_refusal_as_an_error_naming_the_gatekeeper() -> None:
    # The SSH transport reads the gatekeeper's line, for a probe in a container (pct defers to
    # its host first) and for discovery; the stderr is the script's own.
    import asyncio

    from fleetcheck.audit import node_from_result
    from fleetcheck.inventory_data.errors import DiscoveryError
    from fleetcheck.inventory_data.model import Target
    from fleetcheck.judgement.policy import DEFAULT_POLICY
    from fleetcheck.kinds.lxc import pct_list
    from fleetcheck.transport.interface import CommandResult
    from fleetcheck.transport.pct import PctTransport
    from fleetcheck.transport.ssh import SshTransport

    host = HostSpec(name="pve1", address="127.0.0.1")
    target = Target(host=host, vmid=101, name="ct", python="python3", env={}, labels=(),
                    timeout=30)
    stderr = b"fleetcheck-gatekeeper: refused: not a command an audit sends: pct list x\n"
    refused = CommandResult(returncode=GK.EXIT_REFUSED, stdout=b"", stderr=stderr)

    class Refusing(SshTransport):
        async def run(self, argv, *, input=None, timeout):
            return refused

    ssh = Refusing(host)
    container = PctTransport(ssh, 101, host_name="pve1")
    node = node_from_result(target, container, refused, DEFAULT_POLICY, 0.1)
    expected = ("refused by the host's fleetcheck gatekeeper: not a command an audit sends: "
                "pct list x")
    assert (node.status, node.reason) == ("error", expected)
    with pytest.raises(DiscoveryError) as caught:
        asyncio.run(pct_list(host, ssh))
    assert str(caught.value).endswith(expected)
    # The same status without the gatekeeper's line is the probe's own business.
    other = CommandResult(returncode=GK.EXIT_REFUSED, stdout=b"", stderr=b"boom\n")
    assert node_from_result(target, container, other, DEFAULT_POLICY, 0.1).reason == (
        "probe exited with status 77: boom")
