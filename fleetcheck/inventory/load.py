"""inventory.yaml -> Inventory: every key checked, every mistake one line with file and line."""

from __future__ import annotations

import dataclasses
import ipaddress
import os
from collections.abc import Callable, Mapping
from typing import Any, TypeVar
from urllib.parse import urlsplit

from fleetcheck.budget import node_timeout
from fleetcheck.inventory.errors import InventoryError
from fleetcheck.inventory.limit import pattern_problem
from fleetcheck.inventory.model import (
    ALL_CONTAINERS,
    OCI_RUNTIMES,
    VMID_MAX,
    VMID_MIN,
    ApiOptions,
    ContainerSpec,
    HostSpec,
    Inventory,
    OciContainerSpec,
    OciSpec,
    SshOptions,
)
from fleetcheck.inventory.ranges import RangeError, expand_nodes, has_range
from fleetcheck.inventory.schema import (
    API_KEYS,
    CONTAINER_KEYS,
    DEFAULTS_KEYS,
    ENV_NAME_RE,
    HOST_KEY_POLICIES,
    HOST_KEYS,
    HOSTNAME_RE,
    JUMP_USER_RE,
    LABEL_RE,
    NAME_RE,
    OCI_CONTAINER_KEYS,
    OCI_KEYS,
    OCI_NAME_RE,
    OCI_USER_RE,
    SECRET_HINT,
    SECRET_KEYS,
    SSH_KEYS,
    TOP_KEYS,
    TRANSPORTS,
    VM_KEYS,
    host_keys,
    kind_keys,
    merge_settings,
)
from fleetcheck.inventory.sources import SOURCE_KEYS, SourceEntry, read_sources
from fleetcheck.inventory.yamlsrc import (
    INVENTORY_WORDING,
    KeyPath,
    YamlDocument,
    format_path,
    load_yaml,
    read_source,
)
from fleetcheck.text import clip, did_you_mean

#: HostSpec's fields: a kind's key with one of them is read into it (`kubernetes:`).
_HOST_FIELDS = frozenset(f.name for f in dataclasses.fields(HostSpec))


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def address_problem(text: str) -> str | None:
    """Why `text` is not a hostname, IPv4 or IPv6 literal; None when it is one."""
    shown = _show(clip(text, 80))
    if text.startswith("-"):
        return f"must not start with '-' (it would read as an ssh option), got {shown}"
    if HOSTNAME_RE.match(text) or _is_ip(text):
        return None
    return ("must be a hostname, an IPv4 or an IPv6 address (no spaces or shell characters), "
            f"got {shown}")


def jump_problem(text: str) -> str | None:
    """Why `text` is not a comma-separated list of `[user@]host[:port]` hops; None if it is."""
    for hop in text.split(","):
        shown = _show(clip(hop.strip(), 80))
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


def schema_keys() -> tuple[str, ...]:
    """Every key the loader accepts, as paths: "hosts.*.containers[].vmid" and the like."""
    keys = [*TOP_KEYS, "groups.*"]
    keys += list(dict.fromkeys(f"sources[].{k}" for ks in SOURCE_KEYS.values() for k in ks))
    for prefix, names in (("defaults", DEFAULTS_KEYS), ("hosts.*", HOST_KEYS)):
        keys += [f"{prefix}.{k}" for k in names]
        keys += [f"{prefix}.ssh.{k}" for k in SSH_KEYS]
        keys += [f"{prefix}.api.{k}" for k in API_KEYS]
    keys += [f"hosts.*.containers[].{k}" for k in CONTAINER_KEYS]
    keys += [f"hosts.*.vms[].{k}" for k in VM_KEYS]
    for prefix in ("hosts.*.oci", "hosts.*.containers[].oci", "hosts.*.vms[].oci"):
        keys += [f"{prefix}.{k}" for k in OCI_KEYS]
        keys += [f"{prefix}.containers[].{k}" for k in OCI_CONTAINER_KEYS]
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
        raise InventoryError(f"{path}: empty inventory (expected a mapping with a 'hosts' key)")
    return _Builder(doc).build()


def _show(value: Any) -> str:
    """A value as the user wrote it, for "got ..." in messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return str(value)


#: What one list item reads as (`_Builder.unique`).
T = TypeVar("T")

class _Builder:
    """Turns the parsed YAML into frozen dataclasses, raising at the first mistake."""

    def __init__(self, doc: YamlDocument) -> None:
        self.doc = doc
        self.base_dir = os.path.dirname(os.path.abspath(doc.path))

    def fail(self, path: KeyPath, problem: str) -> InventoryError:
        return self.doc.error(path, problem)

    def optional(
        self,
        raw: Mapping[str, Any],
        path: KeyPath,
        key: str,
        convert: Callable[[Any, KeyPath], Any],
        default: Any,
    ) -> Any:
        """`raw[key]` checked by `convert`, or `default` when the key is absent."""
        return convert(raw[key], (*path, key)) if key in raw else default

    # -- shapes ---------------------------------------------------------------------------

    def shown(self, value: Any) -> str:
        """A value as the user wrote it, for a kind's "got ..." (`_show`)."""
        return _show(value)

    def mapping(self, value: Any, path: KeyPath, allowed: tuple[str, ...]) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(path, f"must be a mapping, got {_show(value)}")
        section = path[-1] if path and isinstance(path[-1], str) else ""
        for key in value:
            if key in SECRET_KEYS.get(str(section), ()):
                raise self.fail(
                    (*path, key),
                    f"secrets are not allowed in the inventory; {SECRET_HINT[str(section)]}",
                )
            if key not in allowed:
                hint = did_you_mean(key, allowed) or " (valid: " + ", ".join(allowed) + ")"
                raise self.fail((*path, key), f"unknown key{hint}")
        return value

    def string(self, value: Any, path: KeyPath) -> str:
        if not isinstance(value, str):
            raise self.fail(path, f"must be a string, got {_show(value)}")
        if not value.strip():
            raise self.fail(path, "must not be empty")
        if "\0" in value:
            # A command line ends at the first NUL on the node: the rest would be dropped.
            raise self.fail(path, "must not contain a NUL character")
        return value

    def checked(self, text: str, path: KeyPath, problem_of: Callable[[str], str | None]) -> str:
        problem = problem_of(text)
        if problem is not None:
            raise self.fail(path, problem)
        return text

    def address(self, value: Any, path: KeyPath) -> str:
        return self.checked(self.string(value, path), path, address_problem)

    def boolean(self, value: Any, path: KeyPath) -> bool:
        if not isinstance(value, bool):
            raise self.fail(path, f"must be true or false, got {_show(value)}")
        return value

    def integer(self, value: Any, path: KeyPath, low: int, high: int | None = None) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(path, f"must be an integer, got {_show(value)}")
        if value < low or (high is not None and value > high):
            bounds = f"between {low} and {high}" if high is not None else f"at least {low}"
            raise self.fail(path, f"must be {bounds}, got {value}")
        return value

    def seconds(self, value: Any, path: KeyPath) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.fail(path, f"must be a number of seconds, got {_show(value)}")
        if not value > 0:
            raise self.fail(path, f"must be more than 0 seconds, got {value}")
        if value == float("inf"):
            raise self.fail(path, "must be a finite number of seconds")
        return float(value)

    def choice(self, value: Any, path: KeyPath, choices: tuple[str, ...]) -> str:
        if value not in choices:
            raise self.fail(path, f"must be one of {', '.join(choices)}, got {_show(value)}")
        return str(value)

    def local_path(self, value: Any, path: KeyPath) -> str:
        """A file on this machine: `~` expanded, relative to the inventory's directory."""
        text = os.path.expanduser(self.string(value, path))
        return text if os.path.isabs(text) else os.path.join(self.base_dir, text)

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
            raise self.fail(path, f"must be a mapping of NAME: value, got {_show(value)}")
        for name, item in value.items():
            if not ENV_NAME_RE.match(name):
                raise self.fail((*path, name), "not a valid environment variable name")
            if not isinstance(item, str):
                quote = " (quote it)" if isinstance(item, (bool, int, float)) else ""
                raise self.fail((*path, name), f"must be a string, got {_show(item)}{quote}")
            if "\0" in item:
                raise self.fail((*path, name), "must not contain a NUL character")
        return dict(value)

    def labels(self, value: Any, path: KeyPath) -> tuple[str, ...]:
        if not isinstance(value, list):
            raise self.fail(path, f"must be a list of labels, e.g. [gpu], got {_show(value)}")
        out: list[str] = []
        for index, item in enumerate(value):
            if not isinstance(item, str) or not LABEL_RE.match(item):
                raise self.fail(
                    (*path, index),
                    f"must be a label (letters, digits, _ + . -), got {_show(item)}",
                )
            if item not in out:
                out.append(item)
        return tuple(out)

    def unique(self, items: list[Any], path: KeyPath, read: Callable[[Any, KeyPath], T],
               named: Callable[[T], str]) -> tuple[T, ...]:
        """Each item of a list read by `read`; one named (`named`) as an earlier one is
        refused with the line of the first."""
        specs: list[T] = []
        seen: dict[str, int] = {}
        for index, item in enumerate(items):
            item_path = (*path, index)
            spec = read(item, item_path)
            name = named(spec)
            if name in seen:
                raise self.fail(item_path, f"{name} listed twice (first at line {seen[name]})")
            seen[name] = self.doc.line(item_path)
            specs.append(spec)
        return tuple(specs)

    # -- sections -------------------------------------------------------------------------

    def build(self) -> Inventory:

        top = self.mapping(self.doc.data, (), TOP_KEYS)
        defaults = self.mapping(top.get("defaults") or {}, ("defaults",), DEFAULTS_KEYS)
        if "hosts" not in top and "sources" not in top:
            raise self.fail((), "missing key 'hosts'")
        hosts_raw = top.get("hosts") or {}
        if not isinstance(hosts_raw, dict):
            raise self.fail(("hosts",), f"must be a mapping of host names, got {_show(hosts_raw)}")
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
        readers = {key: kind for key, kind in kind_keys().items() if key in raw}
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
        # The keys of the kinds that read their own declaration (`kinds/`): into HostSpec's
        # field of that name where it has one, else into `declarations`.
        declared = {key: kind.read_declaration(self, raw[key], (*path, key), transport)
                    for key, kind in readers.items()}
        fields = {key: value for key, value in declared.items() if key in _HOST_FIELDS}
        declarations = {key: value for key, value in declared.items() if key not in fields}
        containers = self.containers(raw.get("containers"), (*path, "containers"))
        vms = self.containers(raw.get("vms"), (*path, "vms"))
        if isinstance(containers, tuple) and isinstance(vms, tuple):
            # VMIDs are unique in a cluster: one guest cannot be both.
            lxc = {spec.vmid for spec in containers}
            for index, guest in enumerate(vms):
                if guest.vmid in lxc:
                    raise self.fail((*path, "vms", index),
                                    f"VMID {guest.vmid} is also listed under containers")
        oci = self.optional(raw, path, "oci", self.oci, None)
        if not probe_host and not containers and not vms and oci is None and not declared:
            raise self.fail(path, "nothing to probe: set containers, vms, oci or probe_host: true "
                                  "(or defaults.probe_host: true)")
        if transport == "api":
            # The API has no `pct exec` and no shell on the host: only guest agents.
            shelled = [key for key, kind in readers.items() if kind.needs_shell]
            for key in ("containers", "probe_host", "oci", *shelled):
                if raw.get(key) or key in shelled:
                    raise self.fail((*path, key), "needs SSH: a transport: api host reaches "
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
            containers=containers,
            vms=vms,
            oci=oci,
            **fields,
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
            declarations=declarations,
        )
        return spec, enabled

    def containers(self, raw: Any, path: KeyPath) -> str | tuple[ContainerSpec, ...]:
        if raw is None:
            return ()
        if raw == ALL_CONTAINERS:
            return ALL_CONTAINERS
        if not isinstance(raw, list):
            raise self.fail(path, f"must be 'all' or a list of VMIDs, got {_show(raw)}")
        return self.unique(raw, path, self.container, lambda spec: f"VMID {spec.vmid}")

    def container(self, raw: Any, path: KeyPath) -> ContainerSpec:
        if not isinstance(raw, dict):
            return ContainerSpec(vmid=self.vmid(raw, path))
        raw = self.mapping(raw, path, CONTAINER_KEYS)
        if "vmid" not in raw:
            raise self.fail((*path, "vmid"), "missing")
        return ContainerSpec(
            vmid=self.vmid(raw["vmid"], (*path, "vmid")),
            python=self.optional(raw, path, "python", self.python, None),
            env=self.optional(raw, path, "env", self.env, {}),
            labels=self.optional(raw, path, "labels", self.labels, ()),
            name=self.optional(raw, path, "name", self.string, None),
            timeout=self.optional(raw, path, "timeout", self.seconds, None),
            oci=self.optional(raw, path, "oci", self.oci, None),
        )

    def oci(self, raw: Any, path: KeyPath) -> OciSpec:
        """`oci: {runtime: docker|podman, containers: all | [NAME | {name, ...}]}`."""
        raw = self.mapping(raw, path, OCI_KEYS)
        if "runtime" not in raw:
            raise self.fail((*path, "runtime"), "missing (docker or podman)")
        runtime = self.choice(raw["runtime"], (*path, "runtime"), OCI_RUNTIMES)
        listed = raw.get("containers", ALL_CONTAINERS)
        cpath = (*path, "containers")
        if listed == ALL_CONTAINERS:
            return OciSpec(runtime=runtime, containers=ALL_CONTAINERS)
        if not isinstance(listed, list) or not listed:
            raise self.fail(cpath, f"must be 'all' or a list of container names, got "
                                   f"{_show(listed)}")
        specs = self.unique(listed, cpath, self.oci_container,
                            lambda spec: f"container {spec.name!r}")
        return OciSpec(runtime=runtime, containers=tuple(specs))

    def oci_container(self, raw: Any, path: KeyPath) -> OciContainerSpec:
        if not isinstance(raw, dict):
            return OciContainerSpec(name=self.oci_name(raw, path))
        raw = self.mapping(raw, path, OCI_CONTAINER_KEYS)
        if "name" not in raw:
            raise self.fail((*path, "name"), "missing")
        user = None
        if "user" in raw:
            user = self.string(raw["user"], (*path, "user"))
            if not OCI_USER_RE.match(user):
                raise self.fail((*path, "user"), f"must be NAME, UID, NAME:GROUP or UID:GID, "
                                                 f"got {_show(clip(user, 80))}")
        return OciContainerSpec(
            name=self.oci_name(raw["name"], (*path, "name")),
            python=self.optional(raw, path, "python", self.python, None),
            env=self.optional(raw, path, "env", self.env, {}),
            user=user,
            labels=self.optional(raw, path, "labels", self.labels, ()),
            timeout=self.optional(raw, path, "timeout", self.seconds, None),
        )

    def oci_name(self, value: Any, path: KeyPath) -> str:
        text = self.string(value, path)
        if not OCI_NAME_RE.match(text):
            # Also keeps a name from reading as an option of `docker exec`.
            raise self.fail(path, "must be a container name (letters, digits, '_', '.', '-', "
                                  f"not '-' first), got {_show(clip(text, 80))}")
        return text

    def vmid(self, value: Any, path: KeyPath) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(path, f"must be an integer, got {_show(value)}")
        return self.integer(value, path, VMID_MIN, VMID_MAX)

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
                kw[key] = self.local_path(value, path)
            elif key == "config_file":
                # "none" as in `ssh -F none`: read no ssh_config at all.
                kw[key] = "" if value in ("", "none") else self.local_path(value, path)
            elif key == "host_key_policy":
                kw[key] = self.choice(value, path, HOST_KEY_POLICIES)
            elif key == "max_sessions":
                kw[key] = self.integer(value, path, 1)
            elif key == "connect_timeout":
                kw[key] = self.seconds(value, path)
        return SshOptions(**kw)

    def api(self, items: Mapping[str, tuple[Any, KeyPath]], host: KeyPath, name: str) -> ApiOptions:
        """ApiOptions from defaults.api + hosts.X.api; the secret itself is never read here."""
        for key in ("url", "user", "token_name"):
            if key not in items:
                raise self.fail((*host, "api", key), "missing (needed for API discovery)")
        url_value, url_path = items["url"]
        url = self.string(url_value, url_path)
        parts = urlsplit(url)
        if parts.scheme != "https" or not parts.hostname:
            raise self.fail(url_path, f"must be an https:// URL, got {_show(url)}")
        user_value, user_path = items["user"]
        user = self.string(user_value, user_path)
        if "@" not in user or "!" in user:
            raise self.fail(user_path, f"must be USER@REALM (e.g. fleet@pve), got {_show(user)}")
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

    def groups(self, raw: Any, inventory: Inventory) -> dict[str, tuple[str, ...]]:
        if raw is None:
            return {}
        if not isinstance(raw, dict):
            raise self.fail(("groups",), f"must be a mapping of group names, got {_show(raw)}")
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
                    path, f"must be a list of host names or patterns, got {_show(members)}"
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

    def fail(self, path: KeyPath, problem: str) -> InventoryError:
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
