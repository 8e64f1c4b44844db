"""An `apt-get` stand-in for the test fleet: apt's texts, streams and exit codes, a real lock.

Installed as `<container>/bin/apt-get` (shebang to the test interpreter), on the container's
PATH. Its state is `<container>/packages.json`:
{"node_bin": DIR, "installed": {name: version}, "repo": {name: {"version", "size_kb",
"links": {tool: target}}}, "network": true, "root": true, "delay": 0}. Every call is
appended to `<container>/apt-get.log` (one JSON argv a line). `delay` seconds pass, lock
held, before an install starts downloading (a slow mirror). Installing a package really
links its tools (e.g. gcc -> the machine's gcc) into the node's PATH, so the next probe sees
them. `<container>/var/lib/dpkg/lock-frontend` is taken with fcntl as dpkg does: a process
holding it makes `install` fail as apt does, naming the holder. Texts from apt 2.6.1
(apt-private/private-install.cc, apt-pkg/cacheset.cc, apt-pkg/contrib/fileutl.cc,
apt-pkg/deb/debsystem.cc); `E:` and `W:` lines on stderr, the rest on stdout; every error
exits 100.
"""

import fcntl
import json
import os
import struct
import sys
import time

HERE = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
STATE = os.path.join(HERE, "packages.json")
LOCK = os.path.join(HERE, "var", "lib", "dpkg", "lock-frontend")
MIRROR = "http://deb.debian.org/debian"


def out(text):
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def err(text):
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


def load():
    with open(STATE, encoding="utf-8") as handle:
        return json.load(handle)


def save(state):
    tmp = STATE + ".tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(state, handle, indent=1)
    os.replace(tmp, STATE)


def lock_holder(fd):
    """(pid, name) of the process holding the lock (F_GETLK), as apt's GetLock reports it."""
    query = struct.pack("hhqqi4x", fcntl.F_WRLCK, 0, 0, 0, 0)
    answer = fcntl.fcntl(fd, fcntl.F_GETLK, query)
    pid = struct.unpack("hhqqi4x", answer)[4]
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8") as handle:
            name = handle.read().strip()
    except OSError:
        name = ""
    return pid, name


def take_lock(state):
    """The frontend lock as debsystem.cc takes it; exits 100 with apt's texts when it cannot."""
    if not state.get("root", True):
        err("E: Could not open lock file /var/lib/dpkg/lock-frontend - open "
            "(13: Permission denied)")
        err("E: Unable to acquire the dpkg frontend lock (/var/lib/dpkg/lock-frontend), "
            "are you root?")
        sys.exit(100)
    os.makedirs(os.path.dirname(LOCK), exist_ok=True)
    fd = os.open(LOCK, os.O_RDWR | os.O_CREAT, 0o640)
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        pid, name = lock_holder(fd)
        holder = f"{pid} ({name})" if name else str(pid)
        err(f"E: Could not get lock /var/lib/dpkg/lock-frontend. It is held by process {holder}")
        err("E: Unable to acquire the dpkg frontend lock (/var/lib/dpkg/lock-frontend), "
            "is another process using it?")
        sys.exit(100)
    return fd


def update(state):
    if not state.get("network", True):
        for _ in range(3):
            out(f"Ign:1 {MIRROR} bookworm InRelease")
        out(f"Err:1 {MIRROR} bookworm InRelease")
        out("  Temporary failure resolving 'deb.debian.org'")
        out("Reading package lists...")
        err(f"W: Failed to fetch {MIRROR}/dists/bookworm/InRelease  Temporary failure "
            "resolving 'deb.debian.org'")
        err("W: Some index files failed to download. They have been ignored, or old ones "
            "used instead.")
        return 0
    out(f"Hit:1 {MIRROR} bookworm InRelease")
    out("Reading package lists...")
    return 0


def install(state, names):
    take_lock(state)
    if state.get("delay"):
        time.sleep(state["delay"])
    out("Reading package lists...")
    out("Building dependency tree...")
    out("Reading state information...")
    repo, installed = state["repo"], state["installed"]
    missing = [name for name in names if name not in repo]
    if missing:
        for name in missing:
            err(f"E: Unable to locate package {name}")
        return 100
    new = []
    for name in names:
        if name in installed:
            out(f"{name} is already the newest version ({installed[name]}).")
        elif name not in new:
            new.append(name)
    if not new:
        out("0 upgraded, 0 newly installed, 0 to remove and 0 not upgraded.")
        return 0
    out("The following NEW packages will be installed:")
    out("  " + " ".join(new))
    out(f"0 upgraded, {len(new)} newly installed, 0 to remove and 0 not upgraded.")
    size = sum(repo[name].get("size_kb", 100) for name in new)
    out(f"Need to get {size} kB of archives.")
    out(f"After this operation, {size * 4} kB of additional disk space will be used.")
    debs = [f"{MIRROR}/pool/main/{name[0]}/{name}/{name}_{repo[name]['version']}_amd64.deb"
            for name in new]
    if not state.get("network", True):
        for index, name in enumerate(new, 1):
            out(f"Err:{index} {MIRROR} bookworm/main amd64 {name} amd64 {repo[name]['version']}")
            out("  Temporary failure resolving 'deb.debian.org'")
        for deb in debs:
            err(f"E: Failed to fetch {deb}  Temporary failure resolving 'deb.debian.org'")
        err("E: Unable to fetch some archives, maybe run apt-get update or try with "
            "--fix-missing?")
        return 100
    for index, name in enumerate(new, 1):
        version = repo[name]["version"]
        out(f"Get:{index} {MIRROR} bookworm/main amd64 {name} amd64 {version} "
            f"[{repo[name].get('size_kb', 100)} kB]")
    out(f"Fetched {size} kB in 0s ({size} kB/s)")
    for name in new:
        version = repo[name]["version"]
        out(f"Selecting previously unselected package {name}.")
        out(f"Preparing to unpack .../{name}_{version}_amd64.deb ...")
        out(f"Unpacking {name} ({version}) ...")
    for name in new:
        for tool, target in repo[name].get("links", {}).items():
            link = os.path.join(state["node_bin"], tool)
            if not os.path.lexists(link):
                os.symlink(target, link)
        installed[name] = repo[name]["version"]
        out(f"Setting up {name} ({repo[name]['version']}) ...")
    save(state)
    return 0


def main(argv):
    with open(os.path.join(HERE, "apt-get.log"), "a", encoding="utf-8") as log:
        log.write(json.dumps(argv) + "\n")
    state = load()
    options = [a for a in argv if a.startswith("-")]
    words = [a for a in argv if not a.startswith("-")]
    if not words:
        err("E: No command given")  # apt-get with no operation prints its usage; rc 100
        return 100
    command, args = words[0], words[1:]
    del options  # -y, --no-install-recommends, --no-upgrade: this stand-in never asks
    if command == "update":
        return update(state)
    if command == "install":
        return install(state, args)
    err(f"E: Invalid operation {command}")
    return 100


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
