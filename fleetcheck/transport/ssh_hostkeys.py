"""Owns the SSH host-key policy: which known_hosts file, strict or accept-new, and its wording.

`ssh.py` holds connection mechanics; what is trusted, how a first key is recorded and how a
refused key is explained live here (the gate's fixes match these texts, see judgement/fixes.py).

A host's keys are found by fleetcheck's own reading of its known_hosts files
(`known_hosts.py`) where that reading is sure of every file, and by asyncssh's otherwise; the
two agree wherever the first is sure (tests/transport/test_known_hosts.py). asyncssh's reading
(and asyncssh itself) is loaded only when a connection needs it: one made by asyncssh, or a
host whose files only asyncssh reads.
"""

from __future__ import annotations

import base64
import os
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fleetcheck.failures import HOST_KEY_CHANGED, HOST_KEY_UNKNOWN
from fleetcheck.transport.interface import TransportError
from fleetcheck.transport.known_hosts import Found, KnownHostsText, Unsure, WireReader

if TYPE_CHECKING:
    import asyncssh

# The known_hosts file is appended to by every accept-new connection; one writer at a time.
_KNOWN_HOSTS_LOCK = threading.Lock()

#: What asyncssh's `known_hosts` argument takes already matched: host keys, CA keys, revoked
#: keys, X.509 certificates, revoked certificates, X.509 subjects, revoked subjects.
Matched = tuple[list[Any], list[Any], list[Any], list[Any], list[Any], list[Any], list[Any]]


class KnownHostsFiles:
    """Every known_hosts file of one audit, each read once, consulted per host.

    A plain entry (`host` or `[host]:port`) is found by a dict lookup; hashed and wildcard
    entries are tried one by one, as OpenSSH does. Each file's text is read once; fleetcheck's
    own reading of it (`mine`) and asyncssh's (`_file`) are each made on first use.
    """

    def __init__(self) -> None:
        self._texts: dict[str, str | None] = {}
        self._mine: dict[str, KnownHostsText | None] = {}
        self._files: dict[str, asyncssh.SSHKnownHosts | None] = {}

    def _text(self, path: str) -> str | None:
        """The file's text; None where it does not exist."""
        if path not in self._texts:
            try:
                with open(path, encoding="utf-8", errors="replace") as handle:
                    self._texts[path] = handle.read()
            except (FileNotFoundError, NotADirectoryError):
                self._texts[path] = None
            except OSError as exc:
                raise TransportError(f"cannot read known_hosts {path}: {exc}") from None
        return self._texts[path]

    def _file(self, path: str) -> asyncssh.SSHKnownHosts | None:
        """asyncssh's reading of the file (asyncssh imported here, on first need)."""
        if path not in self._files:
            text = self._text(path)
            if text is None:
                self._files[path] = None
                return None
            from fleetcheck.transport.sshlib import asyncssh

            try:
                self._files[path] = asyncssh.import_known_hosts(text)
            except ValueError as exc:
                raise TransportError(f"cannot read known_hosts {path}: {exc}") from None
        return self._files[path]

    def _own(self, path: str) -> KnownHostsText | None:
        """fleetcheck's own reading of the file (an absent file holds nothing); None where it
        is not sure of it."""
        if path not in self._mine:
            try:
                self._mine[path] = KnownHostsText(self._text(path) or "")
            except Unsure:
                self._mine[path] = None
        return self._mine[path]

    def read(self, paths: tuple[str, ...]) -> tuple[str, ...]:
        """The files of `paths` that exist (each read on its first mention)."""
        return tuple(path for path in paths if self._text(path) is not None)

    def match(self, paths: tuple[str, ...], host: str, port: int | None) -> Matched:
        """Keys for `host` (at `port`) in every file of `paths` together, as asyncssh's
        `known_hosts` argument."""
        found: Matched = ([], [], [], [], [], [], [])
        wanted = port if port not in (None, 22) else None
        for path in paths:
            known = self._file(path)
            if known is not None:
                for into, part in zip(found, known.match(host, "", wanted), strict=True):
                    into.extend(part)
        return found

    def match_own(self, paths: tuple[str, ...], host: str, port: int | None) -> Found | None:
        """`match` by fleetcheck's own reading: None where it is not sure of a file."""
        found = Found()
        wanted = port if port not in (None, 22) else None
        for path in paths:
            mine = self._own(path)
            if mine is None:
                return None
            try:
                found += mine.match(host, wanted)
            except Unsure:
                return None
        return found

    def add(self, path: str, line: str) -> None:
        """A line just appended to `path`: later hosts of this audit see it too."""
        if path in self._texts:
            self._texts[path] = (self._texts[path] or "") + line
        else:
            self._text(path)  # the file as it is now, the line included
        mine = self._mine.get(path)
        if mine is not None:
            try:
                mine.load(line)
            except Unsure:
                self._mine[path] = None
        known = self._files.get(path)
        if known is not None:
            known.load(line)
        else:
            self._files.pop(path, None)  # read again, with the line, when asyncssh needs it


def _key_type(blob: bytes) -> str:
    """A key's type, the first string of its wire blob."""
    return WireReader(blob).string().decode("ascii", "replace")


def _known_hosts_line(host: str, port: int | None, blob: bytes) -> str:
    """The line OpenSSH's accept-new writes for a key (its wire blob): `host type base64`."""
    pattern = host if port in (None, 22) else f"[{host}]:{port}"
    return f"{pattern} {_key_type(blob)} {base64.b64encode(blob).decode('ascii')}\n"


@dataclass(frozen=True)
class HostKeyPlan:
    """How one connection checks its host's key, decided before connecting."""

    #: The known_hosts files consulted: the user's (the first is where accept-new writes),
    #: then the global ones.
    files: tuple[str, ...]
    address: str
    port: int | None
    #: fleetcheck's own reading of the files for the host; None where only asyncssh's is sure.
    own: Found | None
    #: known_hosts already holds a key (or CA) for the host: a mismatch means "changed".
    known: bool
    #: accept-new and no key yet: connect without checking, then record the key.
    trust_new: bool
    store: KnownHostsFiles
    #: asyncssh's reading for the host, made on first need (`matched`).
    _asyncssh: list[Matched] = field(default_factory=list, compare=False, repr=False)

    @classmethod
    def for_host(cls, store: KnownHostsFiles, files: tuple[str, ...], address: str,
                 port: int | None, policy: str) -> HostKeyPlan:
        own = store.match_own(files, address, port)
        matched = [] if own is not None else [store.match(files, address, port)]
        known = own.known if own is not None else any(matched[0][:4])
        return cls(files, address, port, own, known, not known and policy == "accept-new",
                   store, matched)

    @property
    def path(self) -> str:
        """The file a trusted-new key is written to (OpenSSH's first UserKnownHostsFile)."""
        return self.files[0]

    @property
    def matched(self) -> Matched:
        """asyncssh's reading of the files for the host (asyncssh imported on first need)."""
        if not self._asyncssh:
            self._asyncssh.append(self.store.match(self.files, self.address, self.port))
        return self._asyncssh[0]

    @property
    def known_hosts(self) -> Matched | None:
        """asyncssh's `known_hosts` argument: None (no check) only while trusting a new key."""
        return None if self.trust_new else self.matched

    @property
    def authorities(self) -> bool:
        """A certificate authority or a certificate names the host: only asyncssh checks
        those."""
        if self.own is not None:
            return self.own.authorities
        return any(self.matched[1]) or any(part for part in self.matched[3:])

    def _blobs(self, part: int) -> list[bytes]:
        if self.own is not None:
            return list(self.own.keys if part == 0 else self.own.revoked)
        return [key.public_data for key in self.matched[part]]

    def accepts(self, blob: bytes) -> bool:
        """Whether a server key (its wire blob) passes: one known_hosts trusts for the host,
        never a revoked one; any other while trusting a new key."""
        if blob in self._blobs(2):
            return False
        return self.trust_new or blob in self._blobs(0)

    def key_types(self) -> list[str]:
        """The types of the keys known for the host, in known_hosts' order."""
        return list(dict.fromkeys(_key_type(blob) for blob in self._blobs(0)))

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
            with open(self.path, "a+b") as handle:
                # A file that does not end its last line gets the line break first, as
                # OpenSSH's does: the new line must not run on from someone else's.
                if handle.seek(0, os.SEEK_END) > 0:
                    handle.seek(-1, os.SEEK_END)
                    if handle.read(1) != b"\n":
                        line = "\n" + line
                handle.write(line.encode("ascii"))
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
