"""A fleet of bare-metal nodes: one OpenSSH sshd per node on 127.0.0.1, the shape of a GPU
cluster, where every tool (fleetcheck, pdsh, clush, ansible) has one target per node.

Each node is a fake GPU node from tests/nodeenv.py (nvidia-smi, libcuda, torch and triton
stand-ins, a C compiler), given to every SSH session by its sshd's `SetEnv`, so that `python3`
on a session's PATH is the node's and the real probe reaches a Triton verdict. Written beside
the fleet:

- `inventory.yaml`: one fleetcheck host per node (`probe_host: true`, no containers), with the
  port, user, key and known_hosts in the inventory and no ssh_config (`config_file: none`);
- `ssh_config`: one `Host nodeNNNN` block per node (HostName, Port, User, IdentityFile,
  IdentitiesOnly, UserKnownHostsFile, StrictHostKeyChecking, BatchMode), how large sites keep
  their nodes: what pdsh, clush and ansible are given (`ssh -F`);
- `inventory-sshcfg.yaml`: the same hosts for fleetcheck, reached through that ssh_config alone
  (`address: nodeNNNN`, `config_file: ssh_config`, nothing else about SSH).

The sshd binary is `sshd` beside the bench's PATH entries or $BENCH_SSHD (the H200 run carries
Debian's, extracted with dpkg -x). Servers start on the fleet's cores under --pin.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import yaml

from bench.fleet import BenchFleet, BenchHost
from bench.measure import fleet_cores

#: Distinct node images in a fleet (tests/nodeenv.py builds each in about 0.1 s).
IMAGES = 25


def sshd_path() -> str:
    """$BENCH_SSHD, else /usr/sbin/sshd, else `sshd` on PATH (sshd wants an absolute path)."""
    chosen = os.environ.get("BENCH_SSHD") or (
        "/usr/sbin/sshd" if os.path.exists("/usr/sbin/sshd") else shutil.which("sshd"))
    if not chosen or not os.path.isabs(chosen):
        raise SystemExit("bench: no sshd (install openssh-server, or set BENCH_SSHD to one)")
    return chosen


def node_name(index: int) -> str:
    return f"node{index:04d}"


def nodeset(names: list[str]) -> str:
    """`node[0001-0500]`: the node list as pdsh and clush take it (names from node_name)."""
    numbers = sorted(int(name[4:]) for name in names)
    ranges: list[list[int]] = []
    for number in numbers:
        if ranges and number == ranges[-1][1] + 1:
            ranges[-1][1] = number
        else:
            ranges.append([number, number])
    return "node[" + ",".join(f"{a:04d}" if a == b else f"{a:04d}-{b:04d}"
                              for a, b in ranges) + "]"


def _keygen(path: Path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "", "-f", str(path)],
                   check=True, stdin=subprocess.DEVNULL)


def _free_ports(count: int) -> list[int]:
    import socket

    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [int(sock.getsockname()[1]) for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


class NodeFleet:
    """The running sshd's and the files beside them; `bench_fleet()` is what contenders use."""

    def __init__(self, count: int, root: Path, *, timeout: float) -> None:
        from tests import nodeenv

        self.root = root
        self.mark = uuid.uuid4().hex
        self.names = [node_name(index + 1) for index in range(count)]
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self.envs: dict[str, dict[str, str]] = {}
        self.ports: dict[str, int] = {}
        self.sshd = sshd_path()
        root.mkdir(parents=True, exist_ok=True)
        self.client_key = root / "client_ed25519"
        self.known_hosts = root / "known_hosts"
        _keygen(self.client_key)
        # One host key for every node keeps the set-up short; each node still has its own
        # known_hosts line ([127.0.0.1]:PORT), so every connection checks its host key.
        host_key = root / "host_ed25519"
        _keygen(host_key)
        blob = host_key.with_suffix(".pub").read_text().split()[1]
        (root / "authorized_keys").write_text(self.client_key.with_suffix(".pub").read_text())
        Path("/run/sshd").mkdir(exist_ok=True)
        ports = _free_ports(count)
        images: list[dict[str, str]] = []
        try:
            for index, (name, port) in enumerate(zip(self.names, ports, strict=True)):
                ndir = root / "nodes" / name
                ndir.mkdir(parents=True)
                if len(images) < min(count, IMAGES):
                    # A node image: what the probe reads (it writes nothing on the node).
                    # IMAGES of them, shared round-robin, keep a 2,000-node set-up short.
                    idir = root / "images" / str(len(images))
                    made = nodeenv.make_node(idir / "node", compiler=True)
                    bindir = idir / "bin"
                    bindir.mkdir(parents=True, exist_ok=True)
                    (bindir / "python3").symlink_to(made.python)
                    image = dict(made.env)
                    # The node's own tools first, then the system's (sh, timeout, env): a
                    # bare-metal node's login has /usr/bin.
                    image["PATH"] = f"{image['PATH']}:{bindir}:/usr/local/bin:/usr/bin:/bin"
                    image["FLEETCHECK_FLEET_MARK"] = self.mark
                    images.append(image)
                self.envs[name] = images[index % len(images)]
                self.ports[name] = port
                self._start(name, ndir, port, host_key)
            self._wait_listening()
        except BaseException:
            self.close()
            raise
        self.known_hosts.write_text("".join(f"[127.0.0.1]:{self.ports[name]} ssh-ed25519 {blob}\n"
                                            for name in self.names))
        self.ssh_config = root / "ssh_config"
        self.ssh_config.write_text("".join(
            f"Host {name}\n  HostName 127.0.0.1\n  Port {self.ports[name]}\n  User root\n"
            f"  IdentityFile {self.client_key}\n  IdentitiesOnly yes\n"
            f"  UserKnownHostsFile {self.known_hosts}\n  StrictHostKeyChecking yes\n"
            "  BatchMode yes\n\n" for name in self.names))
        self.inventory = root / "inventory.yaml"
        self.inventory.write_text(yaml.safe_dump({
            "defaults": {"ssh": {"user": "root", "identity_file": str(self.client_key),
                                 "known_hosts": str(self.known_hosts), "config_file": "none",
                                 "connect_timeout": 10},
                         "timeout": timeout},
            "hosts": {name: {"address": "127.0.0.1", "ssh": {"port": self.ports[name]},
                             "probe_host": True, "containers": []} for name in self.names},
        }, sort_keys=False))
        self.inventory_sshcfg = root / "inventory-sshcfg.yaml"
        self.inventory_sshcfg.write_text(yaml.safe_dump({
            "defaults": {"ssh": {"config_file": str(self.ssh_config)}, "timeout": timeout},
            "hosts": {name: {"address": name, "probe_host": True, "containers": []}
                      for name in self.names},
        }, sort_keys=False))

    def _start(self, name: str, ndir: Path, port: int, host_key: Path) -> None:
        sdir = ndir / "sshd"
        sdir.mkdir(exist_ok=True)
        env = self.envs[name]
        setenv = " ".join(f"{key}={value}" for key, value in env.items())
        config = sdir / "sshd_config"
        config.write_text("\n".join([
            f"Port {port}", "ListenAddress 127.0.0.1", f"HostKey {host_key}",
            f"PidFile {sdir / 'sshd.pid'}", f"AuthorizedKeysFile {self.root / 'authorized_keys'}",
            "PasswordAuthentication no", "KbdInteractiveAuthentication no", "UsePAM no",
            "StrictModes no", "PermitRootLogin prohibit-password",
            # A fleet's nodes take up to 64 sessions' handshakes at once from pdsh/clush at
            # fan-out 64 only one per node: OpenSSH's defaults (MaxStartups 10:30:100) stay.
            f"SetEnv {setenv}", "LogLevel ERROR", "",
        ]))
        with fleet_cores():
            self.processes[name] = subprocess.Popen(
                [self.sshd, "-D", "-f", str(config), "-E", str(sdir / "sshd.log")],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def _wait_listening(self) -> None:
        import socket

        deadline = time.monotonic() + 60 + len(self.names) * 0.05
        pending = list(self.names)
        while pending:
            name = pending[0]
            process = self.processes[name]
            if process.poll() is not None:
                log = self.root / "nodes" / name / "sshd" / "sshd.log"
                raise RuntimeError(f"sshd for {name} exited {process.returncode}: "
                                   f"{log.read_text()[-500:] if log.exists() else ''}")
            try:
                with socket.create_connection(("127.0.0.1", self.ports[name]), timeout=1):
                    pending.pop(0)
                    continue
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"sshd for {name} is not listening on {self.ports[name]}")
            time.sleep(0.02)

    def server_pids(self) -> set[int]:
        return {process.pid for process in self.processes.values()}

    def leftover_processes(self) -> list[int]:
        """pids of processes still running with this fleet's mark (what a probe left)."""
        from tests.fleet.kit import marked_processes

        return [int(line.split()[0]) for line in marked_processes(self.mark)]

    def close(self) -> None:
        import signal

        for pid in self.leftover_processes():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for process in self.processes.values():
            if process.poll() is None:
                process.terminate()
        for process in self.processes.values():
            try:
                process.wait(5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)

    def bench_fleet(self) -> BenchFleet:
        return BenchFleet(
            hosts=tuple(BenchHost(name, self.ports[name], ()) for name in self.names),
            user="root", identity_file=str(self.client_key), known_hosts=str(self.known_hosts),
            inventory_path=str(self.inventory), pct_command=(), env={},
            server_pids=self.server_pids, closer=self.close,
            node_envs=self.envs, ssh_config=str(self.ssh_config),
            inventory_sshcfg=str(self.inventory_sshcfg),
        )


def build_node_fleet(count: int, root: Path, *, timeout: float) -> BenchFleet:
    return NodeFleet(count, root, timeout=timeout).bench_fleet()


if __name__ == "__main__":  # a smoke check: python bench/nodes.py N DIR
    fleet = build_node_fleet(int(sys.argv[1]), Path(sys.argv[2]), timeout=60)
    print(fleet.inventory_path, fleet.ssh_config, nodeset([h.name for h in fleet.hosts]))
    fleet.close()
