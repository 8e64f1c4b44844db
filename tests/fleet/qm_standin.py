"""A `qm` stand-in for the test fleet: qemu-server's CLI texts, JSON and exit codes, VMs as dirs.

Installed as `<host dir>/bin/qm`. Each VM is `<host dir>/vms/<vmid>/config.json`:
{"name", "status": "running"|"stopped", "agent": "on"|"off"|"none", "env": {...},
"template": bool}. "none" is a VM without `agent:` in its config; "off" one whose agent does
not answer. `guest exec` follows qemu-server's src/PVE/CLI/qm.pm and Agent.pm:

- `--pass-stdin` reads stdin to EOF first; more than 1 MiB dies with
  `'input-data' (STDIN) is limited to 1 MiB, aborting`; then the config is loaded;
- the guest process runs with the VM's environment only (no login: HOME unset unless the VM
  sets it), its stdout and stderr captured up to 16 MiB each (QGA's GUEST_EXEC_MAX_OUTPUT,
  cut silently but for `out-truncated`/`err-truncated`, 0 or 1 beside each data key);
- a command the agent cannot start is qm's `Agent error: Guest agent command failed, error
  was 'Failed to execute child process “CMD” (...)'` (QMPClient returns the agent's error,
  Agent.pm's check_agent_error dies with it);
- qm polls once a second up to `--timeout` (default 30); on expiry it warns `timeout reached,
  returning pid` and prints `{"pid": N}`, leaving the guest process running (no kill);
- output is JSON::XS pretty (3-space indent, `"key" : value`, sorted keys), with out-data and
  err-data decoded (each byte one character, UTF-8 encoded), and qm exits 0 whatever the
  guest's exit code; every die exits 255 with its text on stderr.

`list` prints qm.pm's `%10s %-20s %-10s %-10s %12.2f %-10s` table. A file `<host dir>/
qm-list-extra` is appended verbatim to `list` (to test odd lines).
"""

import json
import os
import subprocess
import sys
import tempfile
import time

HOST_DIR = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
NODE = os.path.basename(HOST_DIR)
VMS = os.path.join(HOST_DIR, "vms")
STDIN_LIMIT = 1024 * 1024
OUTPUT_CAP = 16 * 1024 * 1024


def die(message):
    sys.stderr.write(message + "\n")
    sys.stderr.flush()
    os._exit(255)


def load(vmid):
    try:
        with open(os.path.join(VMS, vmid, "config.json"), encoding="utf-8") as handle:
            return json.load(handle)
    except (FileNotFoundError, NotADirectoryError):
        die(f"Configuration file 'nodes/{NODE}/qemu-server/{vmid}.conf' does not exist")


def perl_pretty(data):
    """JSON::XS->new->pretty->canonical->utf8 of a flat hash."""
    lines = []
    for key in sorted(data):
        value = data[key]
        shown = json.dumps(value, ensure_ascii=False) if isinstance(value, str) else str(value)
        lines.append(f'   "{key}" : {shown}')
    return "{\n" + ",\n".join(lines) + "\n}\n"


def cmd_list():
    vmids = sorted(int(d) for d in os.listdir(VMS) if d.isdigit()) if os.path.isdir(VMS) else []
    extra = os.path.join(HOST_DIR, "qm-list-extra")
    if not vmids and not os.path.exists(extra):
        return 0
    out = ["%10s %-20s %-10s %-10s %12s %-10s\n" % (  # noqa: UP031 - qm.pm's printf
        "VMID", "NAME", "STATUS", "MEM(MB)", "BOOTDISK(GB)", "PID")]
    for vmid in vmids:
        config = load(str(vmid))
        running = config.get("status", "running") == "running"
        out.append("%10s %-20s %-10s %-10s %12.2f %-10s\n" % (  # noqa: UP031
            vmid, config.get("name") or f"VM {vmid}", config.get("status", "running"),
            "8192", 32.0, 4242 + vmid if running else 0))
    if os.path.exists(extra):
        with open(extra, encoding="utf-8") as handle:
            out.append(handle.read())
    sys.stdout.write("".join(out))
    return 0


def parse_exec(args):
    """vmid, pass_stdin, timeout, command from qm's Getopt (permute; `--` ends options)."""
    vmid, pass_stdin, timeout, command = None, False, 30, []
    index = 0
    while index < len(args):
        arg = args[index]
        if arg == "--":
            command = args[index + 1:]
            break
        if arg in ("--pass-stdin", "-pass-stdin"):
            value = args[index + 1] if index + 1 < len(args) else "1"
            pass_stdin = value not in ("0", "false", "no")
            index += 2
            continue
        if arg in ("--timeout", "-timeout"):
            timeout = int(args[index + 1])
            index += 2
            continue
        if arg.startswith("-"):
            sys.stderr.write(f"Unknown option: {arg.lstrip('-')}\n")
            die("400 unable to parse option")
        if vmid is None:
            vmid = arg
        else:
            command.append(arg)
        index += 1
    return vmid, pass_stdin, timeout, command


def cmd_guest_exec(args):
    vmid, pass_stdin, timeout, command = parse_exec(args)
    if vmid is None:
        die("400 not enough arguments\nqm guest exec <vmid> [<extra-args>] [OPTIONS]")
    data = None
    if pass_stdin:
        data = b""
        for line in sys.stdin.buffer:
            data += line
            if len(data) > STDIN_LIMIT:
                die("'input-data' (STDIN) is limited to 1 MiB, aborting")
    config = load(vmid)
    if not command and data is None:
        die("command or input-data (or both) required")
    agent = config.get("agent", "on")
    if agent == "none":
        die("No QEMU guest agent configured")
    if config.get("status", "running") != "running":
        die(f"VM {vmid} is not running")
    if agent != "on":
        die("QEMU guest agent is not running")
    env = dict(config.get("env", {}))
    outputs = [tempfile.TemporaryFile(), tempfile.TemporaryFile()]
    try:
        proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=outputs[0],
                                stderr=outputs[1], env=env, cwd=config.get("cwd") or "/",
                                start_new_session=True)
    except OSError as exc:
        # QMPClient hands the agent's error back as {error => ...}; Agent.pm's
        # check_agent_error dies with its desc (as qemu-ga 7.2 words a failed spawn).
        die(f"Agent error: Guest agent command failed, error was "
            f"'Failed to execute child process \u201c{command[0]}\u201d "
            f"({os.strerror(exc.errno or 2)})'")
    try:
        proc.stdin.write(data or b"")
        proc.stdin.close()
    except BrokenPipeError:
        pass
    started = time.time()
    while timeout == 0 or time.time() - started < timeout:
        if proc.poll() is not None:
            break
        time.sleep(1)  # qm's `sleep 1` between exec-status calls
    if proc.poll() is None:
        sys.stderr.write("timeout reached, returning pid\n")
        sys.stdout.write(perl_pretty({"pid": proc.pid}))
        return 0
    result = {"exited": 1}
    if proc.returncode < 0:
        result["signal"] = -proc.returncode
    else:
        result["exitcode"] = proc.returncode
    for handle, key in zip(outputs, ("out", "err"), strict=True):
        handle.seek(0)
        captured = handle.read(OUTPUT_CAP + 1)
        if captured:
            # qemu-ga sets X-truncated beside every X-data it sends (0 or 1).
            result[f"{key}-data"] = captured[:OUTPUT_CAP].decode("latin-1")
            result[f"{key}-truncated"] = int(len(captured) > OUTPUT_CAP)
    sys.stdout.buffer.write(perl_pretty(result).encode("utf-8"))
    return 0


def main(argv):
    if not argv:
        die("ERROR: no command specified")
    if argv[0] == "list":
        return cmd_list()
    if argv[:2] == ["guest", "exec"]:
        return cmd_guest_exec(argv[2:])
    die(f"ERROR: unknown command 'qm {' '.join(argv[:2])}'")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
