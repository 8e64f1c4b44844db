"""Container discovery through the Proxmox API (proxmoxer, in a worker thread, token auth)."""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar
from urllib.parse import urlsplit

from fleetcheck.budget import api_deadline
from fleetcheck.failures import ACCESS_DENIED, UNREACHABLE
from fleetcheck.inventory_data.errors import DiscoveryError
from fleetcheck.inventory_data.listings import parse_guest_rows
from fleetcheck.inventory_data.model import ApiOptions, DiscoveredContainer, HostSpec

_VERIFY_FAILED = re.compile(r"certificate verify failed: ([^(')\"]+)")
_T = TypeVar("_T")
_ERRNO = re.compile(r"\[Errno -?\d+\] ([^'\")]+)")


async def discover_via_api(host: HostSpec) -> list[DiscoveredContainer]:
    """The containers on `host`'s Proxmox node (see `discover_guests_via_api`)."""
    return (await discover_guests_via_api(host))[0]


async def discover_guests_via_api(
    host: HostSpec,
) -> tuple[list[DiscoveredContainer], list[DiscoveredContainer]]:
    """(containers, VMs) on `host`'s Proxmox node, from GET /cluster/resources?type=vm.

    Raises DiscoveryError (one line, naming the host, never the token) when the token is
    missing, the API refuses it, TLS verification fails, the node is unknown or offline, or
    the API does not answer within `api.timeout` seconds.
    """
    api = host.api
    if api is None:
        raise DiscoveryError(f"{host.name}: no api: section in the inventory", host=host.name)
    secret = read_token_secret(api, host.name)
    node = api.node or host.name
    # proxmoxer is built on requests and blocks: api_deadline bounds the whole exchange.
    deadline = api_deadline(api.timeout)
    try:
        nodes, resources = await asyncio.wait_for(
            asyncio.to_thread(_fetch, api, secret, host.name), timeout=deadline
        )
    except asyncio.TimeoutError:
        raise DiscoveryError(
            f"{host.name}: Proxmox API {api.url} did not answer within {deadline:g} s",
            host=host.name,
        ) from None
    _check_node(nodes, node, host.name, api)
    if isinstance(resources, list) and not any(
            isinstance(row, dict) and row.get("type") in ("lxc", "qemu") for row in resources):
        # Proxmox leaves out guests the token may not audit: "none" may be "not allowed".
        await _refuse_blind_token(api, secret, host.name, deadline)
    return (containers_from_resources(resources, node, host.name),
            containers_from_resources(resources, node, host.name, "qemu"))


#: The privilege a token needs to see a cluster's guests (on /vms).
GUEST_PRIVILEGE = "VM.Audit"


def missing_guest_privilege(permissions: Any) -> str | None:
    """Why a token sees no guest, from GET /access/permissions (path -> {privilege: 1});
    None when it holds VM.Audit somewhere guests live (then there are simply none)."""
    if not isinstance(permissions, Mapping):
        return None
    for path, privileges in permissions.items():
        where = str(path)
        guest_path = where in ("/", "/vms") or where.startswith(("/vms/", "/pool/"))
        if guest_path and isinstance(privileges, Mapping) and GUEST_PRIVILEGE in privileges:
            return None
    held = sorted(str(path) for path in permissions) or ["none"]
    return f"it lacks {GUEST_PRIVILEGE} on /vms (its permissions: {', '.join(held)})"


async def _refuse_blind_token(api: ApiOptions, secret: str, host: str, deadline: float) -> None:
    """DiscoveryError when a token that sees no guest lacks VM.Audit (GET
    /access/permissions), so an audit never passes on guests it could not see."""
    def permissions() -> Any:
        client = api_client(api, secret, host)
        return call_api(api, secret, host, lambda: client.access.permissions.get())

    try:
        held = await asyncio.wait_for(asyncio.to_thread(permissions), timeout=deadline)
    except asyncio.TimeoutError:
        return
    missing = missing_guest_privilege(held)
    if missing:
        token = f"{api.user}!{api.token_name}"
        raise DiscoveryError(
            f"{host}: Proxmox API {api.url}: token {token} sees no guests: {missing}; "
            f"grant: pveum acl modify /vms -token '{token}' -role PVEAuditor", host=host)


def read_token_secret(api: ApiOptions, host: str) -> str:
    """The API token secret from `token_env` or `token_file`."""
    if api.token_env:
        secret = os.environ.get(api.token_env, "").strip()
        if not secret:
            raise DiscoveryError(
                f"{host}: api.token_env: environment variable {api.token_env} is not set",
                host=host,
            )
        return secret
    if api.token_file:
        try:
            with open(api.token_file, encoding="utf-8") as handle:
                secret = handle.read().strip()
        except OSError as exc:
            raise DiscoveryError(
                f"{host}: api.token_file: cannot read {api.token_file}: {exc.strerror or exc}",
                host=host,
            ) from None
        except UnicodeDecodeError:
            # The decoder's message quotes the offending bytes: never show the file's content.
            raise DiscoveryError(
                f"{host}: api.token_file: {api.token_file} is not UTF-8 text", host=host
            ) from None
        if not secret:
            raise DiscoveryError(f"{host}: api.token_file: {api.token_file} is empty", host=host)
        return secret
    raise DiscoveryError(f"{host}: api: neither token_env nor token_file is set", host=host)


def containers_from_resources(
    rows: Iterable[Any], node: str, host: str = "", kind: str = "lxc"
) -> list[DiscoveredContainer]:
    """The `kind` rows ("lxc" or "qemu") of /cluster/resources?type=vm for one node.

    A row that is not an object or has no readable VMID becomes one entry with `problem`
    set (an error node), never the failure of the whole host.
    """
    if not isinstance(rows, list):
        raise DiscoveryError(f"{host}: unexpected Proxmox API answer (not a list of objects)",
                             host=host)
    mine = [row for row in rows
            if not isinstance(row, dict) or (row.get("type") == kind and row.get("node") == node)]
    default = "CT{vmid}" if kind == "lxc" else "VM {vmid}"
    return parse_guest_rows(mine, f"GET /cluster/resources ({kind})", default)


def _check_node(nodes: Any, node: str, host: str, api: ApiOptions) -> None:
    # A node name that is not the host's (hosts.X named differently from the PVE node)
    # would otherwise list no containers at all and let an audit pass on nothing.
    if not isinstance(nodes, list):
        raise DiscoveryError(f"{host}: unexpected Proxmox API answer for /nodes", host=host)
    status = {str(n.get("node")): str(n.get("status", "")) for n in nodes if isinstance(n, dict)}
    if node not in status:
        known = ", ".join(sorted(status)) or "none"
        raise DiscoveryError(
            f"{host}: Proxmox API {api.url}: no node {node!r} in the cluster (nodes: {known}); "
            "set api.node",
            host=host,
        )
    if status[node] != "online":
        raise DiscoveryError(
            f"{host}: Proxmox API {api.url}: node {node!r} is {status[node] or 'not online'}",
            host=host,
        )


def _fetch(api: ApiOptions, secret: str, host: str) -> tuple[Any, Any]:
    """GET /nodes and /cluster/resources?type=vm; every library error becomes DiscoveryError."""
    client = api_client(api, secret, host)
    return call_api(api, secret, host, lambda: (client.nodes.get(),
                                                client.cluster.resources.get(type="vm")))


def api_client(api: ApiOptions, secret: str, host: str) -> Any:
    """A proxmoxer client for `api` with the token (no request is made yet)."""
    # Imported here: proxmoxer's https backend silences urllib3 warnings process-wide on
    # import, which only API users should pay for.
    from proxmoxer import ProxmoxAPI

    quiet_unverified_tls()

    parts = urlsplit(api.url)
    prefix = parts.path.strip("/")
    if prefix.endswith("api2/json"):
        prefix = prefix[: -len("api2/json")].strip("/")
    return call_api(api, secret, host, lambda: ProxmoxAPI(
        parts.hostname,
        port=parts.port or 8006,
        path_prefix=prefix or None,
        user=api.user,
        token_name=api.token_name,
        token_value=secret,
        verify_ssl=api.verify_tls,
        timeout=api.timeout,
    ))


def quiet_unverified_tls() -> None:
    """urllib3's InsecureRequestWarning ignored: `verify_tls: false` is the inventory's own,
    documented choice (docs/inventory.md), not news at every request. proxmoxer's import
    silences it too, with all of urllib3's warnings; fleetcheck does not rely on that."""
    import warnings

    from urllib3.exceptions import InsecureRequestWarning

    warnings.filterwarnings("ignore", category=InsecureRequestWarning, module=r"urllib3(\.|$)")


def call_api(
    api: ApiOptions, secret: str, host: str, request: Callable[[], _T],
    forbidden: str = "it needs the PVEAuditor role on /vms and /nodes",
) -> _T:
    """`request()` (blocking proxmoxer calls); every library error becomes DiscoveryError.

    The message is one line naming the host and the URL, never the secret; `forbidden` says
    what a 403 lacks.
    """
    import requests
    from proxmoxer import ResourceException

    # The API refused the token or could not be reached at all; any other answer is an error.
    unreached = True
    cause: str | None = None
    try:
        return request()
    except ResourceException as exc:
        message = _resource_message(exc, api, forbidden)
        status = getattr(exc, "status_code", None)
        unreached = status == 401
        cause = ACCESS_DENIED if status == 403 else None
    except requests.exceptions.SSLError as exc:
        reason = _VERIFY_FAILED.search(str(exc))
        detail = reason.group(1).strip() if reason else "TLS handshake failed"
        message = (
            f"TLS certificate not trusted ({detail}); set api.verify_tls to the cluster's CA "
            "file (/etc/pve/pve-root-ca.pem on any node)"
        )
    except requests.exceptions.Timeout:
        message = f"no answer within {api.timeout:g} s"
    except requests.exceptions.ConnectionError as exc:
        reason = _ERRNO.search(str(exc))
        message = f"cannot connect: {reason.group(1).strip() if reason else 'connection failed'}"
    except requests.exceptions.RequestException as exc:
        message = f"request failed: {type(exc).__name__}"
        unreached = False
    except OSError as exc:
        # requests raises a plain OSError for a CA bundle path that does not exist.
        message = f"api.verify_tls: {exc}"
        unreached = False
    text = f"{host}: Proxmox API {api.url}: {message}"
    # Defence in depth: no message built above holds the secret, but a library text might.
    if len(secret) >= 8:
        text = text.replace(secret, "***")
    raise DiscoveryError(text, host=host, cause=UNREACHABLE if unreached else cause)


def _resource_message(exc: Any, api: ApiOptions, forbidden: str) -> str:
    status = getattr(exc, "status_code", None)
    reason = str(getattr(exc, "content", "") or getattr(exc, "status_message", "")).strip()
    if status == 401:
        where = f"${api.token_env}" if api.token_env else api.token_file
        return (
            f"401 {reason or 'unauthorized'}: token {api.user}!{api.token_name} refused "
            f"(check the secret in {where})"
        )
    if status == 403:
        return (
            f"403 {reason or 'forbidden'}: token {api.user}!{api.token_name} lacks permission "
            f"({forbidden})"
        )
    return f"{status} {reason}".strip()
