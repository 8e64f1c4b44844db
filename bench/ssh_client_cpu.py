"""What one SSH connection costs the client's CPU, by client: asyncssh (as fleetcheck imports
it), libssh2 (ssh2-python's own binding, blocking), fleetcheck's SSH transport with each of its
clients (`ssh.client`: libssh2, asyncssh) and OpenSSH's `ssh` process (what pdsh and clush
start per node).

Usage: python bench/ssh_client_cpu.py [--connections N] [--rounds R] [--ssh2-python PYTHON]

Starts one OpenSSH sshd on 127.0.0.1 (a temporary folder: host key, user key, known_hosts),
then, R rounds in turn, each client makes N connections one after another; each connection
checks the host key against known_hosts, logs in with the ed25519 key, runs one command with
75 KB on its stdin (about what zlib(probe) is), reads the reply and closes. The crypto is the
same for all: curve25519-sha256 and aes128-gcm@openssh.com, what fleetcheck negotiates with
OpenSSH 9.2. A client's figure is its own CPU (user + system) for the N connections, without
its interpreter's start or its imports (the `ssh` processes: all of theirs, start included,
since each connection is one); the median of the rounds is printed, per connection, with
the wall time per connection (one after another: round trips, not CPU) and, for the two
libraries, what the client's interpreter start and imports cost it (the gate pays that once).

The two fleetcheck clients are `SshTransport` as an audit makes it (one `SshFiles` for all
connections, the command under the remote `timeout`), one transport per connection, opened,
run and closed. ssh2-python is a fleetcheck dependency on Linux x86_64 and aarch64; the bare
libssh2 client runs in this interpreter where it has it, or in --ssh2-python's. The server's
CPU is not counted for any client.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import pwd
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.nodes import _free_ports, _keygen, sshd_path  # noqa: E402
from fleetcheck.transport import libssh2  # noqa: E402

COMMAND = "cat >/dev/null; echo ok"
KEX = "curve25519-sha256"
CIPHER = "aes128-gcm@openssh.com"

#: Each client's program: argv SPEC.json; prints one JSON line {"cpu": seconds, "ok": n}.
ASYNCSSH = r'''
import asyncio, json, resource, sys, time
sys.path.insert(0, sys.argv[2])
from fleetcheck.transport.sshlib import asyncssh
spec = json.load(open(sys.argv[1]))
payload = open(spec["payload"], "rb").read()
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
async def main():
    keys = asyncssh.load_keypairs([spec["key"]])
    known = asyncssh.read_known_hosts(spec["known_hosts"])
    ok = 0
    for _ in range(spec["n"]):
        async with asyncssh.connect("127.0.0.1", spec["port"], username=spec["user"],
                                    config=None, client_keys=keys, known_hosts=known,
                                    kex_algs=[spec["kex"]], encryption_algs=[spec["cipher"]],
                                    compression_algs=None) as conn:
            done = await conn.run(spec["command"], input=payload, encoding=None)
            ok += done.stdout.strip() == b"ok"
    return ok
started, wall = cpu(), time.monotonic()
ok = asyncio.run(main())
print(json.dumps({"cpu": cpu() - started, "ok": ok, "start": started,
                  "wall": time.monotonic() - wall}))
'''

LIBSSH2 = r'''
import json, resource, socket, sys, time
from ssh2.session import (Session, LIBSSH2_METHOD_KEX, LIBSSH2_METHOD_CRYPT_CS,
                          LIBSSH2_METHOD_CRYPT_SC)
from ssh2 import knownhost
spec = json.load(open(sys.argv[1]))
payload = open(spec["payload"], "rb").read()
TYPE = (knownhost.LIBSSH2_KNOWNHOST_TYPE_PLAIN | knownhost.LIBSSH2_KNOWNHOST_KEYENC_RAW
        | knownhost.LIBSSH2_KNOWNHOST_KEY_ED25519)
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
def one():
    sock = socket.create_connection(("127.0.0.1", spec["port"]))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    session = Session()
    session.method_pref(LIBSSH2_METHOD_KEX, spec["kex"])
    session.method_pref(LIBSSH2_METHOD_CRYPT_CS, spec["cipher"])
    session.method_pref(LIBSSH2_METHOD_CRYPT_SC, spec["cipher"])
    session.handshake(sock)
    known = session.knownhost_init()
    known.readfile(spec["known_hosts"])
    key, _ = session.hostkey()
    known.checkp(b"127.0.0.1", spec["port"], key, TYPE)  # raises unless it matches
    session.userauth_publickey_fromfile(spec["user"], spec["key"])
    channel = session.open_session()
    channel.execute(spec["command"])
    channel.write(payload)
    channel.send_eof()
    out = b""
    while True:
        size, data = channel.read()
        if size <= 0:
            break
        out += data
    channel.wait_eof()
    channel.close()
    channel.wait_closed()
    session.disconnect()
    sock.close()
    return out.strip() == b"ok"
started, wall = cpu(), time.monotonic()
ok = sum(one() for _ in range(spec["n"]))
print(json.dumps({"cpu": cpu() - started, "ok": ok, "start": started,
                  "wall": time.monotonic() - wall}))
'''

FLEETCHECK = r'''
import asyncio, json, resource, sys, time
sys.path.insert(0, sys.argv[2])
from fleetcheck.inventory_data.model import HostSpec, SshOptions
from fleetcheck.transport.ssh import SshTransport
from fleetcheck.transport.ssh_settings import SshFiles
spec = json.load(open(sys.argv[1]))
payload = open(spec["payload"], "rb").read()
host = HostSpec(name="node", address="127.0.0.1", ssh=SshOptions(
    user=spec["user"], port=spec["port"], identity_file=spec["key"],
    known_hosts=spec["known_hosts"], config_file="", client=spec["client"]))
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
async def main():
    files = SshFiles()
    ok = 0
    for _ in range(spec["n"]):
        transport = SshTransport(host, files=files)
        try:
            done = await transport.run(["sh", "-c", spec["command"]], input=payload, timeout=60)
        finally:
            await transport.close()
        assert transport.client == spec["client"], transport.client
        ok += done.stdout.strip() == b"ok"
    return ok
started, wall = cpu(), time.monotonic()
ok = asyncio.run(main())
print(json.dumps({"cpu": cpu() - started, "ok": ok, "start": started,
                  "wall": time.monotonic() - wall}))
'''

OPENSSH = r'''
import json, resource, subprocess, sys, time
spec = json.load(open(sys.argv[1]))
payload = open(spec["payload"], "rb").read()
argv = ["ssh", "-p", str(spec["port"]), "-i", spec["key"], "-F", "none",
        "-o", "UserKnownHostsFile=" + spec["known_hosts"], "-o", "StrictHostKeyChecking=yes",
        "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes", "-o", "KexAlgorithms=" + spec["kex"],
        "-o", "Ciphers=" + spec["cipher"], "-o", "ControlMaster=no",
        spec["user"] + "@127.0.0.1", spec["command"]]
def cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime
started, wall = cpu(), time.monotonic()
ok = 0
for _ in range(spec["n"]):
    done = subprocess.run(argv, input=payload, capture_output=True, check=False)
    ok += done.stdout.strip() == b"ok"
print(json.dumps({"cpu": cpu() - started, "ok": ok, "start": None,
                  "wall": time.monotonic() - wall}))
'''


def start_sshd(root: Path) -> tuple[subprocess.Popen[bytes], dict[str, object]]:
    sshd = sshd_path()
    for name in ("host", "user"):
        _keygen(root / name)
    port = _free_ports(1)[0]
    host_key = (root / "host.pub").read_text().split()
    (root / "known_hosts").write_text(f"[127.0.0.1]:{port} {host_key[0]} {host_key[1]}\n")
    (root / "sshd_config").write_text("\n".join([
        f"Port {port}", "ListenAddress 127.0.0.1", f"HostKey {root / 'host'}",
        f"AuthorizedKeysFile {root / 'user.pub'}", "PasswordAuthentication no",
        "KbdInteractiveAuthentication no", "UsePAM no", "StrictModes no",
        f"PidFile {root / 'sshd.pid'}", "MaxStartups 100", ""]))
    with contextlib.suppress(OSError):  # sshd's privilege-separation folder, as root
        Path("/run/sshd").mkdir(exist_ok=True)
    server = subprocess.Popen([sshd, "-D", "-f", str(root / "sshd_config"),
                               "-E", str(root / "sshd.log")])
    for _ in range(100):
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                break
        time.sleep(0.05)
    else:
        server.kill()
        raise SystemExit(f"bench: sshd did not listen: {(root / 'sshd.log').read_text()}")
    (root / "payload").write_bytes(os.urandom(75 * 1024))
    spec: dict[str, object] = {
        "port": port, "user": pwd.getpwuid(os.getuid()).pw_name, "key": str(root / "user"),
        "known_hosts": str(root / "known_hosts"), "payload": str(root / "payload"),
        "command": COMMAND, "kex": KEX, "cipher": CIPHER}
    return server, spec


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--ssh2-python", help="an interpreter with ssh2-python (libssh2)")
    args = parser.parse_args()
    clients: dict[str, tuple[str, str, dict[str, str]]] = {
        "asyncssh": (sys.executable, ASYNCSSH, {}), "openssh": (sys.executable, OPENSSH, {})}
    ssh2_python = args.ssh2_python or (
        sys.executable if importlib.util.find_spec("ssh2") is not None else None)
    if ssh2_python:
        clients["libssh2"] = (ssh2_python, LIBSSH2, {})
    clients["fc-asyncssh"] = (sys.executable, FLEETCHECK, {"client": "asyncssh"})
    if libssh2.library() is not None:
        clients["fc-libssh2"] = (sys.executable, FLEETCHECK, {"client": "libssh2"})
    with tempfile.TemporaryDirectory(prefix="fc-sshcpu-") as tmp:
        root = Path(tmp)
        server, spec = start_sshd(root)
        spec["n"] = args.connections
        per: dict[str, list[float]] = {name: [] for name in clients}
        walls: dict[str, list[float]] = {name: [] for name in clients}
        starts: dict[str, list[float]] = {name: [] for name in clients}
        try:
            for _ in range(args.rounds):
                for name, (python, program, extra) in clients.items():
                    (root / "spec.json").write_text(json.dumps({**spec, **extra}))
                    done = subprocess.run([python, "-c", program, str(root / "spec.json"),
                                           str(REPO)], capture_output=True, text=True,
                                          check=False, timeout=600)
                    if done.returncode != 0:
                        raise SystemExit(f"bench: {name} failed: {done.stderr.strip()}")
                    result = json.loads(done.stdout.strip().splitlines()[-1])
                    if result["ok"] != args.connections:
                        raise SystemExit(f"bench: {name}: {result['ok']} of "
                                         f"{args.connections} connections answered ok")
                    per[name].append(result["cpu"] / args.connections)
                    walls[name].append(result["wall"] / args.connections)
                    if result["start"] is not None:
                        starts[name].append(result["start"])
        finally:
            server.terminate()
            server.wait(timeout=10)
    floor = statistics.median(per["openssh"])
    print(f"{'client':11s} {'CPU ms/connection':>18s} {'min-max':>13s} {'/ openssh':>9s} "
          f"{'wall ms/connection':>18s} {'start+import CPU ms':>19s}")
    for name, values in per.items():
        median = statistics.median(values)
        start = (f"{statistics.median(starts[name]) * 1000:19.0f}" if starts[name]
                 else f"{'(a process each)':>19s}")
        print(f"{name:11s} {median * 1000:18.2f} "
              f"{min(values) * 1000:6.2f}-{max(values) * 1000:<6.2f} {median / floor:9.2f} "
              f"{statistics.median(walls[name]) * 1000:18.1f} {start}")
    print(f"(medians of {args.rounds} rounds of {args.connections} connections; 1-minute load "
          f"{os.getloadavg()[0]:.2f} at the end)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
