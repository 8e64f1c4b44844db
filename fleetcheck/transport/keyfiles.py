"""Owns fleetcheck's own reading of private key files, for the connections made without asyncssh.

libssh2 reads a key file itself; what fleetcheck must know beforehand is whether the file is
one asyncssh would load as one plain key of a type libssh2 logs in with, and which type
(ssh_libssh2.plan_for). Reading that here, rather than through asyncssh's loader, keeps a gate
to OpenSSH hosts from importing asyncssh at all (bench/results.md).

It is sure only of the file `ssh-keygen` writes by default: one OpenSSH-format key, not
encrypted, ssh-ed25519 or ssh-rsa, its private part consistent with its public part (the
Ed25519 point derived from its seed; the RSA numbers as OpenSSL checks them, p and q prime), its
framing and padding OpenSSH's, nothing after it, no `-cert.pub` beside it and a one-line `.pub`
beside it (if any) of the same key. Any other
file (another format or type, a passphrase, a certificate, anything malformed) is not read
here: `None`, and asyncssh's loader decides, with its own words for what it refuses.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import math
import os
import random

from fleetcheck.transport.known_hosts import Unsure, WireReader, key_blob

_BEGIN = b"-----BEGIN OPENSSH PRIVATE KEY-----"
_END = b"-----END OPENSSH PRIVATE KEY-----"
_MAGIC = b"openssh-key-v1\0"
#: The types read here: the ones `ssh-keygen` makes by default (ed25519 since OpenSSH 9.5, RSA
#: before), both logged in with by libssh2.
KEY_TYPES = ("ssh-ed25519", "ssh-rsa")
#: A missing file: OpenSSH and asyncssh skip it.
MISSING = "missing"


#: Ed25519 (RFC 8032 5.1): the field prime, the curve's d, the base point in extended
#: coordinates, and a square root of -1.
_P = 2**255 - 19
_D = -121665 * pow(121666, _P - 2, _P) % _P
_GX = 15112221349535400772501151409588531511454012693041857206046113283949847762202
_GY = 46316835694926478169428394003475163141307993866256225615783033603165251855960
_G = (_GX, _GY, 1, _GX * _GY % _P)


def _ed_add(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, int, int, int]:
    x = (a[1] - a[0]) * (b[1] - b[0]) % _P
    y = (a[1] + a[0]) * (b[1] + b[0]) % _P
    t = 2 * a[3] * b[3] * _D % _P
    z = 2 * a[2] * b[2] % _P
    e, f, g, h = y - x, z - t, z + t, y + x
    return e * f % _P, g * h % _P, f * g % _P, e * h % _P


def ed25519_public(seed: bytes) -> bytes:
    """The Ed25519 public key of a 32-byte private key (RFC 8032 5.1.5): what asyncssh (through
    OpenSSL) derives from the seed, so a file whose stated point is another is not taken."""
    digest = hashlib.sha512(seed).digest()
    scalar = (int.from_bytes(digest[:32], "little") & ((1 << 254) - 8)) | (1 << 254)
    point, base = (0, 1, 1, 0), _G
    while scalar:
        if scalar & 1:
            point = _ed_add(point, base)
        base = _ed_add(base, base)
        scalar >>= 1
    inverse = pow(point[2], _P - 2, _P)
    x, y = point[0] * inverse % _P, point[1] * inverse % _P
    return (y | ((x & 1) << 255)).to_bytes(32, "little")


def _probably_prime(n: int, rounds: int = 8) -> bool:
    """Miller-Rabin with random bases: OpenSSL's key check (through asyncssh's loader) refuses
    an RSA key whose p or q is not prime."""
    if n < 4 or n % 2 == 0:
        return n in (2, 3)
    d, r = n - 1, 0
    while d % 2 == 0:
        d, r = d // 2, r + 1
    pick = random.SystemRandom()
    for _ in range(rounds):
        x = pow(pick.randrange(2, n - 1), d, n)
        if x in (1, n - 1):
            continue
        for _ in range(r - 1):
            x = x * x % n
            if x == n - 1:
                break
        else:
            return False
    return True


def _private_part(private: bytes, algorithm: str, public: bytes) -> None:
    """The private section of an unencrypted key: two equal check words, the same key in its
    private form, a comment, then the padding 1, 2, 3..."""
    reader = WireReader(private)
    if reader.uint32() != reader.uint32():
        raise Unsure("check words differ")
    if reader.string() != algorithm.encode("ascii"):
        raise Unsure("the private key's type is not the public key's")
    public_key = WireReader(public)
    public_key.string()
    if algorithm == "ssh-ed25519":
        point, secret = reader.string(), reader.string()
        if point != public_key.string() or len(secret) != 64 or secret[32:] != point \
                or ed25519_public(secret[:32]) != point:
            raise Unsure("not the public key's private key")
    else:
        n, e, d, iqmp, p, q = (reader.mpint() for _ in range(6))
        public_e, public_n = public_key.mpint(), public_key.mpint()
        if (n, e) != (public_n, public_e) or p * q != n or min(p, q, d, iqmp) <= 1 or d >= n \
                or iqmp >= p or (e * d) % math.lcm(p - 1, q - 1) != 1 or (iqmp * q) % p != 1 \
                or not (_probably_prime(p) and _probably_prime(q)):
            raise Unsure("not the public key's private key")
    reader.string()  # comment
    padding = private[reader.at:]
    if len(private) % 8 or len(padding) >= 8 or padding != bytes(range(1, len(padding) + 1)):
        raise Unsure("not OpenSSH's padding")


def _public_file(path: str, algorithm: str) -> bytes | None:
    """The key of a `.pub` file beside the key (one line, "TYPE base64 [comment]", TYPE the
    key's: asyncssh reads a line that begins otherwise in other formats), or None where there
    is none."""
    try:
        with open(path, "rb") as handle:
            lines = [line for line in handle.read().splitlines() if line.strip()]
    except FileNotFoundError:
        return None
    except OSError:
        raise Unsure("unreadable .pub") from None
    fields = lines[0].split() if len(lines) == 1 and lines[0].isascii() else []
    if len(fields) < 2 or fields[0] != algorithm.encode("ascii"):
        raise Unsure("not one public key of the key's type")
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
        lines = [line.rstrip() for line in data.rstrip().split(b"\n")]
        if len(lines) < 3 or lines[0] != _BEGIN or lines[-1] != _END or \
                any(line.startswith(b"-----") for line in lines[1:-1]):
            raise Unsure("not one OpenSSH private key")
        try:
            raw = base64.b64decode(b"".join(lines[1:-1]), validate=True)
        except (binascii.Error, ValueError):
            raise Unsure("not base64") from None
        if not raw.startswith(_MAGIC):
            raise Unsure("not openssh-key-v1")
        reader = WireReader(raw[len(_MAGIC):])
        if (reader.string(), reader.string(), reader.string(), reader.uint32()) != \
                (b"none", b"none", b"", 1):
            raise Unsure("encrypted, or not one key")
        public, private = reader.string(), reader.string()
        if not reader.ended:
            raise Unsure("trailing data")
        algorithm = WireReader(public).string().decode("ascii", "replace")
        if algorithm not in KEY_TYPES:
            raise Unsure(f"a {algorithm} key")
        key_blob(algorithm, public)
        _private_part(private, algorithm, public)
        if os.path.exists(path + "-cert.pub"):
            raise Unsure("a certificate beside it")
        beside = _public_file(path + ".pub", algorithm)
        if beside is not None and beside != public:
            raise Unsure("a .pub of another key beside it")
    except (Unsure, ValueError, IndexError):
        return None
    return algorithm, data
