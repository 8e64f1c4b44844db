"""The real-runtime test fleet: real LXC, dockerd, podman and a QEMU guest agent, one namespace.

Everything runs inside one private mount namespace (`unshare -m --propagation private`) in
which /sys/fs/cgroup/unified is unmounted (crun and LXC refuse the hybrid layout), a fresh
tmpfs is on /run and /var/lib/lxc, /var/lib/containers, /etc/containers and /etc/lxc (its
lxc.conf naming the fleet's own lxcpath) are bind mounts of folders under the fleet's root:
the machine's own state is not touched. A holder process
keeps the namespace; every process is started in it with `nsenter -t HOLDER -m` and ended by
its PID. The sshds that play the Proxmox hosts run in it too, so their sessions see it all.

    fleet = RealFleet(tmp_dir)
    fleet.start()                  # namespace, dockerd; raises Unavailable (why) if it cannot
    fleet.lxc(101)                 # a running LXC container (its rootfs: the machine's /usr)
    fleet.docker_run("web")        # a running Docker container (image made from a folder)
    fleet.podman_run("pweb")
    fleet.boot_vm(301)             # a TCG VM whose qemu-ga answers (tests/runtimes/guest.py)
    host = fleet.add_host("pve1")  # a real sshd with pct (pct_lxc.py) and qm (qm_agent.py)
    fleet.close()                  # containers removed with the runtimes' tools, all PIDs ended

Containers' rootfs: usr/ (a read-only bind of the machine's /usr: python3 and the tools are
the real ones), etc/ with copies of passwd and group, tmp/ root/ proc/ sys/ dev/ run/ and the
bin, lib, lib64, sbin links into usr/.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.fleet.kit import _keygen, free_port
from tests.runtimes import guest

_HERE = Path(__file__).resolve().parent
SSHD = "/usr/sbin/sshd"
#: What each part needs: (the program, the Debian package that has it).
TOOLS = (("unshare", "util-linux"), ("nsenter", "util-linux"), ("lxc-start", "lxc"),
         ("lxc-attach", "lxc"), ("dockerd", "docker.io"), ("docker", "docker.io"),
         ("podman", "podman"), ("crun", "crun"), (SSHD, "openssh-server"))
DOCKER_IMAGE = "fleet/rootfs:1"
#: The image of the dockerd inside an LXC container (imported there from its /image).
INNER_IMAGE = "fleet/inner:1"
#: The hard open-files limit of the machines this runs on is 20000 (dockerd's default, and
#: podman's, exceed it: `crun: setrlimit RLIMIT_NOFILE: Operation not permitted`).
NOFILE = "20000:20000"


class Unavailable(Exception):
    """This machine cannot run the real-runtime fleet; the message names the failed check."""


def missing_tool() -> str | None:
    """The first program the fleet needs that is not installed, worded for a skip."""
    if os.geteuid() != 0:
        return f"the real-runtime fleet needs root (uid {os.geteuid()}): mount namespaces"
    for tool, package in TOOLS:
        if shutil.which(tool) is None and not Path(tool).is_file():
            return f"{tool} missing (Debian package {package}; scripts/test.sh installs it)"
    return guest.missing()


def make_rootfs(root: Path, extra_dirs: tuple[str, ...] = ()) -> Path:
    for sub in ("usr", "etc", "tmp", "root", "proc", "sys", "dev", "run", *extra_dirs):
        (root / sub).mkdir(parents=True, exist_ok=True)
    (root / "tmp").chmod(0o1777)
    for link in ("bin", "lib", "lib64", "sbin"):
        if not (root / link).is_symlink():
            (root / link).symlink_to(f"usr/{link}")
    (root / "var").mkdir(exist_ok=True)
    if not (root / "var" / "run").is_symlink():
        (root / "var" / "run").symlink_to("../run")  # the docker CLI's /var/run/docker.sock
    for name in ("passwd", "group"):
        shutil.copy2(f"/etc/{name}", root / "etc" / name)
    return root


@dataclass
class RealHost:
    """One sshd playing a Proxmox host: its own port, host key, bin/ (pct, qm) and configs."""

    name: str
    dir: Path
    port: int
    host_key: Path
    process: subprocess.Popen[bytes] | None = None
    entry: dict[str, Any] = field(default_factory=dict)

    @property
    def log(self) -> Path:
        return self.dir / "sshd.log"


class RealFleet:
    """The namespace, the runtimes' daemons and containers, the hosts; see the module text."""

    def __init__(self, root: Path | str, *, python: str = sys.executable) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.python = python
        self.state = self.root / "state"
        self.holder: subprocess.Popen[bytes] | None = None
        self.children: dict[str, subprocess.Popen[bytes]] = {}
        self.lxc_ids: list[int] = []
        #: The LXC containers with a dockerd of their own (`inner_dockerd`).
        self.lxc_docker: list[int] = []
        self.vms: dict[int, subprocess.Popen[bytes]] = {}
        #: The VMs whose guest was booted (not started stopped with -S), once each.
        self.booted: list[int] = []
        self.vm_run = self.root / "qemu-server"
        self.hosts: dict[str, RealHost] = {}
        self.client_key = self.root / "client_ed25519"
        self.known_hosts = self.root / "known_hosts"
        self.docker_dir = self.root / "docker"
        self.image_root = make_rootfs(self.root / "image")
        self._initramfs: Path | None = None
        #: Set to stop a fleet being made in another thread (conftest's early start).
        self.cancel = threading.Event()
        #: What ran in the scenario's probed nodes before its audit (conftest.build).
        self.before: dict[str, set[str]] = {}

    # -- the namespace ---------------------------------------------------------------------

    def start(self) -> None:
        """The namespace; Unavailable when this machine cannot have it. VMs can boot in it
        from here on (`boot_vm`), before dockerd starts (`start_dockerd`)."""
        why = missing_tool()
        if why:
            raise Unavailable(why)
        for sub in ("lxc", "containers", "etc-containers", "etc-lxc"):
            (self.state / sub).mkdir(parents=True, exist_ok=True)
        # The LXC tools' lxcpath is this fleet's own folder (also bound at /var/lib/lxc, where
        # the configs name the rootfs): a container's monitor socket is an abstract one,
        # `@LXCPATH/VMID/command`, in the network namespace that every test run on the
        # machine shares, so with /var/lib/lxc two runs' LXC 105 would be one.
        if Path("/etc/lxc").is_dir():
            shutil.copytree("/etc/lxc", self.state / "etc-lxc", dirs_exist_ok=True)
        (self.state / "etc-lxc" / "lxc.conf").write_text(f"lxc.lxcpath = {self.state / 'lxc'}\n")
        shutil.copytree("/etc/containers", self.state / "etc-containers", dirs_exist_ok=True)
        (self.state / "etc-containers" / "containers.conf").write_text(
            "[containers]\ndefault_ulimits = []\n")
        ready = self.root / "namespace.ready"
        script = "\n".join([
            "set -e",
            "if mountpoint -q /sys/fs/cgroup/unified; then umount /sys/fs/cgroup/unified; fi",
            "mount -t tmpfs -o mode=755 tmpfs /run",
            "mkdir -p /run/sshd /run/lock /run/qemu-server",
            "mkdir -p /var/lib/lxc /var/lib/containers",
            f'mount --bind "{self.state / "lxc"}" /var/lib/lxc',
            f'mount --bind "{self.state / "containers"}" /var/lib/containers',
            f'mount --bind "{self.state / "etc-containers"}" /etc/containers',
            "mkdir -p /etc/lxc",
            f'mount --bind "{self.state / "etc-lxc"}" /etc/lxc',
            f'touch "{ready}"',
            "exec sleep infinity",
        ])
        log = self.root / "namespace.log"
        with log.open("wb") as out:
            self.holder = subprocess.Popen(
                ["unshare", "-m", "--propagation", "private", "sh", "-c", script],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
        self._wait(lambda: ready.exists(), 20, "the mount namespace",
                   lambda: self.holder is not None and self.holder.poll() is not None)
        if not ready.exists():
            raise Unavailable(f"no private mount namespace here: {log.read_text()[-300:]}")
        self.vm_run.mkdir(exist_ok=True)
        _keygen(self.client_key)
        self.known_hosts.write_text("")

    def ns(self, argv: list[str]) -> list[str]:
        """`argv` run inside the fleet's namespace."""
        assert self.holder is not None
        return ["nsenter", "-t", str(self.holder.pid), "-m", "--", *argv]

    def run(self, argv: list[str], *, check: bool = True, input: bytes | None = None,
            timeout: float = 120) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(self.ns(argv), capture_output=True, input=input,
                              timeout=timeout)
        result = subprocess.CompletedProcess(
            done.args, done.returncode, done.stdout.decode(errors="replace"),
            done.stderr.decode(errors="replace"))
        if check and result.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} exited {result.returncode}: "
                               f"{result.stderr.strip()[-500:]}")
        return result

    def spawn(self, key: str, argv: list[str], log: Path) -> subprocess.Popen[bytes]:
        """A long-running process in the namespace (nsenter execs it: same PID)."""
        with log.open("ab") as out:
            proc = subprocess.Popen(self.ns(argv), stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT)
        self.children[key] = proc
        return proc

    def _wait(self, done: Any, seconds: float, what: str, failed: Any = None) -> None:
        """Until `done()` (a real condition, polled every 0.1 s), `failed()`, `seconds` or
        `cancel` (set from another thread: the test run ends while the fleet is made)."""
        deadline = time.monotonic() + seconds
        while not done():
            if (failed is not None and failed()) or time.monotonic() > deadline:
                return
            if self.cancel.wait(0.1):
                raise Unavailable(f"cancelled while waiting for {what}")

    # -- Docker ----------------------------------------------------------------------------

    def start_dockerd(self) -> None:
        """dockerd in the namespace, and the fleet's image imported into it."""
        self.docker_dir.mkdir(exist_ok=True)
        self.spawn("dockerd", self._dockerd_argv(), self.docker_dir / "dockerd.log")
        self.wait_docker()
        tar = subprocess.run(["tar", "-C", str(self.image_root), "-c", "."],
                             capture_output=True, check=True).stdout
        self.run(["docker", "import", "-", DOCKER_IMAGE], input=tar)

    def wait_docker(self, seconds: float = 60) -> None:
        proc = self.children["dockerd"]
        self._wait(lambda: self.run(["docker", "version"], check=False).returncode == 0,
                   seconds, "dockerd", lambda: proc.poll() is not None)
        if self.run(["docker", "version"], check=False).returncode != 0:
            log = (self.docker_dir / "dockerd.log").read_text(errors="replace")
            raise RuntimeError(f"dockerd did not come up: {log[-800:]}")

    def restart_dockerd(self) -> None:
        """dockerd TERMed (by PID) and started again; its containers stop with it."""
        proc = self.children.pop("dockerd")
        self._end(proc)
        self.spawn("dockerd", self._dockerd_argv(), self.docker_dir / "dockerd.log")
        self.wait_docker()

    def _dockerd_argv(self) -> list[str]:
        ddir = self.docker_dir
        return ["dockerd", "--data-root", str(ddir / "data"), "--exec-root",
                str(ddir / "exec"), "--pidfile", str(ddir / "dockerd.pid"),
                "--iptables=false", "--ip6tables=false", "--bridge=none", "--exec-opt",
                "native.cgroupdriver=cgroupfs", "--default-ulimit", f"nofile={NOFILE}"]

    def docker_run(self, name: str, state: str = "running", *, inside: int | None = None,
                   ) -> None:
        """A Docker container (of the fleet's dockerd, or of the dockerd inside LXC container
        `inside`: `inner_dockerd`): running, exited (`docker stop`) or paused."""
        wrap = ["lxc-attach", "-n", str(inside), "--clear-env", "--"] if inside else []
        image = INNER_IMAGE if inside else DOCKER_IMAGE
        # Its PID 1, sleep, ignores SIGTERM: dockerd stopping (restart_dockerd) kills it after
        # 1 s instead of its default 10.
        self.run([*wrap, "docker", "run", "-d", "--name", name, "--network", "none",
                  "--stop-timeout", "1", "-v", "/usr:/usr:ro", image,
                  "/usr/bin/sleep", "infinity"])
        if state == "exited":
            self.run([*wrap, "docker", "stop", "-t", "0", name])
        elif state == "paused":
            self.run([*wrap, "docker", "pause", name])

    def inner_dockerd(self, vmid: int, seconds: float = 60) -> None:
        """A real dockerd inside LXC container `vmid` (made with `lxc(vmid, docker=True)`):
        its containers' cgroups are /docker/ID of the cgroup tree bound into the container
        (beside the fleet's dockerd's: the ids differ), the vfs storage driver (the
        container's rootfs is no place for overlayfs), the fleet's image imported."""
        attach = ["lxc-attach", "-n", str(vmid), "--clear-env", "--"]
        log = self.root / f"lxc{vmid}-dockerd.log"
        proc = self.spawn(f"dockerd-{vmid}", [
            *attach, "dockerd", "--iptables=false", "--ip6tables=false", "--bridge=none",
            "--storage-driver", "vfs", "--exec-opt", "native.cgroupdriver=cgroupfs",
            "--default-ulimit", f"nofile={NOFILE}"], log)
        self._wait(lambda: self.run([*attach, "docker", "version"], check=False).returncode == 0,
                   seconds, f"the dockerd in LXC {vmid}", lambda: proc.poll() is not None)
        if self.run([*attach, "docker", "version"], check=False).returncode != 0:
            raise RuntimeError(f"the dockerd in LXC {vmid} did not come up: "
                               f"{log.read_text(errors='replace')[-800:]}")
        self.run([*attach, "sh", "-c", f"tar -C /image -c . | docker import - {INNER_IMAGE}"])
        self.lxc_docker.append(vmid)

    # -- Podman ----------------------------------------------------------------------------

    def podman_run(self, name: str, state: str = "running", *, inside: int | None = None,
                   ) -> None:
        """A Podman container (in the namespace, or inside LXC container `inside`): running,
        exited (`podman stop`) or paused (paused needs its cgroup: made with one)."""
        wrap = ["lxc-attach", "-n", str(inside), "--clear-env", "--"] if inside else []
        rootfs = "/image" if inside else str(self.image_root)
        cgroups = [] if state == "paused" else ["--cgroups=disabled"]
        self.run([*wrap, "podman", "--cgroup-manager=cgroupfs", "run", "-d", "--name", name,
                  *cgroups, "--network=none", "-v", "/usr:/usr:ro", "--rootfs", rootfs,
                  "/usr/bin/sleep", "infinity"])
        if state == "exited":
            self.run([*wrap, "podman", "stop", "-t", "0", name])
        elif state == "paused":
            self.run([*wrap, "podman", "--cgroup-manager=cgroupfs", "pause", name])

    # -- LXC -------------------------------------------------------------------------------

    def lxc(self, vmid: int, *, running: bool = True, docker_socket: bool = False,
            podman: bool = False, docker: bool = False) -> Path:
        """An LXC container /var/lib/lxc/VMID, started unless `running` is False.

        `docker_socket`: the namespace's /run/docker.sock bound into it (its docker CLI, the
        machine's, talks to the fleet's dockerd). `podman`: what podman needs to run its own
        containers inside (/dev/shm, a cgroup2 at /sys/fs/cgroup that crun accepts, an image
        folder at /image, /etc/containers with the fleet's containers.conf). `docker`: what
        a dockerd of its own needs (`inner_dockerd`): /dev/shm, the namespace's cgroup v1
        tree bound at /sys/fs/cgroup (this kernel refuses a fresh cgroup v1 mount inside an
        LXC container: EPERM), /var/lib/docker and an image folder at /image."""
        cdir = self.state / "lxc" / str(vmid)
        rootfs = make_rootfs(cdir / "rootfs", ("var/lib/containers", "var/tmp", "image"))
        lines = [f"lxc.uts.name = ct{vmid}", f"lxc.rootfs.path = dir:/var/lib/lxc/{vmid}/rootfs",
                 "lxc.mount.entry = /usr usr none bind,ro 0 0",
                 "lxc.mount.auto = proc:mixed sys:ro", "lxc.net.0.type = empty",
                 "lxc.init.cmd = /usr/bin/sleep infinity", "lxc.apparmor.profile = unconfined",
                 "lxc.autodev = 1",
                 "lxc.mount.entry = tmpfs run tmpfs rw,nosuid,nodev,mode=755 0 0"]
        if docker_socket:
            lines.append("lxc.mount.entry = /run/docker.sock run/docker.sock none "
                         "bind,create=file 0 0")
        if docker:
            make_rootfs(rootfs / "image")
            (rootfs / "var" / "lib" / "docker").mkdir(parents=True, exist_ok=True)
            lines += ["lxc.mount.entry = tmpfs dev/shm tmpfs rw,nosuid,nodev,create=dir 0 0",
                      "lxc.mount.entry = /sys/fs/cgroup sys/fs/cgroup none rbind,create=dir 0 0"]
        if podman:
            make_rootfs(rootfs / "image")
            shutil.copytree(self.state / "etc-containers", rootfs / "etc" / "containers",
                            dirs_exist_ok=True)
            lines += ["lxc.mount.entry = tmpfs dev/shm tmpfs rw,nosuid,nodev,create=dir 0 0",
                      "lxc.mount.entry = cgroup2 sys/fs/cgroup cgroup2 rw,nosuid,nodev,noexec 0 0"]
        (cdir / "config").write_text("\n".join(lines) + "\n")
        self.lxc_ids.append(vmid)
        if running:
            self.run(["lxc-start", "-n", str(vmid)])
        return cdir

    def lxc_stop(self, vmid: int) -> None:
        self.run(["lxc-stop", "-k", "-n", str(vmid)], check=False)

    # -- QEMU ------------------------------------------------------------------------------

    def boot_vm(self, vmid: int, *, boot: bool = True) -> subprocess.Popen[bytes]:
        """A QEMU VM with the agent's socket at /var/run/qemu-server/VMID.qga; its guest boots
        to a real qemu-ga (`boot`), or its CPUs stay stopped (an agent that never answers).
        Does not wait: `wait_agent` does."""
        if self._initramfs is None:
            self._initramfs = guest.build_initramfs(self.root / "guest")
        run = Path("/var/run/qemu-server")
        argv = guest.qemu_argv(vmid, self._initramfs, run, boot=boot)
        # The console goes to a file outside the namespace's /run.
        argv = [a.replace(f"file:{run / f'{vmid}.console'}",
                          f"file:{self.root / f'vm{vmid}.console'}") for a in argv]
        # The emulated guest runs ahead of the audit's own probes (nice -10, exec'd: the same
        # PID): on TCG its agent needs the host's CPU to answer within qm's 5 s, and an audit
        # of eighty nodes at once on two cores would otherwise starve it.
        proc = self.spawn(f"vm{vmid}", ["nice", "-n", "-10", *argv], self.root / f"vm{vmid}.log")
        self.vms[vmid] = proc
        if boot:
            self.booted.append(vmid)
        return proc

    def wait_agent(self, vmid: int, seconds: float = 240) -> None:
        """Until the guest's qemu-ga answers a guest-sync-delimited (bounded). Asked from here,
        through the holder's view of the namespace (/proc/HOLDER/root): no process per try."""
        assert self.holder is not None
        socket_path = f"/proc/{self.holder.pid}/root/run/qemu-server/{vmid}.qga"
        proc = self.vms[vmid]
        self._wait(lambda: guest.agent_answers(socket_path), seconds, f"VM {vmid}'s agent",
                   lambda: proc.poll() is not None)
        if not guest.agent_answers(socket_path):
            console = (self.root / f"vm{vmid}.console")
            text = console.read_text(errors="replace") if console.exists() else ""
            raise RuntimeError(f"VM {vmid}'s guest agent did not answer: {text[-800:]}")

    def kill_vm(self, vmid: int) -> None:
        proc = self.vms.pop(vmid)
        self.children.pop(f"vm{vmid}", None)
        self._end(proc, signal.SIGKILL)

    def vm_config(self, host: RealHost, vmid: int, **conf: Any) -> None:
        """qemu-server/VMID.conf of `host` (`agent: 1` unless agent=None)."""
        cdir = host.dir / "qemu-server"
        cdir.mkdir(exist_ok=True)
        conf.setdefault("name", f"vm{vmid}")
        conf.setdefault("memory", 512)
        lines = [f"{key}: {value}" for key, value in conf.items() if value is not None]
        (cdir / f"{vmid}.conf").write_text("\n".join(lines) + "\n")

    # -- hosts -----------------------------------------------------------------------------

    def add_host(self, name: str) -> RealHost:
        """A real sshd in the namespace, its bin/ (pct over lxc, qm over the agent socket)
        first on the session PATH."""
        hdir = self.root / "hosts" / name
        (hdir / "bin").mkdir(parents=True, exist_ok=True)
        for tool, source in (("pct", "pct_lxc.py"), ("qm", "qm_agent.py")):
            path = hdir / "bin" / tool
            path.write_text(f"#!{self.python}\n" + (_HERE / source).read_text())
            path.chmod(0o755)
        host = RealHost(name=name, dir=hdir, port=free_port(), host_key=hdir / "host_ed25519")
        _keygen(host.host_key)
        (hdir / "authorized_keys").write_text(self.client_key.with_suffix(".pub").read_text())
        path = f"{hdir / 'bin'}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
        for _attempt in range(3):
            config = hdir / "sshd_config"
            config.write_text("\n".join([
                f"Port {host.port}", "ListenAddress 127.0.0.1", f"HostKey {host.host_key}",
                f"PidFile {hdir / 'sshd.pid'}", f"AuthorizedKeysFile {hdir / 'authorized_keys'}",
                "PasswordAuthentication no", "KbdInteractiveAuthentication no", "UsePAM no",
                "StrictModes no", "PermitRootLogin prohibit-password",
                f"SetEnv PATH={path} HOME={hdir}", "LogLevel INFO", ""]))
            host.log.write_text("")
            host.process = self.spawn(f"sshd-{name}", [SSHD, "-D", "-f", str(config), "-E",
                                                       str(host.log)], hdir / "sshd.out")
            self._wait(lambda: "Server listening" in host.log.read_text(), 10, "sshd",
                       lambda: host.process is not None and host.process.poll() is not None)
            if "Server listening" in host.log.read_text():
                break
            self._end(host.process)
            host.port = free_port()
        else:
            raise RuntimeError(f"sshd for {name} did not start: {host.log.read_text()[-300:]}")
        self.hosts[name] = host
        blob = host.host_key.with_suffix(".pub").read_text().split()[1]
        with self.known_hosts.open("a") as out:
            out.write(f"[127.0.0.1]:{host.port} ssh-ed25519 {blob}\n")
        return host

    def inventory(self, path: Path, *, timeout: float = 60, **defaults: Any) -> Path:
        """The inventory YAML of every host's `entry` (address and port filled in)."""
        import yaml

        hosts = {name: {"address": "127.0.0.1", "ssh": {"port": host.port}, **host.entry}
                 for name, host in self.hosts.items()}
        data = {"defaults": {"ssh": {"user": "root", "identity_file": str(self.client_key),
                                     "known_hosts": str(self.known_hosts), "config_file": "",
                                     "connect_timeout": 10},
                             "timeout": timeout, **defaults},
                "hosts": hosts}
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        return path

    # -- observation -----------------------------------------------------------------------

    def namespace_pids(self) -> list[int]:
        """Every process in the fleet's mount namespace but the holder."""
        if self.holder is None:
            return []
        try:
            target = os.readlink(f"/proc/{self.holder.pid}/ns/mnt")
        except OSError:
            return []
        found = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit() and int(entry.name) != self.holder.pid:
                try:
                    if os.readlink(entry / "ns" / "mnt") == target:
                        found.append(int(entry.name))
                except OSError:
                    continue
        return found

    # -- teardown --------------------------------------------------------------------------

    @staticmethod
    def _end(proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM) -> None:
        if proc.poll() is None:
            proc.send_signal(sig)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)

    def close(self) -> None:
        """Containers removed with the runtimes' own tools, then every process by its PID."""
        if self.holder is None:
            return

        def docker() -> None:
            if "dockerd" in self.children and self.children["dockerd"].poll() is None:
                ids = self.run(["docker", "ps", "-aq"], check=False).stdout.split()
                if ids:
                    self.run(["docker", "rm", "-f", *ids], check=False)

        def lxc(vmid: int) -> None:
            if vmid in self.lxc_docker:
                self.run(["lxc-attach", "-n", str(vmid), "--clear-env", "--", "sh", "-c",
                          "docker rm -f $(docker ps -aq)"], check=False)
            if self.lxc_podman(vmid):
                self.run(["lxc-attach", "-n", str(vmid), "--clear-env", "--", "podman", "rm",
                          "-f", "-a", "-t", "0"], check=False)
            self.lxc_stop(vmid)

        try:
            # Each runtime's own tool removes its containers, the runtimes side by side.
            with ThreadPoolExecutor(max_workers=4) as pool:
                jobs = [pool.submit(docker),
                        pool.submit(self.run, ["podman", "rm", "-f", "-a", "-t", "0"],
                                    check=False)]
                jobs += [pool.submit(lxc, vmid) for vmid in self.lxc_ids]
                for job in jobs:
                    job.result()
        finally:
            for proc in list(self.children.values()):
                self._end(proc)
            self.children.clear()
            for pid in self.namespace_pids():
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            self._end(self.holder, signal.SIGKILL)
            self.holder = None

    def lxc_podman(self, vmid: int) -> bool:
        return (self.state / "lxc" / str(vmid) / "rootfs" / "etc" / "containers").is_dir()

    def ps(self, argv: list[str]) -> list[str]:
        """The lines a runtime's own ps/top prints (inside the namespace)."""
        return self.run(argv, check=False).stdout.splitlines()

    def dump(self) -> str:
        """What went wrong where: the tail of each log (for a failed test's message)."""
        parts = []
        for log in sorted(self.root.glob("**/*.log")):
            text = log.read_text(errors="replace")[-600:]
            parts.append(f"== {log.relative_to(self.root)}\n{text}")
        return "\n".join(parts)


def json_lines(text: str) -> list[Any]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]



def processes(fleet: RealFleet, *, lxc: Sequence[int] = (), docker: Sequence[str] = (),
              podman: Sequence[str] = (), vm: int | None = None,
              host: RealHost | None = None) -> dict[str, set[str]]:
    """What runs in each node ("PID ARGS" lines), as the runtimes' own tools show it:
    `lxc-attach -- ps`, `docker top`, `podman top`, `qm guest exec VMID -- ps` (through
    `host`'s qm). The ps itself is left out; compare two of these with `new_processes`."""
    asks: dict[str, list[str]] = {}
    for vmid in lxc:
        asks[f"lxc {vmid}"] = ["lxc-attach", "-n", str(vmid), "--clear-env", "--", "ps", "-eo",
                               "pid,args"]
    for name in docker:
        asks[f"docker {name}"] = ["docker", "top", name, "-eo", "pid,args"]
    for name in podman:
        asks[f"podman {name}"] = ["podman", "top", name, "pid", "args"]
    if vm is not None and host is not None:
        asks[f"vm {vm}"] = [str(host.dir / "bin" / "qm"), "guest", "exec", str(vm), "--", "ps",
                            "-eo", "pid,args"]

    def ask(node: str) -> list[str]:
        if not node.startswith("vm "):
            return fleet.ps(asks[node])[1:]
        reply = fleet.run(asks[node], check=False)
        try:
            out = json.loads(reply.stdout).get("out-data", "")
        except json.JSONDecodeError:
            out = reply.stdout + reply.stderr
        return str(out).splitlines()[1:]

    # A few at a time: each is a runtime's own tool starting (podman's takes longest).
    with ThreadPoolExecutor(max_workers=4) as pool:
        found = dict(zip(asks, pool.map(ask, asks), strict=True))
    # Zombies are not running: a container whose init is `sleep` never reaps the
    # double-forked helpers of podman's exec sessions (conmon), whoever ran them. Kernel
    # threads ([kworker/0:0]: the guest's own) come and go by themselves.
    return {node: {" ".join(line.split()) for line in lines if _a_process(line)}
            for node, lines in found.items()}


def _a_process(line: str) -> bool:
    """Whether a `PID ARGS` line of ps/top is a process something started (not the ps itself,
    a zombie or a kernel thread)."""
    fields = line.split(None, 1)
    args = fields[1].strip() if len(fields) > 1 else ""
    return bool(args) and not args.startswith("ps -eo pid,args") and not (
        args.startswith("[") and args.endswith("]")) and not args.endswith("<defunct>")


def new_processes(before: dict[str, set[str]], after: dict[str, set[str]]
                  ) -> dict[str, list[str]]:
    """The processes in `after` that were not in `before`, per node (none: {})."""
    grown = {node: sorted(lines - before.get(node, set())) for node, lines in after.items()}
    return {node: lines for node, lines in grown.items() if lines}
