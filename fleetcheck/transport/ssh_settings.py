"""Owns one host's effective SSH settings: the inventory over ssh_config over the defaults.

An audit makes one `SshFiles`: each ssh_config, known_hosts file and private key is read once,
however many hosts use it. `SshFiles.settings(host)` gives the address, port, user, keys,
known_hosts files, host-key policy, jump hosts, connect timeout and algorithms a connection
uses; asyncssh is then given all of them explicitly and reads no config of its own, nor its
own default keys: where nothing names a key, OpenSSH's default ones in the passwd entry's home
are given (`fleetcheck/userhome.py`), not asyncssh's under `$HOME`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from fleetcheck.budget import DEFAULT_CONNECT_TIMEOUT
from fleetcheck.inventory_data.model import HostSpec, SshOptions
from fleetcheck.transport.interface import TransportError
from fleetcheck.transport.keyfiles import plain_key
from fleetcheck.transport.ssh_config import (
    DEFAULT_IDENTITY_FILES,
    Resolved,
    SshConfig,
    algorithm_list,
)
from fleetcheck.transport.ssh_hostkeys import KnownHostsFiles
from fleetcheck.userhome import expand_tilde

#: Host-key policy when neither `ssh.host_key_policy` nor `StrictHostKeyChecking` says.
DEFAULT_HOST_KEY_POLICY = "strict"
#: StrictHostKeyChecking -> fleetcheck's policy. `no` trusts unknown keys as accept-new does
#: but, unlike OpenSSH, never connects to a host whose key changed (the audit logs in as root).
_POLICY_OF_STRICT = {"yes": "strict", "ask": "strict", "accept-new": "accept-new",
                     "no": "accept-new"}

#: Cipher preference, first match wins (the client's order decides in SSH). AES-GCM runs on the
#: CPU's AES instructions through OpenSSL and costs asyncssh one AEAD call per packet, where its
#: chacha20-poly1305 builds three cipher contexts and a Poly1305 per packet: about 45% less
#: client CPU per node (bench/results.md). chacha20 and the ctr modes stay as fallbacks so that
#: a host restricted to them still connects.
PREFERRED_CIPHERS = (
    "aes128-gcm@openssh.com", "aes256-gcm@openssh.com", "chacha20-poly1305@openssh.com",
    "aes128-ctr", "aes192-ctr", "aes256-ctr",
)
#: MACs matter only on the ctr fallback (AEAD ciphers carry their own tag); hmac-sha2-256-etm
#: first because umac exists only where asyncssh finds libnettle.
PREFERRED_MACS = (
    "hmac-sha2-256-etm@openssh.com", "umac-64-etm@openssh.com",
    "hmac-sha2-512-etm@openssh.com", "umac-128-etm@openssh.com",
    "hmac-sha2-256", "hmac-sha2-512", "hmac-sha1-etm@openssh.com", "hmac-sha1",
)


def _names(algs: list[bytes]) -> list[str]:
    return [alg.decode("ascii") for alg in algs]


def key_exchanges() -> list[str]:
    """asyncssh's own key-exchange order: post-quantum hybrids first (mlkem768x25519-sha256
    through `cryptography`, sntrup761x25519-sha512 with liboqs) where this build has them."""
    from fleetcheck.transport.sshlib import asyncssh

    return [alg for alg in _names(asyncssh.kex.get_default_kex_algs())
            if not alg.startswith("gss-")]


def _host_key_algs(default: bool) -> list[str]:
    from fleetcheck.transport.sshlib import asyncssh

    key = asyncssh.public_key
    if default:
        return _names(key.get_default_x509_certificate_algs()
                      + key.get_default_certificate_algs() + key.get_default_public_key_algs())
    return _names(key.get_x509_certificate_algs() + key.get_certificate_algs()
                  + key.get_public_key_algs())


@functools.cache
def algorithms(option: str, setting: str | None) -> tuple[str, ...]:
    """The list one option gives (ssh_config's `setting` on fleetcheck's defaults), computed
    once per distinct setting: asyncssh's algorithms are fixed once it is imported."""
    from fleetcheck.transport.sshlib import asyncssh

    if option == "KexAlgorithms":
        chosen = algorithm_list(setting, key_exchanges(), _names(asyncssh.kex.get_kex_algs()))
    elif option == "Ciphers":
        chosen = algorithm_list(setting, PREFERRED_CIPHERS,
                                _names(asyncssh.encryption.get_encryption_algs()))
    elif option == "MACs":
        chosen = algorithm_list(setting, PREFERRED_MACS, _names(asyncssh.mac.get_mac_algs()))
    else:
        chosen = algorithm_list(setting, _host_key_algs(True), _host_key_algs(False))
    if not chosen:
        raise TransportError(f"ssh_config {option} {setting}: none of them is one this SSH "
                             "client (asyncssh) has")
    return tuple(chosen)


@dataclass(frozen=True)
class SshSettings:
    """What one connection to one host uses, every value decided (for messages, too)."""

    name: str
    address: str
    port: int
    user: str
    identity_files: tuple[str, ...]
    #: The inventory's `identity_file`, first of `identity_files` (it must load).
    named_identity: str | None
    identities_only: bool
    #: known_hosts files consulted: the user's (first: where accept-new writes), then global.
    known_hosts: tuple[str, ...]
    host_key_policy: str
    #: The name the host's key is known under (ssh_config's HostKeyAlias), else the address.
    host_key_name: str
    proxy_jump: str | None
    connect_timeout: float
    #: ssh_config's KexAlgorithms, Ciphers and MACs; None: fleetcheck's own lists.
    kex_setting: str | None
    cipher_setting: str | None
    mac_setting: str | None
    host_key_algs: tuple[str, ...] | None

    @property
    def kex_algs(self) -> tuple[str, ...]:
        """The key exchanges asyncssh offers (its own order, or ssh_config's list)."""
        return algorithms("KexAlgorithms", self.kex_setting)

    @property
    def encryption_algs(self) -> tuple[str, ...]:
        return algorithms("Ciphers", self.cipher_setting)

    @property
    def mac_algs(self) -> tuple[str, ...]:
        return algorithms("MACs", self.mac_setting)

    @property
    def where(self) -> str:
        return f"{self.address}:{self.port}"

    def jump_hops(self) -> list[str]:
        """`proxy_jump`'s hops in order (`[user@]host[:port]` each), none without it."""
        if not self.proxy_jump:
            return []
        return [hop.strip() for hop in self.proxy_jump.split(",")]


class SshFiles:
    """The ssh_config files, known_hosts files and keys of one audit, each read once."""

    def __init__(self) -> None:
        self._configs: dict[str | None, SshConfig] = {}
        #: Per path: its keys, or why it cannot be loaded.
        self._keys: dict[str, list[Any] | str] = {}
        #: Per path: the key file's bytes, for libssh2.
        self._key_bytes: dict[str, bytes] = {}
        #: Per path: fleetcheck's own reading of the file (keyfiles.plain_key).
        self._plain_keys: dict[str, tuple[str, bytes] | str | None] = {}
        #: OpenSSH's default key files, given where nothing names a key: one that cannot be
        #: loaded is skipped, as OpenSSH skips it.
        self._defaults = frozenset(expand_tilde(path) for path in DEFAULT_IDENTITY_FILES)
        self.known_hosts = KnownHostsFiles()

    def config(self, config_file: str | None) -> SshConfig:
        if config_file not in self._configs:
            self._configs[config_file] = SshConfig.for_option(config_file)
        return self._configs[config_file]

    def settings(self, host: HostSpec, *, lookup: str | None = None,
                 user: str | None = None, port: int | None = None) -> SshSettings:
        """`host`'s settings; a jump hop passes its own `lookup` name, user and port."""
        options = host.ssh
        name = lookup or host.address or host.name
        if lookup is None:
            user, port = options.user, options.port
        resolved = self.config(options.config_file).resolve(name, user=user, port=port)
        return _settings(host.name, options, resolved)

    def _loaded(self, path: str) -> list[Any] | str:
        """The keys of `path` (none where it is gone), or why they cannot be loaded."""
        if path not in self._keys:
            from fleetcheck.transport.sshlib import asyncssh

            try:
                self._keys[path] = list(asyncssh.load_keypairs([path]))
            except FileNotFoundError:
                self._keys[path] = []
            except (OSError, ValueError, asyncssh.KeyImportError) as exc:
                self._keys[path] = f"cannot load SSH key {path}: {exc}"
        return self._keys[path]

    def _plain(self, path: str) -> tuple[str, bytes] | str | None:
        """keyfiles.plain_key of `path`, read once."""
        if path not in self._plain_keys:
            self._plain_keys[path] = plain_key(path)
        return self._plain_keys[path]

    def _usable(self, paths: tuple[str, ...], named: str | None) -> list[tuple[str, list[Any]]]:
        """Each path with its keys, in order. A file that is gone is skipped, as OpenSSH skips
        it, and so is a passphrase-protected one from ssh_config (its agent may hold it, as
        asyncssh's own reading does); only `named`, the inventory's key, must load."""
        usable: list[tuple[str, list[Any]]] = []
        for path in paths:
            loaded = self._loaded(path)
            if isinstance(loaded, str):
                if path == named or ("passphrase" not in loaded.lower()
                                     and path not in self._defaults):
                    raise TransportError(loaded)
                continue
            if loaded:
                usable.append((path, loaded))
        return usable

    def client_keys(self, paths: tuple[str, ...], named: str | None = None) -> list[Any]:
        """Each private key loaded once (see `_usable` for the files skipped)."""
        return [key for _, keys in self._usable(paths, named) for key in keys]

    def key_files(self, paths: tuple[str, ...], named: str | None = None
                  ) -> list[tuple[str, bytes, tuple[str, ...]]]:
        """Each usable key file (see `_usable`) as a client that reads the file itself is
        given it: its path, its bytes (read once) and its keys' algorithms (a certificate's
        where one comes with it). Read by fleetcheck's own reading where it is sure of every
        file (keyfiles.py: asyncssh not imported), by asyncssh's loader otherwise."""
        plain = [self._plain(path) for path in paths]
        if all(found is not None for found in plain):
            return [(path, found[1], (found[0],)) for path, found in zip(paths, plain, strict=True)
                    if isinstance(found, tuple)]
        files: list[tuple[str, bytes, tuple[str, ...]]] = []
        for path, keys in self._usable(paths, named):
            if path not in self._key_bytes:
                try:
                    with open(path, "rb") as handle:
                        self._key_bytes[path] = handle.read()
                except OSError as exc:
                    raise TransportError(f"cannot load SSH key {path}: {exc}") from None
            files.append((path, self._key_bytes[path],
                          tuple(key.algorithm.decode("ascii", "replace") for key in keys)))
        return files


def _settings(name: str, options: SshOptions, resolved: Resolved) -> SshSettings:
    # The inventory's key comes first, as `ssh -i` does, then the ssh_config's.
    # `~` as OpenSSH expands `-i` and `-o` values: from the passwd entry's home.
    identities = resolved.identity_files
    named = expand_tilde(options.identity_file) if options.identity_file else None
    if named:
        identities = (named, *(path for path in identities if path != named))
    if not identities:
        identities = tuple(expand_tilde(path) for path in DEFAULT_IDENTITY_FILES)
    user_files = ((expand_tilde(options.known_hosts),) if options.known_hosts
                  else resolved.user_known_hosts)
    if not user_files:
        raise TransportError(f"{name}: UserKnownHostsFile none leaves no known_hosts to check "
                             "host keys against: name one (ssh.known_hosts)", kind="error")
    timeout = options.connect_timeout or resolved.connect_timeout or DEFAULT_CONNECT_TIMEOUT
    policy = (options.host_key_policy
              or _POLICY_OF_STRICT.get(resolved.strict_host_key_checking)
              or DEFAULT_HOST_KEY_POLICY)
    jump = options.proxy_jump or resolved.proxy_jump
    # Unset: asyncssh orders host key types by the keys known_hosts holds, as OpenSSH does.
    host_key_algs = (algorithms("HostKeyAlgorithms", resolved.host_key_algorithms)
                     if resolved.host_key_algorithms else None)
    settings = SshSettings(
        name=name,
        address=resolved.hostname,
        port=resolved.port,
        user=resolved.user,
        identity_files=identities,
        named_identity=named,
        identities_only=resolved.identities_only,
        known_hosts=(*user_files, *resolved.global_known_hosts),
        host_key_policy=policy,
        host_key_name=resolved.host_key_alias or resolved.hostname,
        proxy_jump=jump,
        connect_timeout=float(timeout),
        kex_setting=resolved.kex_algorithms,
        cipher_setting=resolved.ciphers,
        mac_setting=resolved.macs,
        host_key_algs=host_key_algs,
    )
    # An ssh_config list none of whose algorithms asyncssh has is refused here, with the host's
    # other settings; fleetcheck's own lists need no check (nor asyncssh, until it connects).
    for option, setting in (("KexAlgorithms", settings.kex_setting),
                            ("Ciphers", settings.cipher_setting),
                            ("MACs", settings.mac_setting)):
        if setting is not None:
            algorithms(option, setting)
    return settings
