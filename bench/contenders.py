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
- pdsh, pdsh-64, pdsh-64-matched: Debian's pdsh 2.34 (`pdsh -R ssh`, one OpenSSH `ssh` per
              node), at its default fan-out (32) and at fleetcheck's concurrency (64); with
              OpenSSH's default algorithms, and `-matched` pinned to what fleetcheck
              negotiates (curve25519-sha256, aes128-gcm@openssh.com)
- clush, clush-matched: ClusterShell's clush 1.9.1 (`clush -b`, its own fan-out: 64 by
              default, fleetcheck's concurrency), the probe on its stdin
- fleetcheck-sshcfg: fleetcheck reaching the nodes through the same ssh_config as pdsh and
              clush (bare-metal fleets only; issue #28)
- fleetcheck-baseline: fleetcheck from the checkout $BENCH_BASELINE names, interleaved with
              this one (a change's before and after on the same fleet)
- asyncssh-floor: the least an asyncssh program does (bench/asyncssh_floor.py): one
              connection and `conn.run(python3 - ARGS, input=probe)` per node, 64 at once,
              fleetcheck's negotiated crypto pinned; no inventory, verdict or report
              (bare-metal fleets only; issue #43)

pdsh, clush and ansible need one target per node: they run on the bare-metal fleet
(bench/nodes.py, `--shape nodes`), where the floor is each node's `python3 - < probe.py` in
the node's environment, on the fleet's cores. pdsh does not forward its standard input (each
`ssh` gets a socket pdsh never writes to or closes; `python3 -` would wait for ever), so for
pdsh, as for ansible, the probe file is already on the node: `python3 - ARGS < /path/probe.py`.
clush forwards its stdin to every node, as fleetcheck does: it gets `python3 - ARGS` and the
probe on stdin. Every tool's output is split back per node and each node's JSON is checked.

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
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench.fleet import BenchFleet
from bench.measure import Measurement, fleet_core_count, repo_pythonpath, run_measured

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


def probe_reply_ok(text: str) -> bool:
    """One node's output is the probe's JSON object (its schema named)."""
    try:
        reply = json.loads(text)
    except ValueError:
        return False
    return isinstance(reply, dict) and reply.get("schema") == PROBE_SCHEMA


#: OpenSSH client options pinning what fleetcheck (asyncssh, no liboqs) negotiates with sshd.
MATCHED_CRYPTO = ("-o", "KexAlgorithms=curve25519-sha256",
                  "-o", "Ciphers=aes128-gcm@openssh.com")


# -- (a) the floor -----------------------------------------------------------------------------

FLEETCHECK_CONCURRENCY = 64
FLEETCHECK_CHANNELS_PER_HOST = 8


def run_floor(ctx: Context, jobs: int | None = None) -> Outcome:
    fleet = ctx.fleet
    commands = []
    envs = []
    if fleet.bare:
        # Each node's probe in that node's environment (what its sshd's SetEnv gives a login).
        for host in fleet.hosts:
            env = dict(fleet.node_envs[host.name])
            commands.append([shutil.which("python3", path=env["PATH"]) or "python3",
                             *ctx.probe.argv[1:]])
            envs.append(env)
        spec: dict[str, object] = {"envs": envs}
    else:
        for host in fleet.hosts:
            for vmid in host.vmids:
                argv = _pct_argv(vmid, ctx.probe)
                commands.append([*fleet.pct_prefix(host), *argv[1:]])
        # Every container's pct ignores the caller's environment (--keep-env 0); one env serves.
        spec = {"env": fleet.pct_env(fleet.hosts[0])}
    spec.update({"jobs": jobs or fleet_core_count(), "stdin": ctx.probe.path,
                 "commands": commands})
    spec_path = ctx.workdir / "floor.json"
    spec_path.write_text(json.dumps(spec))
    # The floor's probes are the fleet's work: on the fleet's cores under --pin.
    measured = run_measured([sys.executable, str(REPO / "bench" / "floor.py"), str(spec_path)],
                            timeout=ctx.timeout, known_children=fleet.server_pids,
                            role="fleet")
    match = re.search(rb"ok=(\d+)", measured.stdout)
    return Outcome(measured, int(match.group(1)) if match else 0, len(commands))


def run_floor_wide(ctx: Context) -> Outcome:
    per_host = 1 if ctx.fleet.bare else FLEETCHECK_CHANNELS_PER_HOST
    jobs = min(FLEETCHECK_CONCURRENCY, per_host * len(ctx.fleet.hosts))
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


def run_fleetcheck(ctx: Context, fixes: str = "", inventory: str = "",
                   repo: Path = REPO) -> Outcome:
    fleet = ctx.fleet
    out = ctx.workdir / f"fleetcheck-{ctx.probe.kind}{'-fixed' if fixes else ''}.json"
    out.unlink(missing_ok=True)
    cli = ["audit", inventory or fleet.inventory_path, "--format", "json", "-o", str(out),
           "--no-progress"]
    env = dict(os.environ)
    env["PYTHONPATH"] = repo_pythonpath(repo)
    note = "" if repo == REPO else f"the checkout at {repo}"
    if fixes:
        env["BENCH_FIXES"] = fixes
        probe_path = "-" if ctx.probe.kind == "real" else ctx.probe.path
        argv = [sys.executable, str(repo / "bench" / "fleetcheck_with_probe.py"), probe_path,
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
            argv = [sys.executable, str(repo / "bench" / "fleetcheck_with_probe.py"),
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


def run_fleetcheck_sshcfg(ctx: Context) -> Outcome:
    """fleetcheck with only `address: nodeNNNN` and the ssh_config pdsh and clush are given."""
    if not ctx.fleet.bare:
        raise SystemExit("bench: fleetcheck-sshcfg needs the bare-metal fleet (--shape nodes)")
    return run_fleetcheck(ctx, inventory=ctx.fleet.inventory_sshcfg)


def run_fleetcheck_baseline(ctx: Context) -> Outcome:
    """fleetcheck from another checkout ($BENCH_BASELINE, e.g. `git worktree add ../before
    HEAD~1`), run in turn with this one against the same fleet: a change's before and after."""
    baseline = os.environ.get("BENCH_BASELINE")
    if not baseline:
        raise SystemExit("bench: fleetcheck-baseline needs BENCH_BASELINE=CHECKOUT")
    return run_fleetcheck(ctx, repo=Path(baseline).resolve())


def run_fleetcheck_chacha(ctx: Context) -> Outcome:
    """fleetcheck with chacha20-poly1305 first again: what preferring AES-GCM bought."""
    return run_fleetcheck(ctx, fixes="chacha")


# -- (c) ansible-core ad-hoc raw ---------------------------------------------------------------

def write_ansible_files(fleet: BenchFleet, workdir: Path) -> tuple[Path, Path]:
    """An INI inventory with one entry per container, and an ansible.cfg next to it."""
    lines = ["[containers]"]
    for host in fleet.hosts:
        if fleet.bare:
            lines.append(f"{host.name} ansible_host=127.0.0.1 ansible_port={host.port}")
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
    command = f"{shlex.join(ctx.probe.argv)} < {shlex.quote(ctx.probe.path)}"
    if not fleet.bare:
        command = f"pct exec {{{{ vmid }}}} --keep-env 0 -- {command}"
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
    # The minimal callback: "NAME | CHANGED | rc=0 >>" then the probe's stdout, up to the next
    # such header: each target's output is checked on its own.
    parts = re.split(r"^(\S+) \| (CHANGED|FAILED|SUCCESS) \| rc=(\d+) >>$", text,
                     flags=re.MULTILINE)
    # `raw` runs with a terminal (ssh -tt), whose client adds this line to the output.
    trailer = re.compile(r"\s*Shared connection to \S+ closed\.\s*$")
    ok = sum(1 for index in range(1, len(parts) - 3, 4)
             if parts[index + 2] == "0" and probe_reply_ok(trailer.sub("", parts[index + 3])))
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


# -- (e) pdsh and ClusterShell's clush: the tools a user would pick instead -------------------

PDSH_DEFAULT_FANOUT = 32  # pdsh(1): "-f number: Set the maximum number of simultaneous
                          # remote commands to number. The default is 32."


def _bare_fleet(ctx: Context, tool: str) -> BenchFleet:
    if not ctx.fleet.bare:
        raise SystemExit(f"bench: {tool} needs one target per node: the bare-metal fleet "
                         "(--shape nodes)")
    return ctx.fleet


def split_prefixed(text: str) -> dict[str, str]:
    """pdsh's `NODE: LINE` output (lines of different nodes interleave) -> node -> its text."""
    nodes: dict[str, list[str]] = {}
    for line in text.splitlines():
        name, sep, rest = line.partition(": ")
        if sep and " " not in name:
            nodes.setdefault(name, []).append(rest)
    return {name: "\n".join(lines) for name, lines in nodes.items()}


_CLUSH_RULE = re.compile(r"^-{15,}\n(\S+)(?: \((\d+)\))?\n-{15,}\n", re.MULTILINE)


def expand_nodeset(text: str) -> list[str]:
    """ClusterShell's folded node set (`node[0001-0003,0007]`, or one name) -> its names."""
    match = re.fullmatch(r"([A-Za-z_.-]*)\[([0-9,-]+)\]([A-Za-z_.-]*)", text)
    if not match:
        if "[" in text or "," in text:
            raise ValueError(f"cannot expand node set {text!r}")
        return [text]
    prefix, ranges, suffix = match.groups()
    names = []
    for part in ranges.split(","):
        low, _, high = part.partition("-")
        width = len(low)
        names += [f"{prefix}{number:0{width}d}{suffix}"
                  for number in range(int(low), int(high or low) + 1)]
    return names


def split_clush(text: str) -> dict[str, str]:
    """clush -b's gathered output (one header per set of nodes that printed the same text)
    -> node -> its text."""
    nodes: dict[str, str] = {}
    matches = list(_CLUSH_RULE.finditer(text))
    for index, match in enumerate(matches):
        end = matches[index + 1].start() if index + 1 < len(matches) else len(text)
        body = text[match.end():end]
        names = expand_nodeset(match.group(1))
        if match.group(2) and int(match.group(2)) != len(names):
            raise ValueError(f"clush header {match.group(0)!r}: {len(names)} names")
        for name in names:
            nodes[name] = body
    return nodes


def _ssh_options(fleet: BenchFleet, matched: bool) -> list[str]:
    return ["-F", fleet.ssh_config, *(MATCHED_CRYPTO if matched else ())]


def _count_ok(fleet: BenchFleet, replies: dict[str, str]) -> int:
    return sum(1 for host in fleet.hosts if probe_reply_ok(replies.get(host.name, "")))


def run_pdsh(ctx: Context, fanout: int = PDSH_DEFAULT_FANOUT, matched: bool = False) -> Outcome:
    from bench.nodes import nodeset

    fleet = _bare_fleet(ctx, "pdsh")
    env = dict(os.environ)
    # pdsh's ssh module runs `ssh $PDSH_SSH_ARGS $PDSH_SSH_ARGS_APPEND HOST COMMAND`; the
    # ssh_config gives each node's port, user, key and known_hosts.
    env["PDSH_SSH_ARGS_APPEND"] = shlex.join(_ssh_options(fleet, matched))
    remote = f"{shlex.join(ctx.probe.argv)} < {shlex.quote(ctx.probe.path)}"
    argv = ["pdsh", "-R", "ssh", "-f", str(fanout), "-w",
            nodeset([host.name for host in fleet.hosts]), remote]
    measured = run_measured(argv, env=env, timeout=ctx.timeout,
                            known_children=fleet.server_pids)
    replies = split_prefixed(measured.stdout.decode(errors="replace"))
    return Outcome(measured, _count_ok(fleet, replies), fleet.container_count,
                   f"fan-out {fanout}, {'matched' if matched else 'default'} crypto")


def run_clush(ctx: Context, fanout: int | None = None, matched: bool = False) -> Outcome:
    from bench.nodes import nodeset

    fleet = _bare_fleet(ctx, "clush")
    argv = ["clush", "-b", "-o", shlex.join(_ssh_options(fleet, matched)), "-w",
            nodeset([host.name for host in fleet.hosts])]
    if fanout:
        argv[1:1] = ["-f", str(fanout)]
    argv.append(shlex.join(ctx.probe.argv))
    measured = run_measured(argv, timeout=ctx.timeout, known_children=fleet.server_pids,
                            stdin_path=ctx.probe.path)
    try:
        replies = split_clush(measured.stdout.decode(errors="replace"))
    except ValueError as exc:
        replies = {}
        print(f"bench: clush output: {exc}", file=sys.stderr)
    return Outcome(measured, _count_ok(fleet, replies), fleet.container_count,
                   f"fan-out {fanout or 'default (64)'}, {'matched' if matched else 'default'}"
                   " crypto")


def run_asyncssh_floor(ctx: Context) -> Outcome:
    """The minimal asyncssh loop over the bare-metal nodes, on the auditor's cores."""
    fleet = _bare_fleet(ctx, "asyncssh-floor")
    spec = {"nodes": [["127.0.0.1", host.port] for host in fleet.hosts], "user": fleet.user,
            "identity_file": fleet.identity_file, "known_hosts": fleet.known_hosts,
            "command": shlex.join(ctx.probe.argv), "stdin": ctx.probe.path,
            "concurrency": FLEETCHECK_CONCURRENCY}
    spec_path = ctx.workdir / "asyncssh-floor.json"
    spec_path.write_text(json.dumps(spec))
    measured = run_measured([sys.executable, str(REPO / "bench" / "asyncssh_floor.py"),
                             str(spec_path)], timeout=ctx.timeout,
                            known_children=fleet.server_pids)
    match = re.search(rb"ok=(\d+)", measured.stdout)
    return Outcome(measured, int(match.group(1)) if match else 0, fleet.container_count,
                   "asyncssh.connect + conn.run per node, 64 at once, matched crypto")


CONTENDERS: dict[str, Callable[[Context], Outcome]] = {
    "floor": run_floor,
    "floor-wide": run_floor_wide,
    "fleetcheck": run_fleetcheck,
    "fleetcheck-chacha": run_fleetcheck_chacha,
    "fleetcheck-baseline": run_fleetcheck_baseline,
    "ansible": run_ansible,
    "ssh-loop": run_ssh_loop,
    "fleetcheck-sshcfg": run_fleetcheck_sshcfg,
    "pdsh": run_pdsh,
    "pdsh-64": lambda ctx: run_pdsh(ctx, fanout=FLEETCHECK_CONCURRENCY),
    "pdsh-64-matched": lambda ctx: run_pdsh(ctx, fanout=FLEETCHECK_CONCURRENCY, matched=True),
    "clush": run_clush,
    "clush-matched": lambda ctx: run_clush(ctx, matched=True),
    "asyncssh-floor": run_asyncssh_floor,
}
