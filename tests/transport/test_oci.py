"""OciTransport: docker/podman exec on a host, inside `pct exec` and inside `qm guest exec`."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest

from fleetcheck.failures import INTERPRETER_MISSING
from fleetcheck.inventory_data.model import HostSpec, SshOptions
from fleetcheck.transport.interface import CommandResult, Transport
from fleetcheck.transport.local import LocalTransport
from fleetcheck.transport.oci import OciTransport, oci_exec_argv, oci_exec_failure
from fleetcheck.transport.pct import PctTransport
from fleetcheck.transport.qemu import QemuTransport
from fleetcheck.transport.ssh import SshTransport
from tests.fleet import Fleet

pytestmark = [pytest.mark.sshd, pytest.mark.timeout(90)]

ECHO_ENV = ("import os,sys; sys.stdout.write(sys.stdin.read() + os.environ.get('NOTE', '-') "
            "+ ' uid=%d' % os.getuid())")


def host_spec(fleet: Fleet, name: str) -> HostSpec:
    options = SshOptions(user="root", port=fleet.hosts[name].port,
                         identity_file=str(fleet.client_key),
                         known_hosts=str(fleet.known_hosts), config_file="")
    return HostSpec(name=name, address="127.0.0.1", ssh=options)


def run_in(fleet: Fleet, parent: str, runtime: str, name: str, argv: list[str], *,
           user: str | None = None, input: bytes = b"") -> tuple[CommandResult, OciTransport]:
    """Run argv in container `name` whose parent is "host", "lxc:VMID" or "vm:VMID"."""
    async def go() -> tuple[CommandResult, OciTransport]:
        ssh = SshTransport(host_spec(fleet, "pve1"))
        kind, _, vmid = parent.partition(":")
        outer: Transport = ssh
        if kind == "lxc":
            outer = PctTransport(ssh, int(vmid))
        elif kind == "vm":
            outer = QemuTransport(ssh, int(vmid), host_name="pve1")
        oci = OciTransport(outer, runtime, name, user=user, parent_name=f"pve1 {parent}")
        try:
            async with oci.session() as run:
                return await run(argv, input=input, timeout=20), oci
        finally:
            await ssh.close()

    return asyncio.run(go())


@pytest.mark.parametrize("parent", ["host", "lxc:101", "vm:300"])
@pytest.mark.parametrize("runtime", ["docker", "podman"])
def test_stdin_env_and_exit_code_reach_the_container_through_any_parent(
    fleet: Fleet, parent: str, runtime: str
) -> None:
    fleet.add_host("pve1")
    fleet.add_container("pve1", 101)
    fleet.add_vm("pve1", 300)
    vmid = None if parent == "host" else int(parent.split(":")[1])
    fleet.add_oci("pve1", runtime, "trainer", vmid=vmid)
    result, _ = run_in(fleet, parent, runtime, "trainer",
                       ["env", "NOTE=a b; $(x)", "python3", "-c", ECHO_ENV], input=b"probe ")
    assert (result.returncode, result.stdout) == (0, b"probe a b; $(x) uid=0")


def test_user_is_passed_to_the_runtime(fleet: Fleet) -> None:
    if not os.access("/usr/bin/python3", os.X_OK):
        pytest.skip("needs a system /usr/bin/python3 that any user may run")
    fleet.add_host("pve1")
    odir = fleet.add_oci("pve1", "docker", "trainer", "no-python")
    # The test interpreter may live under a home only root can enter.
    (odir / "bin" / "python3").symlink_to("/usr/bin/python3")
    result, _ = run_in(fleet, "host", "docker", "trainer", ["python3", "-c", ECHO_ENV],
                       user="4242:4242")
    assert (result.returncode, result.stdout) == (0, b"- uid=4242")


def _refusal(fleet: Fleet, runtime: str, parent: str, name: str, **oci: Any) -> Any:
    result, transport = run_in(fleet, parent, runtime, name, ["python3", "-"], input=b"")
    return result.returncode, transport.explain_failure(result)


@pytest.mark.parametrize(
    ("runtime", "kind", "state", "name", "expected"),
    [
        ("docker", "healthy", "running", "ghost",
         (1, ("error", "no docker container 'ghost' on pve1 host"))),
        ("podman", "healthy", "running", "ghost",
         (125, ("error", "no podman container 'ghost' on pve1 host"))),
        ("docker", "healthy", "exited", "trainer", (1, ("skipped", "container not running"))),
        ("podman", "healthy", "exited", "trainer", (255, ("skipped", "container not running"))),
        ("docker", "healthy", "paused", "trainer", (1, ("skipped", "container paused"))),
        ("docker", "no-python", "running", "trainer",
         (127, ("error", "python3 not found in docker container 'trainer' on pve1 host"))),
        ("podman", "no-python", "running", "trainer",
         (127, ("error", "python3 not found in podman container 'trainer' on pve1 host"))),
    ],
    ids=["docker-missing", "podman-missing", "docker-exited", "podman-exited", "docker-paused",
         "docker-no-python", "podman-no-python"],
)
def test_runtime_refusals_are_clear(
    fleet: Fleet, runtime: str, kind: str, state: str, name: str, expected: Any
) -> None:
    fleet.add_host("pve1")
    fleet.add_oci("pve1", runtime, "trainer", kind, state=state)
    assert _refusal(fleet, runtime, "host", name) == expected


#: What each runtime writes, and where, when the configured interpreter cannot be started
#: (texts from docker 20.10.24 with runc 1.1, docker 28, podman 4.3 with crun).
START_FAILURES = [
    # Docker 20.10: a path that is not there, on STDOUT, exit 126.
    ("docker", 126, b'OCI runtime exec failed: exec failed: unable to start container process: '
     b'exec: "/usr/bin/python3": stat /usr/bin/python3: no such file or directory: unknown\r\n',
     b"", "/usr/bin/python3 not found"),
    # Docker 20.10 with runc 1.0 (container_linux.go), same stream and code.
    ("docker", 126, b"OCI runtime exec failed: exec failed: container_linux.go:380: starting "
     b'container process caused: exec: "/opt/venv/bin/python3": stat /opt/venv/bin/python3: '
     b"no such file or directory: unknown\r\n", b"", "/opt/venv/bin/python3 not found"),
    # Docker 20.10, a name not on PATH (126), and Docker 23 on (127).
    ("docker", 126, b'OCI runtime exec failed: exec failed: unable to start container process: '
     b'exec: "python3": executable file not found in $PATH: unknown\r\n', b"",
     "python3 not found"),
    ("docker", 127, b'OCI runtime exec failed: exec failed: unable to start container process: '
     b'exec: "python3": executable file not found in $PATH: unknown\r\n', b"",
     "python3 not found"),
    # There, but not runnable: another failure than a missing one.
    ("docker", 126, b'OCI runtime exec failed: exec failed: unable to start container process: '
     b'exec: "/usr/bin/python3": permission denied: unknown\r\n', b"",
     "/usr/bin/python3 cannot be run"),
    # podman (crun) on stderr, 127.
    ("podman", 127, b"", b"Error: crun: executable file `/usr/bin/python3` not found: No such "
     b"file or directory: OCI runtime attempted to invoke a command that was not found\n",
     "/usr/bin/python3 not found"),
]


@pytest.mark.parametrize(("runtime", "code", "stdout", "stderr", "said"), START_FAILURES,
                         ids=["docker20-path", "docker20-runc10-path", "docker20-name",
                              "docker23-name", "docker-denied", "podman-path"])
def test_an_interpreter_the_runtime_cannot_start_is_named_from_where_it_writes(
    runtime: str, code: int, stdout: bytes, stderr: bytes, said: str,
) -> None:
    refusal = oci_exec_failure(CommandResult(code, stdout, stderr), runtime, "trainer", "pve1")
    assert refusal is not None
    assert (refusal.status, refusal.reason, refusal.cause) == (
        "error", f"{said} in {runtime} container 'trainer' on pve1", INTERPRETER_MISSING)


def test_the_parents_refusal_comes_first(fleet: Fleet) -> None:
    fleet.add_host("pve1")
    fleet.add_container("pve1", 101, "stopped")
    fleet.add_vm("pve1", 300, agent="none")
    fleet.add_oci("pve1", "docker", "a", vmid=101)
    fleet.add_oci("pve1", "docker", "b", vmid=300)
    assert _refusal(fleet, "docker", "lxc:101", "a") == (255, ("skipped", "container stopped"))
    assert _refusal(fleet, "docker", "vm:300", "b")[1][0] == "error"
    assert "no QEMU guest agent" in _refusal(fleet, "docker", "vm:300", "b")[1][1]


def test_a_stopped_daemon_and_a_missing_runtime(fleet: Fleet) -> None:
    fleet.add_host("pve1")
    fleet.add_container("pve1", 101)
    store = fleet.add_oci("pve1", "docker", "trainer").parent
    (store / "daemon-down").write_text("")
    assert _refusal(fleet, "docker", "host", "trainer") == (
        1, ("error", "docker daemon on pve1 host is not running"))
    # LXC 101 has no docker at all: the shell-less `pct exec` reports lxc-attach's failure.
    code, reason = _refusal(fleet, "docker", "lxc:101", "trainer")
    assert (code == 127 and reason is None) or reason[0] == "error"


def test_argv_shape() -> None:
    assert oci_exec_argv("docker", "trainer", ["env", "A=1", "B=x y", "python3", "-", "--deep"],
                         user="1000") == [
        "docker", "exec", "-i", "--user", "1000", "--env", "A=1", "--env", "B=x y", "trainer",
        "python3", "-", "--deep"]
    assert oci_exec_argv("podman", "t", ["python3", "-"]) == ["podman", "exec", "-i", "t",
                                                               "python3", "-"]
    sudo = OciTransport(LocalTransport(), "docker", "t", sudo=True)
    assert sudo.wrap(["python3"])[:4] == ["sudo", "-n", "docker", "exec"]


def test_the_real_docker_client_without_a_daemon(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real docker CLI, where installed, says what the stand-in says (no daemon needed)."""
    import shutil

    if shutil.which("docker") is None:
        pytest.skip("no docker client on this machine")
    # A socket path where nothing listens, so a running daemon is never used.
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/docker.sock")
    oci = OciTransport(LocalTransport(), "docker", "trainer", parent_name="this machine")

    result = asyncio.run(oci.run(["python3", "-"], input=b"print(1)", timeout=20))

    assert result.returncode == 1
    assert oci.explain_failure(result) == (
        "error", "docker daemon on this machine is not running")
