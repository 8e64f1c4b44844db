"""What an Ansible inventory says, however it was read (`ansible-inventory --list` in
`ansible.py`, or the static reader in `ansible_static.py`): the one shape both readers give."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fleetcheck.errors import FleetcheckError


class AnsibleSourceError(FleetcheckError, ValueError):
    """The Ansible inventory could not be read; the message is one line (its YAML mistakes
    in the inventory's wording, `yamlsrc.YamlWording`)."""


@dataclass(frozen=True)
class AnsibleInventory:
    """What an Ansible inventory says: hosts with their variables (group_vars and host_vars
    merged as Ansible merges them), and each group's hosts (children included)."""

    hosts: Mapping[str, Mapping[str, Any]]
    groups: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: How it was read: "ansible-inventory" or "builtin".
    parser: str = "builtin"


def group_members(direct: Mapping[str, list[str]],
                  children: Mapping[str, list[str]]) -> dict[str, tuple[str, ...]]:
    """Each group's hosts, its children's included (Ansible's get_hosts), groups by name."""
    out: dict[str, tuple[str, ...]] = {}

    def collect(group: str, seen: frozenset[str]) -> list[str]:
        found = list(direct.get(group, ()))
        for child in children.get(group, ()):
            if child not in seen:
                found += collect(child, seen | {child})
        return found

    for group in direct.keys() | children.keys():
        out[group] = tuple(dict.fromkeys(collect(group, frozenset({group}))))
    # By name, as ansible-inventory prints them: both readers give the same order.
    return {name: out[name] for name in sorted(out)}
