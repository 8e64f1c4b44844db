"""`sources:` of the inventory: hosts from inventories users already keep (Ansible, Proxmox).

A source gives host settings in the inventory's own terms (the mapping a `hosts:` entry
holds) plus, for each setting, the name it had in the source, so that a mistake is worded in
the source's terms (`fleetcheck_timeout`, `ansible_port`). The loader validates them as it
validates `hosts:` entries.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fleetcheck.budget import SOURCE_COMMAND_TIMEOUT
from fleetcheck.inventory.ansible import AnsibleInventory
from fleetcheck.inventory.hostkeys import host_keys
from fleetcheck.inventory_data.reader import InventoryReader
from fleetcheck.inventory_data.schema import API_KEYS, LABEL_RE, merge_settings
from fleetcheck.text import did_you_mean

#: A host variable `fleetcheck_KEY` is the host key KEY (`fleetcheck_containers: all`).
VARIABLE_PREFIX = "fleetcheck_"
#: Ansible's variables and the inventory keys they become (the first one set wins).
_ANSIBLE_VARS: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = (
    (("address",), ("ansible_host", "ansible_ssh_host")),
    (("ssh", "port"), ("ansible_port", "ansible_ssh_port")),
    (("ssh", "user"), ("ansible_user", "ansible_ssh_user")),
    (("ssh", "identity_file"), ("ansible_ssh_private_key_file", "ansible_private_key_file")),
    (("python",), ("ansible_python_interpreter",)),
)
#: ansible_connection values fleetcheck reaches the same way (OpenSSH or paramiko: SSH).
_SSH_CONNECTIONS = ("ssh", "smart", "paramiko", "paramiko_ssh", "ansible.builtin.ssh",
                    "ansible.builtin.paramiko_ssh")
_LOCAL_CONNECTIONS = ("local", "ansible.builtin.local")


class SourceProblem(ValueError):
    """A source's host setting fleetcheck cannot take: "VARIABLE: problem", one line."""

    def __init__(self, variable: str, problem: str) -> None:
        super().__init__(f"{variable}: {problem}")


@dataclass(frozen=True)
class SourceHost:
    """One host a source gives: its settings as a `hosts:` entry, and where each came from."""

    name: str
    settings: Mapping[str, Any]
    #: Inventory key path ("ssh", "port") -> the source's name for it ("ansible_port").
    provenance: Mapping[tuple[str, ...], str] = field(default_factory=dict)


@dataclass(frozen=True)
class SourceHosts:
    """What one source gave: its hosts, its groups (name -> host names) and what it left out."""

    hosts: tuple[SourceHost, ...]
    groups: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: One line each: hosts left out and why (a Windows host, a connection fleetcheck has not).
    warnings: tuple[str, ...] = ()


def ansible_hosts(inventory: AnsibleInventory, host_keys: tuple[str, ...],
                  only_groups: tuple[str, ...] = (), label: str = "") -> SourceHosts:
    """The hosts of an Ansible inventory as inventory hosts (see docs/inventory.md).

    `only_groups`: keep the hosts of these groups. Every group a host is in becomes one of
    its labels; `fleetcheck_KEY` variables are host keys and win over the ansible_* ones.
    """
    keep = set(inventory.hosts)
    if only_groups:
        keep = {h for g in only_groups for h in inventory.groups.get(g, ())}
    membership: dict[str, list[str]] = {}
    for group, members in inventory.groups.items():
        for member in members:
            membership.setdefault(member, []).append(group)
    hosts: list[SourceHost] = []
    warnings: list[str] = []
    for name, variables in inventory.hosts.items():
        if name not in keep:
            continue
        connection = variables.get("ansible_connection")
        if connection is not None and connection not in (*_SSH_CONNECTIONS,
                                                         *_LOCAL_CONNECTIONS):
            warnings.append(f"{label}: host {name} left out: ansible_connection "
                            f"{connection!r} is not SSH (fleetcheck reaches hosts over SSH)")
            continue
        try:
            settings, provenance = ansible_settings(name, variables, host_keys,
                                                    tuple(membership.get(name, ())))
        except SourceProblem as exc:
            raise SourceProblem(f"host {name}", str(exc)) from None
        hosts.append(SourceHost(name, settings, provenance))
    kept = {host.name for host in hosts}
    groups = {g: tuple(h for h in members if h in kept)
              for g, members in inventory.groups.items()}
    return SourceHosts(tuple(hosts), {g: m for g, m in groups.items() if m}, tuple(warnings))


def ansible_settings(
    name: str, variables: Mapping[str, Any], host_keys: tuple[str, ...],
    groups: tuple[str, ...] = (),
) -> tuple[dict[str, Any], dict[tuple[str, ...], str]]:
    """One Ansible host's variables -> (a `hosts:` entry, provenance). Raises SourceProblem."""
    settings: dict[str, Any] = {}
    provenance: dict[tuple[str, ...], str] = {}

    def put(path: tuple[str, ...], value: Any, variable: str) -> None:
        _refuse_unevaluated(variable, value)
        target = settings
        for key in path[:-1]:
            target = target.setdefault(key, {})
        target[path[-1]] = value
        provenance[path] = variable

    for path, names in _ANSIBLE_VARS:
        variable = next((n for n in names if variables.get(n) is not None), None)
        if variable is None:
            continue
        value = variables[variable]
        if path == ("python",) and isinstance(value, str) and value.startswith("auto"):
            continue  # Ansible's interpreter discovery: fleetcheck's default python3
        if path == ("ssh", "port") and isinstance(value, str) and value.isdigit():
            value = int(value)
        put(path, value, variable)
    for variable in ("ansible_ssh_common_args", "ansible_ssh_extra_args"):
        if variables.get(variable):
            jump = proxy_jump_of(variable, variables[variable])
            if jump is not None:
                put(("ssh", "proxy_jump"), jump, variable)
    if variables.get("ansible_connection") in _LOCAL_CONNECTIONS:
        put(("transport",), "local", "ansible_connection")
    labels = list(groups)
    if labels:
        put(("labels",), labels, "groups")
    for variable, value in variables.items():
        if not variable.startswith(VARIABLE_PREFIX):
            continue
        key = variable[len(VARIABLE_PREFIX):]
        if key not in host_keys:
            hint = did_you_mean(key, host_keys, shown=lambda close: VARIABLE_PREFIX + close)
            raise SourceProblem(variable, f"not an inventory key{hint}")
        if key == "labels" and isinstance(value, list):
            value = [*labels, *value]
        elif key in ("ssh", "api", "env") and isinstance(value, dict) \
                and isinstance(settings.get(key), dict):
            value = {**settings[key], **value}
        _refuse_unevaluated(variable, value)
        settings[key] = value
        for path in [p for p in provenance if p[0] == key]:
            del provenance[path]
        provenance[(key,)] = variable
    return settings, provenance


def proxy_jump_of(variable: str, args: Any) -> str | None:
    """The ProxyJump in ssh arguments (`-J HOP`, `-o ProxyJump=HOP`, or the classic
    `-o ProxyCommand="ssh -W %h:%p [-p PORT] USER@HOP"`); None when they name none."""
    if not isinstance(args, str):
        raise SourceProblem(variable, "must be a string of ssh arguments")
    _refuse_unevaluated(variable, args)
    try:
        words = shlex.split(args)
    except ValueError as exc:
        raise SourceProblem(variable, f"cannot split the ssh arguments: {exc}") from None
    options: list[str] = []
    for index, word in enumerate(words):
        if word == "-J" and index + 1 < len(words):
            return words[index + 1]
        if word.startswith("-J") and len(word) > 2:
            return word[2:]
        if word == "-o" and index + 1 < len(words):
            options.append(words[index + 1])
        elif word.startswith("-o") and len(word) > 2:
            options.append(word[2:])
    for option in options:
        # ssh -o takes "Key=Value" and "Key Value".
        key, value = [*re.split(r"\s*=\s*|\s+", option.strip(), maxsplit=1), ""][:2]
        if key.lower() == "proxyjump":
            return value.strip()
        if key.lower() == "proxycommand":
            return _jump_of_proxy_command(variable, value.strip())
    return None


def _jump_of_proxy_command(variable: str, command: str) -> str:
    words = shlex.split(command)
    if words[:1] == ["ssh"] and "-W" in words:
        port = ""
        rest: list[str] = []
        skip = False
        for index, word in enumerate(words[1:], start=1):
            if skip:
                skip = False
                continue
            if word in ("-W", "-p", "-l", "-i"):
                skip = True
                if word == "-p" and index + 1 < len(words):
                    port = words[index + 1]
                continue
            if not word.startswith("-"):
                rest.append(word)
        if len(rest) == 1:
            return rest[0] + (f":{port}" if port else "")
    raise SourceProblem(variable, f"ProxyCommand {command!r} is not an `ssh -W %h:%p HOST` "
                                  "jump; use ProxyJump (ssh -J) instead")


def _refuse_unevaluated(variable: str, value: Any) -> None:
    """Values Ansible would still evaluate: a Jinja template or a vaulted string."""
    if isinstance(value, str) and ("{{" in value or "{%" in value):
        raise SourceProblem(variable, f"{value!r} is a Jinja template, which fleetcheck does "
                                      "not evaluate; give the value itself")
    if isinstance(value, dict):
        if "__ansible_vault" in value:
            raise SourceProblem(variable, "is vault-encrypted; fleetcheck reads no secrets")
        for item in value.values():
            _refuse_unevaluated(variable, item)
    if isinstance(value, list):
        for item in value:
            _refuse_unevaluated(variable, item)


# -- the `sources:` key ----------------------------------------------------------------------

#: The keys of each kind of source entry (the kind is the key naming its location).
SOURCE_KEYS = {
    "ansible": ("ansible", "parser", "groups", "host", "timeout", "enabled"),
    "proxmox": ("proxmox", "host", "enabled"),
}


@dataclass(frozen=True)
class SourceEntry:
    """A host a `sources:` entry gave, with where it was declared (for messages)."""

    host: SourceHost
    #: The entry's key path, ("sources", 0, "ansible"), and how the source is named.
    where: tuple[str | int, ...]
    label: str
    #: Where the host comes from: "inv.yaml:5 (hosts.ini)".
    origin: str


@dataclass(frozen=True)
class FoundSources:
    """Everything the `sources:` entries gave."""

    hosts: tuple[SourceEntry, ...] = ()
    groups: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()


def read_sources(builder: InventoryReader, raw: Any, context: Mapping[str, Any]) -> FoundSources:
    """Read each `sources:` entry; `builder` is the loader's reader (its checks and error
    wording), `context` what `defaults:` gives every host."""
    if raw is None or raw == []:
        return FoundSources()
    if not isinstance(raw, list):
        raise builder.fail(("sources",), "must be a list of sources, e.g. [{ansible: hosts.ini}]")
    entries: list[SourceEntry] = []
    groups: dict[str, tuple[str, ...]] = {}
    warnings: list[str] = []
    seen: dict[str, str] = {}
    for index, item in enumerate(raw):
        path: tuple[str | int, ...] = ("sources", index)
        kinds = [kind for kind in SOURCE_KEYS if isinstance(item, dict) and kind in item]
        if len(kinds) != 1:
            raise builder.fail(path, "must be a mapping with one of: "
                                     + ", ".join(f"{kind}: ..." for kind in SOURCE_KEYS))
        kind = kinds[0]
        item = builder.mapping(item, path, SOURCE_KEYS[kind])
        if not builder.optional(item, path, "enabled", builder.boolean, True):
            continue  # not read at all: no command run, no API asked
        template = builder.mapping(item.get("host") or {}, (*path, "host"), host_keys())
        if kind == "ansible":
            found = _read_ansible(builder, item, path, host_keys())
            label = str(item[kind])
        else:
            found = _read_proxmox(builder, item, path, context, template)
            label = "Proxmox cluster " + str(item[kind].get("url"))
        origin = f"{builder.doc.path}:{builder.doc.line((*path, kind))} ({label})"
        for host in found.hosts:
            if host.name in seen:
                raise builder.fail((*path, kind), f"host {host.name!r} is also given by "
                                                  f"{seen[host.name]}")
            seen[host.name] = label
            settings = dict(host.settings)
            if isinstance(settings.get("labels"), list):
                # Group names that are not labels (Ansible allows more) stay groups only.
                settings["labels"] = [g for g in settings["labels"]
                                      if not isinstance(g, str) or LABEL_RE.match(g)]
            entries.append(SourceEntry(
                SourceHost(host.name, _merged(template, settings), host.provenance),
                (*path, kind), label, origin))
        for name, members in found.groups.items():
            groups.setdefault(name, members)
        warnings += found.warnings
    return FoundSources(tuple(entries), groups, tuple(warnings))


def _merged(template: Mapping[str, Any], settings: Mapping[str, Any]) -> dict[str, Any]:
    return merge_settings(template, settings)


def _read_ansible(builder: InventoryReader, item: Mapping[str, Any], path: tuple[str | int, ...],
                  host_keys: tuple[str, ...]) -> SourceHosts:
    from fleetcheck.inventory.ansible import (
        PARSERS,
        AnsibleSourceError,
        read_ansible_inventory,
    )

    location = builder.local_path(item["ansible"], (*path, "ansible"))
    parser = builder.optional(item, path, "parser",
                              lambda v, p: builder.choice(v, p, PARSERS), "auto")
    timeout = builder.optional(item, path, "timeout", builder.seconds,
                               SOURCE_COMMAND_TIMEOUT)
    only: tuple[str, ...] = ()
    if "groups" in item:
        value = item["groups"]
        if not isinstance(value, list) or not value:
            raise builder.fail((*path, "groups"), "must be a list of Ansible group names")
        only = tuple(builder.string(g, (*path, "groups", i)) for i, g in enumerate(value))
    try:
        inventory = read_ansible_inventory(location, parser, timeout)
    except AnsibleSourceError as exc:
        raise builder.fail((*path, "ansible"), str(exc)) from None
    for index, group in enumerate(only):
        if group not in inventory.groups and group != "all":
            known = ", ".join(sorted(inventory.groups)) or "none"
            raise builder.fail((*path, "groups", index),
                               f"no group {group!r} in {item['ansible']} (groups: {known})")
    label = str(item["ansible"])
    try:
        return ansible_hosts(inventory, host_keys, tuple(g for g in only if g != "all"),
                             label=label)
    except SourceProblem as exc:
        raise builder.fail((*path, "ansible"), f"{label}: {exc}") from None


def _read_proxmox(builder: InventoryReader, item: Mapping[str, Any], path: tuple[str | int, ...],
                  context: Mapping[str, Any], template: Mapping[str, Any]) -> SourceHosts:
    """The nodes of a Proxmox cluster, each a host listing its guests through the same API."""
    from fleetcheck import kinds
    from fleetcheck.inventory.pvecluster import read_cluster
    from fleetcheck.inventory_data.errors import DiscoveryError, InventoryError
    from fleetcheck.inventory_data.model import ALL_CONTAINERS
    from fleetcheck.kinds.proxmox import ProxmoxGuestKind

    where = (*path, "proxmox")
    keys = tuple(k for k in API_KEYS if k != "node")
    api_raw = builder.mapping(item["proxmox"], where, keys)
    items = {**context["api"], **{k: (v, (*where, k)) for k, v in api_raw.items()}}
    for key in ("url", "user", "token_name"):
        if key not in items:
            raise builder.fail((*where, key), "missing (defaults.api or here)")
    api = builder.api(items, path, "")
    label = f"{builder.doc.path}:{builder.doc.line(where)}: sources[{path[1]}].proxmox"
    try:
        view = read_cluster(api, label)
    except DiscoveryError as exc:
        raise InventoryError(str(exc)) from None
    # Each node lists its guests through the API it came from (its own node name); the
    # host settings say what to probe: by default every guest of each Proxmox guest kind
    # (containers and VMs), only those the API reaches for a `transport: api` host.
    api_only = template.get("transport") == "api"
    base: dict[str, Any] = {
        kind.key: ALL_CONTAINERS for kind in kinds.all_kinds()
        if isinstance(kind, ProxmoxGuestKind) and not (api_only and kind.needs_shell)}
    hosts = []
    for node in view.nodes:
        settings = _merged(_merged(base, template), {"api": {**api_raw, "node": node.name}})
        provenance: dict[tuple[str, ...], str] = {("api",): "proxmox"}
        if node.ip is not None and not api_only:
            settings["address"] = node.ip
            provenance[("address",)] = f"the ip of node {node.name} in /cluster/status"
        hosts.append(SourceHost(node.name, settings, provenance))
    groups = {view.name: tuple(n.name for n in view.nodes)} if view.name else {}
    return SourceHosts(tuple(hosts), groups, view.warnings)
