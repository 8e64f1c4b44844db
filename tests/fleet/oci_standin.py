"""`docker` and `podman` stand-ins for the test fleet: their CLI texts and exit codes.

Installed as `bin/docker` or `bin/podman` of a host, an LXC container or a VM dir (the
runtime is the file's name); that dir's `oci/<runtime>/<name>/config.json` are its containers:
{"state": "running"|"exited"|"paused"|"created", "env": {...}, "id": 64 hex}. Texts and codes
follow docker/cli + moby (daemon refusals on stderr as `Error response from daemon: ...`,
exit 1; the OCI start failure written to the exec's STDOUT with `\\r\\n`, exit 127/126) and
podman (`Error: ...` on stderr; 125 no such container, 127 not found, 126 cannot invoke, 255
for a container that is not running). `exec -i` replaces this process with the command in
the container's environment (+ `--env`), so stdin, stdout and the exit code pass straight
through; `--user` switches to that uid (the stand-in runs as root). docker's
`ps [-a] --format '{{json .}}'` prints one compact JSON object a line (`Names` a string),
podman's `ps [-a] --format json` one indented array (`Names` an array), as the real ones do;
without `-a` only running and paused ones. A file `oci/<runtime>/ps-extra` is appended to
`ps` (odd lines).
"""

import json
import os
import pwd
import sys

RUNTIME = os.path.basename(sys.argv[0])
PARENT_DIR = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
STORE = os.path.join(PARENT_DIR, "oci", RUNTIME)


def fail(message, code, stream=None):
    (stream or sys.stderr).write(message)
    (stream or sys.stderr).flush()
    os._exit(code)


def load(name):
    try:
        with open(os.path.join(STORE, name, "config.json"), encoding="utf-8") as handle:
            return json.load(handle)
    except (FileNotFoundError, NotADirectoryError):
        return None


def cmd_ps(args):
    every = "-a" in args or "--all" in args
    args = [arg for arg in args if arg not in ("-a", "--all")]
    wanted = ["--format", "json"] if RUNTIME == "podman" else ["--format", "{{json .}}"]
    if args != wanted:
        fail(f"{RUNTIME} ps: this stand-in knows only [-a] {' '.join(wanted)}\n", 125)
    names = sorted(os.listdir(STORE)) if os.path.isdir(STORE) else []
    rows = []
    for name in names:
        config = load(name)
        if config is None:
            continue
        state = config.get("state", "running")
        if not every and state not in ("running", "paused"):
            continue
        cid = config.get("id", "0" * 64)
        up = "Up 2 hours" + (" (Paused)" if state == "paused" else "")
        status = up if state in ("running", "paused") else "Exited (137) 5 minutes ago"
        if state == "created":
            status = "Created"
        if RUNTIME == "docker":
            # docker/cli 20.10-28 `{{json .}}` of formatter.ContainerContext (the real one's
            # keys: tests/runtimes/test_standins_pinned.py).
            rows.append({"Command": '"sleep infinity"', "CreatedAt":
                         "2026-01-02 15:04:05 +0000 UTC", "ID": cid[:12],
                         "Image": "python:3.12-slim", "Labels": "", "LocalVolumes": "0",
                         "Mounts": "", "Names": name, "Networks": "bridge", "Platform": None,
                         "Ports": "", "RunningFor": "2 hours ago", "Size": "0B",
                         "State": state, "Status": status})
        else:
            # podman's entities.ListContainer as `ps --format json` prints it.
            rows.append({"AutoRemove": False, "Command": ["sleep", "infinity"],
                         "CreatedAt": "2 hours ago", "Exited": state not in (
                             "running", "paused", "created"), "ExitedAt": 0, "ExitCode": 0,
                         "Id": cid, "Image": "docker.io/library/python:3.12-slim",
                         "ImageID": "", "IsInfra": False, "Labels": None, "Mounts": [],
                         "Names": [name], "Namespaces": {}, "Networks": [], "Pid": 0,
                         "Pod": "", "PodName": "", "Ports": None, "Size": None,
                         "StartedAt": 0, "State": state, "Status": status, "Created": 0})
    if RUNTIME == "docker":
        text = "".join(json.dumps(row, separators=(",", ":"), sort_keys=True) + "\n"
                       for row in rows)
    else:
        # json.MarshalIndent(rows, "", "  "): one array over many lines; `[]` when none.
        text = json.dumps(rows, indent=2) + "\n"
    extra = os.path.join(STORE, "ps-extra")
    if os.path.exists(extra):
        with open(extra, encoding="utf-8") as handle:
            text += handle.read()
    sys.stdout.write(text)
    return 0


def parse_exec(args):
    interactive, user, env = False, None, {}
    index = 0
    while index < len(args) and args[index].startswith("-"):
        arg = args[index]
        if arg in ("-i", "--interactive"):
            interactive = True
        elif arg in ("-t", "--tty"):
            fail("the input device is not a TTY\n", 1)
        elif arg in ("-u", "--user"):
            index += 1
            user = args[index]
        elif arg in ("-e", "--env"):
            index += 1
            key, _, value = args[index].partition("=")
            env[key] = value
        else:
            fail(f"unknown flag: {arg}\n", 125)
        index += 1
    rest = args[index:]
    if len(rest) < 2:
        fail(f"\"{RUNTIME} exec\" requires at least 2 arguments.\n", 1 if RUNTIME == "docker"
             else 125)
    return interactive, user, env, rest[0], rest[1:]


def not_found(command, container):
    if RUNTIME == "docker":
        fail("OCI runtime exec failed: exec failed: unable to start container process: exec: "
             f"\"{command}\": executable file not found in $PATH: unknown\r\n", 127, sys.stdout)
    fail(f"Error: crun: executable file `{command}` not found in $PATH: No such file or "
         "directory: OCI runtime attempted to invoke a command that was not found\n", 127)


def cmd_exec(args):
    interactive, user, extra_env, name, command = parse_exec(args)
    config = load(name)
    if config is None:
        if RUNTIME == "docker":
            fail(f"Error response from daemon: No such container: {name}\n", 1)
        fail(f"Error: no container with name or ID \"{name}\" found: no such container\n", 125)
    state = config.get("state", "running")
    cid = config.get("id", "0" * 64)
    if state == "paused" and RUNTIME == "docker":
        fail(f"Error response from daemon: Container {name} is paused, unpause the container "
             "before exec\n", 1)
    if state != "running":
        if RUNTIME == "docker":
            fail(f"Error response from daemon: Container {cid} is not running\n", 1)
        fail("Error: can only create exec sessions on running containers: container state "
             "improper\n", 255)
    env = dict(config.get("env", {}))
    env.update(extra_env)
    if not interactive:
        # Without -i the command's stdin is empty: the probe would read nothing.
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
    root = os.path.join(STORE, name, "root")
    if os.path.isdir(root):
        os.chdir(root)
    path = env.get("PATH", "/usr/local/bin:/usr/bin:/bin")
    program = command[0]
    if "/" not in program:
        for folder in path.split(":"):
            candidate = os.path.join(folder, program)
            if os.access(candidate, os.X_OK) and not os.path.isdir(candidate):
                program = candidate
                break
        else:
            not_found(command[0], name)
    if user is not None:
        # Resolved as root above; the user only needs to be able to run the binary.
        program = os.path.realpath(program)
        uid_text, _, gid_text = user.partition(":")
        try:
            uid = int(uid_text) if uid_text.isdigit() else pwd.getpwnam(uid_text).pw_uid
        except KeyError:
            message = (f"unable to find user {uid_text}: no matching entries in passwd file")
            if RUNTIME == "docker":
                fail(f"OCI runtime exec failed: exec failed: {message}: unknown\r\n", 126,
                     sys.stdout)
            fail(f"Error: {message}\n", 126)
        gid = int(gid_text) if gid_text.isdigit() else uid
        os.setgid(gid)
        os.setuid(uid)
    try:
        os.execve(program, command, env)
    except FileNotFoundError:
        not_found(command[0], name)
    except OSError as exc:
        if RUNTIME == "docker":
            fail("OCI runtime exec failed: exec failed: unable to start container process: exec: "
                 f"\"{command[0]}\": {os.strerror(exc.errno)}: unknown\r\n", 126, sys.stdout)
        fail(f"Error: crun: {command[0]}: {os.strerror(exc.errno)}: OCI permission denied\n",
             126)


def main(argv):
    if not argv:
        fail(f"Usage:  {RUNTIME} [OPTIONS] COMMAND\n", 1 if RUNTIME == "docker" else 125)
    if os.path.exists(os.path.join(STORE, "daemon-down")) and RUNTIME == "docker":
        fail("Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the "
             "docker daemon running?\n", 1)
    if argv[0] == "ps":
        return cmd_ps(argv[1:])
    if argv[0] == "exec":
        return cmd_exec(argv[1:])
    fail(f"{RUNTIME}: '{argv[0]}' is not a {RUNTIME} command.\n", 1 if RUNTIME == "docker"
         else 125)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
