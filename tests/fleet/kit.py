"""The loopback test fleet: real OpenSSH sshd per "Proxmox host", a `pct` stand-in, containers.

Usable outside pytest (benchmarks)::

    from tests.fleet import Fleet      # with the repository root on sys.path
    with Fleet(tmp_dir) as fleet:
        pve1 = fleet.add_host("pve1")                     # starts sshd on 127.0.0.1:<free port>
        fleet.add_container("pve1", 101)                  # kind "healthy"
        fleet.add_container("pve1", 102, "no-compiler")
        fleet.add_container("pve1", 103, "stopped")
        inventory = fleet.write_inventory(timeout=20)     # inventory YAML path
        ...                                               # run the audit
        fleet.accepted_logins("pve1")                     # "Accepted publickey" lines
    # on exit: sshd stopped; fleet.leftovers holds processes that outlived the audit (killed)

    build_fleet(tmp_dir, containers=100, per_host=20)     # 5 hosts, 20 healthy containers each

Hosts: `add_host(name, *, containers="all"|"listed", probe_host=False, known="trusted"|"wrong"|
"absent", refuse=False, sudo=False, sudo_password=False, max_sessions=None)`. Each host has its
own sshd (own port, own host key, MaxSessions and MaxStartups left at OpenSSH's defaults), its
own `bin/` (the pct stand-in and a sudo stand-in) put first on the session PATH by sshd's
`SetEnv`, and `containers/<vmid>/` directories. `refuse=True` holds a port that refuses
connections (no sshd).
`known` decides the host's line in the fleet's known_hosts: its real key, another key, or none.

VMs and Docker/Podman: `add_vm(host, vmid, kind, agent="on"|"off"|"none", template=False)`
puts a VM beside the containers (reached with the `qm` stand-in: `qm guest exec`, `qm list`;
its processes get no HOME, as under the guest agent), and `add_oci(host, runtime, name, kind,
vmid=None|VMID, state="running"|"exited"|"paused"|"created", mode="all"|"listed")` a
container in the host or in guest `vmid`, with the `docker`/`podman` stand-in in that node's
bin/. `add_host(..., vms="all"|"listed", pvesh=True)` decides the written `vms:` and whether
the `pvesh` stand-in is there (discovery falls back to pct list / qm list without it). Files
`pct-list-extra`, `qm-list-extra`, `pvesh-extra-<kind>.json` and `oci/<runtime>/ps-extra`
add odd lines to the listings.

Container kinds (`KINDS`): healthy (python3 and a C compiler), no-compiler, no-python, stopped,
hang (the "python3" sleeps; its command line carries the fleet's marker), garbage (prints text
that is not the probe's JSON), crash (exits 3 with a traceback on stderr). When tests/nodeenv.py
is present, healthy and no-compiler containers get its fake GPU node (nvidia-smi, libcuda,
torch, triton stubs) so the probe reaches a Triton verdict. Every container's environment holds
FLEETCHECK_FLEET_MARK=<marker>, so `leftover_processes()` finds anything a probe left running.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

SSHD = "/usr/sbin/sshd"
KINDS = ("healthy", "no-compiler", "no-python", "stopped", "hang", "garbage", "crash")
_HERE = Path(__file__).resolve().parent
_TOOLS = ("env", "sh", "cat", "sleep", "ls", "uname", "id", "true", "timeout", "tee", "ln",
          "mkdir")
#: Stand-ins installed in every host's bin/ (from tests/fleet/<name>_standin.py).
_HOST_TOOLS = {"pct": "pct_standin.py", "qm": "qm_standin.py", "pvesh": "pvesh_standin.py"}
AGENT_STATES = ("on", "off", "none")
OCI_STATES = ("running", "exited", "paused", "created")


def debian_repo() -> dict[str, Any]:
    """The packages the apt-get stand-in can install: what a fix asks for on Debian 12."""
    gcc = shutil.which("gcc") or "/usr/bin/gcc"
    xy = "{}.{}".format(*sys.version_info[:2])
    tools = {tool: shutil.which(tool) or f"/usr/bin/{tool}" for tool in ("as", "ld")}
    return {
        "gcc": {"version": "4:12.2.0-3", "size_kb": 5232, "links": {"gcc": gcc}},
        "libc6-dev": {"version": "2.36-9+deb12u10", "size_kb": 1904},
        "binutils": {"version": "2.40-2", "size_kb": 2900, "links": tools},
        f"python{xy}-dev": {"version": f"{xy}.2-1+deb12u1", "size_kb": 505},
        "libc-bin": {"version": "2.36-9+deb12u10", "size_kb": 608},
    }


def rhel_repo() -> dict[str, Any]:
    """The packages the dnf stand-in can install: what a fix asks for on Rocky Linux 9."""
    gcc = shutil.which("gcc") or "/usr/bin/gcc"
    xy = "{}.{}".format(*sys.version_info[:2])
    return {
        "gcc": {"version": "11.5.0-5.el9_5", "size_kb": 32338, "links": {"gcc": gcc}},
        "glibc-devel": {"version": "2.34-125.el9_5.1", "size_kb": 35},
        "binutils": {"version": "2.35.2-54.el9", "size_kb": 4600},
        f"python{xy}-devel": {"version": f"{xy}.9-1.el9", "size_kb": 247},
    }


@dataclass
class FleetHost:
    """One loopback "Proxmox host": its sshd and its directories."""

    name: str
    dir: Path
    port: int
    host_key: Path
    containers: str = "all"
    probe_host: bool = False
    sudo: bool = False
    known: str = "trusted"
    refuse: bool = False
    process: subprocess.Popen[bytes] | None = None
    vmids: list[int] = field(default_factory=list)
    timeouts: dict[int, float] = field(default_factory=dict)
    ssh_extra: dict[str, Any] = field(default_factory=dict)
    #: QEMU VMs: "all" (`vms: all`) or "listed"; their VMIDs and per-VM timeouts.
    vm_mode: str = "all"
    vm_ids: list[int] = field(default_factory=list)
    #: `oci:` per parent (None: the host itself, else a VMID): [runtime, mode, names].
    oci: dict[int | None, list[Any]] = field(default_factory=dict)
    #: `refuse`: the bound, never listening socket that keeps the port refusing (closed by
    #: `Fleet.close`).
    held: socket.socket | None = None

    @property
    def log(self) -> Path:
        return self.dir / "sshd" / "sshd.log"


def free_port() -> int:
    """A port on 127.0.0.1 for a server started next, reserved for the next minute.

    The port is left in TIME_WAIT (a connection to it, closed first by the accepting side): for
    the kernel's TIME_WAIT period no other `bind(("127.0.0.1", 0))` and no outgoing connection
    is given it, so another pytest-xdist worker, or another test run on the machine, cannot
    take it between now and the server's bind; a server that sets SO_REUSEADDR (sshd,
    slurmctld, slurmd, Python's socketserver) binds it at once. (A bound socket closed before
    the server starts, as this did before, can be handed to anyone in between.)
    """
    with socket.socket() as server:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        address = server.getsockname()
        with socket.socket() as client:
            client.connect(address)
            accepted, _ = server.accept()
            accepted.close()  # the server's side closes first: its port is the one held
        return int(address[1])


def refused_port() -> socket.socket:
    """A socket bound to a port of 127.0.0.1 and never listening: a connection to its port is
    refused for as long as it is open, and no other server can bind that port meanwhile."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    return sock


def _keygen(path: Path) -> str:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "", "-f", str(path)],
                   check=True, stdin=subprocess.DEVNULL)
    return path.with_suffix(".pub").read_text().split()[1]


def _load_nodeenv() -> Any:
    from tests import nodeenv

    return nodeenv


class Fleet:
    """Hosts (sshd) and containers (dirs) under `root`, an inventory and known_hosts for them."""

    def __init__(self, root: Path | str, *, python: str = sys.executable) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.python = python
        self.mark = uuid.uuid4().hex
        self.hosts: dict[str, FleetHost] = {}
        self.client_key = self.root / "client_ed25519"
        self.known_hosts = self.root / "known_hosts"
        self.inventory: Path | None = None
        self.ssh_config: Path | None = None
        self.leftovers: list[str] = []
        _keygen(self.client_key)
        self.known_hosts.write_text("")
        self._nodeenv = _load_nodeenv()

    # -- hosts -----------------------------------------------------------------------------

    def add_host(
        self, name: str, *, containers: str = "all", probe_host: bool = False,
        known: str = "trusted", refuse: bool = False, sudo: bool = False,
        sudo_password: bool = False, pvesh: bool = True, vms: str = "all", **ssh_extra: Any,
    ) -> FleetHost:
        """A host with its own sshd (not started when `refuse`); `containers` "all" or "listed"."""
        hdir = self.root / "hosts" / name
        for sub in ("bin", "containers", "sshd"):
            (hdir / sub).mkdir(parents=True, exist_ok=True)
        for tool, source in _HOST_TOOLS.items():
            if tool == "pvesh" and not pvesh:
                continue
            self._script(hdir / "bin" / tool, (_HERE / source).read_text())
        (hdir / "bin" / "sudo").write_text(
            "#!/bin/sh\n# sudo stand-in: `sudo -n CMD` runs CMD (the login is already root).\n"
            '[ "$1" = "-n" ] && shift\n'
            'if [ -e "$(dirname "$0")/../sudo-requires-password" ]; then\n'
            '  echo "sudo: a password is required" >&2; exit 1\nfi\nexec "$@"\n')
        (hdir / "bin" / "sudo").chmod(0o755)
        if sudo_password:
            (hdir / "sudo-requires-password").write_text("")
        held = refused_port() if refuse else None
        host = FleetHost(name=name, dir=hdir,
                         port=free_port() if held is None else held.getsockname()[1],
                         host_key=hdir / "sshd" / "host_ed25519", containers=containers,
                         probe_host=probe_host, sudo=sudo, known=known, refuse=refuse,
                         ssh_extra=ssh_extra, vm_mode=vms, held=held)
        self.hosts[name] = host
        if not refuse:
            _keygen(host.host_key)
            self._start_sshd(host)
        self._write_known_hosts()
        return host

    def _start_sshd(self, host: FleetHost) -> None:
        Path("/run/sshd").mkdir(exist_ok=True)  # privilege separation dir sshd insists on as root
        sdir = host.dir / "sshd"
        (sdir / "authorized_keys").write_text(self.client_key.with_suffix(".pub").read_text())
        path = f"{host.dir / 'bin'}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
        for _attempt in range(3):
            config = sdir / "sshd_config"
            config.write_text("\n".join([
                f"Port {host.port}", "ListenAddress 127.0.0.1",
                f"HostKey {host.host_key}", f"PidFile {sdir / 'sshd.pid'}",
                f"AuthorizedKeysFile {sdir / 'authorized_keys'}",
                "PasswordAuthentication no", "KbdInteractiveAuthentication no",
                "UsePAM no", "StrictModes no", "PermitRootLogin prohibit-password",
                # HOME points away from root's: its ~/.bashrc (sourced by bash for every ssh
                # command) would slow each command and change PATH.
                f"SetEnv PATH={path} HOME={host.dir} FLEETCHECK_FLEET_MARK={self.mark}",
                "LogLevel INFO", "",
            ]))
            host.log.write_text("")
            host.process = subprocess.Popen(
                [SSHD, "-D", "-f", str(config), "-E", str(host.log)],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            # Bounded (10 s and more); sshd listens within tens of milliseconds, so the log is
            # read every 5 ms rather than making each of the suite's ~250 starts wait 50.
            for _ in range(2000):
                if "Server listening" in host.log.read_text():
                    return
                if host.process.poll() is not None:
                    break
                time.sleep(0.005)
            self._stop(host)
            host.port = free_port()
        raise RuntimeError(f"sshd for {host.name} did not start: {host.log.read_text()[-500:]}")

    def _write_known_hosts(self) -> None:
        lines = []
        for host in self.hosts.values():
            if host.refuse or host.known == "absent":
                continue
            if host.known == "wrong":
                impostor = host.dir / "sshd" / "impostor_ed25519"
                if not impostor.exists():
                    _keygen(impostor)
                blob = impostor.with_suffix(".pub").read_text().split()[1]
            else:
                blob = host.host_key.with_suffix(".pub").read_text().split()[1]
            lines.append(f"[127.0.0.1]:{host.port} ssh-ed25519 {blob}\n")
        self.known_hosts.write_text("".join(lines))

    # -- containers ------------------------------------------------------------------------

    def add_container(
        self, host: str, vmid: int, kind: str = "healthy", *, name: str | None = None,
        env: dict[str, str] | None = None, timeout: float | None = None, lock: str = "",
        node: dict[str, Any] | None = None, packages: dict[str, Any] | None = None,
    ) -> Path:
        """A container of `kind` on `host`; returns its directory.

        `node`: extra make_node options for healthy/no-compiler kinds (tests/nodeenv.py).
        `packages`: install a package-manager stand-in, "manager": "apt-get" (default,
        tests/fleet/apt_standin.py) or "dnf" (dnf_standin.py); its state starts from
        {"repo": debian_repo() or rhel_repo(), "installed": {}, "network": True, "root": True}
        updated with the rest of this dict.
        """
        if kind not in KINDS:
            raise ValueError(f"unknown container kind {kind!r}; one of {KINDS}")
        fhost = self.hosts[host]
        cdir = fhost.dir / "containers" / str(vmid)
        node_env, node_bin = self._node(cdir, kind, node)
        if packages is not None:
            self._package_manager(cdir, node_bin, packages)
        node_env.update(env or {})
        config = {"name": name or f"ct{vmid}-{kind}",
                  "status": "stopped" if kind == "stopped" else "running",
                  "lock": lock, "env": node_env}
        (cdir / "config.json").write_text(json.dumps(config, indent=1))
        fhost.vmids.append(vmid)
        if timeout is not None:
            fhost.timeouts[vmid] = timeout
        return cdir

    def _package_manager(self, cdir: Path, node_bin: Path, packages: dict[str, Any]) -> None:
        """The apt-get or dnf stand-in in the node's bin/, installing into `node_bin`."""
        manager = packages.get("manager", "apt-get")
        state: dict[str, Any] = {"node_bin": str(node_bin),
                                 "repo": debian_repo() if manager == "apt-get" else rhel_repo(),
                                 "installed": {}, "network": True, "root": True}
        state.update({key: value for key, value in packages.items() if key != "manager"})
        (cdir / "packages.json").write_text(json.dumps(state, indent=1))
        standin = {"apt-get": "apt_standin.py", "dnf": "dnf_standin.py"}[manager]
        (cdir / "bin" / manager).write_text(f"#!{self.python}\n" + (_HERE / standin).read_text())
        (cdir / "bin" / manager).chmod(0o755)

    def _node(
        self, cdir: Path, kind: str, node: dict[str, Any] | None = None,
    ) -> tuple[dict[str, str], Path]:
        """A node of `kind` in `cdir` (bin/, root/, sysroot/): its environment, and the folder
        its tools live in (where an installed package links into).

        `node`: extra make_node options for the healthy/no-compiler kinds; its "amd" key (a dict
        of make_amd_node options) makes the node an AMD GPU node instead."""
        bindir = cdir / "bin"
        for sub in ("root", "sysroot"):
            (cdir / sub).mkdir(parents=True, exist_ok=True)
        bindir.mkdir(exist_ok=True)
        for tool in _TOOLS:
            found = shutil.which(tool)
            if found:
                (bindir / tool).symlink_to(found)
        node_env = {"PATH": str(bindir), "HOME": str(cdir / "root"),
                    "FLEETCHECK_SYSROOT": str(cdir / "sysroot"),
                    "FLEETCHECK_FLEET_MARK": self.mark}
        node_bin = bindir
        if kind in ("healthy", "no-compiler") and self._nodeenv is not None:
            options = dict(node or {})
            amd = options.pop("amd", None)
            if amd is not None:
                made = self._nodeenv.make_amd_node(cdir / "node", compiler=kind == "healthy",
                                                   **amd, **options)
            else:
                made = self._nodeenv.make_node(cdir / "node", compiler=kind == "healthy",
                                               **options)
            node_bin = made.bindir
            made_env = dict(made.env)
            made_env["PATH"] = f"{made_env.get('PATH', '')}:{bindir}".strip(":")
            node_env.update(made_env)
            node_env["FLEETCHECK_FLEET_MARK"] = self.mark
            (bindir / "python3").symlink_to(made.python)
        elif kind in ("healthy", "no-compiler", "stopped"):
            (bindir / "python3").symlink_to(self.python)
            if kind == "healthy":
                (bindir / "cc").symlink_to(shutil.which("gcc") or "/usr/bin/gcc")
        elif kind == "hang":
            # Re-exec with the marker in argv, so the sleeper is findable with `pgrep -f`.
            self._script(bindir / "python3",
                         "import os, sys\nos.execv(sys.executable, [sys.executable, '-c', "
                         f"'import time; time.sleep(600)', 'hang-{self.mark}'])")
        elif kind == "garbage":
            self._script(bindir / "python3", "print('Welcome to container shell!')")
        elif kind == "crash":
            self._script(bindir / "python3",
                         "import sys\nsys.stderr.write('Traceback (most recent call last):\\n"
                         "MemoryError\\n')\nsys.exit(3)")
        return node_env, node_bin

    def add_vm(
        self, host: str, vmid: int, kind: str = "healthy", *, agent: str = "on",
        name: str | None = None, env: dict[str, str] | None = None, template: bool = False,
    ) -> Path:
        """A QEMU VM of `kind` on `host`, reached by the qm stand-in; returns its directory.

        `agent`: "on" (answers), "off" (configured, not answering), "none" (not configured).
        Its processes get no HOME (the guest agent runs commands without a login).
        """
        if kind not in KINDS or agent not in AGENT_STATES:
            raise ValueError(f"unknown VM kind {kind!r} or agent {agent!r}")
        fhost = self.hosts[host]
        vdir = fhost.dir / "vms" / str(vmid)
        node_env, _ = self._node(vdir, kind)
        node_env.pop("HOME", None)
        # Triton would fall back to the agent user's home (/root here): keep it in the VM.
        node_env["TRITON_HOME"] = str(vdir / "root")
        node_env.update(env or {})
        config = {"name": name or f"vm{vmid}-{kind}",
                  "status": "stopped" if kind == "stopped" else "running",
                  "agent": agent, "env": node_env, "template": template,
                  "cwd": str(vdir / "root")}
        (vdir / "config.json").write_text(json.dumps(config, indent=1))
        fhost.vm_ids.append(vmid)
        return vdir

    def add_oci(
        self, host: str, runtime: str, name: str, kind: str = "healthy", *,
        vmid: int | None = None, state: str = "running", mode: str = "all",
        env: dict[str, str] | None = None,
    ) -> Path:
        """A Docker/Podman container in the host (`vmid` None) or in its guest `vmid`.

        The runtime stand-in is installed in that node's bin/; `mode` "all" or "listed"
        decides the parent's `oci: {containers: ...}` in the written inventory.
        """
        if runtime not in ("docker", "podman") or state not in OCI_STATES:
            raise ValueError(f"unknown runtime {runtime!r} or state {state!r}")
        fhost = self.hosts[host]
        if vmid is None:
            parent_dir = fhost.dir
        elif (fhost.dir / "vms" / str(vmid)).exists():
            parent_dir = fhost.dir / "vms" / str(vmid)
        else:
            parent_dir = fhost.dir / "containers" / str(vmid)
        tool = parent_dir / "bin" / runtime
        if not tool.exists():
            self._script(tool, (_HERE / "oci_standin.py").read_text())
        odir = parent_dir / "oci" / runtime / name
        node_env, _ = self._node(odir, kind)
        node_env.update(env or {})
        config = {"state": state, "env": node_env, "id": uuid.uuid4().hex * 2}
        (odir / "config.json").write_text(json.dumps(config, indent=1))
        entry = fhost.oci.setdefault(vmid, [runtime, mode, []])
        entry[2].append(name)
        return odir

    def _script(self, path: Path, body: str) -> None:
        path.write_text(f"#!{self.python}\n{body}\n")
        path.chmod(0o755)

    # -- inventory -------------------------------------------------------------------------

    def write_ssh_config(self, path: Path | str | None = None) -> Path:
        """An ssh_config with one `Host NAME` block per host (HostName, Port, User,
        IdentityFile, IdentitiesOnly, UserKnownHostsFile, StrictHostKeyChecking), the way
        sites keep their nodes; default `<root>/ssh_config`."""
        target = Path(path) if path else self.root / "ssh_config"
        target.write_text("".join(
            f"Host {host.name}\n    HostName 127.0.0.1\n    Port {host.port}\n"
            f"    User root\n    IdentityFile {self.client_key}\n    IdentitiesOnly yes\n"
            f"    UserKnownHostsFile {self.known_hosts}\n    StrictHostKeyChecking yes\n\n"
            for host in self.hosts.values()))
        self.ssh_config = target
        return target

    def inventory_data(self, *, timeout: float = 30, ssh_config: Path | str | None = None,
                       **defaults: Any) -> dict[str, Any]:
        """The inventory as a dict (YAML-ready); `defaults` extends `defaults:`.

        With `ssh_config` (see `write_ssh_config`) each host's address is its name and
        `defaults.ssh` is `config_file` alone: every SSH value comes from that file.
        """
        hosts: dict[str, Any] = {}
        for host in self.hosts.values():
            entry: dict[str, Any] = {"address": "127.0.0.1",
                                     "ssh": {"port": host.port, **host.ssh_extra}}
            if ssh_config is not None:
                # The address is the ssh_config's Host name, as in `ssh NAME`.
                entry = {"address": host.name, **({"ssh": dict(host.ssh_extra)}
                                                  if host.ssh_extra else {})}
            if host.containers == "all":
                entry["containers"] = "all"
            else:
                entry["containers"] = [
                    {"vmid": vmid, **({"timeout": host.timeouts[vmid]}
                                      if vmid in host.timeouts else {})}
                    for vmid in sorted(host.vmids)]
            for index, item in enumerate(entry["containers"] if isinstance(
                    entry["containers"], list) else []):
                if item["vmid"] in host.oci:
                    entry["containers"][index]["oci"] = self._oci_entry(host, item["vmid"])
            if host.vm_ids:
                entry["vms"] = "all" if host.vm_mode == "all" else [
                    {"vmid": vmid, **({"oci": self._oci_entry(host, vmid)}
                                      if vmid in host.oci else {})}
                    for vmid in sorted(host.vm_ids)]
            if None in host.oci:
                entry["oci"] = self._oci_entry(host, None)
            if not host.vmids and entry["containers"] == "all" and (host.vm_ids or host.oci):
                del entry["containers"]
            if host.probe_host:
                entry["probe_host"] = True
            if host.sudo:
                entry["sudo"] = True
            hosts[host.name] = entry
        ssh: dict[str, Any] = {"user": "root", "identity_file": str(self.client_key),
                               "known_hosts": str(self.known_hosts), "config_file": "",
                               "connect_timeout": 10}
        if ssh_config is not None:
            ssh = {"config_file": str(ssh_config)}
        ssh.update(defaults.pop("ssh", {}))
        return {"defaults": {"ssh": ssh, "timeout": timeout, **defaults}, "hosts": hosts}

    @staticmethod
    def _oci_entry(host: FleetHost, parent: int | None) -> dict[str, Any]:
        runtime, mode, names = host.oci[parent]
        return {"runtime": runtime, "containers": "all" if mode == "all" else list(names)}

    def write_inventory(self, path: Path | str | None = None, *, timeout: float = 30,
                        ssh_config: Path | str | None = None, **defaults: Any) -> Path:
        """Write the inventory YAML (default `<root>/inventory.yaml`) and return its path."""
        target = Path(path) if path else self.root / "inventory.yaml"
        data = self.inventory_data(timeout=timeout, ssh_config=ssh_config, **defaults)
        target.write_text(yaml.safe_dump(data, sort_keys=False))
        self.inventory = target
        return target

    # -- observation -----------------------------------------------------------------------

    def accepted_logins(self, host: str) -> int:
        """How many SSH logins the host's sshd accepted (its "Accepted publickey" log lines)."""
        return self.hosts[host].log.read_text().count("Accepted publickey")

    def leftover_processes(self) -> list[str]:
        """Processes still running in any container of this fleet: "pid cmdline"."""
        return marked_processes(self.mark)

    def wait_no_leftovers(self, seconds: float = 10) -> list[str]:
        """Leftover processes after giving them up to `seconds` to exit (bounded poll)."""
        deadline = time.monotonic() + seconds
        while True:
            left = self.leftover_processes()
            if not left or time.monotonic() > deadline:
                return left
            time.sleep(0.1)

    def pgrep(self, pattern: str) -> list[str]:
        """`pgrep -af PATTERN` lines (the pattern is a regex: pass re.escape'd text)."""
        out = subprocess.run(["pgrep", "-af", pattern], capture_output=True, text=True)
        return [line for line in out.stdout.splitlines() if line.split()[0] != str(os.getpid())]

    # -- teardown --------------------------------------------------------------------------

    def _stop(self, host: FleetHost) -> None:
        if host.process is not None and host.process.poll() is None:
            host.process.terminate()
            try:
                host.process.wait(5)
            except subprocess.TimeoutExpired:
                host.process.kill()
                host.process.wait(5)

    def close(self) -> list[str]:
        """Stop every sshd, kill what the probes left behind; return those leftovers.

        A process still ending (killed, not yet reaped) gets up to 10 s: the wait ends as
        soon as none is left, so only a real leftover costs the time."""
        self.leftovers = self.wait_no_leftovers(10)
        for line in self.leftovers:
            try:
                os.kill(int(line.split()[0]), signal.SIGKILL)
            except ProcessLookupError:
                pass
        for host in self.hosts.values():
            self._stop(host)
            if host.held is not None:
                host.held.close()
        return self.leftovers

    def __enter__(self) -> Fleet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def marked_processes(mark: str) -> list[str]:
    """Processes other than sshd whose environment holds FLEETCHECK_FLEET_MARK=`mark` (what a
    fleet's probes left running): "pid cmdline"."""
    needle = f"FLEETCHECK_FLEET_MARK={mark}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if needle in environ.split(b"\0") and b"sshd" not in cmdline.split(b"\0")[0]:
            shown = cmdline.replace(b"\0", b" ").decode(errors="replace").strip()
            found.append(f"{entry.name} {shown}")
    return found


def build_fleet(root: Path | str, *, containers: int, per_host: int = 20,
                kind: str = "healthy", timeout: float = 60) -> Fleet:
    """A fleet of `containers` containers of `kind`, `per_host` per host (hosts pve1, pve2...).

    Each host has its own sshd; VMIDs start at 101 on every host. The inventory is written.
    """
    fleet = Fleet(root)
    try:
        hosts = max(1, -(-containers // per_host))
        for index in range(hosts):
            name = f"pve{index + 1}"
            fleet.add_host(name)
            for vmid in range(101, 101 + min(per_host, containers - index * per_host)):
                fleet.add_container(name, vmid, kind)
        fleet.write_inventory(timeout=timeout)
    except BaseException:
        fleet.close()
        raise
    return fleet


def marker_pattern(text: str) -> str:
    """A pgrep pattern matching `text` literally."""
    return re.escape(text)
