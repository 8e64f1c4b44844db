"""Command line: parse arguments, call one library function, render, exit with the exit code."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from fleetcheck import __version__
from fleetcheck.errors import FleetcheckError
from fleetcheck.verdict import EXIT_FAIL, EXIT_PASS, EXIT_USAGE

if TYPE_CHECKING:  # the CLI imports stages lazily, so that `--help` and `probe --script` stay fast
    from fleetcheck.spec.model import Inventory
    from fleetcheck.verdict import Policy



EPILOG = """\
exit codes (audit, gate, probe):
  0  every selected node passed (warnings allowed)
  1  at least one node failed (for example: Triton falls back to CPU)
  2  usage, inventory or playbook error: nothing was probed
  3  nothing failed, but some nodes could not be verified (unreachable, timed out, probe
     error, interrupted), or no node was verified at all
"""


class UsageError(FleetcheckError):
    """A problem with what the user asked for; printed as one line, exit code 2."""


def positive_seconds(text: str) -> float:
    """argparse type: a finite number of seconds above zero."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number of seconds above 0, got {text!r}")
    return value


def positive_count(text: str) -> int:
    """argparse type: an integer of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _add_output(parser: argparse.ArgumentParser, default_format: str = "table") -> None:
    from fleetcheck.render import FORMATS

    parser.add_argument(
        "--format", "-f", choices=FORMATS, default=None,
        help=f"output format (default: {default_format}; inferred from -o's extension "
        ".html/.json/.xml/.prom when given)",
    )
    parser.add_argument(
        "-o", "--output", metavar="FILE", default=None,
        help="write the report to FILE (atomically) instead of stdout; '-' is stdout",
    )


def _add_max_out(parser: argparse.ArgumentParser, what: str) -> None:
    """--max-out: the remediation bound (fleetcheck/outbound.py), for health and fix."""
    from fleetcheck.outbound import DEFAULT_OUT_BOUND

    default = DEFAULT_OUT_BOUND.replace("%", "%%")  # argparse formats help with %
    parser.add_argument("--max-out", metavar="SHARE|N", default=None,
                        help=what + f" (default: {default}, at least 1 node)")


def _add_max_age(parser: argparse.ArgumentParser, what: str) -> None:
    """--max-age: the oldest node document or cached verdict that counts, for gate, health
    and merge (the default is fleetcheck/nodehealth.py's)."""
    from fleetcheck.nodehealth import DEFAULT_MAX_AGE_S

    parser.add_argument("--max-age", type=positive_seconds, default=None, metavar="SECONDS",
                        help=f"{what} (default: {DEFAULT_MAX_AGE_S:g})")


def _add_history(parser: argparse.ArgumentParser, what: str) -> None:
    """--history, --keep, --on-change (checked together by `_keeping`)."""
    from fleetcheck.history import DEFAULT_KEEP

    parser.add_argument("--history", metavar="DIR", help=what)
    parser.add_argument("--keep", type=positive_count, default=None, metavar="N",
                        help=f"with --history: runs to keep (default: {DEFAULT_KEEP})")
    parser.add_argument("--on-change", metavar="CMD",
                        help="with --history: run CMD (no shell) with the changes on stdin "
                        "when something changed")


def _add_selection(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--limit", "-l", action="append", default=[], metavar="PATTERN",
        help="only these nodes: HOST, HOST/VMID, node ranges (gpu[01-03,07], pve[1-3]/1[01-20]), "
        "globs (pve*, pve1/*), label:NAME (or @NAME), "
        "a GROUP of the inventory, !PATTERN to exclude, &PATTERN to intersect; "
        "comma-separated or repeated",
    )


def build_parser() -> argparse.ArgumentParser:
    from fleetcheck.budget import DEFAULT_DEEP_NODE_TIMEOUT, DEFAULT_NODE_TIMEOUT

    parser = argparse.ArgumentParser(
        prog="fleetcheck",
        description="Audit GPU nodes (Proxmox VE hosts, their LXC containers and QEMU VMs, and "
        "Docker/Podman containers inside any of them) and "
        "tell, per node, whether Triton really runs on the GPU or silently falls back to CPU, "
        "and why.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"fleetcheck {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    audit = sub.add_parser(
        "audit", help="probe every node of an inventory and report",
        description="Probe every node of the inventory at once and report per node.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    audit.add_argument(
        "inventory", nargs="?", default=None,
        help="inventory YAML (default: the built-in one, which probes this machine only)",
    )
    _add_selection(audit)
    _add_output(audit)
    audit.add_argument("--deep", action="store_true",
                       help="also JIT-compile and launch a Triton kernel on every GPU")
    audit.add_argument("--playbook", "-p", metavar="FILE|NAME",
                       help="what counts as failing (default: the built-in default playbook)")
    audit.add_argument("--timeout", type=positive_seconds, metavar="SECONDS",
                       help="deadline for the whole audit (default: the inventory's, or none)")
    _add_history(audit, "keep this run in DIR and report what changed since the last one")
    audit.add_argument("--no-progress", action="store_true",
                       help="no progress bar (it is only drawn on a terminal anyway)")

    gate = sub.add_parser(
        "gate", help="pre-job gate: one exit code, blocking nodes on stderr",
        description="Probe the selected nodes and exit 0 only if all of them may run the job. "
        "Blocking nodes are printed on stderr, one line each: node, cause, fix.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    gate.add_argument("inventory", nargs="?", default=None,
                      help="inventory YAML (not with --documents)")
    _add_selection(gate)
    gate.add_argument("--nodes", metavar="HOSTLIST",
                      help="gate exactly these hosts as one job's node set: a Slurm hostlist "
                      "(gpu[01-08], $SLURM_JOB_NODELIST); each must be a host of the inventory; "
                      "the playbook's consistency checks run across them (instead of --limit)")
    gate.add_argument("--documents", action="append", default=None, metavar="PATH",
                      help="with --nodes, instead of an inventory: gate from the node documents "
                      "the nodes wrote (`fleetcheck probe --format json`, or the bare probe "
                      "script's output; files, folders, tarballs, as for `merge`), probing "
                      "nothing; a node without a document, or with one older than --max-age, "
                      "is unverified")
    _add_max_age(gate, "with --documents: oldest document that counts")
    gate.add_argument("--playbook", "-p", metavar="FILE|NAME", default="pre-training",
                      help="requirements (default: the built-in pre-training playbook)")
    gate.add_argument("--json", action="store_true", help="print a JSON verdict on stdout")
    gate.add_argument("--timeout", type=positive_seconds, metavar="SECONDS",
                      help="deadline for the whole gate")

    probe = sub.add_parser(
        "probe", help="probe this machine (also how a node gates itself, e.g. a Slurm prolog)",
        description="Run the probe on this machine and report. With --script, print the "
        "probe's source instead, to read it or run it by hand: "
        "fleetcheck probe --script | ssh node python3 -",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    probe.add_argument("--format", "-f", choices=("table", "json", "prometheus"), default=None,
                       help="table (default; inferred from -o's extension .json/.prom when "
                       "given), the node's JSON, or Prometheus text for node_exporter's "
                       "textfile collector")
    probe.add_argument("-o", "--output", metavar="FILE", default=None,
                       help="write to FILE atomically instead of stdout (a *.prom file for the "
                       "textfile collector)")
    probe.add_argument("--cache", metavar="FILE", default=None,
                       help="also save the verdict to FILE (atomically) for `fleetcheck health "
                       "--cache FILE`")
    probe.add_argument("--nfd", metavar="FILE", default=None,
                       help="also write the verdict as a node-feature-discovery feature file "
                       "(atomically; labels fleetcheck.feature.node.kubernetes.io/*, expiring "
                       "after 30 min), e.g. /etc/kubernetes/node-feature-discovery/features.d/"
                       "fleetcheck")
    probe.add_argument("--python", metavar="PATH",
                       help="the workload's interpreter to examine (default: python3 on PATH)")
    probe.add_argument("--deep", action="store_true",
                       help="also JIT-compile and launch a Triton kernel on every GPU")
    probe.add_argument("--timeout", type=positive_seconds, default=None, metavar="SECONDS",
                       help=f"deadline for the whole probe (default: {DEFAULT_NODE_TIMEOUT:g}; "
                       f"{DEFAULT_DEEP_NODE_TIMEOUT:g} with --deep)")
    probe.add_argument("--playbook", "-p", metavar="FILE|NAME",
                       help="what counts as failing (default: the built-in default playbook)")
    probe.add_argument("--script", action="store_true", help="print the probe's source and exit")
    probe.add_argument("--sha256", action="store_true",
                       help="with --script: print the SHA-256 of the probe's source instead "
                       "(what a host's gatekeeper allow-list holds)")

    health = sub.add_parser(
        "health", help="this node's health for Slurm (HealthCheckProgram) or node-problem-detector",
        description="Say whether this node is healthy, from the verdict cached by `fleetcheck "
        "probe --cache FILE` (fast: for Slurm's HealthCheckProgram, killed after 60 s) or from "
        "a probe run now. Prints one line; exit 0 ok, 1 fail, 3 not verified (stale or missing "
        "cache, probe error): node-problem-detector's OK / NonOK / Unknown. See "
        "docs/integrations.md.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    health.add_argument("--cache", metavar="FILE",
                        help="read the verdict `fleetcheck probe --cache FILE` saved, instead of "
                        "probing now")
    _add_max_age(health, "a cached verdict older than this is not verified")
    health.add_argument("--npd", action="store_true",
                        help="node-problem-detector custom plugin: at most 80 characters on stdout")
    health.add_argument("--slurm", action="store_true",
                        help="drain this Slurm node on failure with reason 'fleetcheck: CAUSE'; "
                        "resume it when healthy, only if fleetcheck drained it")
    health.add_argument("--node", metavar="NAME",
                        help="the Slurm node name (default: $SLURMD_NODENAME, else hostname -s)")
    health.add_argument("--drain-unverified", action="store_true",
                        help="with --slurm, also drain when the node could not be verified")
    _add_max_out(health, "with --slurm: never drain when that would take more than SHARE "
                 "(10%%) or N nodes of one of the node's partitions out at once; the node is "
                 "then left as it is")
    health.add_argument("--python", metavar="PATH",
                        help="without --cache: the workload's interpreter to examine")
    health.add_argument("--playbook", "-p", metavar="FILE|NAME",
                        help="without --cache: what counts as failing")
    health.add_argument("--timeout", type=positive_seconds, default=None, metavar="SECONDS",
                        help="without --cache: deadline for the probe (default: "
                        f"{DEFAULT_NODE_TIMEOUT:g})")

    inventory = sub.add_parser(
        "inventory", help="show the resolved targets without connecting",
        description="Load and validate an inventory and print its hosts and containers as a "
        "tree, without connecting to anything.",
    )
    inventory.add_argument("inventory", help="inventory YAML")
    inventory.add_argument("--json", action="store_true", help="JSON instead of a tree")

    report = sub.add_parser(
        "report", help="re-render a saved audit JSON without probing again",
        description="Re-render a saved audit (JSON, or .json.gz from --history) in any format.",
    )
    report.add_argument("results", help="audit JSON written by `fleetcheck audit --format json`")
    _add_output(report)
    report.add_argument("--history", metavar="DIR",
                        help="add the trend and 'failing since' from this history directory")

    fix = sub.add_parser(
        "fix", help="plan the repair of every failing node; --apply runs it and probes again",
        description="Print, per failing node, its cause, the exact commands for its "
        "distribution, where they run (as root, inside the node, through the node's "
        "transport) and what is left to the host's admin or a person. Nothing changes "
        "without --apply. With --apply the plans run (each node's stops at its first failing "
        "command), the nodes are probed again and the before -> after table is printed; "
        "the exit code is the audit's, for the after-state.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    fix.add_argument("source", metavar="INVENTORY|RESULTS.json",
                     help="an inventory (probed first) or a saved audit JSON (.json, .json.gz; "
                     "--apply reaches its nodes through the inventory it names)")
    _add_selection(fix)
    fix.add_argument("--apply", action="store_true",
                     help="run the safe, local steps as root on the nodes, then probe them again")
    fix.add_argument("--yes", "-y", action="store_true",
                     help="with --apply: do not ask (needed when stdin is not a terminal)")
    fix.add_argument("-o", "--output", metavar="FILE", default=None,
                     help="write the JSON record of the plan and of what ran where (atomically)")
    fix.add_argument("--playbook", "-p", metavar="FILE|NAME",
                     help="what counts as failing (default: the built-in default playbook)")
    fix.add_argument("--timeout", type=positive_seconds, metavar="SECONDS",
                     help="deadline for each phase (the first probe; the repair and the "
                     "probe after it)")
    fix.add_argument("--history", metavar="DIR",
                     help="with --apply: keep the after-probe in DIR like any audit")
    _add_max_out(fix, "with --apply: refuse (changing nothing) to repair more than SHARE "
                 "(10%%) or N of the selected nodes at once; narrow the selection with --limit "
                 "or raise it")
    fix.add_argument("--no-progress", action="store_true",
                     help="no progress bar (it is only drawn on a terminal anyway)")

    merge = sub.add_parser(
        "merge", help="one audit report from node documents gathered by Slurm, Kubernetes, "
        "timers",
        description="Assemble the node documents that `fleetcheck probe --format json` printed "
        "on each node, or the probe script itself where fleetcheck is not installed "
        "(`fleetcheck probe --script | python3 -`), into one audit report (files, folders of "
        "*.json, tarballs, - for stdin; node caches and saved audits too) with the playbook's "
        "fleet checks, history and every format, as `fleetcheck audit` would have written it: "
        "each node judged as an audit judges its probe's reply. A node given twice keeps its "
        "newest document; a document older than --max-age leaves its node unverified; an input "
        "that cannot be read is named. Each is one line on stderr and a finding in the report. "
        "See docs/integrations.md.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    merge.add_argument("inputs", nargs="+", metavar="INPUT",
                       help="node document files, folders, tarballs (.tar, .tar.gz), or -")
    _add_output(merge)
    merge.add_argument("--id", dest="id_template", default="auto", metavar="TEMPLATE",
                       help="how merged nodes are named: 'auto' (default: the Slurm node name, "
                       "else the Kubernetes node name, else the document's id, which is the "
                       "probed machine's host name, else the file's name) or a template "
                       "of {id} {hostname} {slurm_node} {slurm_job} {k8s_node} {pod} "
                       "{namespace} {file}")
    _add_max_age(merge, "a document probed longer ago leaves its node unverified")
    merge.add_argument("--playbook", "-p", metavar="FILE|NAME",
                       help="fleet checks and requirements (default: the built-in default)")
    _add_history(merge, "keep this merge in DIR and report what changed since the last run")

    diff = sub.add_parser(
        "diff", help="what changed between two saved audits",
        description="Compare two saved audits. Exit 0: no change, 1: changes, 2: trouble.",
    )
    diff.add_argument("old")
    diff.add_argument("new")
    diff.add_argument("--json", action="store_true", help="JSON instead of text")
    _add_host_setup(sub)
    _add_contracts(sub)
    return parser


def _add_contracts(sub: Any) -> None:
    """`schema`, `completion`, `manpage`: what fleetcheck publishes about itself."""
    schema = sub.add_parser(
        "schema", help="print the JSON Schema of a document fleetcheck writes",
        description="Print the JSON Schema (draft 2020-12) of the probe's document "
        "(fleetcheck.probe/1), the node document (fleetcheck.node/1) or the audit report "
        "(fleetcheck.audit/1); without NAME, or with --list, list them. The same files are "
        "in docs/schemas/.",
    )
    schema.add_argument("name", nargs="?", choices=("probe", "node", "audit"), metavar="NAME",
                        help="probe, node or audit")
    schema.add_argument("--list", action="store_true", help="list the schemas and exit")
    completion = sub.add_parser(
        "completion", help="print the shell completion script for bash or zsh",
        description="Print the completion script of SHELL, e.g. "
        "fleetcheck completion bash > /usr/share/bash-completion/completions/fleetcheck, or "
        "fleetcheck completion zsh > /usr/local/share/zsh/site-functions/_fleetcheck "
        "(scripts/install.sh does both as root).",
    )
    completion.add_argument("shell", choices=("bash", "zsh"), metavar="SHELL",
                            help="bash or zsh")
    sub.add_parser(
        "manpage", help="print the man page (roff)",
        description="Print fleetcheck's man page: fleetcheck manpage > "
        "/usr/local/share/man/man1/fleetcheck.1, or read it now: fleetcheck manpage | man -l -",
    )


def cmd_schema(args: argparse.Namespace) -> int:
    from fleetcheck.schemas import DOCUMENTS, TITLES, file_name, shipped

    if args.name is None or args.list:
        if args.name is not None:
            raise UsageError("schema: give NAME or --list, not both")
        _emit("".join(f"{name:<6} {tag:<20} {file_name(tag):<14} {TITLES[name]}\n"
                      for name, tag in DOCUMENTS.items()), None)
        return EXIT_PASS
    _emit(shipped(args.name), None)
    return EXIT_PASS


def cmd_completion(args: argparse.Namespace) -> int:
    from fleetcheck.completion import shipped

    _emit(shipped(args.shell), None)
    return EXIT_PASS


def cmd_manpage(args: argparse.Namespace) -> int:
    from fleetcheck.completion import shipped

    _emit(shipped(None), None)
    return EXIT_PASS


def _add_host_setup(sub: Any) -> None:
    """`host-setup`: the least-privilege audit key's gatekeeper for a host (docs/security.md)."""
    from fleetcheck.gatekeeper import (
        DEFAULT_AUTHORIZED_KEYS,
        DEFAULT_HASH_PATH,
        DEFAULT_HOST_PYTHON,
        DEFAULT_SCRIPT_PATH,
    )

    setup = sub.add_parser(
        "host-setup", help="restrict an audit key to running the probe (prints an installer)",
        description="Print a standard-library program that, run as root on a Proxmox host "
        "(fleetcheck host-setup --key KEY.pub | ssh root@HOST python3 -), installs the "
        "fleetcheck gatekeeper, adds this fleetcheck's probe hash to the host's allow-list and "
        "puts KEY in authorized_keys as restrict,command=\"gatekeeper\": the key can then run "
        "nothing but the audit's commands and the pinned probe. Run it again after an upgrade.",
    )
    setup.add_argument("--key", required=True, metavar="FILE",
                       help="the audit key's public key (.pub)")
    setup.add_argument("--python", default=DEFAULT_HOST_PYTHON, metavar="PATH",
                       help=f"the host's Python 3 (default: {DEFAULT_HOST_PYTHON})")
    setup.add_argument("--script-path", default=DEFAULT_SCRIPT_PATH, metavar="PATH",
                       help=f"where the gatekeeper goes (default: {DEFAULT_SCRIPT_PATH})")
    setup.add_argument("--hash-file", default=DEFAULT_HASH_PATH, metavar="PATH",
                       help=f"the probe hash allow-list (default: {DEFAULT_HASH_PATH})")
    setup.add_argument("--authorized-keys", default=DEFAULT_AUTHORIZED_KEYS, metavar="PATH",
                       help="the login's authorized_keys on the host "
                       f"(default: {DEFAULT_AUTHORIZED_KEYS})")
    setup.add_argument("--from", dest="from_patterns", metavar="PATTERNS",
                       help="also restrict the key to these client addresses (from=\"...\")")
    setup.add_argument("--log", metavar="PATH",
                       help="log to this file instead of syslog (hosts without syslog)")
    shown = setup.add_mutually_exclusive_group()
    shown.add_argument("--print-line", action="store_true",
                       help="print only the authorized_keys line")
    shown.add_argument("--print-script", action="store_true",
                       help="print only the gatekeeper script")


def cmd_host_setup(args: argparse.Namespace) -> int:
    from fleetcheck import kinds
    from fleetcheck.gatekeeper import HostSetup, read_public_key, script_source

    # script_source writes in the kinds' composed chains; the shapes a kind writes whole too.
    grammar = kinds.gatekeeper_grammar()
    setup = HostSetup(public_key=read_public_key(args.key), python=args.python,
                      script_path=args.script_path, hash_path=args.hash_file,
                      authorized_keys=args.authorized_keys, log_path=args.log,
                      from_patterns=args.from_patterns, grammar=grammar)
    if args.print_line:
        _emit(setup.key_line() + "\n", None)
    elif args.print_script:
        _emit(script_source(grammar), None)
    else:
        _emit(setup.installer(), None)
    return EXIT_PASS


def _format_for(fmt: str | None, output: str | None) -> str:
    """The format asked for, else the one `output`'s suffix names, else the table."""
    if fmt:
        return fmt
    if output and output != "-":
        from fleetcheck.render import format_for_path

        return format_for_path(output) or "table"
    return "table"


def _output_format(args: argparse.Namespace) -> str:
    return _format_for(args.format, args.output)


def _to_file(output: str | None) -> bool:
    return output not in (None, "-", "/dev/stdout")


def _silence_stdout() -> None:
    """Point stdout at /dev/null after its reader left, so the flush at exit stays quiet."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def _emit(text: str, output: str | None) -> None:
    """Print to stdout, or write FILE atomically (readable, never group/world-writable)."""
    if output is None or not _to_file(output):
        try:
            sys.stdout.write(text)
            sys.stdout.flush()
        except BrokenPipeError:
            # `fleetcheck … | head`: the reader left; the exit code must still say what was
            # found.
            _silence_stdout()
        except OSError as exc:
            # A full disk or a failing device behind `>`: said in one line, like -o FILE.
            _silence_stdout()
            raise UsageError(f"standard output: cannot write report: {exc.strerror or exc}"
                             ) from None
        return
    from fleetcheck.reportio import write_atomic

    umask = os.umask(0)
    os.umask(umask)
    try:
        write_atomic(output, text, mode=0o644 & ~umask)
    except OSError as exc:
        raise UsageError(f"{output}: cannot write report: {exc.strerror or exc}") from None


def _check_output(output: str | None) -> None:
    """Refuse an -o FILE that cannot be written, before anything is probed."""
    if output is None or not _to_file(output):
        return
    target = os.path.realpath(output)
    if os.path.isdir(target):
        raise UsageError(f"{output}: is a folder, not a file")
    if os.path.exists(target) and not os.path.isfile(target):
        return  # a device or FIFO: written to as it is
    folder = os.path.dirname(target) or "."
    if not os.path.isdir(folder):
        raise UsageError(f"{output}: folder {folder} does not exist")
    if not os.access(folder, os.W_OK):
        raise UsageError(f"{output}: folder {folder} is not writable")


def _check_history(directory: str) -> None:
    """Refuse a --history DIR that cannot hold runs, before anything is probed."""
    path = os.path.abspath(directory)
    probe = path
    while not os.path.exists(probe):
        probe = os.path.dirname(probe)
    if not os.path.isdir(probe):
        raise UsageError(f"--history {directory}: {probe} is not a folder")
    if not os.access(probe, os.W_OK):
        raise UsageError(f"--history {directory}: {probe} is not writable")


def _file_options(output: str | None) -> dict[str, Any]:
    """A table written to a file gets no colour and no terminal width limit."""
    return {"color": False, "width": 0} if _to_file(output) else {}


def _load_policy(name: str | None) -> Policy:
    from fleetcheck.playbook import load_playbook

    return load_playbook(name)


def _default_inventory() -> Inventory:
    """The embedded default: this machine only, through the local transport."""
    import socket

    from fleetcheck.spec.model import HostSpec, Inventory

    host = HostSpec(name=socket.gethostname() or "localhost", address=None, transport="local",
                    probe_host=True)
    return Inventory(path="<built-in: this machine>", hosts=(host,))


def _say(lines: Sequence[str]) -> None:
    for line in lines:
        print(f"fleetcheck: {line}", file=sys.stderr)


def _audit_request(args: argparse.Namespace, inventory: Inventory, policy: Policy,
                   limit: Sequence[str], **extra: Any) -> Any:
    from fleetcheck.commands import AuditRequest

    return AuditRequest(inventory, policy, limit=tuple(limit or ()), timeout=args.timeout,
                        parts=args.parts, **extra)


def _with_progress(enabled: bool, call: Any, request: Any) -> Any:
    """`call(request)` with a progress bar on stderr when it is a terminal and `enabled`."""
    import dataclasses

    from fleetcheck.render.progress import progress_observer

    with progress_observer(sys.stderr, enabled=enabled) as observer:
        return call(dataclasses.replace(request, observer=observer))


def cmd_audit(args: argparse.Namespace) -> int:
    from fleetcheck import commands

    keeping = _keeping(args)
    inventory = _load_inventory(args.inventory) if args.inventory else _default_inventory()
    policy = _load_policy(args.playbook)
    request = _audit_request(args, inventory, policy, args.limit, deep=args.deep,
                             history=keeping.history, on_change=keeping.on_change,
                             keep=keeping.keep)
    return _finish_run(_with_progress(not args.no_progress, commands.audit, request), args)


def cmd_gate(args: argparse.Namespace) -> int:
    from fleetcheck import commands

    if args.documents is not None:
        return _gate_documents(args)
    if args.inventory is None:
        raise UsageError("gate needs an INVENTORY, or --documents PATH with --nodes")
    if args.max_age is not None:
        raise UsageError("--max-age goes with --documents (a probe is never stale)")
    inventory = _load_inventory(args.inventory)
    policy = _load_policy(args.playbook)
    limit = args.limit
    if args.nodes is not None:
        from fleetcheck.gate import job_limit

        if args.limit:
            raise UsageError("--nodes and --limit: give one (--nodes is the job's node set)")
        limit = [job_limit(args.nodes, inventory)]
    return _finish_gate(commands.gate(_audit_request(args, inventory, policy, limit)), args)


def _gate_documents(args: argparse.Namespace) -> int:
    """`gate --documents PATH --nodes HOSTLIST`: the gate over gathered node documents."""
    from fleetcheck import commands

    if args.inventory is not None or args.limit:
        raise UsageError("--documents replaces the inventory and --limit: give --nodes only")
    if args.nodes is None:
        raise UsageError("--documents needs --nodes HOSTLIST (the job's nodes)")
    policy = _load_policy(args.playbook)
    return _finish_gate(commands.gate_documents(commands.GateDocumentsRequest(
        args.documents, args.nodes, policy, max_age_s=args.max_age)), args)


def _finish_gate(outcome: Any, args: argparse.Namespace) -> int:
    """A gate's outcome: notices, one line per blocking node, the JSON verdict, the code."""
    import json

    _say(outcome.notices)
    for line in outcome.lines:
        print(line, file=sys.stderr)
    if args.json:
        _emit(json.dumps(outcome.json(), indent=2) + "\n", None)
    if outcome.limit_error:
        _say([f"error: {outcome.limit_error}"])
    return int(outcome.exit_code)


def cmd_probe(args: argparse.Namespace) -> int:
    if args.sha256:
        if not args.script:
            raise UsageError("--sha256 goes with --script (fleetcheck probe --script --sha256)")
        from fleetcheck.gatekeeper import probe_sha256

        _emit(probe_sha256() + "\n", None)
        return EXIT_PASS
    if args.script:
        from fleetcheck.probe import probe_source

        _emit(probe_source(), None)
        return EXIT_PASS
    from fleetcheck import commands

    output = getattr(args, "output", None)
    cache = getattr(args, "cache", None)
    nfd = getattr(args, "nfd", None)
    _check_output(output)
    _check_output(cache)
    _check_output(nfd)
    policy = _load_policy(args.playbook)
    outcome = commands.probe(commands.ProbeRequest(python=args.python, deep=args.deep,
                                                   timeout=args.timeout, policy=policy))
    fmt = args.format
    if fmt is None:
        fmt = _format_for(None, output)
        fmt = fmt if fmt in ("json", "prometheus") else "table"
    if cache:
        from fleetcheck.nodehealth import cache_document

        _emit(cache_document(outcome.document, outcome.exit_code), cache)
    if nfd:
        from fleetcheck.nfd import feature_file

        _emit(feature_file(outcome.document), nfd)
    if fmt == "json":
        import json

        _emit(json.dumps(outcome.document, indent=2, ensure_ascii=False) + "\n", output)
    else:
        from fleetcheck.render import render

        _emit(render(outcome.report, fmt, **_file_options(output)), output)
    return outcome.exit_code


def _out_bound(text: str | None) -> Any:
    """--max-out's bound (outbound.OutBound), the default when not given."""
    from fleetcheck.outbound import DEFAULT_OUT_BOUND, OutBoundError, parse_out_bound

    try:
        return parse_out_bound(text if text is not None else DEFAULT_OUT_BOUND)
    except OutBoundError as exc:
        raise UsageError(f"--max-out {exc}") from None


def cmd_health(args: argparse.Namespace) -> int:
    from fleetcheck import commands

    bound = _out_bound(args.max_out) if args.slurm else None
    probe = commands.ProbeRequest()
    if not args.cache:
        probe = commands.ProbeRequest(python=args.python, timeout=args.timeout,
                                      policy=_load_policy(args.playbook))
    outcome = commands.health(commands.HealthRequest(
        cache=args.cache, max_age_s=args.max_age, probe=probe, npd=args.npd, slurm=args.slurm,
        node=args.node, drain_unverified=args.drain_unverified, bound=bound))
    _say(outcome.notices)
    _emit(outcome.line + "\n", None)
    return outcome.exit_code


def cmd_inventory(args: argparse.Namespace) -> int:
    from fleetcheck.inventory import inventory_to_json, render_inventory_graph

    inventory = _load_inventory(args.inventory)
    if args.json:
        import json

        _emit(json.dumps(inventory_to_json(inventory), indent=2) + "\n", None)
    else:
        _emit(render_inventory_graph(inventory), None)
    return EXIT_PASS


def cmd_report(args: argparse.Namespace) -> int:
    from fleetcheck.render import render
    from fleetcheck.reportio import load_report

    report = load_report(args.results)
    history: Any = ()
    failing_since: Any = {}
    if args.history:
        from fleetcheck import history as hist

        history = hist.history_summaries(args.history)
        failing_since = hist.failing_since(args.history, report)
    _emit(render(report, _output_format(args), history=history, failing_since=failing_since,
                 **_file_options(args.output)), args.output)
    return EXIT_PASS


def _keeping(args: argparse.Namespace) -> Any:
    """--history, --keep, --on-change: checked before anything is read or probed."""
    from fleetcheck.commands import Keeping

    if args.on_change and not args.history:
        raise UsageError("--on-change needs --history DIR (changes are found against the last run)")
    if args.keep is not None and not args.history:
        raise UsageError("--keep needs --history DIR (it is how many runs the history keeps)")
    _check_output(args.output)
    if args.history:
        _check_history(args.history)
    return Keeping(args.history, args.on_change, args.keep)


def _finish_run(outcome: Any, args: argparse.Namespace) -> int:
    """An audit's or a merge's outcome: notices, the report, the history kept, the code."""
    _say(outcome.notices)
    _emit(outcome.render(_output_format(args), **_file_options(args.output)), args.output)
    _say(outcome.record())
    if outcome.limit_error:
        _say([f"error: {outcome.limit_error}"])
    return int(outcome.exit_code)


def cmd_merge(args: argparse.Namespace) -> int:
    from fleetcheck import commands

    keeping = _keeping(args)
    policy = _load_policy(args.playbook)
    return _finish_run(commands.merge(commands.MergeRequest(
        args.inputs, policy, id_template=args.id_template, max_age_s=args.max_age,
        keeping=keeping)), args)


def cmd_diff(args: argparse.Namespace) -> int:
    import json

    from fleetcheck.reportio import load_report
    from fleetcheck.rundiff import diff_reports

    diff = diff_reports(load_report(args.old), load_report(args.new))
    if args.json:
        _emit(json.dumps(diff.to_dict(), indent=2, ensure_ascii=False) + "\n", None)
    else:
        _emit("".join(line + "\n" for line in diff.lines()), None)
    return EXIT_FAIL if diff.changed else EXIT_PASS


def _confirm(question: str) -> bool:
    """Ask on the terminal; anything but y/yes is no."""
    try:
        answer = input(question)
    except EOFError:
        return False
    return answer.strip().lower() in ("y", "yes")


def cmd_fix(args: argparse.Namespace) -> int:
    import dataclasses
    import json

    from fleetcheck import commands
    from fleetcheck.fix.render import render_outcomes, render_plan
    from fleetcheck.render.progress import progress_observer

    request = commands.FixRequest(
        args.source, limit=tuple(args.limit), apply=args.apply, timeout=args.timeout,
        history=args.history, parts=args.parts, load_inventory=_load_inventory)
    request.check()
    if args.apply and not args.yes and not sys.stdin.isatty():
        raise UsageError("--apply without a terminal to confirm on needs --yes "
                         "(nothing was changed)")
    _check_output(args.output)
    if args.history:
        _check_history(args.history)
    bound = _out_bound(args.max_out)
    request = dataclasses.replace(request, bound=bound, policy=_load_policy(args.playbook))
    planned = _with_progress(not args.no_progress, commands.fix_plan, request)
    _say(planned.notices)
    _emit(render_plan(planned.plan, apply=planned.applying), None)

    def write_record(record: dict[str, Any]) -> None:
        if args.output is not None:
            _emit(json.dumps(record, indent=2, ensure_ascii=False) + "\n", args.output)

    if not planned.applying:
        write_record(planned.record())
        return planned.exit_code
    if not args.yes and not _confirm(f"Run these {planned.command_count} command(s) as root "
                                     f"on {len(planned.runnable)} node(s)? [y/N] "):
        print("fleetcheck: nothing was changed", file=sys.stderr)
        write_record(planned.record())
        return planned.exit_code
    planned.request = dataclasses.replace(request, observer=None)
    with progress_observer(sys.stderr, enabled=not args.no_progress) as observer:
        outcome = commands.fix_apply(planned, observer=observer, on_record=write_record)
    _emit("\n" + render_outcomes(outcome.outcomes), None)
    _say(outcome.notices)
    return outcome.exit_code


def _load_inventory(path: str) -> Inventory:
    from fleetcheck.inventory import load_inventory

    inventory = load_inventory(path)
    for warning in inventory.warnings:
        print(f"fleetcheck: warning: {warning}", file=sys.stderr)
    return inventory


COMMANDS = {
    "audit": cmd_audit,
    "gate": cmd_gate,
    "probe": cmd_probe,
    "inventory": cmd_inventory,
    "report": cmd_report,
    "diff": cmd_diff,
    "merge": cmd_merge,
    "health": cmd_health,
    "host-setup": cmd_host_setup,
    "fix": cmd_fix,
    "schema": cmd_schema,
    "completion": cmd_completion,
    "manpage": cmd_manpage,
}


def main(argv: Sequence[str] | None = None, *, parts: Any = None) -> int:
    """The `fleetcheck` command; `parts` (an `audit.AuditParts`) lets a bench swap the
    audit's transports, probe payload or node budget without patching modules."""
    if hasattr(sys.stdout, "reconfigure"):
        # A report must be written even if a node sent text this terminal cannot encode.
        sys.stdout.reconfigure(errors="replace")
    parser = build_parser()
    args = parser.parse_args(argv)
    args.parts = parts
    if not args.command:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        return COMMANDS[args.command](args)
    except KeyboardInterrupt:
        print("fleetcheck: interrupted", file=sys.stderr)
        return 130
    except FleetcheckError as exc:
        # Every stage's own exception (fleetcheck/errors.py): one line, exit code 2.
        print(f"fleetcheck: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        # Output goes through _emit, which survives a closed pipe; anything else that meets
        # one ends as a shell reports a death by SIGPIPE, never as a pass.
        _silence_stdout()
        return 128 + 13


#: CPython's own exit status when flushing stdout fails at exit (Py_FinalizeEx).
EXIT_FLUSH_FAILED = 120


def finish(code: int) -> NoReturn:
    """End the process with `code` at once, once stdout and stderr are flushed.

    Python's own shutdown (a full garbage collection, then every module's objects freed one
    by one) took 65-90 ms after a gate of 100 nodes, a sixth of all the gate may add to the
    slowest probe (bench/results.md), and gives nothing back: every file fleetcheck writes is
    closed, and renamed into place, before `main` returns, and it registers no exit handler.
    A reader that left (`fleetcheck audit | head`) does not change the code, as in `_emit`.
    """
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        pass
    except (OSError, ValueError) as exc:
        print(f"fleetcheck: error: writing standard output: {exc}", file=sys.stderr)
        code = EXIT_FLUSH_FAILED
    try:
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    os._exit(code)


def run() -> NoReturn:
    """The `fleetcheck` command as installed (and `python -m fleetcheck`): main, then finish.

    An exception main lets through (a bug) still ends the ordinary way, with its traceback.
    """
    finish(main())
