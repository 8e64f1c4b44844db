"""Owns the SSH host-key policy: which known_hosts file, strict or accept-new, and its wording.

`ssh.py` holds connection mechanics; what is trusted, how a first key is recorded and how a
refused key is explained live here (the gate's fixes match these texts, see judgement/fixes.py).
"""

from __future__ import annotations

import base64
import os
import threading
from dataclasses import dataclass
from typing import Any

from fleetcheck.failures import HOST_KEY_CHANGED, HOST_KEY_UNKNOWN
from fleetcheck.transport.interface import TransportError
from fleetcheck.transport.sshlib import asyncssh

# The known_hosts file is appended to by every accept-new connection; one writer at a time.
_KNOWN_HOSTS_LOCK = threading.Lock()

#: What asyncssh's `known_hosts` argument takes already matched: host keys, CA keys, revoked
#: keys, X.509 certificates, revoked certificates, X.509 subjects, revoked subjects.
Matched = tuple[list[Any], list[Any], list[Any], list[Any], list[Any], list[Any], list[Any]]


class KnownHostsFiles:
    """Every known_hosts file of one audit, each read once, consulted per host.

    A plain entry (`host` or `[host]:port`) is found by a dict lookup in asyncssh's index;
    hashed and wildcard entries are tried one by one, as OpenSSH does.
    """

    def __init__(self) -> None:
        self._files: dict[str, asyncssh.SSHKnownHosts | None] = {}

    def _file(self, path: str) -> asyncssh.SSHKnownHosts | None:
        if path not in self._files:
            try:
                with open(path, encoding="utf-8", errors="replace") as handle:
                    text = handle.read()
            except (FileNotFoundError, NotADirectoryError):
                self._files[path] = None
                return None
            except OSError as exc:
                raise TransportError(f"cannot read known_hosts {path}: {exc}") from None
            try:
                self._files[path] = asyncssh.import_known_hosts(text)
            except ValueError as exc:
                raise TransportError(f"cannot read known_hosts {path}: {exc}") from None
        return self._files[path]

    def read(self, paths: tuple[str, ...]) -> tuple[str, ...]:
        """The files of `paths` that exist (each read on its first mention)."""
        return tuple(path for path in paths if self._file(path) is not None)

    def match(self, paths: tuple[str, ...], host: str, port: int | None) -> Matched:
        """Keys for `host` (at `port`) in every file of `paths` together."""
        found: Matched = ([], [], [], [], [], [], [])
        wanted = port if port not in (None, 22) else None
        for path in paths:
            known = self._file(path)
            if known is not None:
                for into, part in zip(found, known.match(host, "", wanted), strict=True):
                    into.extend(part)
        return found

    def add(self, path: str, line: str) -> None:
        """A line just appended to `path`: later hosts of this audit see it too."""
        known = self._files.get(path)
        if known is None:
            self._files[path] = asyncssh.import_known_hosts(line)
        else:
            known.load(line)


def _known_hosts_line(host: str, port: int | None, blob: bytes) -> str:
    """The line OpenSSH's accept-new writes for a key (its wire blob): `host type base64`."""
    pattern = host if port in (None, 22) else f"[{host}]:{port}"
    size = int.from_bytes(blob[:4], "big")
    alg = blob[4:4 + size].decode("ascii", "replace")
    return f"{pattern} {alg} {base64.b64encode(blob).decode('ascii')}\n"


@dataclass(frozen=True)
class HostKeyPlan:
    """How one connection checks its host's key, decided before connecting."""

    #: The known_hosts files consulted: the user's (the first is where accept-new writes),
    #: then the global ones.
    files: tuple[str, ...]
    address: str
    port: int | None
    #: The keys (and CAs) the files hold for the host, asyncssh's `known_hosts` argument.
    matched: Matched
    #: accept-new and no key yet: connect without checking, then record the key.
    trust_new: bool
    store: KnownHostsFiles

    @classmethod
    def for_host(cls, store: KnownHostsFiles, files: tuple[str, ...], address: str,
                 port: int | None, policy: str) -> HostKeyPlan:
        matched = store.match(files, address, port)
        known = any(matched[:4])
        return cls(files, address, port, matched, not known and policy == "accept-new", store)

    @property
    def path(self) -> str:
        """The file a trusted-new key is written to (OpenSSH's first UserKnownHostsFile)."""
        return self.files[0]

    @property
    def known(self) -> bool:
        """known_hosts already holds a key (or CA) for the host: a mismatch means "changed"."""
        return any(self.matched[:4])

    @property
    def known_hosts(self) -> Matched | None:
        """asyncssh's `known_hosts` argument: None (no check) only while trusting a new key."""
        return None if self.trust_new else self.matched

    def accepts(self, blob: bytes) -> bool:
        """Whether a server key (its wire blob) passes: one known_hosts trusts for the host,
        never a revoked one; any other while trusting a new key."""
        if any(blob == key.public_data for key in self.matched[2]):
            return False
        return self.trust_new or any(blob == key.public_data for key in self.matched[0])

    def key_types(self) -> list[str]:
        """The types of the keys known for the host, in known_hosts' order."""
        return list(dict.fromkeys(key.algorithm.decode("ascii", "replace")
                                  for key in self.matched[0]))

    def consulted(self) -> str:
        """The files a refusal names: the first always, the others where they exist."""
        shown = [self.path, *(p for p in self.store.read(self.files[1:]))]
        return " or ".join(dict.fromkeys(shown))

    def record(self, key: asyncssh.SSHKey | None) -> None:
        """Append the key a trusted-new connection saw, as OpenSSH's accept-new does."""
        if key is not None:
            self.record_blob(key.public_data)

    def record_blob(self, blob: bytes) -> None:
        """`record` for a key given as its wire blob (what libssh2 reports)."""
        if not self.trust_new:
            return
        line = _known_hosts_line(self.address, self.port, blob)
        with _KNOWN_HOSTS_LOCK:
            os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
            with open(self.path, "a", encoding="ascii") as handle:
                handle.write(line)
            self.store.add(self.path, line)

    def refusal_cause(self) -> str:
        """The failure id of a refused key: changed, or not yet known."""
        return HOST_KEY_CHANGED if self.known else HOST_KEY_UNKNOWN

    def refusal(self, name: str, where: str) -> str:
        """Why the host's key was refused: changed (possible MITM) or not yet known."""
        if self.known:
            return (f"host key for {name} ({where}) does not match known_hosts "
                    f"{self.consulted()} — possible man-in-the-middle")
        return f"host key for {name} ({where}) is not in {self.consulted()}"
