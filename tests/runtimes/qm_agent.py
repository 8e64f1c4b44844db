"""`qm` speaking qemu-server's protocol to a real qemu-guest-agent's socket.

Installed as `<host dir>/bin/qm` of the real-runtime fleet (tests/runtimes/fleet.py). The VM
is a real QEMU process and the agent a real qemu-ga in its guest; what stands in is only qm's
Perl (no /etc/pve, no pmxcfs): configs are `<host dir>/qemu-server/VMID.conf` in Proxmox's
`key: value` format, the sockets and pidfiles /var/run/qemu-server/VMID.{qga,pid} as
qemu-server's Helpers.pm names them. Followed: src/PVE/CLI/qm.pm (`guest exec`, `list`),
src/PVE/QemuServer/Agent.pm (assert_agent_available, qemu_exec, qemu_exec_status,
check_agent_error), src/PVE/QMPClient.pm (one connection per command; `guest-sync-delimited`
with id "$$0N" then the command; the answer after the last 0xFF; "got timeout" after the
command's timeout: 3 s for guest-ping, 5 s otherwise) and Monitor.pm's die texts
(`VM N qga command 'guest-exec' failed - ...`).
"""

import base64
import json
import os
import select
import socket
import sys
import time

HOST_DIR = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
NODE = os.path.basename(HOST_DIR)
CONFIGS = os.path.join(HOST_DIR, "qemu-server")
RUN = "/var/run/qemu-server"
STDIN_LIMIT = 1024 * 1024
_SEQ = [0]


def die(message):
    sys.stderr.write(message if message.endswith("\n") else message + "\n")
    sys.stderr.flush()
    os._exit(255)


def load(vmid):
    path = os.path.join(CONFIGS, f"{vmid}.conf")
    if not vmid.isdigit() or not os.path.isfile(path):
        die(f"Configuration file 'nodes/{NODE}/qemu-server/{vmid}.conf' does not exist")
    conf = {}
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            if ":" in line and not line.startswith("#"):
                key, value = line.split(":", 1)
                conf[key.strip()] = value.strip()
    return conf


def running(vmid):
    """Helpers.pm vm_running_locally: the pidfile's process is alive and is a QEMU."""
    try:
        with open(os.path.join(RUN, f"{vmid}.pid"), encoding="utf-8") as handle:
            pid = int(handle.read().strip())
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return b"qemu" in handle.read().split(b"\0")[0]
    except (OSError, ValueError):
        return False


class Failed(Exception):
    pass


def qga(vmid, execute, arguments=None, timeout=5.0):
    """One QMPClient qga exchange: its own connection, sync-delimited, the command's answer."""
    if not running(vmid):
        raise Failed(f"VM {vmid} not running\n")
    path = os.path.join(RUN, f"{vmid}.qga")
    if not os.path.exists(path):
        raise Failed("unable to open monitor socket\n")
    _SEQ[0] += 1
    cmdid = int(f"{os.getpid()}0{_SEQ[0]}")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        try:
            sock.connect(path)
        except OSError as exc:
            raise Failed(f"VM {vmid} qga command '{execute}' failed - unable to connect to "
                         f"VM {vmid} qga socket - {exc.strerror}\n") from None
        # IO::Multiplex closes the handle on a failed write or read (a QEMU killed mid-command
        # resets it) as on EOF: QMPClient's mux_close then says "client closed connection".
        closed = Failed(f"VM {vmid} qga command '{execute}' failed - client closed "
                        "connection\n")
        try:
            sock.sendall((json.dumps({"execute": "guest-sync-delimited",
                                      "arguments": {"id": cmdid}}) + "\n"
                          + json.dumps({"execute": execute, "arguments": arguments or {}})
                          + "\n").encode())
        except OSError:
            raise closed from None
        buffer = b""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([sock], [], [], left)[0]:
                raise Failed(f"VM {vmid} qga command '{execute}' failed - got timeout\n")
            try:
                chunk = sock.recv(65536)
            except OSError:
                raise closed from None
            if not chunk:
                raise closed
            buffer += chunk
            if b"\xff" not in buffer:
                continue
            tail = buffer[buffer.rindex(b"\xff") + 1:]
            lines = tail.split(b"\n")
            if len(lines) < 3:  # two complete lines after the last 0xFF
                continue
            sync, answer = json.loads(lines[0]), json.loads(lines[1])
            got = sync.get("return")
            if not got:
                raise Failed(f"VM {vmid} qga command '{execute}' failed - received response "
                             "without command id\n")
            if got < cmdid:
                buffer = b""
                continue
            if got != cmdid:
                raise Failed(f"VM {vmid} qga command '{execute}' failed - got wrong command "
                             f"id '{got}' (expected {cmdid})\n")
            if "return" in answer:
                return answer["return"]
            return {"error": answer.get("error")}
    finally:
        sock.close()


def agent_cmd(vmid, conf, command, arguments, errmsg):
    """Agent.pm agent_cmd: assert_agent_available, the command, check_agent_error."""
    if "agent" not in conf:
        die("No QEMU guest agent configured")
    if not running(vmid):
        die(f"VM {vmid} is not running")
    try:
        qga(vmid, "guest-ping", timeout=3)
    except Failed:
        die("QEMU guest agent is not running")
    try:
        result = qga(vmid, f"guest-{command}", arguments)
    except Failed as exc:
        die(str(exc))
    if isinstance(result, dict) and isinstance(result.get("error"), dict) \
            and result["error"].get("desc"):
        die(f"Agent error: {result['error']['desc']}")
    if result is None:
        die(f"Agent error: {errmsg}")
    return result


def perl_pretty(data):
    """JSON->new->pretty->canonical->utf8 of a flat hash (3-space indent, `"k" : v`)."""
    lines = []
    for key in sorted(data):
        value = data[key]
        shown = json.dumps(value, ensure_ascii=False) if isinstance(value, str) else str(value)
        lines.append(f'   "{key}" : {shown}')
    return "{\n" + ",\n".join(lines) + "\n}\n"


def parse_exec(args):
    vmid, pass_stdin, timeout, command = None, False, 30, []
    index = 0
    while index < len(args):
        arg = args[index]
        if arg == "--":
            command += args[index + 1:]
            break
        if arg.lstrip("-") in ("pass-stdin", "timeout", "synchronous"):
            value = args[index + 1] if index + 1 < len(args) else ""
            if arg.lstrip("-") == "pass-stdin":
                pass_stdin = value not in ("0", "false", "no")
            elif arg.lstrip("-") == "timeout":
                timeout = int(value)
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
    conf = load(vmid)
    arguments = {"capture-output": True}
    if command:
        arguments["path"] = command[0]
        arguments["arg"] = command[1:]
    if data is not None:
        arguments["input-data"] = base64.b64encode(data).decode()
    if "input-data" not in arguments and "path" not in arguments:
        die("command or input-data (or both) required")
    res = agent_cmd(vmid, conf, "exec", arguments, "can't execute command")
    pid = res.get("pid")
    started = time.time()
    while timeout == 0 or time.time() - started < timeout:
        out = agent_cmd(vmid, conf, "exec-status", {"pid": pid},
                        f"can't get exec status for '{pid}'")
        if out.get("exited"):
            res = out
            break
        time.sleep(1)
    if not res.get("exited"):
        sys.stderr.write("timeout reached, returning pid\n")
    for key in ("out-data", "err-data"):
        if res.get(key):
            res[key] = base64.b64decode(res[key]).decode("latin-1")
    res = {key: (int(value) if isinstance(value, bool) else value)
           for key, value in res.items()}
    sys.stdout.buffer.write(perl_pretty(res).encode("utf-8"))
    return 0


def cmd_list():
    vmids = sorted((name[:-5] for name in os.listdir(CONFIGS) if name.endswith(".conf")
                    and name[:-5].isdigit()), key=int) if os.path.isdir(CONFIGS) else []
    if not vmids:
        return 0
    out = ["%10s %-20s %-10s %-10s %12s %-10s\n" % (  # noqa: UP031 - qm.pm's printf
        "VMID", "NAME", "STATUS", "MEM(MB)", "BOOTDISK(GB)", "PID")]
    for vmid in vmids:
        conf = load(vmid)
        pid = 0
        if running(vmid):
            with open(os.path.join(RUN, f"{vmid}.pid"), encoding="utf-8") as handle:
                pid = int(handle.read().strip())
        out.append("%10s %-20s %-10s %-10s %12.2f %-10s\n" % (  # noqa: UP031
            vmid, conf.get("name", f"VM {vmid}"), "running" if pid else "stopped",
            conf.get("memory", "512"), 0.0, pid))
    sys.stdout.write("".join(out))
    return 0


def main(argv):
    # What ran, for the tests (`<host dir>/calls.log`, one line a call).
    with open(os.path.join(HOST_DIR, "calls.log"), "a", encoding="utf-8") as log:
        log.write(" ".join(["qm", *argv]) + "\n")
    if os.geteuid() != 0:
        die("please run as root")
    if not argv:
        die("ERROR: no command specified")
    if argv[0] == "list":
        return cmd_list()
    if argv[:2] == ["guest", "exec"]:
        return cmd_guest_exec(argv[2:])
    die(f"ERROR: unknown command 'qm {' '.join(argv[:2])}'")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
