"""The inventory's schema: the keys each section accepts, the shapes of names, and how one
host's settings are laid over another's (defaults, a source's template, the host's own).

Below the loader (`load.py`) and the sources it reads (`sources.py`), which both use it, and
below the node kinds, whose declarations are read with it: it asks the kinds nothing (the keys
they add are `hostkeys.py`'s).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

TOP_KEYS = ("defaults", "hosts", "groups", "sources")
SSH_KEYS = (
    "user",
    "port",
    "identity_file",
    "known_hosts",
    "proxy_jump",
    "host_key_policy",
    "config_file",
    "max_sessions",
    "connect_timeout",
    "client",
)
API_KEYS = ("url", "user", "token_name", "token_env", "token_file", "verify_tls", "node", "timeout")
DEFAULTS_KEYS = (
    "ssh",
    "api",
    "python",
    "env",
    "labels",
    "timeout",
    "sudo",
    "concurrency",
    "audit_timeout",
    "probe_host",
)
#: A host entry's keys, in the order "unknown key (valid: ...)" lists them. The keys of the
#: kinds fleetcheck shipped first stand here for that order only: each kind reads its own
#: (`hostkeys.kind_keys`), and a kind added since comes after these (`hostkeys.host_keys`).
HOST_KEYS = (
    "address",
    "transport",
    "enabled",
    "ssh",
    "api",
    "probe_host",
    "containers",
    "vms",
    "oci",
    "kubernetes",
    "python",
    "env",
    "labels",
    "sudo",
    "timeout",
)


TRANSPORTS = ("ssh", "local", "api")
HOST_KEY_POLICIES = ("strict", "accept-new")
#: `ssh.client`: which SSH client a connection uses (transport/ssh.py decides "auto").
SSH_CLIENTS = ("auto", "libssh2", "asyncssh")

#: Keys that would put a secret in the file; refused with a pointer to the safe way.
SECRET_KEYS = {
    "api": ("token_value", "token", "secret", "password"),
    "ssh": ("password", "passphrase"),
}
SECRET_HINT = {
    "api": "use token_env (an environment variable) or token_file (a file) instead",
    "ssh": "use an identity_file or ssh-agent instead",
}

#: Host and group names appear in node ids (`HOST/VMID`) and in --limit patterns, so none of
#: the pattern characters (`/ , ! & @ : * ? [`) may appear in them.
NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")
#: The Proxmox tag syntax (pve-common), so API tags and inventory labels mix.
LABEL_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_+.-]*$")
ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
#: A DNS name or an ssh_config alias: dot-separated labels of letters, digits, '_' and '-',
#: none starting with '-' (so no address can read as an option such as -oProxyCommand=...).
HOSTNAME_RE = re.compile(r"^(?=.{1,253}$)[A-Za-z0-9_][A-Za-z0-9_-]{0,62}"
                         r"(?:\.[A-Za-z0-9_][A-Za-z0-9_-]{0,62})*\.?$")
#: A jump user as POSIX login names go: no '-' first, no shell metacharacter.
JUMP_USER_RE = re.compile(r"^[A-Za-z0-9_.][A-Za-z0-9_.-]{0,31}$")


def merge_settings(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """Host settings `over` laid on `base`: ssh, api and env merged key by key, labels added
    up, anything else replaced."""
    merged = dict(base)
    for key, value in over.items():
        if key in ("ssh", "api", "env") and isinstance(value, dict) \
                and isinstance(merged.get(key), dict):
            merged[key] = {**merged[key], **value}
        elif key == "labels" and isinstance(value, list) and isinstance(merged.get(key), list):
            merged[key] = [*merged[key], *value]
        else:
            merged[key] = value
    return merged
