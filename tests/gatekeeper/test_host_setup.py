"""`fleetcheck host-setup` and `probe --script --sha256`: what they print and what it installs."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest

from fleetcheck.cli import main
from fleetcheck.host_setup import probe_sha256, script_source

KEY = ("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJ3Yf0QmA0ZtZt8kD3c0y0Ok6m8mC9o8pS0y2b9mKqZt "
       "audit@fleetcheck")


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_probe_sha256_is_the_hash_of_the_script(capsys: pytest.CaptureFixture[str]) -> None:
    _, script, _ = run_cli(capsys, "probe", "--script")
    code, digest, _ = run_cli(capsys, "probe", "--script", "--sha256")
    assert code == 0
    assert digest == hashlib.sha256(script.encode()).hexdigest() + "\n" == probe_sha256() + "\n"
    code, _, err = run_cli(capsys, "probe", "--sha256")
    assert (code, err) == (2, "fleetcheck: error: --sha256 goes with --script "
                              "(fleetcheck probe --script --sha256)\n")


def test_installer_installs_and_upgrades_in_place(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pub = tmp_path / "audit.pub"
    pub.write_text(KEY + "\n")
    keys = tmp_path / "home" / ".ssh" / "authorized_keys"
    keys.parent.mkdir(parents=True)
    keys.write_text("ssh-ed25519 AAAAother admin\n" + KEY + "\n")  # the key, unrestricted
    hashes = tmp_path / "etc" / "probe.sha256"
    hashes.parent.mkdir()
    hashes.write_text("a" * 64 + "  # fleetcheck 0.0.9 probe\n")  # the last version's probe
    script = tmp_path / "lib" / "gatekeeper.py"
    argv = ["host-setup", "--key", str(pub), "--script-path", str(script),
            "--hash-file", str(hashes), "--authorized-keys", str(keys), "--from", "10.0.0.0/8"]

    code, installer, _ = run_cli(capsys, *argv)
    assert code == 0
    for _ in range(2):  # a second run (an upgrade, or by mistake) changes nothing more
        subprocess.run([sys.executable, "-"], input=installer.encode(), check=True,
                       capture_output=True)

    assert script.read_text() == script_source()
    assert script.stat().st_mode & 0o777 == 0o755
    assert [line.split()[0] for line in hashes.read_text().splitlines()[0:]] == [
        "a" * 64, probe_sha256()]
    code, line, _ = run_cli(capsys, *argv, "--print-line")
    assert keys.read_text().splitlines() == ["ssh-ed25519 AAAAother admin", line.strip()]
    assert line == (f'restrict,from="10.0.0.0/8",command="/usr/bin/python3 -I {script} '
                    f'--allow {hashes}" {KEY}\n')
    assert keys.stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize(("extra", "message"), [
    (["--python", "/usr/bin/python3 -c evil"], "--python '/usr/bin/python3 -c evil': needs an "
     "absolute path of letters, digits and ._+-/ (it goes into authorized_keys)"),
    (["--hash-file", 'x"y'], "--hash-file 'x\"y': needs an absolute path"),
    (["--from", 'a" b'], "--from 'a\" b': not a list of host patterns"),
])
def test_unsafe_setup_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    pub = tmp_path / "audit.pub"
    pub.write_text(KEY)
    code, out, err = run_cli(capsys, "host-setup", "--key", str(pub), *extra)
    assert (code, out) == (2, "")
    assert err.startswith("fleetcheck: error: " + message) and err.count("\n") == 1


def test_a_missing_or_bad_key_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, "host-setup", "--key", str(tmp_path / "none.pub"))
    assert code == 2 and err.startswith(f"fleetcheck: error: cannot read public key {tmp_path}")
    bad = tmp_path / "bad.pub"
    bad.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n")
    code, _, err = run_cli(capsys, "host-setup", "--key", str(bad))
    assert (code, err) == (2, "fleetcheck: error: the public key is not an OpenSSH public key "
                              "line (e.g. ssh-ed25519 AAAA... comment)\n")
