"""Owns the SSH host-key policy: which known_hosts file, strict or accept-new, and its wording.

`ssh.py` holds connection mechanics; what is trusted, how a first key is recorded and how a
refused key is explained live here (the gate's fixes match these texts, see verdict.py).
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass

from fleetcheck.inventory.model import SshOptions
from fleetcheck.transport.interface import TransportError
from fleetcheck.transport.sshlib import asyncssh

DEFAULT_KNOWN_HOSTS = "~/.ssh/known_hosts"

# The known_hosts file is appended to by every accept-new connection; one writer at a time.
_KNOWN_HOSTS_LOCK = threading.Lock()


def known_hosts_path(options: SshOptions) -> str:
    return os.path.expanduser(options.known_hosts or DEFAULT_KNOWN_HOSTS)


def _has_known_key(path: str, host: str, port: int | None) -> bool:
    """Does known_hosts hold any key (or CA) for this host? Decides "unknown" vs "changed"."""
    try:
        known = asyncssh.read_known_hosts(path)
    except FileNotFoundError:
        return False
    except (OSError, ValueError) as exc:
        raise TransportError(f"cannot read known_hosts {path}: {exc}") from None
    matched = known.match(host, "", port if port not in (None, 22) else None)
    return any(matched[:4])


def _known_hosts_line(host: str, port: int | None, key: asyncssh.SSHKey) -> str:
    pattern = host if port in (None, 22) else f"[{host}]:{port}"
    alg, blob = key.export_public_key("openssh").decode().split()[:2]
    return f"{pattern} {alg} {blob}\n"


@dataclass(frozen=True)
class HostKeyPlan:
    """How one connection checks its host's key, decided before connecting."""

    path: str
    address: str
    port: int | None
    #: known_hosts already holds a key (or CA) for the host: a mismatch means "changed".
    known: bool
    #: accept-new and no key yet: connect without checking, then record the key.
    trust_new: bool

    @classmethod
    def for_host(cls, options: SshOptions, address: str) -> HostKeyPlan:
        path = known_hosts_path(options)
        known = _has_known_key(path, address, options.port)
        trust_new = not known and options.host_key_policy == "accept-new"
        return cls(path, address, options.port, known, trust_new)

    @property
    def known_hosts(self) -> str | None:
        """asyncssh's `known_hosts` argument: None (no check) only while trusting a new key."""
        return None if self.trust_new else self.path

    def record(self, key: asyncssh.SSHKey | None) -> None:
        """Append the key a trusted-new connection saw, as OpenSSH's accept-new does."""
        if not self.trust_new or key is None:
            return
        line = _known_hosts_line(self.address, self.port, key)
        with _KNOWN_HOSTS_LOCK:
            os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
            with open(self.path, "a", encoding="ascii") as handle:
                handle.write(line)

    def refusal(self, name: str, where: str) -> str:
        """Why the host's key was refused: changed (possible MITM) or not yet known."""
        if self.known:
            return f"host key for {name} does not match known_hosts — possible man-in-the-middle"
        return f"host key for {name} ({where}) is not in {self.path}"
