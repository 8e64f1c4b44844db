"""inventory.yaml -> Inventory: every key checked, every mistake one line with file and line."""

from __future__ import annotations

import dataclasses
from typing import Any

from fleetcheck.budget import node_timeout
from fleetcheck.errors import FleetcheckError
from fleetcheck.inventory.hostkeys import host_keys, kind_keys
from fleetcheck.inventory.limit import pattern_problem
from fleetcheck.inventory.sources import SOURCE_KEYS, SourceEntry, read_sources
from fleetcheck.inventory_data.errors import InventoryError
from fleetcheck.inventory_data.model import HostSpec, Inventory, declaration_fields
from fleetcheck.inventory_data.ranges import RangeError, expand_nodes, has_range
from fleetcheck.inventory_data.reader import InventoryReader, address_problem
from fleetcheck.inventory_data.schema import (
    API_KEYS,
    DEFAULTS_KEYS,
    HOST_KEYS,
    NAME_RE,
    SSH_KEYS,
    TOP_KEYS,
    TRANSPORTS,
    merge_settings,
)
from fleetcheck.inventory_data.yamlread import show
from fleetcheck.inventory_data.yamlsrc import (
    INVENTORY_WORDING,
    KeyPath,
    YamlDocument,
    format_path,
    load_yaml,
    read_source,
)


def schema_keys() -> tuple[str, ...]:
    """Every key the loader accepts, as paths: "hosts.*.containers[].vmid" and the like."""
    keys = [*TOP_KEYS, "groups.*"]
    keys += list(dict.fromkeys(f"sources[].{k}" for ks in SOURCE_KEYS.values() for k in ks))
    for prefix, names in (("defaults", DEFAULTS_KEYS), ("hosts.*", HOST_KEYS)):
        keys += [f"{prefix}.{k}" for k in names]
        keys += [f"{prefix}.ssh.{k}" for k in SSH_KEYS]
        keys += [f"{prefix}.api.{k}" for k in API_KEYS]
    for key, kind in kind_keys().items():
        keys += [*([] if key in HOST_KEYS else [f"hosts.*.{key}"]),
                 *(f"hosts.*.{key}{sub}" for sub in kind.schema_keys())]
    return tuple(keys)


def load_inventory(path: str) -> Inventory:
    """Read and validate the inventory at `path`; raise InventoryError (one line) if wrong."""
    return parse_inventory(read_source(path, path, INVENTORY_WORDING), path)


def parse_inventory(text: str, path: str) -> Inventory:
    """Validate inventory YAML `text`; `path` is used in messages and for relative paths."""
    doc = load_yaml(text, path)
    if doc.data is None:
        raise doc.wording.empty(path, "expected a mapping with a 'hosts' key")
    return _Builder(doc).build()


class _Builder(InventoryReader):
    """Turns the parsed YAML into frozen dataclasses, raising at the first mistake."""

    # -- sections -------------------------------------------------------------------------

    def build(self) -> Inventory:

        top = self.mapping(self.doc.data, (), TOP_KEYS)
        defaults = self.mapping(top.get("defaults") or {}, ("defaults",), DEFAULTS_KEYS)
        if "hosts" not in top and "sources" not in top:
            raise self.fail((), "missing key 'hosts'")
        hosts_raw = top.get("hosts") or {}
        if not isinstance(hosts_raw, dict):
            raise self.fail(("hosts",), f"must be a mapping of host names, got {show(hosts_raw)}")
        context = self.defaults(defaults)
        found = read_sources(self, top.get("sources"), context)
        if not hosts_raw and not found.hosts:
            raise self.fail(("hosts",) if "hosts" in top else ("sources",), "no hosts defined")
        first: dict[str, str] = {}
        from_sources = {entry.host.name: entry for entry in found.hosts}
        # Hosts in order: the sources' (each refined by a hosts: entry of its name), then
        # the hosts: entries of their own.
        built: dict[str, tuple[HostSpec, bool]] = {}
        own: list[str] = []
        for key, raw in hosts_raw.items():
            for name, address in self.host_names(key, raw):
                if name in first:
                    raise self.fail(("hosts", key), f"duplicate host {name!r} (also in "
                                                    f"{first[name]})")
                first[name] = f"{key} at line {self.doc.line(('hosts', key))}"
                entry = from_sources.get(name)
                if entry is not None:
                    # The inventory's own entry refines what the source says of the host.
                    raw = merge_settings(entry.host.settings, raw or {})
                else:
                    own.append(name)
                built[name] = self.host(name, raw, context, key=key, address=address)
        for entry in found.hosts:
            if entry.host.name not in built:
                built[entry.host.name] = _SourceBuilder(self.doc, entry).host(
                    entry.host.name, dict(entry.host.settings), context, origin=entry.origin)
        order = [*(entry.host.name for entry in found.hosts), *own]
        enabled = [built[name][0] for name in order if built[name][1]]
        disabled = [built[name][0] for name in order if not built[name][1]]
        # What the file leaves out takes the model's default (budget.py's value), not a copy.
        given: dict[str, Any] = {}
        if "concurrency" in defaults:
            given["concurrency"] = self.integer(defaults["concurrency"],
                                                ("defaults", "concurrency"), 1)
        audit_timeout = None
        if defaults.get("audit_timeout") is not None:
            audit_timeout = self.seconds(defaults["audit_timeout"], ("defaults", "audit_timeout"))
        inventory = Inventory(
            path=self.doc.path,
            hosts=tuple(enabled),
            audit_timeout=audit_timeout,
            disabled_hosts=tuple(disabled),
            **given,
        )
        groups = self.groups(top.get("groups"), inventory)
        host_names = {h.name for h in (*inventory.hosts, *inventory.disabled_hosts)}
        for name, members in found.groups.items():
            # A source's group is one more group, unless the file names it already.
            if name not in groups and name not in host_names and NAME_RE.match(name):
                groups[name] = members
        return dataclasses.replace(inventory, groups=groups, warnings=found.warnings)

    def defaults(self, raw: dict[str, Any]) -> dict[str, Any]:
        """The values every host starts from (before its own keys)."""
        path: KeyPath = ("defaults",)
        ssh = self.mapping(raw.get("ssh") or {}, (*path, "ssh"), SSH_KEYS)
        api = self.mapping(raw.get("api") or {}, (*path, "api"), API_KEYS)
        return {
            "ssh": {k: (v, (*path, "ssh", k)) for k, v in ssh.items()},
            "api": {k: (v, (*path, "api", k)) for k, v in api.items()},
            "python": self.optional(raw, path, "python", self.python, "python3"),
            "env": self.optional(raw, path, "env", self.env, {}),
            "labels": self.optional(raw, path, "labels", self.labels, ()),
            "timeout": self.optional(raw, path, "timeout", self.seconds, None),
            "sudo": self.optional(raw, path, "sudo", self.boolean, False),
            "probe_host": self.optional(raw, path, "probe_host", self.boolean, False),
        }

    def host_names(self, key: str, raw: Any) -> list[tuple[str, str | None]]:
        """The hosts a `hosts:` key stands for, each with its address when the key's
        `address` is a range too: `gpu[01-16]` is sixteen hosts with the same settings."""
        path: KeyPath = ("hosts", key)
        if not has_range(key):
            return [(key, None)]
        try:
            names = expand_nodes(key)
        except RangeError as exc:
            raise self.fail(path, f"bad node range: {exc}") from None
        address = raw.get("address") if isinstance(raw, dict) else None
        if not isinstance(address, str) or not has_range(address):
            return [(name, None) for name in names]
        try:
            addresses = expand_nodes(address)
        except RangeError as exc:
            raise self.fail((*path, "address"), f"bad range: {exc}") from None
        if len(addresses) != len(names):
            raise self.fail((*path, "address"), f"a range of {len(addresses)} addresses for "
                                                f"{len(names)} hosts (they pair up in order)")
        return list(zip(names, addresses, strict=True))

    def host(self, name: str, raw: Any, ctx: dict[str, Any], key: str | None = None,
             address: str | None = None, origin: str | None = None) -> tuple[HostSpec, bool]:
        path: KeyPath = ("hosts", key or name)
        if not NAME_RE.match(name):
            raise self.fail(path, "host name may hold only letters, digits, '_', '.' and '-'"
                                  + (f" (got {name!r})" if name != path[-1] else ""))
        raw = self.mapping({} if raw is None else raw, path, host_keys())
        # An entry of a kind that runs its tool here (a Kubernetes cluster: kubectl) is local
        # unless it names a machine to run it on.
        # Each kind reads its own key (`kinds/`), in the order of `host_keys()`.
        known = kind_keys()
        readers = {key: known[key] for key in host_keys() if key in known and key in raw}
        here = any(kind.local_by_default for kind in readers.values())
        transport = self.choice(raw.get("transport", "local" if here and "address" not in raw
                                        else "ssh"), (*path, "transport"), TRANSPORTS)
        enabled = self.boolean(raw.get("enabled", True), (*path, "enabled"))
        if address is not None:
            address = self.address(address, (*path, "address"))
        elif "address" in raw:
            address = self.address(raw["address"], (*path, "address"))
        elif transport == "ssh":
            # As ssh and Ansible do: the name is the address (DNS, or an ssh_config Host).
            address = self.checked(name, path, address_problem)
        # This machine is always its own node; an api host has no shell to probe.
        default_probe = not here and (
            transport == "local" or (ctx["probe_host"] and transport == "ssh"))
        probe_host = self.boolean(raw.get("probe_host", default_probe), (*path, "probe_host"))
        # What each declares goes into HostSpec's field of the key's name where it has one
        # (the kinds fleetcheck shipped first), else into `declarations` (declaration_fields).
        declared = {key: kind.read_declaration(self, raw[key], (*path, key), transport)
                    for key, kind in readers.items()}
        for kind in readers.values():
            kind.check_host(self, path, declared)
        if not probe_host and not any(declared.values()):
            # The keys this names are the message users know, not the registry's list.
            raise self.fail(path, "nothing to probe: set containers, vms, oci or probe_host: true "
                                  "(or defaults.probe_host: true)")
        if transport == "api":
            # The API has no `pct exec` and no shell on the host: only guest agents.
            refused = [key for key, kind in readers.items() if kind.needs_shell and declared[key]]
            if raw.get("probe_host"):
                refused.append("probe_host")
            if refused:
                raise self.fail((*path, refused[0]), "needs SSH: a transport: api host reaches "
                                "only its VMs (through the guest agent)")
            if "api" not in raw and "url" not in ctx["api"]:
                raise self.fail((*path, "api"), "missing (transport: api needs the API url)")
        ssh_raw = self.mapping(raw.get("ssh") or {}, (*path, "ssh"), SSH_KEYS)
        ssh_items = {**ctx["ssh"], **{k: (v, (*path, "ssh", k)) for k, v in ssh_raw.items()}}
        api_raw = self.mapping(raw.get("api") or {}, (*path, "api"), API_KEYS)
        api_items = {**ctx["api"], **{k: (v, (*path, "api", k)) for k, v in api_raw.items()}}
        labels = ctx["labels"]
        if "labels" in raw:
            labels = tuple(dict.fromkeys((*labels, *self.labels(raw["labels"], (*path, "labels")))))
        env = {**ctx["env"], **(self.env(raw["env"], (*path, "env")) if "env" in raw else {})}
        timeout = self.optional(raw, path, "timeout", self.seconds, ctx["timeout"])
        spec = HostSpec(
            name=name,
            address=address,
            transport=transport,
            ssh=self.ssh(ssh_items),
            probe_host=probe_host,
            **declaration_fields(declared),
            python=self.optional(raw, path, "python", self.python, ctx["python"]),
            env=env,
            labels=labels,
            sudo=self.optional(raw, path, "sudo", self.boolean, ctx["sudo"]),
            timeout=node_timeout(timeout, deep=False),
            timeout_given=timeout is not None,
            # defaults.api may hold only shared settings (user, token...): a host uses the
            # API when it ends up with a url, or when it has an api: section of its own.
            api=self.api(api_items, path, name) if api_raw or "url" in api_items else None,
            origin=origin or f"{self.doc.path}:{self.doc.line(path)}",
        )
        return spec, enabled

    def groups(self, raw: Any, inventory: Inventory) -> dict[str, tuple[str, ...]]:
        if raw is None:
            return {}
        if not isinstance(raw, dict):
            raise self.fail(("groups",), f"must be a mapping of group names, got {show(raw)}")
        host_names = {h.name for h in (*inventory.hosts, *inventory.disabled_hosts)}
        groups: dict[str, tuple[str, ...]] = {}
        for name, members in raw.items():
            path: KeyPath = ("groups", name)
            if not NAME_RE.match(name):
                raise self.fail(path, "group name may hold only letters, digits, '_', '.' and '-'")
            if name in host_names:
                raise self.fail(path, f"{name!r} is already a host name")
            if not isinstance(members, list) or not members:
                raise self.fail(
                    path, f"must be a list of host names or patterns, got {show(members)}"
                )
            for index, member in enumerate(members):
                self.string(member, (*path, index))
            groups[name] = tuple(members)
        # A group may name disabled hosts: disabling a host must not break the groups it is in.
        everything = Inventory(
            path=inventory.path, hosts=(*inventory.hosts, *inventory.disabled_hosts)
        )
        for name, members in groups.items():
            for index, member in enumerate(members):
                problem = pattern_problem(everything, member, groups, seen=(name,))
                if problem:
                    raise self.fail(("groups", name, index), problem)
        return groups


class _SourceBuilder(_Builder):
    """The loader for a host a source gave: its mistakes are worded in the source's terms,
    at the line of the `sources:` entry (`fleetcheck_timeout`, not `hosts.X.timeout`)."""

    def __init__(self, doc: YamlDocument, entry: SourceEntry) -> None:
        super().__init__(doc)
        self.entry = entry

    def fail(self, path: KeyPath, problem: str) -> FleetcheckError:
        entry = self.entry
        rest = tuple(str(part) for part in path[2:])
        variable = ""
        for cut in range(len(rest), 0, -1):
            if rest[:cut] in entry.host.provenance:
                variable = entry.host.provenance[rest[:cut]] + "".join(
                    f"[{part}]" if isinstance(part, int) else f".{part}"
                    for part in path[2 + cut:])
                break
        else:
            variable = format_path(("host", *path[2:])) if rest else ""
        where = f"{self.doc.path}:{self.doc.line(entry.where)}: {format_path(entry.where)}"
        what = f"{entry.label}: host {entry.host.name}"
        return InventoryError(f"{where}: {what}: {variable + ': ' if variable else ''}{problem}")
