"""A `pct` stand-in for the test fleet: pct's CLI shapes and error texts, containers as dirs.

Installed as `<host dir>/bin/pct` (shebang to the test interpreter) and found on the SSH
session's PATH. Each container is `<host dir>/containers/<vmid>/config.json`:
{"name": ..., "status": "running"|"stopped", "lock": "", "env": {...}}. `exec` replaces the
host's environment with the container's and execs the command (as lxc-attach does, so stdin,
stdout and the exit code pass straight through). Texts follow src/PVE/CLI/pct.pm,
pve-common (RESTEnvironment) and pve-guest-common (AbstractConfig).
"""

import errno
import json
import os
import sys

HOST_DIR = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
NODE = os.path.basename(HOST_DIR)
CONTAINERS = os.path.join(HOST_DIR, "containers")
# What pct's run_cli_handler forces before exec (the host side of `pct exec`).
PCT_PATH = "/sbin:/bin:/usr/sbin:/usr/bin"
# What lxc-attach --clear-env sets in the container (lxc's attach.c).
LXC_ATTACH_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def die(message):
    # Perl's die with $! == 0 exits 255.
    sys.stderr.write(message + "\n")
    sys.stderr.flush()
    os._exit(255)


def load(vmid):
    path = os.path.join(CONTAINERS, vmid, "config.json")
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except FileNotFoundError:
        die(f"Configuration file 'nodes/{NODE}/lxc/{vmid}.conf' does not exist")


def cmd_list():
    vmids = sorted(int(d) for d in os.listdir(CONTAINERS) if d.isdigit()) if os.path.isdir(
        CONTAINERS) else []
    if not vmids:
        return 0
    rows = [("VMID", "Status", "Lock", "Name")]
    for vmid in vmids:
        config = load(str(vmid))
        rows.append((str(vmid), config.get("status", "running"), config.get("lock", ""),
                     config.get("name") or f"CT{vmid}"))
    # pct's printf "%-10s %-10s %-12s %-20s\n"
    sys.stdout.write("".join(f"{a:<10} {b:<10} {c:<12} {d:<20}\n" for a, b, c, d in rows))
    # Lines a test wants pct list to print after the rows (odd lines for discovery tests).
    extra = os.path.join(HOST_DIR, "pct-list-extra")
    if os.path.exists(extra):
        with open(extra, encoding="utf-8") as handle:
            sys.stdout.write(handle.read())
    return 0


def cmd_status(args):
    if not args:
        die("400 not enough arguments\npct status <vmid> [OPTIONS]")
    config = load(args[0])
    sys.stdout.write(f"status: {config.get('status', 'running')}\n")
    return 0


def cmd_exec(args):
    if not args:
        die("400 not enough arguments\npct exec <vmid> [<extra-args>] [OPTIONS]")
    vmid, rest = args[0], args[1:]
    keep_env = True
    while rest and rest[0] != "--" and rest[0].startswith("--keep-env"):
        if "=" in rest[0]:
            value, rest = rest[0].split("=", 1)[1], rest[1:]
        else:
            value, rest = (rest[1] if len(rest) > 1 else ""), rest[2:]
        keep_env = value not in ("0", "false", "no")
    if rest and rest[0] == "--":
        rest = rest[1:]
    config = load(vmid)
    if config.get("status", "running") != "running":
        die(f"container '{vmid}' not running!")
    if not rest:
        die("missing command")
    # lxc-attach --clear-env: its own PATH and container=lxc (LXC 5.0, checked against the real
    # one in tests/runtimes/test_standins_pinned.py); the container's env below comes on top.
    env = {"container": "lxc", "PATH": LXC_ATTACH_PATH}
    if keep_env:
        env.update(os.environ)
        env["PATH"] = PCT_PATH
    env.update(config.get("env", {}))
    root = os.path.join(CONTAINERS, vmid, "root")
    if os.path.isdir(root):
        os.chdir(root)
    try:
        os.execvpe(rest[0], rest, env)
    except OSError as exc:
        # lxc_attach_run_command: ENOENT -> 127, ENOEXEC/EACCES -> 126.
        code = 127 if exc.errno == errno.ENOENT else 126
        sys.stderr.write(f"lxc-attach: {vmid}: ../src/lxc/attach.c: lxc_attach_run_command: "
                         f"1841 {os.strerror(exc.errno)} - Failed to exec \"{rest[0]}\"\n")
        sys.stderr.flush()
        os._exit(code)


def main(argv):
    if os.geteuid() != 0:
        die("please run as root")
    if not argv:
        die("ERROR: no command specified")
    command, args = argv[0], argv[1:]
    if command == "list":
        return cmd_list()
    if command == "status":
        return cmd_status(args)
    if command == "exec":
        return cmd_exec(args)
    die(f"ERROR: unknown command 'pct {command}'")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
