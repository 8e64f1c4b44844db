"""The docker and podman stand-ins of the loopback fleet (tests/fleet/oci_standin.py) pinned to
the real tools on the real-runtime fleet: the same listing shape and keys, and for every
refusal the same stream, exit code class and node outcome (fleetcheck reads the text)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from fleetcheck.inventory_data.listings import parse_oci_ps
from fleetcheck.transport.interface import CommandResult
from fleetcheck.transport.oci import oci_exec_failure, oci_list_argv
from tests.runtimes.conftest import Scenario

pytestmark = [pytest.mark.timeout(600)]
STANDIN = Path(__file__).resolve().parents[1] / "fleet" / "oci_standin.py"
#: The real fleet's containers (conftest.build) and the stand-in's of the same states.
STATES = {"docker": {"web": "running", "gone": "exited", "frozen": "paused"},
          "podman": {"pweb": "running", "pgone": "exited", "pfrozen": "paused"}}


def _standin(tmp_path: Path, runtime: str) -> Path:
    tool = tmp_path / "bin" / runtime
    tool.parent.mkdir(parents=True)
    tool.write_text(f"#!{sys.executable}\n" + STANDIN.read_text())
    tool.chmod(0o755)
    for name, state in STATES[runtime].items():
        store = tmp_path / "oci" / runtime / name
        (store / "bin").mkdir(parents=True)
        (store / "bin" / "python3").symlink_to(sys.executable)
        (store / "config.json").write_text(json.dumps({
            "state": state, "id": "ab" * 32, "env": {"PATH": str(store / "bin")}}))
    return tool


def _result(done: subprocess.CompletedProcess[bytes]) -> CommandResult:
    return CommandResult(done.returncode, done.stdout, done.stderr)


@pytest.mark.parametrize("runtime", ["docker", "podman"])
def test_the_listing_has_the_real_ones_shape_and_keys(scenario: Scenario, tmp_path: Path,
                                                      runtime: str) -> None:
    real = scenario.fleet.run(oci_list_argv(runtime)).stdout
    fake = subprocess.run([str(_standin(tmp_path, runtime)), *oci_list_argv(runtime)[1:]],
                          capture_output=True, text=True, check=True).stdout
    if runtime == "docker":
        real_rows = [json.loads(line) for line in real.splitlines()]
        fake_rows = [json.loads(line) for line in fake.splitlines()]
    else:
        real_rows, fake_rows = json.loads(real), json.loads(fake)
        assert fake.startswith("[\n  {") and real.startswith("[\n  {")
    assert {key for row in real_rows for key in row} == {key for row in fake_rows
                                                         for key in row}
    wanted = set(STATES[runtime])
    real_states = {e.name: e.state for e in parse_oci_ps(real, runtime) if e.name in wanted}
    fake_states = {e.name: e.state for e in parse_oci_ps(fake, runtime)}
    assert real_states == fake_states == STATES[runtime]


CASES = [("gone", ["true"]), ("frozen", ["true"]), ("ghost", ["true"]),
         ("web", ["no-such-interpreter"])]


@pytest.mark.parametrize("runtime", ["docker", "podman"])
@pytest.mark.parametrize(("which", "command"), CASES)
def test_each_refusal_reads_as_the_real_ones(scenario: Scenario, tmp_path: Path, runtime: str,
                                             which: str, command: list[str]) -> None:
    name = which if runtime == "docker" else {"gone": "pgone", "frozen": "pfrozen",
                                              "ghost": "pghost", "web": "pweb"}[which]
    argv = [runtime, "exec", "-i", name, *command]
    real = _result(subprocess.run(scenario.fleet.ns(argv), capture_output=True, timeout=120))
    fake = _result(subprocess.run([str(_standin(tmp_path, runtime)), *argv[1:]],
                                  capture_output=True, timeout=60))
    assert oci_exec_failure(real, runtime, name, "p") == oci_exec_failure(fake, runtime, name,
                                                                          "p")
    assert oci_exec_failure(real, runtime, name, "p") is not None
    # The same stream carries the text (docker's OCI error on stdout, the rest on stderr).
    assert (bool(real.stdout.strip()), bool(real.stderr.strip())) == (
        bool(fake.stdout.strip()), bool(fake.stderr.strip())), (real, fake)
    # Exit codes: the same, but for docker's missing command (20.10: 126, 23 on: 127).
    if not (runtime == "docker" and which == "web"):
        assert real.returncode == fake.returncode, (real, fake)
