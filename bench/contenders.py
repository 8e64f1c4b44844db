"""The four ways to probe every container, each run as one measured command.

- floor:      the probe through the `pct` stand-in directly, no SSH, `cores` at a time
- floor-wide: the same, as many at a time as fleetcheck runs (min(concurrency 64, hosts x 8)):
              the probe is not purely CPU-bound (it waits on gcc, ldconfig, nvidia-smi), so
              `cores` at a time is not the least time the machine can do
- fleetcheck: `fleetcheck audit INVENTORY --format json -o FILE` (the real CLI, a subprocess)
- fleetcheck-chacha: the same CLI with asyncssh's own cipher order (chacha20-poly1305 first,
              fleetcheck's before it preferred AES-GCM), from bench/proposed_fixes.py
- ansible:    ansible-core ad-hoc `raw`, forks 50, one inventory entry per container
- ssh-loop:   a sequential shell loop of `ssh HOST pct exec VMID -- python3 - < probe.py`

How the probe reaches the container: fleetcheck pipes it over the SSH channel (that is its
design). Ansible `raw` has no way to feed stdin, so for Ansible and the shell loop the probe
file is already on the host and the remote command redirects it:
`pct exec VMID --keep-env 0 -- python3 - ARGS < /path/probe.py`. That spares them the copy;
on loopback the copy costs nothing measurable either way.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench.fleet import BenchFleet
from bench.measure import Measurement, run_measured

REPO = Path(__file__).resolve().parent.parent
ANSIBLE_FORKS = 50
ANSIBLE_SSH_RETRIES = 3
PROBE_SCHEMA = "fleetcheck.probe/1"


@dataclass(frozen=True)
class Probe:
    """A probe script on disk and how to call it (the same argv for every contender)."""

    kind: str  # "real", "trivial" or "latency"
    path: str
    argv: tuple[str, ...]  # e.g. ("python3", "-", "--deadline", "50")


@dataclass(frozen=True)
class Outcome:
    measurement: Measurement
    #: Containers whose probe output came back (a JSON object from the probe).
    ok: int
    total: int
    note: str = ""


@dataclass(frozen=True)
class Context:
    fleet: BenchFleet
    probe: Probe
    workdir: Path
    timeout: float


def _pct_argv(vmid: int, probe: Probe) -> list[str]:
    return ["pct", "exec", str(vmid), "--keep-env", "0", "--", *probe.argv]


# -- (a) the floor -----------------------------------------------------------------------------

FLEETCHECK_CONCURRENCY = 64
FLEETCHECK_CHANNELS_PER_HOST = 8


def run_floor(ctx: Context, jobs: int | None = None) -> Outcome:
    fleet = ctx.fleet
    commands = []
    for host in fleet.hosts:
        for vmid in host.vmids:
            argv = _pct_argv(vmid, ctx.probe)
            commands.append([*fleet.pct_prefix(host), *argv[1:]])
    # Every container's pct ignores the caller's environment (--keep-env 0); one env serves.
    spec = {"jobs": jobs or os.cpu_count() or 1, "stdin": ctx.probe.path,
            "env": fleet.pct_env(fleet.hosts[0]), "commands": commands}
    spec_path = ctx.workdir / "floor.json"
    spec_path.write_text(json.dumps(spec))
    measured = run_measured([sys.executable, str(REPO / "bench" / "floor.py"), str(spec_path)],
                            timeout=ctx.timeout, known_children=fleet.server_pids)
    match = re.search(rb"ok=(\d+)", measured.stdout)
    return Outcome(measured, int(match.group(1)) if match else 0, len(commands))


def run_floor_wide(ctx: Context) -> Outcome:
    jobs = min(FLEETCHECK_CONCURRENCY, FLEETCHECK_CHANNELS_PER_HOST * len(ctx.fleet.hosts))
    return run_floor(ctx, jobs)


# -- (b) fleetcheck ----------------------------------------------------------------------------

def fleetcheck_probe_env_hook() -> str | None:
    """The environment variable fleetcheck reads to choose the probe source, if it has one."""
    try:
        import inspect

        import fleetcheck.probe as probe_module
    except ImportError:
        return None
    try:
        source = inspect.getsource(probe_module)
    except (OSError, TypeError):
        return None
    match = re.search(r"FLEETCHECK_PROBE[A-Z_]*", source)
    return match.group(0) if match else None


def run_fleetcheck(ctx: Context, fixes: str = "") -> Outcome:
    fleet = ctx.fleet
    out = ctx.workdir / f"fleetcheck-{ctx.probe.kind}{'-fixed' if fixes else ''}.json"
    out.unlink(missing_ok=True)
    cli = ["audit", fleet.inventory_path, "--format", "json", "-o", str(out), "--no-progress"]
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO)
    note = ""
    if fixes:
        env["BENCH_FIXES"] = fixes
        probe_path = "-" if ctx.probe.kind == "real" else ctx.probe.path
        argv = [sys.executable, str(REPO / "bench" / "fleetcheck_with_probe.py"), probe_path,
                *cli]
        note = f"variant applied in-process: {fixes}"
    elif ctx.probe.kind == "real":
        argv = [sys.executable, "-m", "fleetcheck", *cli]
    else:
        hook = fleetcheck_probe_env_hook()
        if hook:
            env[hook] = ctx.probe.path
            argv = [sys.executable, "-m", "fleetcheck", *cli]
            note = f"probe chosen with {hook}"
        else:
            argv = [sys.executable, str(REPO / "bench" / "fleetcheck_with_probe.py"),
                    ctx.probe.path, *cli]
            note = "probe payload injected as AuditParts (bench/fleetcheck_with_probe.py)"
    measured = run_measured(argv, env=env, timeout=ctx.timeout,
                            known_children=fleet.server_pids)
    ok = 0
    try:
        report = json.loads(out.read_text())
        ok = sum(1 for node in report.get("nodes", ())
                 if node.get("status") not in ("error", "unreachable"))
    except (OSError, ValueError):
        pass
    return Outcome(measured, ok, fleet.container_count, note)


def run_fleetcheck_chacha(ctx: Context) -> Outcome:
    """fleetcheck with chacha20-poly1305 first again: what preferring AES-GCM bought."""
    return run_fleetcheck(ctx, fixes="chacha")


# -- (c) ansible-core ad-hoc raw ---------------------------------------------------------------

def write_ansible_files(fleet: BenchFleet, workdir: Path) -> tuple[Path, Path]:
    """An INI inventory with one entry per container, and an ansible.cfg next to it."""
    lines = ["[containers]"]
    for host in fleet.hosts:
        for vmid in host.vmids:
            lines.append(f"{host.name}-{vmid} ansible_host=127.0.0.1 ansible_port={host.port}"
                         f" vmid={vmid}")
    common = (f"-o UserKnownHostsFile={fleet.known_hosts} -o StrictHostKeyChecking=yes"
              " -o BatchMode=yes")
    lines += ["", "[containers:vars]", f"ansible_user={fleet.user}",
              f"ansible_ssh_private_key_file={fleet.identity_file}",
              f"ansible_ssh_common_args='{common}'", ""]
    inventory = workdir / "ansible-hosts.ini"
    inventory.write_text("\n".join(lines))
    control = workdir / "ansible-cp"
    control.mkdir(exist_ok=True)
    config = workdir / "ansible.cfg"
    # Ansible's own defaults otherwise: ssh_args "-C -o ControlMaster=auto -o
    # ControlPersist=60s", i.e. what an Ansible user gets without configuring anything.
    config.write_text(
        "[defaults]\n"
        f"forks = {ANSIBLE_FORKS}\n"
        "host_key_checking = True\n"
        "gathering = explicit\n"
        "retry_files_enabled = False\n"
        "deprecation_warnings = False\n"
        f"local_tmp = {workdir}/ansible-tmp\n"
        "[ssh_connection]\n"
        f"control_path_dir = {control}\n"
        # Without retries, forks 50 against sshd's default MaxStartups (10:30:100) loses
        # about one target per hundred ("kex_exchange_identification: Connection closed by
        # remote host"); an Ansible user who meets that sets retries.
        f"retries = {ANSIBLE_SSH_RETRIES}\n"
    )
    return inventory, config


def run_ansible(ctx: Context) -> Outcome:
    fleet = ctx.fleet
    inventory, config = write_ansible_files(fleet, ctx.workdir)
    command = f"pct exec {{{{ vmid }}}} --keep-env 0 -- {shlex.join(ctx.probe.argv)}" \
              f" < {shlex.quote(ctx.probe.path)}"
    env = dict(os.environ)
    env.update({"ANSIBLE_CONFIG": str(config), "ANSIBLE_NOCOLOR": "1",
                "ANSIBLE_LOCALHOST_WARNING": "False", "ANSIBLE_PYTHON_INTERPRETER": "python3"})
    ansible = str(Path(sys.executable).with_name("ansible"))
    if not Path(ansible).exists():
        ansible = "ansible"
    argv = [ansible, "containers", "-i", str(inventory), "-f", str(ANSIBLE_FORKS),
            "-m", "raw", "-a", command]
    # The ControlPersist masters outlive ansible: run_measured adopts them (subreaper),
    # stops them and counts their CPU.
    measured = run_measured(argv, env=env, timeout=ctx.timeout, cwd=str(ctx.workdir),
                            known_children=fleet.server_pids)
    text = measured.stdout.decode(errors="replace")
    # The minimal callback: "NAME | CHANGED | rc=0 >>" then the probe's stdout.
    changed = len(re.findall(r"^\S+ \| CHANGED \| rc=\d+ >>$", text, re.MULTILINE))
    replies = len(re.findall(r'"schema":\s*"' + re.escape(PROBE_SCHEMA) + '"', text))
    ok = min(changed, replies)
    unreachable = text.count("| UNREACHABLE!")
    note = f"{unreachable} unreachable" if unreachable else ""
    return Outcome(measured, ok, fleet.container_count, note)


# -- (d) a sequential OpenSSH loop -------------------------------------------------------------

def run_ssh_loop(ctx: Context) -> Outcome:
    fleet = ctx.fleet
    outdir = ctx.workdir / f"loop-{ctx.probe.kind}"
    outdir.mkdir(exist_ok=True)
    for old in outdir.iterdir():
        old.unlink()
    lines = ["#!/bin/bash", "# One ssh per container, one after the other."]
    opts = shlex.join(["-i", fleet.identity_file, "-o", f"UserKnownHostsFile={fleet.known_hosts}",
                       "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes",
                       "-l", fleet.user])
    targets = ctx.workdir / f"loop-{ctx.probe.kind}.txt"
    targets.write_text("".join(f"{host.port} {vmid}\n"
                               for host in fleet.hosts for vmid in host.vmids))
    remote = (f"pct exec $vmid --keep-env 0 -- {shlex.join(ctx.probe.argv)}"
              f" < {shlex.quote(ctx.probe.path)}")
    lines += [
        "while read -r port vmid; do",
        f"  ssh {opts} -p \"$port\" 127.0.0.1 \"{remote}\" </dev/null"
        f" >{shlex.quote(str(outdir))}/\"$port-$vmid\".json",
        f"done <{shlex.quote(str(targets))}",
    ]
    script = ctx.workdir / f"loop-{ctx.probe.kind}.sh"
    script.write_text("\n".join(lines) + "\n")
    measured = run_measured(["bash", str(script)], timeout=ctx.timeout,
                            known_children=fleet.server_pids)
    ok = 0
    for result in outdir.iterdir():
        if result.read_bytes().lstrip().startswith(b"{"):
            ok += 1
    return Outcome(measured, ok, fleet.container_count)


CONTENDERS: dict[str, Callable[[Context], Outcome]] = {
    "floor": run_floor,
    "floor-wide": run_floor_wide,
    "fleetcheck": run_fleetcheck,
    "fleetcheck-chacha": run_fleetcheck_chacha,
    "ansible": run_ansible,
    "ssh-loop": run_ssh_loop,
}
