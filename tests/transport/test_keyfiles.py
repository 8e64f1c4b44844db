"""fleetcheck's own reading of key files (transport/keyfiles.py): sure only of what asyncssh
loads as one plain key of the same type; anything else is left to asyncssh's loader."""

from __future__ import annotations

import base64
import math
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from fleetcheck.transport.keyfiles import MISSING, plain_key
from fleetcheck.transport.ssh_settings import SshFiles
from fleetcheck.transport.sshlib import asyncssh

pytestmark = [pytest.mark.timeout(60),
              pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="needs ssh-keygen")]


def keygen(path: Path, kind: str, *extra: str) -> Path:
    subprocess.run(["ssh-keygen", "-q", "-t", kind, "-f", str(path), "-N", "", "-C", "a comment",
                    *extra], check=True, capture_output=True)
    return path


@pytest.mark.parametrize("kind", ["ed25519", "rsa"])
def test_a_key_ssh_keygen_writes_is_read_as_asyncssh_loads_it(tmp_path: Path, kind: str) -> None:
    path = keygen(tmp_path / "id", kind, *(["-b", "2048"] if kind == "rsa" else []))
    found = plain_key(str(path))
    assert isinstance(found, tuple)
    algorithm, data = found
    loaded = asyncssh.load_keypairs([str(path)])
    assert [key.algorithm.decode() for key in loaded] == [algorithm]
    assert data == path.read_bytes()
    # Its .pub beside it is the same key: still sure; without it too.
    path.with_suffix(".pub").unlink()
    assert plain_key(str(path)) == found


def test_what_it_is_not_sure_of_is_left_to_asyncssh(tmp_path: Path) -> None:
    assert plain_key(str(tmp_path / "absent")) == MISSING
    ecdsa = keygen(tmp_path / "ecdsa", "ecdsa")
    assert plain_key(str(ecdsa)) is None  # a type not read here
    encrypted = tmp_path / "encrypted"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-f", str(encrypted), "-N", "secret"],
                   check=True, capture_output=True)
    assert plain_key(str(encrypted)) is None
    pem = keygen(tmp_path / "pem", "rsa", "-b", "2048", "-m", "PEM")
    assert plain_key(str(pem)) is None
    good = keygen(tmp_path / "good", "ed25519")
    data = good.read_bytes()
    for name, mangled in [
        ("truncated", data[:len(data) // 2]),
        ("trailing", data + b"-----BEGIN OPENSSH PRIVATE KEY-----\n"),
        ("not a key", b"hello\n"),
    ]:
        (tmp_path / name).write_bytes(mangled)
        assert plain_key(str(tmp_path / name)) is None, name
    # A private part that is not the public key's: one byte of the secret changed.
    lines = data.decode().splitlines()
    raw = bytearray(base64.b64decode("".join(lines[1:-1])))
    raw[-40] ^= 1
    body = base64.b64encode(bytes(raw)).decode()
    (tmp_path / "other").write_text(
        lines[0] + "\n" + "\n".join(body[i:i + 70] for i in range(0, len(body), 70)) + "\n"
        + lines[-1] + "\n")
    assert plain_key(str(tmp_path / "other")) is None
    # A certificate beside the key, or a .pub of another key: asyncssh's to read.
    shutil.copy(good.with_suffix(".pub"), tmp_path / "good-cert.pub")
    assert plain_key(str(good)) is None
    (tmp_path / "good-cert.pub").unlink()
    other = keygen(tmp_path / "second", "ed25519")
    shutil.copy(other.with_suffix(".pub"), good.with_suffix(".pub"))
    assert plain_key(str(good)) is None


def test_key_files_read_without_asyncssh_what_asyncssh_would_give(tmp_path: Path) -> None:
    ed = keygen(tmp_path / "ed", "ed25519")
    rsa = keygen(tmp_path / "rsa", "rsa", "-b", "2048")
    ecdsa = keygen(tmp_path / "ecdsa", "ecdsa")
    paths = (str(ed), str(tmp_path / "absent"), str(rsa))
    mine = SshFiles().key_files(paths, str(ed))
    assert [(path, algorithms) for path, _, algorithms in mine] == [
        (str(ed), ("ssh-ed25519",)), (str(rsa), ("ssh-rsa",))]
    # One file it is not sure of: every file through asyncssh's loader, the same answer's shape.
    theirs = SshFiles().key_files((*paths, str(ecdsa)), str(ed))
    assert [(path, algorithms) for path, _, algorithms in theirs] == [
        (str(ed), ("ssh-ed25519",)), (str(rsa), ("ssh-rsa",)),
        (str(ecdsa), ("ecdsa-sha2-nistp256",))]
    assert [data for _, data, _ in theirs[:2]] == [data for _, data, _ in mine]


def _string(data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + data


def _mpint(value: int) -> bytes:
    return _string(value.to_bytes((value.bit_length() + 8) // 8, "big", signed=True))


def _key_file(public: bytes, private: bytes, extra_padding: int = 0, lead: bytes = b"") -> bytes:
    """An unencrypted OpenSSH-format key file of these parts, padded as OpenSSH pads."""
    count = (-len(private)) % 8 + extra_padding
    private += bytes(i % 256 for i in range(1, count + 1))
    raw = (b"openssh-key-v1\0" + _string(b"none") + _string(b"none") + _string(b"")
           + struct.pack(">I", 1) + _string(public) + _string(private))
    body = base64.b64encode(raw)
    return (lead + b"-----BEGIN OPENSSH PRIVATE KEY-----\n"
            + b"\n".join(body[i:i + 70] for i in range(0, len(body), 70))
            + b"\n-----END OPENSSH PRIVATE KEY-----\n")


def test_a_key_file_asyncssh_refuses_is_never_one_read_here(tmp_path: Path) -> None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ed25519

    secret = ed25519.Ed25519PrivateKey.generate()
    seed = secret.private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw,
                                serialization.NoEncryption())
    point = secret.public_key().public_bytes(serialization.Encoding.Raw,
                                             serialization.PublicFormat.Raw)
    ed_public = _string(b"ssh-ed25519") + _string(point)

    def ed_private(seed: bytes) -> bytes:
        return (struct.pack(">II", 7, 7) + _string(b"ssh-ed25519") + _string(point)
                + _string(seed + point) + _string(b"comment"))

    rsa = asyncssh.generate_private_key("ssh-rsa", key_size=1024).pyca_key.private_numbers()
    n, e = rsa.public_numbers.n, rsa.public_numbers.e
    rsa_public = _string(b"ssh-rsa") + _mpint(e) + _mpint(n)

    def rsa_private(iqmp: int) -> bytes:
        return (struct.pack(">II", 7, 7) + _string(b"ssh-rsa") + _mpint(n) + _mpint(e)
                + _mpint(rsa.d) + _mpint(iqmp) + _mpint(rsa.p) + _mpint(rsa.q)
                + _string(b"comment"))

    good = tmp_path / "good"
    good.write_bytes(_key_file(ed_public, ed_private(seed)))
    assert isinstance(plain_key(str(good)), tuple)
    (tmp_path / "rsa").write_bytes(_key_file(rsa_public, rsa_private(rsa.iqmp)))
    assert isinstance(plain_key(str(tmp_path / "rsa")), tuple)
    composite = rsa.p * rsa.q  # a "p" that is not prime, its numbers otherwise consistent
    other = asyncssh.generate_private_key("ssh-rsa", key_size=1024).pyca_key.private_numbers()
    n2 = composite * other.p
    lam = math.lcm(composite - 1, other.p - 1)
    d2 = pow(e, -1, lam) if math.gcd(e, lam) == 1 else 0
    composite_public = _string(b"ssh-rsa") + _mpint(e) + _mpint(n2)
    composite_private = (struct.pack(">II", 7, 7) + _string(b"ssh-rsa") + _mpint(n2) + _mpint(e)
                         + _mpint(d2) + _mpint(pow(other.p, -1, composite)) + _mpint(composite)
                         + _mpint(other.p) + _string(b"comment"))
    cases = {
        "a p that is not prime": _key_file(composite_public, composite_private),
        "padding of 256 bytes and more": _key_file(ed_public, ed_private(seed), 256),
        "white space before its first line": _key_file(ed_public, ed_private(seed), lead=b"  "),
        "a seed that is not the point's": _key_file(ed_public, ed_private(bytes(32))),
        "iqmp not below p": _key_file(rsa_public, rsa_private(rsa.iqmp + rsa.p)),
    }
    for name, data in cases.items():
        path = tmp_path / name.replace(" ", "-")
        path.write_bytes(data)
        # Refused by asyncssh's loader (2.24's: some, by older ones: not all; either way its
        # loader decides, not this reading).
        assert plain_key(str(path)) is None, name
    # A .pub whose first line asyncssh reads as another key; one whose first field is not the
    # key's type (asyncssh reads such a line in other formats: DER where it begins with "0").
    (tmp_path / "good.pub").write_bytes(
        b"x " + base64.b64encode(ed_public) + b"\nssh-rsa " + base64.b64encode(rsa_public) + b"\n")
    assert plain_key(str(good)) is None
    (tmp_path / "good.pub").write_bytes(b"0A " + base64.b64encode(ed_public) + b"\n")
    assert plain_key(str(good)) is None
    (tmp_path / "good.pub").write_bytes(b"ssh-ed25519 " + base64.b64encode(ed_public) + b" c\n")
    assert isinstance(plain_key(str(good)), tuple)
