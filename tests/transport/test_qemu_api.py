"""QemuApiTransport against the HTTPS fake of the Proxmox API's agent/exec and exec-status."""

from __future__ import annotations

import asyncio
import base64
import random
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from fleetcheck.inventory_data.model import ApiOptions
from fleetcheck.probe import probe_source
from fleetcheck.probe.results import parse_probe_output
from fleetcheck.transport.interface import CommandResult, TransportError
from fleetcheck.transport.qemu_api import (
    API_INPUT_LIMIT,
    BOOTSTRAP,
    BOOTSTRAP_XZ,
    MAX_PIECES,
    ApiAgent,
    QemuApiTransport,
    pack_script,
)
from tests.fakes.pve_api import FIXTURES_DIR, FakePveApi, FakeVm, serve_pve_api

pytestmark = [pytest.mark.timeout(60)]
TOKEN_ENV = "FLEETCHECK_TEST_PVE_TOKEN"


@pytest.fixture
def api(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakePveApi]:
    with serve_pve_api(FakePveApi(FIXTURES_DIR), tmp_path / "tls") as fake:
        monkeypatch.setenv(TOKEN_ENV, fake.secret)
        fake.vms[300] = FakeVm(env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
                               cwd=str(tmp_path))
        yield fake


def options(api: FakePveApi) -> ApiOptions:
    return ApiOptions(url=api.url, user="fleet@pve", token_name="audit", token_env=TOKEN_ENV,
                      verify_tls=str(api.ca_path), node="pve1", timeout=5.0)


def run(api: FakePveApi, vmid: int, argv: list[str], *, input: bytes | None = None,
        timeout: float = 20) -> tuple[CommandResult, QemuApiTransport]:
    transport = QemuApiTransport(ApiAgent(options(api), "pve1"), vmid)

    async def go() -> CommandResult:
        async with transport.session() as run_command:
            return await run_command(argv, input=input, timeout=timeout)

    return asyncio.run(go()), transport


def test_exec_then_status_until_exited_and_the_pid_is_forgotten(api: FakePveApi) -> None:
    script = "import sys; sys.stdout.buffer.write(bytes(range(256))); sys.exit(4)"
    result, _ = run(api, 300, [sys.executable, "-c", script])
    assert (result.returncode, result.stdout) == (4, bytes(range(256)))
    posts = [path for method, path, _ in api.requests if method == "POST"]
    assert posts == ["/api2/json/nodes/pve1/qemu/300/agent/exec"]
    assert api.sessions == {}  # asked once after "exited", never again


def test_the_whole_probe_goes_as_a_compressed_bootstrap(api: FakePveApi) -> None:
    probe = probe_source().encode()
    assert len(probe) > API_INPUT_LIMIT
    result, _ = run(api, 300, [sys.executable, "-", "--deadline", "20"], input=probe)
    # The probe ran and printed its one JSON document.
    assert result.returncode in (0, 1, 2), result.stderr[-500:]
    output = parse_probe_output(result.stdout)
    assert output.triton.verdict == "no-gpu"


def test_a_script_over_the_limit_even_packed_goes_in_pieces_and_leaves_nothing(
        api: FakePveApi, tmp_path: Path) -> None:
    # Random bytes do not compress: 150 KB of them packs to three pieces of at most 64 KiB.
    guest_tmp = tmp_path / "guest-tmp"
    guest_tmp.mkdir()
    api.vms[300] = FakeVm(env={"PATH": "/usr/bin:/bin", "TMPDIR": str(guest_tmp)},
                          cwd=str(tmp_path))
    blob = base64.b64encode(random.Random(3).randbytes(110000)).decode()
    script = (f"import os, sys\nblob = {blob!r}\nprint(len(blob), sys.argv[1:], "
              f"sorted(os.listdir({str(guest_tmp)!r})))\n").encode()
    packed = pack_script([sys.executable, "-"], script)
    assert len(packed.pieces) == 2
    result, _ = run(api, 300, [sys.executable, "-", "--deep"], input=script)
    assert result.returncode == 0, result.stderr
    # The script ran with its own arguments, after the dir of pieces was removed.
    assert result.stdout.decode().split(None, 1) == [str(len(blob)), "['--deep'] []\n"]
    assert list(guest_tmp.iterdir()) == []
    posts = [path for method, path, _ in api.requests if method == "POST"]
    assert len(posts) == 3


def test_a_guest_that_cannot_store_the_first_piece_answers_as_qm_would(
        api: FakePveApi) -> None:
    blob = base64.b64encode(random.Random(4).randbytes(110000)).decode()
    result, _ = run(api, 300, ["/nonexistent/python3", "-"], input=f"x = {blob!r}\n".encode())
    # The guest's `timeout` could not start it: exit 127, as the one-exec path reads it.
    assert result.returncode == 127
    assert b"No such file or directory" in result.stderr
    posts = [path for method, path, _ in api.requests if method == "POST"]
    assert len(posts) == 1  # nothing stored, nothing run after


def test_a_script_too_large_even_in_pieces_is_refused() -> None:
    blob = random.Random(5).randbytes(API_INPUT_LIMIT * MAX_PIECES)
    with pytest.raises(TransportError, match="even in 4 pieces"):
        pack_script(["python3", "-"], blob)


def test_bootstrap_needs_a_script_on_stdin() -> None:
    with pytest.raises(TransportError):
        pack_script(["python3", "-c", "pass"], b"x" * (API_INPUT_LIMIT + 1))
    one = pack_script(["env", "A=1", "python3", "-", "--deep"], b"print(1)")
    assert one.pieces == ()
    argv, packed = one.argv, one.data
    assert argv[:4] == ["env", "A=1", "python3", "-c"] and argv[5:] == ["--deep"]
    assert argv[4] == BOOTSTRAP and len(packed) < 100


def test_a_script_that_zlib_cannot_fit_goes_as_xz_and_still_runs() -> None:
    # One 40 KB block twice: zlib's 32 KB window cannot reach back to the first copy, xz can,
    # so only the xz packing fits the limit (as the third round's probe: 77 KB vs 62 KB).
    block = base64.b64encode(random.Random(7).randbytes(30000)).decode()
    script = f"import sys\ntext = {block + block!r}\nprint(len(text), sys.argv[1:])\n".encode()
    one = pack_script([sys.executable, "-", "x"], script)
    assert one.pieces == ()
    argv, packed = one.argv, one.data
    assert argv[2] == BOOTSTRAP_XZ and len(packed) <= API_INPUT_LIMIT
    ran = subprocess.run(argv, input=packed.encode(), capture_output=True, check=True)
    assert ran.stdout.decode().split() == ["80000", "['x']"]


@pytest.mark.parametrize(
    ("vm", "expected"),
    [
        (FakeVm(agent="none"), ("error", "VM 300 has no QEMU guest agent configured: set it "
                                "with `qm set 300 --agent 1` and install qemu-guest-agent in "
                                "the guest")),
        (FakeVm(status="stopped"), ("skipped", "VM stopped")),
        (FakeVm(agent="off"), ("error", "the QEMU guest agent in VM 300 does not answer: start "
                               "qemu-guest-agent in the guest (or the agent is disabled)")),
        (None, ("error", "VM 300 does not exist on pve1")),
    ],
    ids=["no-agent", "stopped", "agent-off", "missing"],
)
def test_the_apis_refusals_read_like_qms(
    api: FakePveApi, vm: FakeVm | None, expected: tuple[str, str]
) -> None:
    if vm is None:
        del api.vms[300]
    else:
        api.vms[300] = vm
    result, transport = run(api, 300, ["python3", "-"], input=b"print(1)")
    assert result.returncode == 255
    assert transport.explain_failure(result) == expected


@pytest.mark.parametrize(("major", "privilege"), [(9, "VM.GuestAgent.Unrestricted"),
                                                  (8, "VM.Monitor")])
def test_a_token_without_the_agent_privilege(
    api: FakePveApi, major: int, privilege: str
) -> None:
    api.pve_major = major
    api.privileges = {"/vms/300": {"VM.Audit"}}
    with pytest.raises(TransportError) as info:
        run(api, 300, ["python3", "-"], input=b"print(1)")
    assert info.value.kind == "error"
    assert f"403 Permission check failed (/vms/300, {privilege})" in str(info.value)
    assert "VM.GuestAgent.Unrestricted on /vms/VMID (PVE 9) or VM.Monitor" in str(info.value)
    assert api.secret not in str(info.value)


def test_a_command_that_outlives_the_bound_is_a_timeout(api: FakePveApi) -> None:
    result, _ = run(api, 300, ["sleep", "30"], timeout=2)
    assert result.timed_out
    for proc, _ in api.sessions.values():
        proc.kill()
        proc.wait()


def test_a_guest_without_coreutils_timeout(api: FakePveApi) -> None:
    api.vms[300] = FakeVm(env={"PATH": "/nonexistent"})
    result, transport = run(api, 300, ["python3", "-"], input=b"print(1)")
    status, reason = transport.explain_failure(result) or ("", "")
    assert status == "error"
    assert reason.startswith("VM 300 has no `timeout` command (coreutils): fleetcheck probes "
                             "Linux guests; agent said: ")
