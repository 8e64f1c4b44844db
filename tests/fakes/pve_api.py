"""A Proxmox VE API stand-in: real HTTPS on 127.0.0.1, token check, fixtures in tests/fixtures.

It answers as pve-http-server does: `{"data": ...}` bodies, the error text as the HTTP reason
phrase (and, as since PVE 8.4, in `message`), 401 "invalid token value!" after a delay for a
wrong token (3 s on a real host; a parameter here so tests stay fast), 500 "Configuration file
'nodes/N/lxc/V.conf' does not exist" for an unknown container, 400 "Parameter verification
failed." for a bad `type`, 501 for an unknown path.

Permissions (`FakePveApi.privileges`, None: a token without privilege separation, which may do
everything) are checked as pve-access-control's RPCEnvironment does: an ACL on a path holds
for the paths below it, a guest's privileges also come from its pool (`/pool/NAME`), lists
(`/cluster/resources`, `/nodes/N/lxc`) leave out the guests the token may not audit, and a
single guest's route answers 403 "Permission check failed (/vms/VMID, PRIV)" (raise_perm_exc).
Running a command through the QEMU guest agent needs VM.GuestAgent.Unrestricted from PVE 9,
VM.Monitor before (`pve_major`).
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import ssl
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

#: The Proxmox JSON fixtures ship with the tests (provenance: FIXTURES.md beside them).
FIXTURES_DIR = Path(__file__).resolve().parents[1] / "fixtures" / "proxmox"

_FIXTURE_ROUTES = {
    "/nodes": "nodes.json",
    "/cluster/resources?type=vm": "cluster_resources_vm.json",
    "/cluster/status": "cluster_status.json",
    "/nodes/pve1/lxc": "nodes_pve1_lxc.json",
    "/nodes/pve1/lxc/101/status/current": "lxc_101_status_current.json",
    "/nodes/pve1/lxc/101/config": "lxc_101_config.json",
}
_RESOURCE_TYPES = ("vm", "storage", "node", "sdn")
#: What a token without privilege separation of root@pam holds on / (PVEAuditor's and more).
_ALL_PRIVILEGES = {"Datastore.Audit", "Sys.Audit", "VM.Audit", "VM.Console", "VM.Monitor",
                   "VM.GuestAgent.Unrestricted", "Permissions.Modify"}


def write_self_signed_cert(directory: Path, common_name: str = "127.0.0.1") -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and localhost (its own CA); (cert, key)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = datetime.datetime.now(datetime.timezone.utc)
    public = key.public_key()
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(public), critical=False)
        .sign(key, hashes.SHA256())
    )
    directory.mkdir(parents=True, exist_ok=True)
    cert_path = directory / "pve-ssl.pem"
    key_path = directory / "pve-ssl.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


@dataclass
class FakePveApi:
    """The fake's state: who may call it, what it serves, what it was asked."""

    fixtures_dir: Path
    user: str = "fleet@pve"
    token_name: str = "audit"
    secret: str = "5f0d7c1e-8a4b-4d2e-9c3f-7b6a5e4d3c2b"
    #: PVE waits 3 s before answering an unauthorized request.
    unauthorized_delay: float = 0.0
    #: Replacement `data` per route ("/cluster/resources?type=vm" -> [...]).
    overrides: dict[str, Any] = field(default_factory=dict)
    #: (method, path with query, Authorization header present) of every request.
    requests: list[tuple[str, str, bool]] = field(default_factory=list)
    url: str = ""
    ca_path: Path | None = None
    #: QEMU VMs whose guest agent answers agent/exec and agent/exec-status, by VMID. With
    #: none, agent/exec answers every VM with pid 4242 once the privilege check passed.
    vms: dict[int, FakeVm] = field(default_factory=dict)
    #: Running and finished guest commands by pid (each forgotten after its "exited" answer).
    sessions: dict[int, Any] = field(default_factory=dict)
    #: ACL path -> privileges granted to the token there; None grants everything.
    privileges: dict[str, set[str]] | None = None
    #: Guest VMID -> its pool, for ACLs on /pool/NAME.
    pools: dict[int, str] = field(default_factory=dict)
    #: Major PVE version: decides the guest-agent exec privilege.
    pve_major: int = 9

    def allowed(self, path: str, privilege: str) -> bool:
        """Does the token hold `privilege` on `path` (ACLs propagate down the tree)?"""
        if self.privileges is None:
            return True
        parts = path.rstrip("/").split("/")
        prefixes = ["/".join(parts[:i]) or "/" for i in range(len(parts), 0, -1)]
        return any(privilege in self.privileges.get(prefix, set()) for prefix in prefixes)

    def vm_allowed(self, vmid: int, privilege: str) -> bool:
        """RPCEnvironment check_vm_perm: the guest's pool first, then /vms/VMID."""
        pool = self.pools.get(vmid)
        if pool and self.allowed(f"/pool/{pool}", privilege):
            return True
        return self.allowed(f"/vms/{vmid}", privilege)

    def agent_exec_privilege(self) -> str:
        """The privilege `POST .../agent/exec` checks (qemu-server API2/Qemu/Agent.pm)."""
        return "VM.GuestAgent.Unrestricted" if self.pve_major >= 9 else "VM.Monitor"

    def visible(self, route: str, data: Any) -> Any:
        """A list route's data without the guests the token may not audit (no 403 for lists)."""
        listed = route.startswith("/cluster/resources") or (
            route.startswith("/nodes/") and route.endswith("/lxc"))
        if not listed or not isinstance(data, list):
            return data
        return [row for row in data if not (isinstance(row, dict) and "vmid" in row)
                or self.vm_allowed(int(row["vmid"]), "VM.Audit")]

    def data_for(self, route: str) -> Any:
        if route in self.overrides:
            return self.overrides[route]
        fixture = _FIXTURE_ROUTES.get(route)
        if fixture is None:
            return None
        return json.loads((self.fixtures_dir / fixture).read_text())["data"]


@dataclass
class FakeVm:
    """A VM as qemu-server's agent endpoints see it: its status, agent and environment.

    `agent` is "on" (answers), "off" (configured, not answering) or "none" (not configured);
    guest commands run here with `env` only (no login environment) and `cwd`.
    """

    status: str = "running"
    agent: str = "on"
    env: dict[str, str] = field(default_factory=dict)
    cwd: str = "/"


_AGENT_INPUT_LIMIT = 64 * 1024
_AGENT_OUTPUT_CAP = 16 * 1024 * 1024


def agent_route(
    api: FakePveApi, method: str, path: str, params: dict[str, list[str]]
) -> tuple[int, str, dict[str, Any]] | None:
    """POST .../agent/exec and GET .../agent/exec-status as qemu-server answers them.

    (status, reason, body), or None for any other path. Texts: Agent.pm (`exec`, with
    `input-data` maxLength 64 KiB; `exec-status`), assert_agent_available, QMPClient's
    `VM N qga command '...' failed - ...`, the 403 `Permission check failed (/vms/N, PRIV)`.
    """
    segments = path.strip("/").split("/")
    if len(segments) != 6 or segments[0] != "nodes" or segments[2] != "qemu" \
            or segments[4] != "agent" or segments[5] not in ("exec", "exec-status"):
        return None
    action, vmid = segments[5], segments[3]
    if (action == "exec") != (method == "POST"):
        return 501, f"Method '{method} /api2/json{path}' not implemented", {"data": None}
    privilege = api.agent_exec_privilege()
    if vmid.isdigit() and not api.vm_allowed(int(vmid), privilege):
        message = f"Permission check failed (/vms/{vmid}, {privilege})"
        return 403, message, {"data": None, "message": message + "\n"}
    if not api.vms and action == "exec":
        # No guest modelled: the privilege check is all there is to test.
        return 200, "OK", {"data": {"pid": 4242}}

    def died(message: str) -> tuple[int, str, dict[str, Any]]:
        return 500, message, {"data": None, "message": message + "\n"}

    vm = api.vms.get(int(vmid)) if vmid.isdigit() else None
    if vm is None:
        return died(f"Configuration file 'nodes/{segments[1]}/qemu-server/{vmid}.conf' does "
                    "not exist")
    if vm.agent == "none":
        return died("No QEMU guest agent configured")
    if vm.status != "running":
        return died(f"VM {vmid} is not running")
    if vm.agent != "on":
        return died("QEMU guest agent is not running")
    if action == "exec":
        return _agent_exec(api, vm, vmid, params)
    return _agent_status(api, vmid, params)


def _agent_exec(
    api: FakePveApi, vm: FakeVm, vmid: str, params: dict[str, list[str]]
) -> tuple[int, str, dict[str, Any]]:
    import subprocess
    import tempfile

    data = params.get("input-data", [None])[0]
    errors = {}
    if "command" not in params:
        errors["command"] = "property is missing and it is not optional"
    if data is not None and len(data) > _AGENT_INPUT_LIMIT:
        errors["input-data"] = f"value may only be {_AGENT_INPUT_LIMIT} characters long"
    if errors:
        return 400, "Parameter verification failed.", {"data": None, "errors": errors}
    command = params["command"]
    outputs = (tempfile.TemporaryFile(), tempfile.TemporaryFile())
    try:
        proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=outputs[0],
                                stderr=outputs[1], env=vm.env, cwd=vm.cwd,
                                start_new_session=True)
    except OSError as exc:
        for handle in outputs:
            handle.close()
        message = (f"VM {vmid} qga command 'guest-exec' failed - Guest agent command failed, "
                   f"error was 'Failed to execute child process \u201c{command[0]}\u201d "
                   f"({exc.strerror})'")
        # The reason phrase is latin-1 on the wire: the quotes become '?'.
        reason = message.encode("latin-1", "replace").decode("latin-1")
        return 500, reason, {"data": None, "message": message + "\n"}
    assert proc.stdin is not None
    try:
        proc.stdin.write((data or "").encode("utf-8"))
        proc.stdin.close()
    except BrokenPipeError:
        pass
    api.sessions[proc.pid] = (proc, outputs)
    return 200, "OK", {"data": {"pid": proc.pid}}


def _agent_status(
    api: FakePveApi, vmid: str, params: dict[str, list[str]]
) -> tuple[int, str, dict[str, Any]]:
    pid_text = params.get("pid", [""])[0]
    entry = api.sessions.get(int(pid_text)) if pid_text.isdigit() else None
    if entry is None:
        message = f"VM {vmid} qga command 'guest-exec-status' failed - Invalid parameter 'pid'"
        return 500, message, {"data": None, "message": message + "\n"}
    proc, outputs = entry
    if proc.poll() is None:
        return 200, "OK", {"data": {"exited": 0}}
    del api.sessions[proc.pid]  # QGA frees the pid after its first "exited" answer
    status: dict[str, Any] = {"exited": 1}
    if proc.returncode < 0:
        status["signal"] = -proc.returncode
    else:
        status["exitcode"] = proc.returncode
    for handle, key in zip(outputs, ("out", "err"), strict=True):
        handle.seek(0)
        captured = handle.read(_AGENT_OUTPUT_CAP + 1)
        handle.close()
        if captured:
            # Decoded by qemu-server, each byte one character (see qemu_exec_status).
            status[f"{key}-data"] = captured[:_AGENT_OUTPUT_CAP].decode("latin-1")
            if len(captured) > _AGENT_OUTPUT_CAP:
                status[f"{key}-truncated"] = 1
    return 200, "OK", {"data": status}


def _handler(api: FakePveApi) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "pve-api-daemon/3.0"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            auth = self.headers.get("Authorization")
            api.requests.append(("GET", self.path, auth is not None))
            expected = f"PVEAPIToken={api.user}!{api.token_name}={api.secret}"
            if auth != expected:
                time.sleep(api.unauthorized_delay)
                self._answer(401, "invalid token value!", {"data": None})
                return
            parts = urlsplit(self.path)
            if not parts.path.startswith("/api2/json/"):
                self._answer(501, f"Method 'GET {parts.path}' not implemented", {"data": None})
                return
            path = parts.path[len("/api2/json") :].rstrip("/")
            query = parse_qs(parts.query)
            agent = agent_route(api, "GET", path, query)
            if agent is not None:
                self._answer(agent[0], agent[1], agent[2])
                return
            route = path
            if path == "/cluster/resources":
                kind = query.get("type", [None])[0]
                if kind is not None and kind not in _RESOURCE_TYPES:
                    errors = {
                        "type": f"value '{kind}' does not have a value in the enumeration "
                        "'vm, storage, node, sdn'"
                    }
                    self._answer(
                        400, "Parameter verification failed.", {"data": None, "errors": errors}
                    )
                    return
                route = f"{path}?type={kind}" if kind else path
            segments = path.strip("/").split("/")
            if (len(segments) >= 4 and segments[0] == "nodes" and segments[2] in ("lxc", "qemu")
                    and segments[3].isdigit()
                    and not api.vm_allowed(int(segments[3]), "VM.Audit")):
                self._forbidden(f"/vms/{segments[3]}, VM.Audit")
                return
            if path == "/access/permissions":
                # pve-access-control `permissions`: path -> {privilege: propagate (1)}.
                self._answer(200, "OK", {"data": {
                    acl: {priv: 1 for priv in sorted(privs)}
                    for acl, privs in (api.privileges or {"/": _ALL_PRIVILEGES}).items()}})
                return
            if path == "/cluster/status" and not api.allowed("/", "Sys.Audit"):
                # API2/Cluster.pm get_status: check => ['perm', '/', ['Sys.Audit']].
                self._forbidden("/, Sys.Audit")
                return
            data = api.data_for(route)
            if data is not None:
                self._answer(200, "OK", {"data": api.visible(route, data)})
                return
            if len(segments) >= 4 and segments[0] == "nodes" and segments[2] == "lxc":
                message = (
                    f"Configuration file 'nodes/{segments[1]}/lxc/{segments[3]}.conf' "
                    "does not exist"
                )
                self._answer(500, message, {"data": None, "message": message + "\n"})
                return
            self._answer(501, f"Method 'GET {parts.path}' not implemented", {"data": None})

        def do_POST(self) -> None:
            """Only the guest agent's exec: form-encoded, `command` repeated per word."""
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length).decode("utf-8") if length else ""
            auth = self.headers.get("Authorization")
            api.requests.append(("POST", self.path, auth is not None))
            if auth != f"PVEAPIToken={api.user}!{api.token_name}={api.secret}":
                time.sleep(api.unauthorized_delay)
                self._answer(401, "invalid token value!", {"data": None})
                return
            parts = urlsplit(self.path)
            path = parts.path[len("/api2/json") :].rstrip("/")
            params = parse_qs(body, keep_blank_values=True)
            params.update(parse_qs(parts.query, keep_blank_values=True))
            agent = agent_route(api, "POST", path, params)
            if agent is None:
                self._answer(501, f"Method 'POST {parts.path}' not implemented", {"data": None})
                return
            self._answer(agent[0], agent[1], agent[2])

        def _forbidden(self, what: str) -> None:
            # PVE::Exception raise_perm_exc: "Permission check failed ($what)", HTTP 403.
            message = f"Permission check failed ({what})"
            self._answer(403, message, {"data": None, "message": message + "\n"})

        def _answer(self, status: int, reason: str, body: dict[str, Any]) -> None:
            payload = json.dumps(body).encode()
            self.send_response(status, reason)
            self.send_header("Content-Type", "application/json;charset=UTF-8")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    return Handler


@contextmanager
def serve_pve_api(api: FakePveApi, cert_dir: Path) -> Iterator[FakePveApi]:
    """Serve `api` over HTTPS on 127.0.0.1:<free port> in a thread; sets url and ca_path."""
    cert_path, key_path = write_self_signed_cert(cert_dir)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_path, key_path)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(api))
    server.daemon_threads = True
    server.socket = context.wrap_socket(server.socket, server_side=True)
    # A short poll interval so that shutdown() at the end of each test is quick.
    thread = threading.Thread(
        target=server.serve_forever,
        kwargs={"poll_interval": 0.02},
        name="fake-pve-api",
        daemon=True,
    )
    thread.start()
    api.url = f"https://127.0.0.1:{server.server_address[1]}"
    api.ca_path = cert_path
    try:
        yield api
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
        # Commands whose status was never asked for (a test that timed out first).
        for proc, outputs in api.sessions.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait(5)
            for handle in outputs:
                handle.close()
        api.sessions.clear()
