"""Static Ansible inventories read without Ansible: INI and YAML, group_vars/ and host_vars/.

Read as ansible-core's `ini` and `yaml` inventory plugins read them (sections `[g]`,
`[g:vars]`, `[g:children]`; `all:` / `hosts:` / `vars:` / `children:`; host ranges
`gpu[01:16]`, `[a:f]`, `[1:9:2]`; `host:port`; values through `ast.literal_eval` as the INI
plugin does), and variables merged as Ansible merges them: inventory-file group vars by group
depth then name, then group_vars/all, then group_vars/GROUP by depth, then the host's own
line, then host_vars/HOST. Scripts and plugin configurations (`plugin:`) need Ansible.
"""

from __future__ import annotations

import ast
import os
import re
import shlex
import string
from collections.abc import Iterator
from typing import Any

from fleetcheck.inventory.ansible_model import (
    AnsibleInventory,
    AnsibleSourceError,
    group_members,
)
from fleetcheck.inventory_data.yamlsrc import YamlWording, load_yaml, read_source

_SECTION = re.compile(r"^\[([^:\]\s]+)(?::(\w+))?\]\s*(?:#.*)?$")
_GROUP_NAME = re.compile(r"^([^:\]\s]+)\s*(?:#.*)?$")
_PORT = re.compile(r"^(?P<host>[^:\[\]]+|[^:]*\[[^\]]*\][^:]*):(?P<port>[0-9]+)$")
_VARS_SUFFIXES = ("", ".yml", ".yaml", ".json")
#: Its files' mistakes, worded as the inventory's are.
_WORDING = YamlWording("Ansible inventory", AnsibleSourceError)
_NEEDS_ANSIBLE = ("install ansible-core (pip install ansible-core, or apt-get install "
                  "ansible-core) so that ansible-inventory reads it")


class _Reader:
    """Groups, their vars, children and hosts, and host vars, as a plugin fills them."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.groups: dict[str, dict[str, Any]] = {"all": {}, "ungrouped": {}}
        self.direct: dict[str, list[str]] = {"all": [], "ungrouped": []}
        self.children: dict[str, list[str]] = {"all": [], "ungrouped": []}
        self.host_vars: dict[str, dict[str, Any]] = {}
        self.line = 0

    def fail(self, problem: str) -> AnsibleSourceError:
        where = f"{self.path}:{self.line}" if self.line else self.path
        return AnsibleSourceError(f"{where}: {problem}")

    def add_group(self, name: str) -> None:
        if name not in self.groups:
            self.groups[name] = {}
            self.direct[name] = []
            self.children[name] = []

    def add_child(self, parent: str, child: str) -> None:
        self.add_group(child)
        if child not in self.children[parent]:
            self.children[parent].append(child)

    def add_hosts(self, pattern: str, group: str, variables: dict[str, Any]) -> None:
        names, port = self.expand(pattern)
        for name in names:
            host = self.host_vars.setdefault(name, {})
            if port is not None:
                host["ansible_port"] = port
            host.update(variables)
            if name not in self.direct[group]:
                self.direct[group].append(name)

    def expand(self, pattern: str) -> tuple[list[str], int | None]:
        port = None
        match = _PORT.match(pattern)
        if match:
            pattern, port = match.group("host"), int(match.group("port"))
        if pattern.endswith(":"):
            raise self.fail(f"invalid host pattern {pattern!r}: ending in ':' is not allowed")
        try:
            return expand_hostname_range(pattern), port
        except ValueError as exc:
            raise self.fail(f"host {pattern!r}: {exc}") from None

    # -- INI -------------------------------------------------------------------------------

    def read_ini(self, text: str) -> None:
        group, state = "ungrouped", "hosts"
        pending: dict[str, tuple[int, list[str]]] = {}
        for self.line, raw in enumerate(text.splitlines(), start=1):
            line = raw.strip()
            if not line or line[0] in "#;":
                continue
            section = _SECTION.match(line)
            if section:
                group, state = section.group(1), section.group(2) or "hosts"
                if state not in ("hosts", "children", "vars"):
                    raise self.fail(f"section [{group}:{state}] has unknown type: {state}")
                if group not in self.groups and state == "vars":
                    pending.setdefault(group, (self.line, []))
                self.add_group(group)
                if state != "vars":
                    pending.pop(group, None)
                continue
            if line.startswith("[") and line.endswith("]"):
                raise self.fail(f"invalid section entry: {line!r}")
            if state == "hosts":
                try:
                    tokens = shlex.split(line, comments=True)
                except ValueError as exc:
                    raise self.fail(f"cannot parse host definition {line!r}: {exc}") from None
                variables: dict[str, Any] = {}
                for token in tokens[1:]:
                    if "=" not in token:
                        raise self.fail(f"expected key=value host variable, got {token!r}")
                    key, _, value = token.partition("=")
                    variables[key] = ini_value(value)
                self.add_hosts(tokens[0], group, variables)
            elif state == "vars":
                if "=" not in line:
                    raise self.fail(f"expected key=value, got {line!r}")
                key, _, value = line.partition("=")
                self.groups[group][key.strip()] = ini_value(value.strip())
            else:
                child = _GROUP_NAME.match(line)
                if not child:
                    raise self.fail(f"expected a group name, got {line!r}")
                self.add_child(group, child.group(1))
        self.line = 0
        for name, (line_no, _) in pending.items():
            self.line = line_no
            raise self.fail(f"section [{name}:vars] is not valid for undefined group {name!r}")

    # -- YAML ------------------------------------------------------------------------------

    def read_yaml(self, data: Any) -> None:
        if not isinstance(data, dict) or not data:
            raise self.fail("a YAML inventory is a mapping of groups")
        if data.get("plugin"):
            raise self.fail(f"a dynamic inventory (plugin: {data['plugin']}) needs Ansible: "
                            + _NEEDS_ANSIBLE)
        for name, body in data.items():
            self.yaml_group(str(name), body)

    def yaml_group(self, name: str, body: Any) -> None:
        self.add_group(name)
        if body is None:
            return
        if not isinstance(body, dict):
            raise self.fail(f"group {name!r}: must be a mapping of hosts, vars and children")
        for key, section in body.items():
            if key not in ("hosts", "vars", "children"):
                continue  # Ansible warns and skips it
            if isinstance(section, str):
                section = {section: None}
            if section is None:
                continue
            if not isinstance(section, dict):
                raise self.fail(f"group {name!r}: {key} must be a mapping")
            if key == "vars":
                self.groups[name].update(section)
            elif key == "children":
                for child, child_body in section.items():
                    self.yaml_group(str(child), child_body)
                    self.add_child(name, str(child))
            else:
                for pattern, variables in section.items():
                    if variables is not None and not isinstance(variables, dict):
                        raise self.fail(f"host {pattern!r}: its variables must be a mapping")
                    self.add_hosts(str(pattern), name, dict(variables or {}))

    # -- merging ---------------------------------------------------------------------------

    def depths(self) -> dict[str, int]:
        """Each group's depth below `all` (the longest path), as Ansible sorts groups by it."""
        for group in list(self.groups):
            # Ansible's reconcile: a group that is nobody's child is a child of all.
            if group != "all" and not any(group in kids for kids in self.children.values()):
                self.add_child("all", group)
        depth = {"all": 0}
        for _ in range(len(self.groups) + 1):
            changed = False
            for parent, kids in self.children.items():
                for kid in kids:
                    if parent in depth and depth.get(kid, -1) < depth[parent] + 1:
                        depth[kid] = depth[parent] + 1
                        changed = True
            if not changed:
                return depth
        raise self.fail("groups are children of each other (a cycle)")

    def inventory(self, group_files: dict[str, dict[str, Any]],
                  host_files: dict[str, dict[str, Any]]) -> AnsibleInventory:
        for host in self.host_vars:
            if not any(host in members for name, members in self.direct.items()
                       if name not in ("all", "ungrouped")):
                if host not in self.direct["ungrouped"]:
                    self.direct["ungrouped"].append(host)
        depth = self.depths()
        members = group_members(self.direct, self.children)
        hosts: dict[str, dict[str, Any]] = {}
        for host in self.host_vars:
            mine = sorted((g for g, hs in members.items() if host in hs),
                          key=lambda g: (depth.get(g, 0), g))
            merged: dict[str, Any] = {}
            for group in mine:
                merged.update(self.groups.get(group, {}))
            merged.update(group_files.get("all", {}))
            for group in mine:
                if group != "all":
                    merged.update(group_files.get(group, {}))
            merged.update(self.host_vars[host])
            merged.update(host_files.get(host, {}))
            hosts[host] = merged
        groups = {g: hs for g, hs in members.items() if g not in ("all", "ungrouped")}
        return AnsibleInventory(hosts=hosts, groups=groups, parser="builtin")


def read_static_inventory(path: str) -> AnsibleInventory:
    """The static INI or YAML inventory at `path`, with the group_vars/ and host_vars/
    beside it; AnsibleSourceError (one line, file and line) when it cannot be read here."""
    if os.path.isdir(path):
        raise AnsibleSourceError(f"{path}: an inventory directory needs Ansible: "
                                 + _NEEDS_ANSIBLE)
    if os.access(path, os.X_OK):
        raise AnsibleSourceError(f"{path}: an executable is a dynamic inventory script; "
                                 + _NEEDS_ANSIBLE)
    text = _read_text(path)
    reader = _Reader(path)
    if path.endswith((".yml", ".yaml", ".json")) or _looks_like_yaml(text):
        reader.read_yaml(load_yaml(text, path, _WORDING).data)
    else:
        reader.read_ini(text)
    base = os.path.dirname(os.path.abspath(path))
    group_files = dict(_vars_files(os.path.join(base, "group_vars"), reader.groups))
    host_files = dict(_vars_files(os.path.join(base, "host_vars"), reader.host_vars))
    return reader.inventory(group_files, host_files)


def _looks_like_yaml(text: str) -> bool:
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped[0] in "#;":
            continue
        return stripped == "---" or (stripped.endswith(":") and not stripped.startswith("["))
    return False


def _read_text(path: str) -> str:
    return read_source(path, path, _WORDING)


def _vars_files(directory: str, names: Any) -> Iterator[tuple[str, dict[str, Any]]]:
    """NAME's variables from DIR/NAME, NAME.yml, NAME.yaml, NAME.json or DIR/NAME/*."""
    if not os.path.isdir(directory):
        return
    for name in names:
        found: dict[str, Any] = {}
        for suffix in _VARS_SUFFIXES:
            candidate = os.path.join(directory, name + suffix)
            if os.path.isfile(candidate):
                found.update(_vars_file(candidate))
        folder = os.path.join(directory, name)
        if os.path.isdir(folder):
            for entry in sorted(os.listdir(folder)):
                candidate = os.path.join(folder, entry)
                if os.path.isfile(candidate) and entry.endswith(_VARS_SUFFIXES[1:]):
                    found.update(_vars_file(candidate))
        if found:
            yield name, found


def _vars_file(path: str) -> dict[str, Any]:
    text = _read_text(path)
    if text.lstrip().startswith("$ANSIBLE_VAULT"):
        raise AnsibleSourceError(f"{path}: a vaulted file needs Ansible: " + _NEEDS_ANSIBLE)
    try:
        data = load_yaml(text, path, _WORDING).data
    except AnsibleSourceError as exc:
        # A `!vault` value is a YAML tag the plain-data loader refuses.
        hint = f"; {_NEEDS_ANSIBLE}" if "!vault" in str(exc) else ""
        raise AnsibleSourceError(f"{exc}{hint}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise AnsibleSourceError(f"{path}: variables must be a mapping")
    return data


def _literal_eval(text: str) -> Any:
    """`ast.literal_eval`, once more where CPython 3.11 before 3.11.8 (Debian 12 has 3.11.2)
    fails it spuriously: an `ast.parse` that the garbage collector ran during its own (a
    finalizer formatting a traceback, which 3.11 does with ast.parse) or another thread's
    upsets its AST constructor's count, kept in one variable of the interpreter (CPython
    gh-106905). The next parse starts the count afresh."""
    try:
        return ast.literal_eval(text)
    except SystemError as exc:
        if "recursion depth mismatch" not in str(exc):
            raise
    return ast.literal_eval(text)


def ini_value(text: str) -> Any:
    """A value of an INI inventory as Ansible's ini plugin reads it (ast.literal_eval)."""
    try:
        value = _literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return text
    if value is ... or isinstance(value, (complex, bytes)):
        return text
    return value


def expand_hostname_range(pattern: str) -> list[str]:
    """Ansible's host ranges: `gpu[01:16]`, `n[1:9:2]`, `[a:f]`; several multiply."""
    if "[" not in pattern:
        return [pattern]
    head, _, rest = pattern.partition("[")
    body, closed, tail = rest.partition("]")
    if not closed:
        raise ValueError("missing ']'")
    bounds = body.split(":")
    if len(bounds) not in (2, 3):
        raise ValueError("host range must be begin:end or begin:end:step")
    begin, end = bounds[0] or "0", bounds[1]
    step = int(bounds[2]) if len(bounds) == 3 and bounds[2].isdigit() else 1
    if not end:
        raise ValueError("host range must specify end value")
    width = len(begin) if begin.startswith("0") and len(begin) > 1 else 0
    if width and width != len(end):
        raise ValueError("host range must specify equal-length begin and end formats")
    letters = string.ascii_letters
    if begin in letters and end in letters and len(begin) == len(end) == 1:
        if letters.index(begin) > letters.index(end):
            raise ValueError("host range must have begin <= end")
        values = list(letters[letters.index(begin):letters.index(end) + 1:step])
    else:
        try:
            values = [str(n).zfill(width) for n in range(int(begin), int(end) + 1, step)]
        except ValueError:
            raise ValueError(f"bad host range [{body}]") from None
    return [name for value in values for name in expand_hostname_range(head + value + tail)]
