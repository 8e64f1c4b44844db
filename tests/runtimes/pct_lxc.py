"""`pct` over the real LXC tools: what pve-container's pct does, without its Perl and /etc/pve.

Installed as `<host dir>/bin/pct` of the real-runtime fleet (tests/runtimes/fleet.py), with
the test interpreter as its shebang. The containers are real LXC containers in
/var/lib/lxc/VMID (the fleet's private mount namespace); only the Perl around the lxc tools
is stood in for, following src/PVE/CLI/pct.pm and src/PVE/LXC.pm:

- `pct exec VMID [--keep-env BOOL] -- CMD...`: the config must exist (`Configuration file
  'nodes/NODE/lxc/VMID.conf' does not exist`), the container must be running as
  PVE::LXC::check_running sees it (its monitor's abstract socket `@/var/lib/lxc/VMID/command`
  in /proc/net/unix), else `container 'VMID' not running!`; SSL_CERT_FILE/SSL_CERT_DIR are
  dropped (clean_environment), then `exec lxc-attach -n VMID --keep-env|--clear-env -- CMD`.
  keep-env defaults to 1 (PVE 8). Everything after that (the environment, stdin, the exit
  code, lxc-attach's own errors) is the real lxc-attach's.
- `pct status VMID`: `status: running|stopped`, as check_running sees it.
- `pct list`: pct.pm's `%-10s %-10s %-12s %-20s` table of VMID, status, lock, name (the
  config's hostname, lxc.uts.name here), sorted by VMID, nothing when there are none.
- Perl's `die` exits 255 with its text on stderr.
"""

import os
import re
import sys

HOST_DIR = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
NODE = os.path.basename(HOST_DIR)
LXC_PATH = "/var/lib/lxc"


def die(message):
    sys.stderr.write(message + "\n")
    sys.stderr.flush()
    os._exit(255)


def config_path(vmid):
    return os.path.join(LXC_PATH, vmid, "config")


def load(vmid):
    if not vmid.isdigit() or not os.path.isfile(config_path(vmid)):
        die(f"Configuration file 'nodes/{NODE}/lxc/{vmid}.conf' does not exist")
    with open(config_path(vmid), encoding="utf-8") as handle:
        return handle.read()


def lxcpath():
    """The LXC tools' lxcpath (/etc/lxc/lxc.conf's lxc.lxcpath; PVE's is /var/lib/lxc)."""
    try:
        with open("/etc/lxc/lxc.conf", encoding="utf-8") as handle:
            for line in handle:
                key, _, value = line.partition("=")
                if key.strip() == "lxc.lxcpath":
                    return value.strip().rstrip("/")
    except OSError:
        pass
    return LXC_PATH


def active():
    """PVE::LXC::list_active_containers: the VMIDs whose monitor socket is listening
    (`@LXCPATH/VMID/command`; the real-runtime fleet's lxcpath is its own folder)."""
    found = set()
    pattern = re.compile(r"\s@" + re.escape(lxcpath()) + r"/(\d+)/command$")
    with open("/proc/net/unix", encoding="utf-8") as handle:
        for line in handle:
            match = pattern.search(line.rstrip("\n"))
            if match:
                found.add(match.group(1))
    return found


def cmd_list():
    vmids = sorted((d for d in os.listdir(LXC_PATH) if d.isdigit()
                    and os.path.isfile(config_path(d))), key=int)
    if not vmids:
        return 0
    running = active()
    out = ["%-10s %-10s %-12s %-20s\n" % ("VMID", "Status", "Lock", "Name")]  # noqa: UP031
    for vmid in vmids:
        match = re.search(r"^lxc\.uts\.name\s*=\s*(\S+)", load(vmid), re.M)
        out.append("%-10s %-10s %-12s %-20s\n" % (  # noqa: UP031 - pct.pm's printf
            vmid, "running" if vmid in running else "stopped", "",
            match.group(1) if match else f"CT{vmid}"))
    sys.stdout.write("".join(out))
    return 0


def cmd_status(args):
    """pct.pm's `status`: `status: running|stopped` of one container."""
    if not args:
        die("400 not enough arguments\npct status <vmid> [OPTIONS]")
    load(args[0])
    sys.stdout.write("status: %s\n" % ("running" if args[0] in active() else "stopped"))
    return 0


def cmd_exec(args):
    if not args:
        die("400 not enough arguments\npct exec <vmid> [<extra-args>] [OPTIONS]")
    vmid, rest, keep_env = None, [], True
    index = 0
    while index < len(args):  # Getopt in permute mode; `--` ends the options
        arg = args[index]
        if arg == "--":
            rest += args[index + 1:]
            break
        if arg.startswith("--keep-env") or arg.startswith("-keep-env"):
            if "=" in arg:
                value = arg.split("=", 1)[1]
            else:
                index += 1
                value = args[index] if index < len(args) else ""
            keep_env = value not in ("0", "false", "no", "off")
        elif vmid is None:
            vmid = arg
        else:
            rest.append(arg)
        index += 1
    load(vmid or "")
    if vmid not in active():
        die(f"container '{vmid}' not running!")
    if not rest:
        die("missing command")
    for name in ("SSL_CERT_FILE", "SSL_CERT_DIR"):
        os.environ.pop(name, None)
    argv = ["lxc-attach", "-n", vmid, "--keep-env" if keep_env else "--clear-env", "--", *rest]
    os.execvp(argv[0], argv)


def main(argv):
    # What ran, for the tests (`<host dir>/calls.log`, one line a call).
    with open(os.path.join(HOST_DIR, "calls.log"), "a", encoding="utf-8") as log:
        log.write(" ".join(["pct", *argv]) + "\n")
    if os.geteuid() != 0:
        die("please run as root")
    if not argv:
        die("ERROR: no command specified")
    if argv[0] == "list":
        return cmd_list()
    if argv[0] == "exec":
        return cmd_exec(argv[1:])
    if argv[0] == "status":
        return cmd_status(argv[1:])
    die(f"ERROR: unknown command 'pct {argv[0]}'")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
