"""Owns fleetcheck's own reading of private key files, for the connections made without asyncssh.

libssh2 reads a key file itself; what fleetcheck must know beforehand is whether the file is
one asyncssh would load as one plain key of a type libssh2 logs in with, and which type
(ssh_libssh2.plan_for). Reading that here, rather than through asyncssh's loader, keeps a gate
to OpenSSH hosts from importing asyncssh at all (bench/results.md).

It is sure only of the file `ssh-keygen` writes by default: one OpenSSH-format key, not
encrypted, ssh-ed25519 or ssh-rsa, its private part consistent with its public part, nothing
after it, no `-cert.pub` beside it and a `.pub` beside it (if any) of the same key. Any other
file (another format or type, a passphrase, a certificate, anything malformed) is not read
here: `None`, and asyncssh's loader decides, with its own words for what it refuses.
"""

from __future__ import annotations

import base64
import binascii
import math
import os

from fleetcheck.transport.known_hosts import Unsure, key_blob

_BEGIN = b"-----BEGIN OPENSSH PRIVATE KEY-----"
_END = b"-----END OPENSSH PRIVATE KEY-----"
_MAGIC = b"openssh-key-v1\0"
#: The types read here: the ones `ssh-keygen` makes by default (ed25519 since OpenSSH 9.5, RSA
#: before), both logged in with by libssh2.
KEY_TYPES = ("ssh-ed25519", "ssh-rsa")
#: A missing file: OpenSSH and asyncssh skip it.
MISSING = "missing"


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.at = 0

    def uint32(self) -> int:
        if self.at + 4 > len(self.data):
            raise Unsure("truncated")
        value = int.from_bytes(self.data[self.at:self.at + 4], "big")
        self.at += 4
        return value

    def string(self) -> bytes:
        size = self.uint32()
        if self.at + size > len(self.data):
            raise Unsure("truncated")
        value = self.data[self.at:self.at + size]
        self.at += size
        return value

    def mpint(self) -> int:
        return int.from_bytes(self.string(), "big", signed=True)


def _private_part(private: bytes, algorithm: str, public: bytes) -> None:
    """The private section of an unencrypted key: two equal check words, the same key in its
    private form, a comment, then the padding 1, 2, 3..."""
    reader = _Reader(private)
    if reader.uint32() != reader.uint32():
        raise Unsure("check words differ")
    if reader.string() != algorithm.encode("ascii"):
        raise Unsure("the private key's type is not the public key's")
    public_key = _Reader(public)
    public_key.string()
    if algorithm == "ssh-ed25519":
        point, secret = reader.string(), reader.string()
        if point != public_key.string() or len(secret) != 64 or secret[32:] != point:
            raise Unsure("not the public key's private key")
    else:
        n, e, d, iqmp, p, q = (reader.mpint() for _ in range(6))
        public_e, public_n = public_key.mpint(), public_key.mpint()
        if (n, e) != (public_n, public_e) or p * q != n or min(p, q, d, iqmp) <= 1 or d >= n \
                or (e * d) % math.lcm(p - 1, q - 1) != 1 or (iqmp * q) % p != 1:
            raise Unsure("not the public key's private key")
    reader.string()  # comment
    padding = private[reader.at:]
    if len(private) % 8 or padding != bytes(range(1, len(padding) + 1)):
        raise Unsure("bad padding")


def _public_file(path: str) -> bytes | None:
    """The key of a `.pub` file beside the key, or None where there is none."""
    try:
        with open(path, "rb") as handle:
            fields = handle.read().split()
    except FileNotFoundError:
        return None
    except OSError:
        raise Unsure("unreadable .pub") from None
    if len(fields) < 2:
        raise Unsure("malformed .pub")
    try:
        return binascii.a2b_base64(fields[1])
    except (binascii.Error, ValueError):
        raise Unsure("malformed .pub") from None


def plain_key(path: str) -> tuple[str, bytes] | str | None:
    """(its type, its bytes) for a key file fleetcheck is sure of (see above); MISSING where
    there is no file; None where asyncssh's loader must decide."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except FileNotFoundError:
        return MISSING
    except OSError:
        return None
    try:
        text = data.strip()
        if not text.startswith(_BEGIN) or not text.endswith(_END) or \
                text.count(b"-----BEGIN") != 1:
            raise Unsure("not one OpenSSH private key")
        try:
            raw = base64.b64decode(b"".join(text[len(_BEGIN):-len(_END)].split()), validate=True)
        except (binascii.Error, ValueError):
            raise Unsure("not base64") from None
        if not raw.startswith(_MAGIC):
            raise Unsure("not openssh-key-v1")
        reader = _Reader(raw[len(_MAGIC):])
        if (reader.string(), reader.string(), reader.string(), reader.uint32()) != \
                (b"none", b"none", b"", 1):
            raise Unsure("encrypted, or not one key")
        public, private = reader.string(), reader.string()
        if reader.at != len(reader.data):
            raise Unsure("trailing data")
        algorithm = _Reader(public).string().decode("ascii", "replace")
        if algorithm not in KEY_TYPES:
            raise Unsure(f"a {algorithm} key")
        key_blob(algorithm, public)
        _private_part(private, algorithm, public)
        if os.path.exists(path + "-cert.pub"):
            raise Unsure("a certificate beside it")
        beside = _public_file(path + ".pub")
        if beside is not None and beside != public:
            raise Unsure("a .pub of another key beside it")
    except Unsure:
        return None
    return algorithm, data
