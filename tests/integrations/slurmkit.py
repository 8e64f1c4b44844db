"""A real Slurm cluster on this machine: munged, slurmctld and slurmd (Debian's slurm-wlm).

One node by default (this host's short name). With `names`, several Slurm nodes on this one
host: one slurmd per node name (`slurmd -N NAME`), each on its own port (`NodeName=NAME
NodeHostname=HOST Port=PORT`), which Debian's build allows without --enable-multiple-slurmd.
Everything lives in one private folder: the munge key and socket, slurm.conf, the state and
spool folders, the logs. The daemons run in the foreground as our children, on free TCP ports
on 127.0.0.1 (held for them until they bind: `tests.fleet.kit.free_port`), so nothing outside
the folder is used or left behind. Every wait is bounded.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tests.fleet.kit import free_port

BINARIES = ("munged", "mungekey", "slurmctld", "slurmd", "sinfo", "scontrol", "sbatch", "squeue")

#: How long one daemon may take to come up, and one state change to show.
START_TIMEOUT_S = 30.0
WAIT_TIMEOUT_S = 45.0


def write_script(path: Path, body: str) -> None:
    """An executable /bin/sh script (a wrapper slurmd or slurmctld runs)."""
    path.write_text("#!/bin/sh\n" + body, encoding="utf-8")
    path.chmod(0o755)


def skip_without_slurm() -> None:
    """Skip the calling test unless root (slurmd runs as root) and Debian's Slurm are here."""
    import pytest

    if os.geteuid() != 0:
        pytest.skip("needs root: slurmd runs as root (SlurmdUser=root) to run Prolog and "
                    "HealthCheckProgram")
    missing = missing_binaries()
    if missing:
        pytest.skip(f"needs Debian's slurm-wlm and munge ({', '.join(missing)} missing; "
                    "scripts/test.sh installs them)")


def missing_binaries() -> list[str]:
    found = {name: shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin") for name in
             BINARIES}
    return [name for name, path in found.items() if path is None]


def _short_hostname() -> str:
    return os.uname().nodename.split(".")[0]


def _binary(name: str) -> str:
    path = shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin")
    assert path, name
    return path


@dataclass
class SlurmCluster:
    """Nodes in one partition `gpu`; root only (SlurmdUser=root)."""

    root: Path
    extra_conf: list[str] = field(default_factory=list)
    node: str = field(default_factory=lambda: _short_hostname())
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    #: Several Slurm node names on this host (one slurmd each); empty: `node` alone.
    names: tuple[str, ...] = ()
    #: Extra words for every NodeName line (e.g. "Features=h200").
    node_extra: str = ""

    def __post_init__(self) -> None:
        if self.names:
            self.node = self.names[0]

    @property
    def nodes(self) -> tuple[str, ...]:
        return self.names or (self.node,)

    @property
    def conf(self) -> Path:
        return self.root / "slurm.conf"

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def start(self) -> None:
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.root.chmod(0o700)  # munged refuses a key or socket in a folder others can write
        for sub in ("state", "spool"):
            (self.root / sub).mkdir(exist_ok=True)
        key = self.root / "munge.key"
        subprocess.run([_binary("mungekey"), "--create", "--keyfile", str(key)], check=True,
                       capture_output=True, timeout=30)
        key.chmod(0o400)
        sock = self.root / "munge.sock"
        self._spawn("munged", [_binary("munged"), "--foreground", "--force",
                               "--socket", str(sock), "--key-file", str(key),
                               "--pid-file", str(self.root / "munged.pid"),
                               "--log-file", str(self.root / "munged.log"),
                               "--seed-file", str(self.root / "munge.seed")])
        self._wait(sock.exists, "munged socket", START_TIMEOUT_S)
        self.conf.write_text(self._slurm_conf(sock), encoding="utf-8")
        self._spawn("slurmctld", [_binary("slurmctld"), "-D", "-f", str(self.conf)])
        self._wait(lambda: self._run_ok(["scontrol", "ping"]) and b"UP" in self._ping(),
                   "slurmctld answering scontrol ping", START_TIMEOUT_S)
        if self.names:
            for name in self.names:
                (self.root / f"spool-{name}").mkdir(exist_ok=True)
                self._spawn(f"slurmd-{name}", [_binary("slurmd"), "-D", "-N", name, "-f",
                                               str(self.conf)])
        else:
            self._spawn("slurmd", [_binary("slurmd"), "-D", "-f", str(self.conf)])
        for name in self.nodes:
            self.wait_for(lambda state, _reason: state.rstrip("*") in ("idle", "mixed",
                                                                       "allocated")
                          and not state.endswith("*"), f"node {name} registered and idle",
                          node=name)

    def _slurm_conf(self, munge_socket: Path) -> str:
        r = self.root
        lines = [
            "ClusterName=fleetcheck-test",
            f"SlurmctldHost={_short_hostname()}(127.0.0.1)",
            f"SlurmctldPort={free_port()}",
            f"SlurmdPort={free_port()}",
            "SlurmUser=root",
            "SlurmdUser=root",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={munge_socket}",
            f"StateSaveLocation={r / 'state'}",
            f"SlurmdSpoolDir={r / ('spool-%n' if self.names else 'spool')}",
            f"SlurmctldPidFile={r / 'slurmctld.pid'}",
            f"SlurmdPidFile={r / ('slurmd-%n.pid' if self.names else 'slurmd.pid')}",
            f"SlurmctldLogFile={r / 'slurmctld.log'}",
            f"SlurmdLogFile={r / ('slurmd-%n.log' if self.names else 'slurmd.log')}",
            # No cgroup on a test machine: track processes by parent pid, bind nothing.
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "SchedulerType=sched/builtin",
            "SelectType=select/cons_tres",
            "MpiDefault=none",
            "ReturnToService=2",
            "SlurmdTimeout=60",
            *self.extra_conf,
            *self._node_lines(),
            f"PartitionName=gpu Nodes={','.join(self.nodes)} Default=YES MaxTime=INFINITE "
            "State=UP",
        ]
        return "\n".join(lines) + "\n"

    def _node_lines(self) -> list[str]:
        extra = f" {self.node_extra}" if self.node_extra else ""
        if not self.names:
            return [f"NodeName={self.node} NodeAddr=127.0.0.1 CPUs=1 State=UNKNOWN{extra}"]
        host = _short_hostname()
        return [f"NodeName={name} NodeHostname={host} NodeAddr=127.0.0.1 Port={free_port()} "
                f"CPUs=1 State=UNKNOWN{extra}" for name in self.names]

    def _spawn(self, name: str, argv: list[str]) -> None:
        log = open(self.root / f"{name}.out", "wb")
        self.processes[name] = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                                env=self.env, start_new_session=True)
        log.close()

    def _ping(self) -> bytes:
        return subprocess.run(["scontrol", "ping"], env=self.env, capture_output=True,
                              timeout=15, check=False).stdout

    def _run_ok(self, argv: list[str]) -> bool:
        return subprocess.run(argv, env=self.env, capture_output=True, timeout=15,
                              check=False).returncode == 0

    def _wait(self, ready: Callable[[], bool], what: str, limit: float) -> None:
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            for name, process in self.processes.items():
                if process.poll() is not None:
                    raise AssertionError(f"{name} exited ({process.returncode}) waiting for "
                                         f"{what}:\n{self.logs()}")
            if ready():
                return
            time.sleep(0.25)
        raise AssertionError(f"timed out after {limit:g} s waiting for {what}:\n{self.logs()}")

    def run(self, *argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(list(argv), env=self.env, capture_output=True, text=True,
                              timeout=30, check=False)

    def node_state(self, node: str | None = None) -> tuple[str, str]:
        """(state, reason) as sinfo prints them: ("drained", "fleetcheck: ...")."""
        done = self.run("sinfo", "-h", "-N", "-n", node or self.node, "-o", "%T|%E")
        assert done.returncode == 0, done.stderr
        state, _, reason = done.stdout.splitlines()[0].partition("|")
        return state.strip(), reason.strip()

    def wait_for(self, ready: Callable[[str, str], bool], what: str,
                 limit: float = WAIT_TIMEOUT_S, node: str | None = None) -> tuple[str, str]:
        seen: list[tuple[str, str]] = []

        def check() -> bool:
            seen.append(self.node_state(node))
            return ready(*seen[-1])

        self._wait(check, f"{what} (last: {seen[-1] if seen else None})", limit)
        return seen[-1]

    def reset_node(self) -> None:
        """Cancel every job and bring every node back to idle for the next test."""
        self.run("scancel", "--full", "-u", "root")
        for name in self.nodes:
            state, _ = self.node_state(name)
            if "drain" in state or state.startswith("down"):
                self.run("scontrol", "update", f"NodeName={name}", "State=RESUME")
        for name in self.nodes:
            self.wait_for(lambda st, _r: st == "idle", f"node {name} idle again", node=name)

    def logs(self) -> str:
        parts = []
        names = ["slurmctld.log", "slurmd.log", "munged.log", "slurmctld.out", "slurmd.out"]
        names += [f"slurmd-{node}.log" for node in self.names]
        for name in names:
            path = self.root / name
            if path.exists():
                tail = path.read_text(errors="replace").splitlines()[-15:]
                parts.append(f"--- {name}\n" + "\n".join(tail))
        return "\n".join(parts)

    def stop(self) -> None:
        # slurmd first (it talks to slurmctld while shutting down), munged last.
        slurmds = [f"slurmd-{node}" for node in self.names] or ["slurmd"]
        for name in (*slurmds, "slurmctld", "munged"):
            process = self.processes.get(name)
            if process is None or process.poll() is not None:
                continue
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)
