"""The gate end to end: `fleetcheck gate` against the loopback fleet (real sshd, pct stand-in)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from fleetcheck.cli import main
from tests.gate.pythons import other_python

pytestmark = pytest.mark.sshd


def gate(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[str], str]:
    code = main(["gate", *argv])
    out = capsys.readouterr()
    return code, out.err.splitlines(), out.out


def test_gate_exit_codes_lines_and_json_on_a_real_fleet(fleet, capsys, tmp_path: Path) -> None:
    fleet.add_host("pve1")
    fleet.add_container("pve1", 101)
    fleet.add_container("pve1", 102, "no-compiler")
    fleet.add_container("pve1", 103, "stopped")
    inventory = str(fleet.write_inventory(timeout=30))

    # 0: a healthy node under the lenient default playbook; nothing on stderr.
    assert gate(capsys, inventory, "--limit", "pve1/101", "--playbook", "default") == (0, [], "")

    # 1: pre-training requires a GPU verdict; a node without a compiler never has one.
    code, lines, _ = gate(capsys, inventory, "--limit", "pve1/102", "--playbook", "pre-training")
    assert code == 1
    assert len(lines) == 1
    assert lines[0].startswith("pve1/102: fail: Triton ")

    # 1: a requirement from a playbook file, with the cause on the node's line.
    big = tmp_path / "big.yaml"
    big.write_text("min_gpus: 64\n", encoding="utf-8")
    code, lines, out = gate(capsys, inventory, "--limit", "pve1/101", "--playbook", str(big),
                            "--json")
    assert code == 1
    assert len(lines) == 1
    assert re.fullmatch(r"pve1/101: fail: \d+ GPU\(s\), playbook big requires 64", lines[0])
    verdict = json.loads(out)
    assert (verdict["result"], verdict["exit_code"], verdict["passed"]) == ("fail", 1, [])
    assert [item["node"] for item in verdict["blocking"]] == ["pve1/101"]

    # 3: a stopped container that the job asked for cannot be verified.
    assert gate(capsys, inventory, "--limit", "pve1/103", "--playbook", "default") == (3, [
        "pve1/103: skipped: container stopped "
        "(fix: start the container, or leave it out of the selection (--limit))"], "")

    # 2: a broken playbook stops the gate before any connection is made.
    logins = fleet.accepted_logins("pve1")
    bad = tmp_path / "bad.yaml"
    bad.write_text("deep: true\nmingpus: 8\n", encoding="utf-8")
    assert gate(capsys, inventory, "--playbook", str(bad)) == (
        2, [f"fleetcheck: error: {bad}:2: mingpus: unknown key (did you mean 'min_gpus'?)"], "")
    assert fleet.accepted_logins("pve1") == logins


def test_gate_unreachable_host_is_unverified(fleet, capsys) -> None:
    fleet.add_host("pve1")
    fleet.add_container("pve1", 101)
    down = fleet.add_host("pve2", refuse=True)
    inventory = str(fleet.write_inventory(timeout=30))
    code, lines, _ = gate(capsys, inventory, "--playbook", "default")
    assert code == 3
    assert lines == [
        f"pve2: unreachable: connection refused by pve2 (127.0.0.1:{down.port}) "
        "(fix: check that the node is up and reachable over SSH, then run the gate again)"]


def test_gate_fails_on_mismatched_python_across_the_selection(fleet, capsys,
                                                              tmp_path: Path) -> None:
    fleet.add_host("pve1")
    fleet.add_container("pve1", 101)
    odd = fleet.add_container("pve1", 102)
    (odd / "bin" / "python3").unlink()
    (odd / "bin" / "python3").symlink_to(other_python())
    inventory = str(fleet.write_inventory(timeout=30))
    playbook = tmp_path / "same-python.yaml"
    playbook.write_text("consistency:\n  fail: [python]\n", encoding="utf-8")
    code, lines, _ = gate(capsys, inventory, "--playbook", str(playbook))
    assert code == 1
    fleet_lines = [line for line in lines if line.startswith("fleet: ")]
    assert len(fleet_lines) == 1
    assert re.fullmatch(
        r"fleet: fail: Python version differs across the selection: "
        r"(\S+) on 1 \(pve1/10[12]\); (\S+) on 1 \(pve1/10[12]\) "
        r"\(fix: run the job with the same Python version on every node\)", fleet_lines[0])


def test_gate_host_key_errors_point_at_known_hosts(fleet, capsys) -> None:
    new = fleet.add_host("new", known="absent", probe_host=True, containers="listed")
    evil = fleet.add_host("evil", known="wrong", probe_host=True, containers="listed")
    inventory = str(fleet.write_inventory(timeout=30))
    code, lines, _ = gate(capsys, inventory, "--playbook", "default")
    assert code == 3
    assert sorted(lines) == [
        f"evil: unreachable: host key for evil (127.0.0.1:{evil.port}) does not match "
        f"known_hosts {fleet.known_hosts} — possible man-in-the-middle (fix: find out why the "
        "host key changed (reinstalled host, or another machine on its address) before "
        "removing the old key with ssh-keygen -R HOST)",
        f"new: unreachable: host key for new (127.0.0.1:{new.port}) is not in "
        f"{fleet.known_hosts} (fix: check the host's key fingerprint out of band (ssh-keyscan "
        "-p PORT HOST | ssh-keygen -lf -, against ssh-keygen -lf "
        "/etc/ssh/ssh_host_ed25519_key.pub on its console), then add the key to known_hosts, "
        "or set ssh.host_key_policy: accept-new)",
    ]
