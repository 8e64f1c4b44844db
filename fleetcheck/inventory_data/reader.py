"""The inventory's typed reader: the YAML reader (`yamlread.YamlReader`) with the inventory's
own values: addresses and jump hosts, interpreters, environments, labels, SSH and API
sections, and no secret in a mapping.

The loader reads with it (`load.py`), the sources read their entries with the loader's
(`sources.py`), and each node kind reads its declaration with it (`NodeKind.read_declaration`).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from fleetcheck.inventory_data.model import ApiOptions, SshOptions
from fleetcheck.inventory_data.schema import (
    ENV_NAME_RE,
    HOST_KEY_POLICIES,
    HOSTNAME_RE,
    JUMP_USER_RE,
    LABEL_RE,
    SECRET_HINT,
    SECRET_KEYS,
    SSH_CLIENTS,
)
from fleetcheck.inventory_data.yamlread import YamlReader, show
from fleetcheck.inventory_data.yamlsrc import KeyPath
from fleetcheck.text import clip
from fleetcheck.userhome import expand_tilde


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def address_problem(text: str) -> str | None:
    """Why `text` is not a hostname, IPv4 or IPv6 literal; None when it is one."""
    shown = show(clip(text, 80))
    if text.startswith("-"):
        return f"must not start with '-' (it would read as an ssh option), got {shown}"
    if HOSTNAME_RE.match(text) or _is_ip(text):
        return None
    return ("must be a hostname, an IPv4 or an IPv6 address (no spaces or shell characters), "
            f"got {shown}")


def jump_problem(text: str) -> str | None:
    """Why `text` is not a comma-separated list of `[user@]host[:port]` hops; None if it is."""
    for hop in text.split(","):
        shown = show(clip(hop.strip(), 80))
        user, at, rest = hop.strip().rpartition("@")
        # The transport splits host:port at the first ':', so an IPv6 literal cannot be a hop.
        host, colon, port = rest.partition(":")
        if at and not JUMP_USER_RE.match(user):
            return (f"hop {shown}: the user may hold only letters, digits, '.', '_' and '-' "
                    "(not first)")
        if host.startswith("-"):
            return f"hop {shown}: the host must not start with '-' (it would read as an option)"
        if not (HOSTNAME_RE.match(host) or _is_ip(host)) or ":" in host:
            return (f"hop {shown}: must be [user@]host[:port], the host a hostname or an IPv4 "
                    "address")
        if colon and not (port.isascii() and port.isdigit() and 1 <= int(port) <= 65535):
            return f"hop {shown}: the port must be between 1 and 65535"
    return None


class InventoryReader(YamlReader):
    """Reads an inventory's values, raising InventoryError at the first mistake."""

    def mapping(self, value: Any, path: KeyPath, allowed: tuple[str, ...]) -> dict[str, Any]:
        """A mapping whose keys are all in `allowed`; a secret's key is refused with the safe
        way to give it."""
        section = str(path[-1]) if path and isinstance(path[-1], str) else ""
        if isinstance(value, dict):
            for key in value:
                if key in SECRET_KEYS.get(section, ()):
                    raise self.fail((*path, key), "secrets are not allowed in the inventory; "
                                                  f"{SECRET_HINT[section]}")
                if key not in allowed:
                    break  # the first key not allowed: refused below
        return super().mapping(value, path, allowed)

    def address(self, value: Any, path: KeyPath) -> str:
        return self.checked(self.string(value, path), path, address_problem)

    def python(self, value: Any, path: KeyPath) -> str:
        text = self.string(value, path)
        if text.startswith("~"):
            # The interpreter is looked up on the node, where `~` is not expanded (no shell).
            raise self.fail(
                path, f"'~' is not expanded on the node; give an absolute path: {text!r}"
            )
        return text

    def env(self, value: Any, path: KeyPath) -> dict[str, str]:
        if not isinstance(value, dict):
            raise self.fail(path, f"must be a mapping of NAME: value, got {show(value)}")
        for name, item in value.items():
            if not ENV_NAME_RE.match(name):
                raise self.fail((*path, name), "not a valid environment variable name")
            if not isinstance(item, str):
                quote = " (quote it)" if isinstance(item, (bool, int, float)) else ""
                raise self.fail((*path, name), f"must be a string, got {show(item)}{quote}")
            if "\0" in item:
                raise self.fail((*path, name), "must not contain a NUL character")
        return dict(value)

    def labels(self, value: Any, path: KeyPath) -> tuple[str, ...]:
        if not isinstance(value, list):
            raise self.fail(path, f"must be a list of labels, e.g. [gpu], got {show(value)}")
        out: list[str] = []
        for index, item in enumerate(value):
            if not isinstance(item, str) or not LABEL_RE.match(item):
                raise self.fail(
                    (*path, index),
                    f"must be a label (letters, digits, _ + . -), got {show(item)}",
                )
            if item not in out:
                out.append(item)
        return tuple(out)

    def ssh(self, items: Mapping[str, tuple[Any, KeyPath]]) -> SshOptions:
        """SshOptions from defaults.ssh + hosts.X.ssh; unset keys stay None for ssh_config."""
        kw: dict[str, Any] = {}
        for key, (value, path) in items.items():
            if value is None:
                continue
            if key == "user":
                kw[key] = self.string(value, path)
            elif key == "proxy_jump":
                kw[key] = self.checked(self.string(value, path), path, jump_problem)
            elif key == "port":
                kw[key] = self.integer(value, path, 1, 65535)
            elif key in ("identity_file", "known_hosts"):
                kw[key] = self.ssh_path(value, path)
            elif key == "config_file":
                # "none" as in `ssh -F none`: read no ssh_config at all.
                kw[key] = "" if value in ("", "none") else self.ssh_path(value, path)
            elif key == "host_key_policy":
                kw[key] = self.choice(value, path, HOST_KEY_POLICIES)
            elif key == "max_sessions":
                kw[key] = self.integer(value, path, 1)
            elif key == "client":
                kw[key] = self.choice(value, path, SSH_CLIENTS)
            elif key == "connect_timeout":
                kw[key] = self.seconds(value, path)
        return SshOptions(**kw)

    def ssh_path(self, value: Any, path: KeyPath) -> str:
        """An SSH file: `~` from the passwd entry's home, as OpenSSH expands it (not `$HOME`,
        which `local_path` would use), then relative to the document's folder."""
        return self.local_path(expand_tilde(self.string(value, path)), path)

    def api(self, items: Mapping[str, tuple[Any, KeyPath]], host: KeyPath, name: str) -> ApiOptions:
        """ApiOptions from defaults.api + hosts.X.api; the secret itself is never read here."""
        for key in ("url", "user", "token_name"):
            if key not in items:
                raise self.fail((*host, "api", key), "missing (needed for API discovery)")
        url_value, url_path = items["url"]
        url = self.string(url_value, url_path)
        parts = urlsplit(url)
        if parts.scheme != "https" or not parts.hostname:
            raise self.fail(url_path, f"must be an https:// URL, got {show(url)}")
        user_value, user_path = items["user"]
        user = self.string(user_value, user_path)
        if "@" not in user or "!" in user:
            raise self.fail(user_path, f"must be USER@REALM (e.g. fleet@pve), got {show(user)}")
        token_name = self.string(*items["token_name"])
        has_env, has_file = "token_env" in items, "token_file" in items
        if has_env == has_file:
            where = (*host, "api")
            problem = "set exactly one of token_env, token_file" + (
                "" if not has_env else " (both are set)"
            )
            raise self.fail(where, problem)
        token_env = token_file = None
        if has_env:
            env_value, env_path = items["token_env"]
            token_env = self.string(env_value, env_path)
            if not ENV_NAME_RE.match(token_env):
                raise self.fail(env_path, "must be the NAME of an environment variable")
        else:
            token_file = self.local_path(*items["token_file"])
        verify: bool | str = True
        if "verify_tls" in items:
            value, path = items["verify_tls"]
            verify = value if isinstance(value, bool) else self.local_path(value, path)
        node = name
        if "node" in items:
            node = self.string(*items["node"])
        given: dict[str, Any] = (
            {"timeout": self.seconds(*items["timeout"])} if "timeout" in items else {})
        return ApiOptions(
            url=url,
            user=user,
            token_name=token_name,
            token_env=token_env,
            token_file=token_file,
            verify_tls=verify,
            node=node,
            **given,
        )
