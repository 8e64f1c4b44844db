"""Owns ssh_config: its files read once per audit, each host resolved as OpenSSH resolves it.

OpenSSH reads its config top to bottom for every connection and keeps the first value it obtains
for each option (ssh_config(5)); the command line comes first. fleetcheck does the same, with the
inventory in the command line's place, but parses the files (and their `Include`s) once: a
`Host` line of plain names is filed under those names, so resolving one host visits the blocks
that name it and the blocks of patterns and `Match` lines, never the other hosts' blocks. One
host costs the same with 10 or 10,000 blocks in the file (docs/scaling.md).

Options fleetcheck's connection depends on are read: HostName, Port, User, IdentityFile,
IdentitiesOnly, UserKnownHostsFile, GlobalKnownHostsFile, StrictHostKeyChecking, ProxyJump,
ConnectTimeout, Ciphers, MACs, KexAlgorithms, HostKeyAlgorithms, HostKeyAlias. `%` tokens are
expanded where OpenSSH expands them (HostName: `%h`; IdentityFile and the known_hosts files: the
path tokens). `~`, `%d`, `%u` and the user's own files come from the passwd entry, as OpenSSH
takes them, not from `$HOME` and `$USER` (`fleetcheck/userhome.py`).
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import shlex
import socket
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from glob import glob
from pathlib import Path

from fleetcheck.transport.interface import TransportError
from fleetcheck.userhome import expand_tilde, ssh_home, ssh_user

USER_CONFIG = "~/.ssh/config"
SYSTEM_CONFIG = "/etc/ssh/ssh_config"
DEFAULT_PORT = 22
#: OpenSSH's defaults when no file names them (ssh_config(5)).
DEFAULT_USER_KNOWN_HOSTS = ("~/.ssh/known_hosts", "~/.ssh/known_hosts2")
DEFAULT_GLOBAL_KNOWN_HOSTS = ("/etc/ssh/ssh_known_hosts", "/etc/ssh/ssh_known_hosts2")
#: The keys OpenSSH tries when neither the command line nor a file names one (`ssh -G`'s
#: `identityfile` lines), in its order.
DEFAULT_IDENTITY_FILES = ("~/.ssh/id_rsa", "~/.ssh/id_ecdsa", "~/.ssh/id_ecdsa_sk",
                          "~/.ssh/id_ed25519", "~/.ssh/id_ed25519_sk", "~/.ssh/id_xmss",
                          "~/.ssh/id_dsa")

#: The options read, by their lower-case keyword: (canonical name, kind).
_OPTIONS = {name.lower(): (name, kind) for name, kind in (
    ("HostName", "str"), ("Port", "int"), ("User", "str"), ("IdentityFile", "append"),
    ("IdentitiesOnly", "bool"), ("UserKnownHostsFile", "list"),
    ("GlobalKnownHostsFile", "list"), ("StrictHostKeyChecking", "strict"),
    ("ProxyJump", "str"), ("ConnectTimeout", "int"), ("Ciphers", "str"), ("MACs", "str"),
    ("KexAlgorithms", "str"), ("HostKeyAlgorithms", "str"), ("HostKeyAlias", "str"),
)}
_STRICT_VALUES = {"yes": "yes", "true": "yes", "no": "no", "false": "no", "off": "no",
                  "ask": "ask", "accept-new": "accept-new"}
_BOOL_VALUES = {"yes": True, "true": True, "no": False, "false": False}
#: Match criteria that take an argument; `all`, `canonical` and `final` take none.
_MATCH_ARGUMENT = ("host", "originalhost", "user", "localuser", "exec")
_MAX_INCLUDE_DEPTH = 16
_TOKEN = re.compile(r"%(.)")
_KEYWORD = re.compile(r"([A-Za-z]+)\s*(?:=\s*|\s+|$)(.*)")
#: What makes a line need shlex: quotes, backslashes, a comment.
_QUOTING = re.compile(r"[\"'\\#]")


class SshConfigError(TransportError):
    """An ssh_config line OpenSSH would refuse too: `FILE line N: problem`."""

    def __init__(self, path: str, line: int, problem: str) -> None:
        super().__init__(f"ssh_config {path} line {line}: {problem}")


def _glob_regex(pattern: str) -> re.Pattern[str]:
    """OpenSSH's match_pattern: `*` and `?` only, case-sensitive, the whole string."""
    wild = {"*": ".*", "?": "."}
    return re.compile("".join(wild.get(c) or re.escape(c) for c in pattern) + r"\Z",
                      re.DOTALL)


@dataclass(frozen=True)
class _PatternList:
    """A Host line's words, or a Match criterion's comma-separated list: `!` negates."""

    patterns: tuple[tuple[bool, re.Pattern[str]], ...]
    #: The plain names, when every word is one (no `*`, `?` or `!`): such a line is indexed.
    names: tuple[str, ...] | None = None

    @classmethod
    def of(cls, words: Iterable[str]) -> _PatternList:
        kept = [word for word in words if word.lstrip("!")]
        plain = all(not any(c in word for c in "*?!") for word in kept)
        return cls(tuple((word.startswith("!"), _glob_regex(word.lstrip("!"))) for word in kept),
                   tuple(kept) if plain else None)

    def matches(self, value: str) -> bool:
        """Any positive pattern matches and no negated one does (OpenSSH's rule)."""
        found = False
        for negated, regex in self.patterns:
            if regex.match(value):
                if negated:
                    return False
                found = True
        return found


@dataclass(frozen=True)
class _Condition:
    """A Host or Match line; `parent` is the block an `Include` of this line sits in."""

    index: int
    parent: int | None
    kind: str  # "host" or "match"
    host: _PatternList | None = None
    #: Match criteria in order: (negated, name, argument).
    criteria: tuple[tuple[bool, str, str], ...] = ()
    where: tuple[str, int] = ("", 0)


@dataclass(frozen=True)
class _Setting:
    name: str
    value: object
    where: tuple[str, int]


@dataclass
class _Segment:
    """Consecutive lines under one condition (None: before any Host/Match line)."""

    condition: int | None
    settings: list[_Setting] = field(default_factory=list)


@dataclass(frozen=True)
class Resolved:
    """What ssh_config (and the inventory before it) says for one host, tokens expanded."""

    host: str
    hostname: str
    port: int
    user: str
    identity_files: tuple[str, ...]
    identities_only: bool
    user_known_hosts: tuple[str, ...]
    global_known_hosts: tuple[str, ...]
    #: yes, no, ask or accept-new (OpenSSH's default: ask).
    strict_host_key_checking: str
    proxy_jump: str | None
    connect_timeout: float | None
    ciphers: str | None
    macs: str | None
    kex_algorithms: str | None
    host_key_algorithms: str | None
    #: The name known_hosts is searched (and written) under instead of the host name.
    host_key_alias: str | None = None
    #: Options that came from the command line's stand-in (the inventory), not a file.
    overridden: frozenset[str] = frozenset()


@functools.cache
def _local_user() -> str:
    return ssh_user()


@functools.cache
def _local_tokens() -> dict[str, str]:
    """The tokens that name this machine and user: the same for every host."""
    local = socket.gethostname()
    return {"u": _local_user(), "d": ssh_home(), "l": local,
            "L": local.split(".", 1)[0], "i": str(os.getuid())}


class _Tokens:
    """OpenSSH's `%` tokens for one host (the ones its path options accept)."""

    def __init__(self, values: Mapping[str, str]) -> None:
        self.values = values

    def expand(self, text: str, allowed: str, where: tuple[str, int] | None = None) -> str:
        def one(match: re.Match[str]) -> str:
            letter = match.group(1)
            if letter == "%":
                return "%"
            if letter not in allowed or letter not in self.values:
                path, line = where or ("ssh_config", 0)
                raise SshConfigError(path, line, f"unknown token %{letter} in {text!r}")
            return self.values[letter]
        return _TOKEN.sub(one, text)


#: Tokens of IdentityFile, UserKnownHostsFile and GlobalKnownHostsFile (ssh_config(5) TOKENS).
_PATH_TOKENS = "CdhijkLlnpru"


def expand_path(text: str, tokens: _Tokens, where: tuple[str, int] | None = None) -> str:
    """A path option as OpenSSH opens it: `~` first, then the `%` tokens."""
    if "%" not in text and not text.startswith("~"):
        return text
    return tokens.expand(expand_tilde(text), _PATH_TOKENS, where)


class SshConfig:
    """The parsed files of one ssh_config (or none); `resolve` answers for one host."""

    def __init__(self, paths: Iterable[str] = ()) -> None:
        self.paths = tuple(paths)
        self._conditions: list[_Condition] = []
        self._segments: list[_Segment] = []
        #: Segments (by index) under a Host line of plain names, filed under each name.
        self._by_name: dict[str, list[int]] = {}
        #: Segments any host may need: patterns, Match lines, lines before any block.
        self._general: list[int] = []
        self._final = False
        for path in self.paths:
            # Relative Includes: /etc/ssh for the system's file, ~/.ssh for any other.
            base = Path("/etc/ssh" if path == SYSTEM_CONFIG else os.path.join(ssh_home(), ".ssh"))
            self._read(path, None, base, 0)
        self._index()

    @classmethod
    def for_option(cls, config_file: str | None) -> SshConfig:
        """The config an inventory's `config_file` names: None is OpenSSH's own pair of files
        (~/.ssh/config, then /etc/ssh/ssh_config), "" none, a path that file alone (`ssh -F`)."""
        if config_file == "":
            return cls()
        if config_file is not None:
            return cls([expand_tilde(config_file)])
        found = [p for p in (expand_tilde(USER_CONFIG), SYSTEM_CONFIG) if os.path.isfile(p)]
        return cls(found)

    # -- reading ------------------------------------------------------------------------

    def _read(self, path: str, parent: int | None, base: Path, depth: int) -> None:
        if depth > _MAX_INCLUDE_DEPTH:
            raise SshConfigError(path, 0, "too many nested Include levels")
        try:
            text = Path(path).read_text(encoding="utf-8", errors="surrogateescape")
        except OSError as exc:
            raise SshConfigError(path, 0, f"cannot read it: {exc.strerror or exc}") from None
        self._segments.append(_Segment(parent))
        for number, raw in enumerate(text.splitlines(), 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            keyword, words = self._split(line, (path, number))
            where = (path, number)
            if keyword == "host":
                self._add_condition(_Condition(len(self._conditions), parent, "host",
                                               host=_PatternList.of(words), where=where))
            elif keyword == "match":
                self._add_condition(_Condition(len(self._conditions), parent, "match",
                                               criteria=self._criteria(words, where),
                                               where=where))
            elif keyword == "include":
                current = self._segments[-1].condition
                for word in words:
                    self._include(word, current, base, depth, where)
                self._segments.append(_Segment(current))
            elif keyword in _OPTIONS:
                self._segments[-1].settings.append(self._setting(keyword, words, where))

    def _include(self, word: str, current: int | None, base: Path, depth: int,
                 where: tuple[str, int]) -> None:
        pattern = expand_tilde(word)
        if not os.path.isabs(pattern):
            # Relative to ~/.ssh for the user's file, /etc/ssh for the system's (ssh_config(5)).
            pattern = str(base / pattern)
        for found in sorted(glob(pattern)):
            if os.path.isfile(found):
                self._read(found, current, base, depth + 1)

    @staticmethod
    def _split(line: str, where: tuple[str, int]) -> tuple[str, list[str]]:
        match = _KEYWORD.match(line)
        if match is None:
            raise SshConfigError(*where, f"cannot read {line!r}")
        rest = match.group(2)
        if not _QUOTING.search(rest):
            # Most lines: plain words, split without shlex's character-by-character lexer.
            return match.group(1).lower(), rest.split()
        try:
            words = shlex.split(rest, comments=True)
        except ValueError as exc:
            raise SshConfigError(*where, str(exc)) from None
        return match.group(1).lower(), words

    def _criteria(self, words: list[str], where: tuple[str, int]
                  ) -> tuple[tuple[bool, str, str], ...]:
        found: list[tuple[bool, str, str]] = []
        items = iter(words)
        for word in items:
            negated, name = word.startswith("!"), word.lstrip("!").lower()
            if name in ("all", "canonical", "final"):
                self._final = self._final or name == "final"
                found.append((negated, name, ""))
            elif name in _MATCH_ARGUMENT:
                argument = next(items, None)
                if argument is None:
                    raise SshConfigError(*where, f"Match {name} needs an argument")
                found.append((negated, name, argument))
            else:
                raise SshConfigError(*where, f"unsupported Match criterion {name!r}")
        if not found:
            raise SshConfigError(*where, "Match needs a criterion")
        return tuple(found)

    def _add_condition(self, condition: _Condition) -> None:
        self._conditions.append(condition)
        self._segments.append(_Segment(condition.index))

    @staticmethod
    def _setting(keyword: str, words: list[str], where: tuple[str, int]) -> _Setting:
        name, kind = _OPTIONS[keyword]
        if not words:
            raise SshConfigError(*where, f"{name} needs a value")
        first = words[0]
        value: object
        if kind == "int":
            if name == "ConnectTimeout" and first.lower() == "none":
                value = None
            elif first.isdigit() and int(first) <= 65535:
                value = int(first)
            else:
                raise SshConfigError(*where, f"{name} must be a number, got {first!r}")
        elif kind == "bool":
            if first.lower() not in _BOOL_VALUES:
                raise SshConfigError(*where, f"{name} must be yes or no, got {first!r}")
            value = _BOOL_VALUES[first.lower()]
        elif kind == "strict":
            if first.lower() not in _STRICT_VALUES:
                raise SshConfigError(*where, f"{name} must be yes, no, ask or accept-new, "
                                             f"got {first!r}")
            value = _STRICT_VALUES[first.lower()]
        elif kind == "list":
            value = tuple(words)
        else:
            value = first
        return _Setting(name, value, where)

    def _index(self) -> None:
        """File each segment under the plain names of the nearest Host line above it."""
        for number, segment in enumerate(self._segments):
            names = self._literal_names(segment.condition)
            if names is None:
                self._general.append(number)
            else:
                for name in names:
                    self._by_name.setdefault(name, []).append(number)

    def _literal_names(self, condition: int | None) -> tuple[str, ...] | None:
        while condition is not None:
            block = self._conditions[condition]
            if block.host is not None and block.host.names is not None:
                return block.host.names
            condition = block.parent
        return None

    # -- resolving ----------------------------------------------------------------------

    def resolve(self, host: str, *, user: str | None = None, port: int | None = None,
                first: Mapping[str, object] | None = None) -> Resolved:
        """Host `host` as `ssh -G` would show it; `user`, `port` and `first` (option name to
        value) come first, as `-l`, `-p` and `-o` do on OpenSSH's command line."""
        options: dict[str, object] = dict(first or {})
        if user is not None:
            options["User"] = user
        if port is not None:
            options["Port"] = port
        overridden = frozenset(options)
        local_user = _local_user()
        where: dict[str, tuple[str, int]] = {}
        self._pass(host, host, options, where, local_user, final=False)
        if self._final:
            # OpenSSH's second pass matches Host lines against the host name now settled.
            options.setdefault("HostName", host.lower())
            self._pass(str(options["HostName"]), host, options, where, local_user, final=True)
        return self._finish(host, options, where, local_user, overridden)

    def _candidates(self, host: str) -> list[int]:
        named = self._by_name.get(host)
        if not named:
            return self._general
        return sorted({*self._general, *named})

    def _pass(self, name: str, host: str, options: dict[str, object],
              where: dict[str, tuple[str, int]], local_user: str, *, final: bool) -> None:
        """One reading of the file: Host lines match `name`, the rest the host as given."""
        active: dict[int, bool] = {}
        for number in self._candidates(name):
            segment = self._segments[number]
            if not self._active(segment.condition, name, host, options, local_user, final,
                                active):
                continue
            for setting in segment.settings:
                if setting.name == "IdentityFile":
                    files = options.setdefault("IdentityFile", [])
                    assert isinstance(files, list)
                    if setting.value not in [value for value, _ in files]:
                        files.append((setting.value, setting.where))
                elif setting.name not in options:
                    options[setting.name] = setting.value
                    where[setting.name] = setting.where
                    if setting.name == "HostName":
                        options["HostName"] = _Tokens({"h": host}).expand(
                            str(setting.value), "h", setting.where).lower()

    def _active(self, condition: int | None, name: str, host: str, options: dict[str, object],
                local_user: str, final: bool, active: dict[int, bool]) -> bool:
        if condition is None:
            return True
        if condition not in active:
            block = self._conditions[condition]
            result = self._active(block.parent, name, host, options, local_user, final, active)
            if result:
                if block.kind == "host":
                    assert block.host is not None
                    result = block.host.matches(name)
                else:
                    result = self._match(block, host, options, local_user, final)
            active[condition] = result
        return active[condition]

    def _match(self, block: _Condition, host: str, options: dict[str, object],
               local_user: str, final: bool) -> bool:
        hostname = str(options.get("HostName", host)).lower()
        for negated, name, argument in block.criteria:
            if name == "all":
                result = True
            elif name in ("canonical", "final"):
                result = final
            elif name == "host":
                result = _PatternList.of(argument.split(",")).matches(hostname)
            elif name == "originalhost":
                result = _PatternList.of(argument.split(",")).matches(host.lower())
            elif name == "user":
                result = _PatternList.of(argument.split(",")).matches(
                    str(options.get("User") or local_user))
            elif name == "localuser":
                result = _PatternList.of(argument.split(",")).matches(local_user)
            else:  # exec, as OpenSSH runs it: the user's shell, the tokens expanded
                command = self._tokens(host, hostname, options, local_user).expand(
                    argument, "CdhiLlnpru", block.where)
                shell = os.environ.get("SHELL") or "/bin/sh"
                try:
                    result = subprocess.run(
                        [shell, "-c", command], stdin=subprocess.DEVNULL,
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False,
                    ).returncode == 0
                except OSError:
                    result = False
            if result == negated:
                return False
        return True

    @staticmethod
    def _tokens(host: str, hostname: str, options: Mapping[str, object],
                local_user: str) -> _Tokens:
        port = str(options.get("Port") or DEFAULT_PORT)
        user = str(options.get("User") or local_user)
        local = _local_tokens()
        jump = str(options.get("ProxyJump") or "")
        values = {
            **local, "h": hostname, "p": port, "r": user, "n": host, "j": jump,
            "k": str(options.get("HostKeyAlias") or host),
            # OpenSSH's %C: a name for the connection, not a security hash.
            "C": hashlib.sha1(f"{local['l']}{hostname}{port}{user}".encode(),
                              usedforsecurity=False).hexdigest(),
        }
        return _Tokens(values)

    def _finish(self, host: str, options: dict[str, object], where: dict[str, tuple[str, int]],
                local_user: str, overridden: frozenset[str]) -> Resolved:
        hostname = str(options.get("HostName") or host.lower())
        tokens = self._tokens(host, hostname, options, local_user)
        timeout = options.get("ConnectTimeout")
        jump = options.get("ProxyJump")
        files = options.get("IdentityFile") or []
        assert isinstance(files, list)

        def text(name: str) -> str | None:
            value = options.get(name)
            return None if value is None else str(value)

        def paths(name: str, default: tuple[str, ...]) -> tuple[str, ...]:
            value = options.get(name, default)
            assert isinstance(value, (tuple, list))
            if [str(v).lower() for v in value] == ["none"]:
                return ()
            return tuple(expand_path(str(v), tokens, where.get(name)) for v in value)

        return Resolved(
            host=host,
            hostname=hostname,
            port=int(str(options.get("Port") or DEFAULT_PORT)),
            user=str(options.get("User") or local_user),
            identity_files=tuple(expand_path(str(f), tokens, origin) for f, origin in files),
            identities_only=bool(options.get("IdentitiesOnly", False)),
            user_known_hosts=paths("UserKnownHostsFile", DEFAULT_USER_KNOWN_HOSTS),
            global_known_hosts=paths("GlobalKnownHostsFile", DEFAULT_GLOBAL_KNOWN_HOSTS),
            strict_host_key_checking=str(options.get("StrictHostKeyChecking", "ask")),
            proxy_jump=None if jump is None or str(jump).lower() == "none" else str(jump),
            connect_timeout=None if timeout is None else float(str(timeout)),
            ciphers=text("Ciphers"),
            macs=text("MACs"),
            kex_algorithms=text("KexAlgorithms"),
            host_key_algorithms=text("HostKeyAlgorithms"),
            host_key_alias=text("HostKeyAlias"),
            overridden=overridden,
        )


def algorithm_list(setting: str | None, defaults: Iterable[str],
                   available: Iterable[str]) -> list[str]:
    """An algorithm option as OpenSSH reads it: a list replaces the defaults, `+list` appends
    to them, `-list` removes from them, `^list` puts first; `*` and `?` match in `-`. Names this
    client cannot do are dropped, as OpenSSH drops them."""
    base = list(defaults)
    offered = set(available)
    if not setting:
        return [alg for alg in base if alg in offered]
    head, rest = setting[0], setting[1:]
    names = [name for name in (rest if head in "+-^" else setting).split(",") if name]
    if head == "-":
        removed = _PatternList.of(names)
        chosen = [alg for alg in base if not removed.matches(alg)]
    elif head == "+":
        chosen = base + [alg for alg in names if alg not in base]
    elif head == "^":
        chosen = names + [alg for alg in base if alg not in names]
    else:
        chosen = names
    return [alg for alg in chosen if alg in offered]
