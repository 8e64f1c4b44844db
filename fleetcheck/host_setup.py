"""The least-privilege audit key: the host gatekeeper's set-up, with the node kinds' grammar.

The gatekeeper itself is `fleetcheck/data/gatekeeper.py`, a standard-library script that runs on
each Proxmox host as the forced command of the audit key and owns the grammar's machinery, the
host's own probe and clean-up, the refusal exit status and the refusal text; the node kinds'
commands are each kind's (`kinds.gatekeeper_chains`). This module owns the fleetcheck side: the
script as installed (the kinds' grammar written into it), the hash of the probe in use, the
`authorized_keys` line and installer `fleetcheck host-setup` prints. The audit reads a refusal
with `transport/gatekeeper_refusal.py`.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from fleetcheck import __version__, kinds
from fleetcheck.errors import FleetcheckError
from fleetcheck.kinds import Grammar
from fleetcheck.transport.gatekeeper_refusal import shipped_script, shipped_text

DEFAULT_SCRIPT_PATH = "/usr/local/lib/fleetcheck/gatekeeper.py"
DEFAULT_HASH_PATH = "/etc/fleetcheck/probe.sha256"
DEFAULT_AUTHORIZED_KEYS = "~/.ssh/authorized_keys"
DEFAULT_HOST_PYTHON = "/usr/bin/python3"

#: Words allowed in a path written into the key's `command="..."`: no quote, no space, no `$`.
_SAFE_PATH = re.compile(r"/[A-Za-z0-9_./+-]*")
_KEY_TYPES = re.compile(r"(ssh-(ed25519|rsa|dss)|ecdsa-sha2-nistp(256|384|521)|"
                        r"sk-(ssh-ed25519|ecdsa-sha2-nistp256)@openssh\.com)")


class HostSetupError(FleetcheckError):
    """A bad host-setup request (unreadable key, unsafe path); one line, exit code 2."""


def script_source(grammar: Grammar | None = None) -> str:
    """The gatekeeper's source as `fleetcheck host-setup` installs it: the registry's node
    kinds' grammar composed along their chains (`kinds.gatekeeper_chains`), with `grammar`'s
    word classes and whole shapes (`kinds.gatekeeper_grammar`), written into its KIND_WORDS
    and KIND_SHAPES."""
    source = shipped_text()
    words, shapes = kinds.joined_grammar(kinds.gatekeeper_chains(), grammar or ({}, {}))
    # The script reads KIND_WORDS over its own WORDS and KIND_SHAPES beside its own shapes:
    # a kind naming one of those would replace it (a generic word class widened everywhere).
    shipped = shipped_script()
    for what, given, own in (("word class", words, shipped.WORDS),
                             ("shape", shapes, shipped.SHAPES)):
        taken = sorted(set(given) & set(own))
        if taken:
            raise ValueError(f"a node kind gives the gatekeeper's own {what} {taken[0]!r}")
    for name, value in (("KIND_WORDS", words), ("KIND_SHAPES", shapes)):
        marker = f"\n{name} = {{}}\n"
        if marker not in source:
            raise AssertionError(f"the gatekeeper script lost its {name} constant")
        source = source.replace(marker, f"\n{name} = {_literal(value)}\n", 1)
    return source


def _literal(table: Mapping[str, Any]) -> str:
    """`table` as a dict literal, one entry a line; the reprs of str, list and tuple values
    read the same in Python 3.6."""
    if not table:
        return "{}"
    return "{" + "".join(f"\n    {key!r}: {value!r}," for key, value in table.items()) + "\n}"


def script_with(grammar: Grammar) -> ModuleType:
    """The gatekeeper as `fleetcheck host-setup` would install it with `grammar`, loaded as a
    module (to check what it allows)."""
    module = ModuleType("fleetcheck_gatekeeper_script_with_kinds")
    exec(compile(script_source(grammar), "gatekeeper.py", "exec"), module.__dict__)  # noqa: S102
    return module


def script_module() -> ModuleType:
    """The gatekeeper as `fleetcheck host-setup` installs it for the registry's kinds as they
    are now (their composed chains), loaded as a module: its grammar, exit status and texts."""
    return _script_for(tuple(kinds.KINDS.items()))


@functools.cache
def _script_for(registry: tuple[tuple[str, str], ...]) -> ModuleType:
    """`script_module` built once for each state of the registry (`registry`: its lines, the
    cache's key; the kinds themselves are read from it)."""
    del registry
    return script_with(({}, {}))


def probe_sha256() -> str:
    """SHA-256 of the probe exactly as the audit sends it on stdin."""
    from fleetcheck.probe import probe_source

    return hashlib.sha256(probe_source().encode()).hexdigest()


@dataclass(frozen=True)
class HostSetup:
    """Where the gatekeeper lives on a host and which key it guards."""

    public_key: str
    python: str = DEFAULT_HOST_PYTHON
    script_path: str = DEFAULT_SCRIPT_PATH
    hash_path: str = DEFAULT_HASH_PATH
    authorized_keys: str = DEFAULT_AUTHORIZED_KEYS
    log_path: str | None = None
    from_patterns: str | None = None
    #: What the registry's node kinds add to the grammar (`kinds.gatekeeper_grammar()`).
    grammar: Grammar | None = None

    def __post_init__(self) -> None:
        for what, value in (("--python", self.python), ("--script-path", self.script_path),
                            ("--hash-file", self.hash_path), ("--log", self.log_path)):
            if value is not None and not _SAFE_PATH.fullmatch(value):
                raise HostSetupError(f"{what} {value!r}: needs an absolute path of letters, "
                                     "digits and ._+-/ (it goes into authorized_keys)")
        if self.from_patterns is not None and not re.fullmatch(r"[A-Za-z0-9_.:*?!/,-]+",
                                                               self.from_patterns):
            raise HostSetupError(f"--from {self.from_patterns!r}: not a list of host patterns")
        self.key_words()

    @classmethod
    def for_key_file(cls, key_file: str, **settings: Any) -> HostSetup:
        """The set-up guarding the key of `key_file` (a .pub), with the grammar the registry's
        node kinds add (`kinds.gatekeeper_grammar()`): `fleetcheck host-setup`'s."""
        grammar = kinds.gatekeeper_grammar()
        return cls(public_key=read_public_key(key_file), grammar=grammar, **settings)

    def script(self) -> str:
        """The gatekeeper's source as this set-up installs it."""
        return script_source(self.grammar)

    def key_words(self) -> tuple[str, str, str]:
        """(type, base64 blob, comment) of the public key; raises HostSetupError."""
        words = self.public_key.strip().split()
        if len(words) < 2 or not _KEY_TYPES.fullmatch(words[0]):
            raise HostSetupError("the public key is not an OpenSSH public key line "
                                 "(e.g. ssh-ed25519 AAAA... comment)")
        if not re.fullmatch(r"[A-Za-z0-9+/]+={0,2}", words[1]):
            raise HostSetupError("the public key's base64 blob is malformed")
        comment = " ".join(words[2:])
        return words[0], words[1], re.sub(r"[^A-Za-z0-9_.@:+-]", "_", comment)

    def command(self) -> str:
        """The forced command: isolated Python (-I ignores PYTHON* and the user's site)."""
        words = [self.python, "-I", self.script_path, "--allow", self.hash_path]
        if self.log_path:
            words += ["--log", self.log_path]
        return " ".join(words)

    def key_line(self) -> str:
        """The authorized_keys line: no forwarding, no PTY, no rc, only the gatekeeper."""
        kind, blob, comment = self.key_words()
        options = ["restrict", f'command="{self.command()}"']
        if self.from_patterns:
            options.insert(1, f'from="{self.from_patterns}"')
        return " ".join([",".join(options), kind, blob, *([comment] if comment else [])])

    def installer(self) -> str:
        """A standard-library program that installs all of it when run as root on the host.

        The gatekeeper's own source with its INSTALL constant set to this plan, to be piped
        into `ssh root@host python3 -`.
        """
        source = self.script()
        plan = {
            "script": source, "script_path": self.script_path, "hash_path": self.hash_path,
            "hashes": [[probe_sha256(), f"fleetcheck {__version__} probe"]],
            "authorized_keys": self.authorized_keys, "key_line": self.key_line(),
            "key_blob": self.key_words()[1],
        }
        marker = "\nINSTALL = None\n"
        if marker not in source:
            raise AssertionError("the gatekeeper script lost its INSTALL constant")
        return source.replace(marker, f"\nINSTALL = {json.dumps(json.dumps(plan))}\n", 1)


def read_public_key(path: str) -> str:
    """The first key line of a .pub file; raises HostSetupError naming the file."""
    try:
        with open(os.path.expanduser(path), encoding="utf-8") as handle:
            lines = [line for line in handle.read().splitlines()
                     if line.strip() and not line.startswith("#")]
    except (OSError, UnicodeDecodeError) as exc:
        raise HostSetupError(f"cannot read public key {path}: {exc}") from None
    if not lines:
        raise HostSetupError(f"{path}: no public key in it")
    return lines[0]
