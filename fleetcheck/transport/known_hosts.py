"""Owns fleetcheck's own reading of known_hosts, for the connections made without asyncssh.

libssh2's connections (ssh_libssh2.py) check the server's key against the host's known keys
by their bytes; reading them here, rather than through asyncssh, keeps a gate to OpenSSH
hosts from importing asyncssh at all (about 0.1 s of every start: bench/results.md).

It reads a file as asyncssh's `SSHKnownHosts` does, rule for rule: exact names, pattern lists
(`*`, `?`, `!` and CIDR ranges), hashed names (`|1|salt|hash`), `@cert-authority` and
`@revoked`, `[host]:port`, and asyncssh's second lookup without the port when the first finds
no key. It reads only what it can read with certainty: plain keys of the types it checks
(ssh-ed25519, ecdsa-sha2-nistp256/384/521, ssh-rsa), in ASCII, encoded as asyncssh writes
them. A file holding any other line (a certificate, another key type, a marker or hash asyncssh
refuses, a key whose encoding is off, a character asyncssh reads otherwise, a scoped or non-ASCII
address) is not read here at all (`Unsure`): the hosts it covers are matched by asyncssh, as
before (ssh_hostkeys.py). tests/transport/test_known_hosts.py
holds this reading to asyncssh's, file by file.
"""

from __future__ import annotations

import binascii
import fnmatch
import hashlib
import hmac
import ipaddress
from dataclasses import dataclass

#: The plain key types read here: what libssh2 checks, and asyncssh imports (with the checks
#: below, every key read here is one asyncssh imports too).
KEY_TYPES = ("ssh-ed25519", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384", "ecdsa-sha2-nistp521",
             "ssh-rsa")
#: Characters that make a host field a pattern list rather than exact names (asyncssh's test).
_PATTERN_CHARACTERS = "*?|/!"

#: The NIST curves' parameters (SEC 2): field prime p, b (a = -3), and the coordinates' size.
_CURVES = {
    b"nistp256": (
        0xffffffff00000001000000000000000000000000ffffffffffffffffffffffff,
        0x5ac635d8aa3a93e7b3ebbd55769886bc651d06b0cc53b0f63bce3c3e27d2604b, 32),
    b"nistp384": (
        0xfffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffeffffffff0000000000000000ffffffff,
        0xb3312fa7e23ee7e4988e056be3f82d19181d9c6efe8141120314088f5013875ac656398d8a2ed19d2a85c8edd3ec2aef,
        48),
    b"nistp521": (
        (1 << 521) - 1,
        0x51953eb9618e1c9a1f929a21a0b68540eea2da725b99b315f3b8b489918ef109e156193951ec7e937b1652c0bd3bb1bf073573df883d2c34f1ef451fd46b503f00,
        66),
}


class Unsure(ValueError):
    """A line this reading does not take on: the file is left to asyncssh's."""


class WireReader:
    """SSH's wire encoding (RFC 4251 5) read in order: `uint32`, `string`, `mpint`; Unsure
    where the data ends first. `at` is where the next value starts."""

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

    @property
    def ended(self) -> bool:
        return self.at == len(self.data)


def _on_curve(curve: bytes, point: bytes) -> bool:
    """An uncompressed point of the named curve (0x04 || x || y, both below p, y² = x³ - 3x + b):
    what `cryptography` accepts when asyncssh builds the key."""
    prime, b, size = _CURVES[curve]
    if len(point) != 1 + 2 * size or point[0] != 4:
        return False
    x = int.from_bytes(point[1:1 + size], "big")
    y = int.from_bytes(point[1 + size:], "big")
    return x < prime and y < prime and (y * y - (x * x * x - 3 * x + b)) % prime == 0


def _encoded(value: bytes) -> bytes:
    return len(value).to_bytes(4, "big") + value


def _mpint_encoded(value: int) -> bytes:
    """SSH's `mpint` of `value` as asyncssh writes it: minimal two's complement."""
    return _encoded(b"" if value == 0 else
                    value.to_bytes((value.bit_length() + 8) // 8, "big", signed=True))


def key_blob(algorithm: str, blob: bytes) -> bytes:
    """`blob` when it is a well-formed public key of `algorithm` (one of KEY_TYPES) that asyncssh
    imports as that type and writes back as these very bytes; else Unsure."""
    reader = WireReader(blob)
    name = reader.string()
    if name != algorithm.encode("ascii"):
        raise Unsure("the key's type is not its line's")
    if algorithm == "ssh-ed25519":
        valid = len(reader.string()) == 32
    elif algorithm == "ssh-rsa":
        e, n = reader.mpint(), reader.mpint()
        valid = (e % 2 == 1 and n % 2 == 1 and 3 <= e < n and n.bit_length() >= 512
                 and blob == _encoded(name) + _mpint_encoded(e) + _mpint_encoded(n))
    else:
        curve, point = reader.string(), reader.string()
        valid = (algorithm == "ecdsa-sha2-" + curve.decode("ascii", "replace")
                 and curve in _CURVES and _on_curve(curve, point))
    if not valid or not reader.ended:
        raise Unsure(f"not a {algorithm} key as asyncssh reads it")
    return blob


def _entry(data: str) -> bytes:
    """A line's key field ("type base64 [comment]"): its key's blob. asyncssh reads it as
    ASCII bytes (a field with any other character is a line it skips) split at ASCII white
    space; a certificate is asyncssh's alone to read."""
    if not data.isascii():
        raise Unsure("not ASCII")
    fields = data.encode("ascii").split(None, 2)
    if len(fields) < 2:
        raise Unsure("no key")
    algorithm = fields[0].decode("ascii")
    if algorithm not in KEY_TYPES:
        raise Unsure(f"a {algorithm} key")
    try:
        blob = binascii.a2b_base64(fields[1])  # as asyncssh decodes it (non-strict)
    except (binascii.Error, ValueError):
        raise Unsure("not base64") from None
    return key_blob(algorithm, blob)


class _Hashed:
    """`|1|salt|hash`: HMAC-SHA1 of the name under the salt (OpenSSH's HashKnownHosts)."""

    def __init__(self, pattern: str) -> None:
        parts = pattern[1:].split("|")
        if len(parts) != 3 or parts[0] != "1":
            raise Unsure("not a hashed name asyncssh reads")
        try:
            self.salt = binascii.a2b_base64(parts[1])
            self.digest = binascii.a2b_base64(parts[2])
        except (binascii.Error, ValueError):
            raise Unsure("not a hashed name asyncssh reads") from None

    def _is(self, value: str) -> bool:
        return hmac.compare_digest(
            hmac.new(self.salt, value.encode(), hashlib.sha1).digest(), self.digest)

    def matches(self, host: str, addr: str, ip: object) -> bool:
        return self._is(host) or self._is(addr)


class _Patterns:
    """A comma-separated list of wildcard or CIDR patterns, `!` negating (asyncssh's
    HostPatternList): a match of a positive pattern and of no negated one."""

    def __init__(self, patterns: str) -> None:
        self.positive: list[object] = []
        self.negative: list[object] = []
        for pattern in patterns.split(","):
            negated = pattern.startswith("!")
            if negated:
                pattern = pattern[1:]
            if "%" in pattern or not pattern.isascii():
                # asyncssh reads an address through getaddrinfo(), which takes a scope and
                # normalises other digits and colons; ipaddress does neither.
                raise Unsure("a scoped or non-ASCII address")
            matcher: object
            try:
                matcher = ipaddress.ip_network(pattern)
            except ValueError:
                # fnmatch with the brackets of "[host]:port" taken literally.
                matcher = "".join("[[]" if ch == "[" else "[]]" if ch == "]" else ch
                                  for ch in pattern)
            (self.negative if negated else self.positive).append(matcher)

    @staticmethod
    def _one(matcher: object, host: str, addr: str, ip: object) -> bool:
        if isinstance(matcher, str):
            return ((bool(host) and fnmatch.fnmatchcase(host, matcher))
                    or (bool(addr) and fnmatch.fnmatchcase(addr, matcher)))
        return ip is not None and ip in matcher  # type: ignore[operator]

    def matches(self, host: str, addr: str, ip: object) -> bool:
        return (any(self._one(m, host, addr, ip) for m in self.positive)
                and not any(self._one(m, host, addr, ip) for m in self.negative))


@dataclass(frozen=True)
class Found:
    """What one file (or several) hold for one host."""

    #: Plain host keys, as wire blobs, in the files' order.
    keys: tuple[bytes, ...] = ()
    #: `@revoked` plain keys.
    revoked: tuple[bytes, ...] = ()
    #: A `@cert-authority` key names the host: only asyncssh checks certificates.
    authorities: bool = False
    #: Something trusts or revokes a key for the host (asyncssh's host keys, CA keys or revoked
    #: keys): a key that does not match is "changed", not "unknown".
    known: bool = False

    def __add__(self, other: Found) -> Found:
        return Found(self.keys + other.keys, self.revoked + other.revoked,
                     self.authorities or other.authorities, self.known or other.known)


#: One line's entry: its marker (None, "cert-authority" or "revoked") and key blob.
_Entry = tuple[str | None, bytes]


class KnownHostsText:
    """One known_hosts file's text, read as asyncssh reads it; Unsure where it cannot be."""

    def __init__(self, text: str = "") -> None:
        self._exact: dict[str, list[_Entry]] = {}
        self._patterns: list[tuple[_Hashed | _Patterns, _Entry]] = []
        self.load(text)

    def load(self, text: str) -> None:
        """Lines added to the file (as asyncssh's `load`)."""
        for line in text.splitlines():
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            marker: str | None = None
            try:
                if line.startswith("@"):
                    marker, pattern, data = line[1:].split(None, 2)
                else:
                    pattern, data = line.split(None, 1)
            except ValueError:
                raise Unsure("not a known_hosts line") from None
            if marker not in (None, "cert-authority", "revoked"):
                raise Unsure(f"marker @{marker}")
            entry = (marker, _entry(data))
            if any(ch in pattern for ch in _PATTERN_CHARACTERS):
                self._patterns.append(
                    (_Hashed(pattern) if pattern.startswith("|") else _Patterns(pattern), entry))
            else:
                for name in pattern.split(","):
                    self._exact.setdefault(name, []).append(entry)

    def _lookup(self, host: str, port: int | None) -> tuple[Found, bool]:
        """The entries for `host` at `port`, and whether a key or CA key (not a revoked one) is
        among them."""
        if "%" in host or not host.isascii():
            raise Unsure("a scoped or non-ASCII address")
        try:
            ip: object = ipaddress.ip_address(host)
        except ValueError:
            ip = None
        addr = ""
        if port:
            host = f"[{host}]:{port}" if host else ""
        entries = [*self._exact.get(host, ()), *self._exact.get(addr, ())]
        entries += [entry for matcher, entry in self._patterns
                    if matcher.matches(host, addr, ip)]
        keys = tuple(blob for marker, blob in entries if marker is None)
        revoked = tuple(blob for marker, blob in entries if marker == "revoked")
        authorities = any(marker == "cert-authority" for marker, _ in entries)
        trusted = bool(keys) or authorities
        return Found(keys, revoked, authorities, trusted or bool(revoked)), trusted

    def match(self, host: str, port: int | None) -> Found:
        """The entries for `host` (at `port`, None for the default port); where `[host]:port`
        has no key or CA key, `host`'s (asyncssh's rule)."""
        found, trusted = self._lookup(host, port)
        if port and not trusted:
            found, _ = self._lookup(host, None)
        return found
