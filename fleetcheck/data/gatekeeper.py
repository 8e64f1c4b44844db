"""fleetcheck gatekeeper: the forced command of a Proxmox host's audit key.

Installed on each host by `fleetcheck host-setup` and named in `authorized_keys` as

    restrict,command="/usr/bin/python3 -I /usr/local/lib/fleetcheck/gatekeeper.py
    --allow /etc/fleetcheck/probe.sha256" ssh-ed25519 AAAA...

sshd then runs this program for every session of that key, whatever the client asked for, with
the client's request in SSH_ORIGINAL_COMMAND. The request is split with shlex (never given to a
shell), every word is checked against the grammar below (`SHAPES`: the host's own probe and
clean-up, and the commands of fleetcheck's node kinds, which `fleetcheck host-setup` writes into
the copy it installs), and only then is the same argv executed with os.execvp. A request that
runs the probe must carry, on stdin, a probe whose SHA-256 is in the host's allow-list; the
gatekeeper reads it (up to `PROBE_MAX` bytes), hashes it, and hands exactly those bytes to the
command through an anonymous in-memory file. The probe comes as its source (`PYTHON - ARGS`)
or zlib-compressed behind fleetcheck's one-line bootstrap (`PYTHON -c PROBE_BOOTSTRAP ARGS`):
then the gatekeeper inflates it (up to `PROBE_MAX` bytes again) and hashes the source, so the
allow-list is the same for both.

Anything else is refused: one line on stderr starting "fleetcheck-gatekeeper: refused:", exit
status `EXIT_REFUSED` (77, EX_NOPERM of sysexits.h), and a line in syslog (facility auth) or in
the file given with --log. Standard library only; Python 3.6 or later (PVE 7 ships 3.9).
"""

import hashlib
import os
import re
import select
import shlex
import sys
import time

NAME = "fleetcheck-gatekeeper"
#: Exit status of a refused request (EX_NOPERM): distinct from pct's 255, a shell's 126/127,
#: timeout's 124 and the probe's own 0..3.
EXIT_REFUSED = 77
#: Most bytes of probe accepted on stdin (the probe is about 100 KB).
PROBE_MAX = 1 << 20
#: Seconds the probe may take to arrive on stdin (it is sent at once, before the command runs).
READ_SECONDS = 60
#: Most characters of SSH_ORIGINAL_COMMAND accepted.
COMMAND_MAX = 8192
#: The one program a `-c` may run: it reads zlib(probe) from stdin and runs the probe as
#: `python -` would (fleetcheck/transport/packing.py's ZLIB_BOOTSTRAP, the same word).
PROBE_BOOTSTRAP = (
    "import sys,zlib;s=zlib.decompress(sys.stdin.buffer.read());sys.argv[0]='-';"
    "c=compile(s,'<stdin>','exec');del s;__file__='<stdin>';exec(c)"
)
#: Replaced by `fleetcheck host-setup` in the copy it prints, to install this file on a host.
INSTALL = None

# ---------------------------------------------------------------------------------------------
# Words. Each class is one regular expression a single word must match in full.

#: Environment names never accepted in an `env NAME=VALUE` or `--env NAME=VALUE`: they make an
#: interpreter or the dynamic linker load code named by the caller.
DENIED_ENV = frozenset({
    "LD_PRELOAD", "LD_AUDIT", "LD_LIBRARY_PATH_FORCE", "BASH_ENV", "ENV", "PYTHONSTARTUP",
    "PYTHONHOME", "PYTHONPATH", "PYTHONINSPECT", "PYTHONEXECUTABLE", "PYTHONUSERBASE",
    "PYTHONBREAKPOINT", "PYTHONWARNINGS", "PERL5OPT", "PERL5LIB", "NODE_OPTIONS",
})

#: Directories anyone may write to: an interpreter found there (by path, or through a PATH the
#: request sets) could be a program any local user planted, run as root by the probe's command.
WORLD_WRITABLE = ("/tmp/", "/var/tmp/", "/dev/shm/", "/run/user/", "/run/shm/")  # noqa: S108

WORDS = {
    "INT": r"[0-9]{1,6}",
    # remote_command's "%g" of a float: 30, 12.5, 1e+06.
    "SECONDS": r"[0-9]{1,9}(\.[0-9]{1,6})?(e\+?[0-9]{1,2})?",
    "RUNTAG": r"FLEETCHECK_RUN=[0-9a-f]{1,64}",
    "KILLTAG": r"FLEETCHECK_RU\[N\]=[0-9a-f]{1,64}",
    # NAME=VALUE without control characters; the name is checked against DENIED_ENV too.
    "ASSIGN": r"[A-Za-z_][A-Za-z0-9_]{0,127}=[^\x00-\x1f\x7f]{0,4096}",
    # A CPython interpreter, by name or absolute path: python, python3, python3.12, with no
    # `..`, no `=` (env would take it for an assignment) and no option-like start.
    "PYTHON": r"(/[A-Za-z0-9_+][A-Za-z0-9_.+-]*)*/?python(3(\.[0-9]{1,2})?)?",
}

# ---------------------------------------------------------------------------------------------
# The grammar: what an audit sends, and nothing else.
#
# A shape is a list of items matched against the words in order:
#   "text"          that exact word
#   ("WORD", CLASS) one word of the class in WORDS (or KIND_WORDS)
#   ("opt", [...])  the items, or nothing
#   ("rep", [...])  the items, zero or more times
#   ("one", [[...], [...]])  one of the alternatives
#   ("ref", NAME)   the items of FRAGMENTS[NAME]
#   ("stdin", "probe")  marks the request as running the probe: its stdin must be a pinned probe
#   ("stdin", "probe-zlib")  the same, the probe zlib-compressed (inflated before it is hashed)
# The commands of the node kinds (pct, qm, pvesh, docker/podman and the chains of one inside
# another) are not written here: each kind's module in fleetcheck declares its own, and
# `fleetcheck host-setup` writes them into KIND_WORDS and KIND_SHAPES in the copy it installs.

FRAGMENTS = {
    # What the probe is run as: `[env NAME=VALUE...] PYTHON - [--deadline N] [--deep]
    # [--python PATH]` (fleetcheck.probe.probe_argv; the env comes from the inventory), or
    # with `-c PROBE_BOOTSTRAP` for the `-` when it comes compressed.
    "probe": [
        ("opt", ["env", ("WORD", "ASSIGN"), ("rep", [("WORD", "ASSIGN")])]),
        ("ref", "probe_argv"),
    ],
    # The probe without `env`, where the command that runs it sets the environment itself.
    "probe_argv": [
        ("WORD", "PYTHON"),
        ("one", [["-", ("stdin", "probe")], ["-c", PROBE_BOOTSTRAP, ("stdin", "probe-zlib")]]),
        ("opt", ["--deadline", ("WORD", "SECONDS")]),
        ("opt", ["--deep"]),
        ("opt", ["--python", ("WORD", "PYTHON")]),
    ],
    "sudo": [("opt", ["sudo", "-n"])],
}

#: The word classes and shapes of the node kinds, each kind's (fleetcheck.kinds), composed by
#: fleetcheck along the kinds' chains: set by `fleetcheck host-setup` in the copy it prints,
#: empty in this file.
KIND_WORDS = {}
KIND_SHAPES = {}

#: The commands run under the outer `timeout -k K T [env FLEETCHECK_RUN=TAG]` wrapper
#: (fleetcheck.transport.ssh.remote_command), by name (the name is logged): the host's own
#: probe, run as the login (never under sudo), and the node kinds' commands.
INNER_SHAPES = {
    "host probe": [("ref", "probe")],
    **KIND_SHAPES,
}

#: Every request accepted: the wrapped commands, and the clean-up of an aborted audit's
#: leftovers (fleetcheck.transport.ssh kill_abandoned), which runs without the wrapper.
SHAPES = {
    **{
        name: ["timeout", "-k", ("WORD", "INT"), ("WORD", "SECONDS"),
               ("opt", ["env", ("WORD", "RUNTAG")])] + shape
        for name, shape in INNER_SHAPES.items()
    },
    "cleanup": ["pkill", "-TERM", "-f", "--", ("WORD", "KILLTAG")],
}

_COMPILED = {name: re.compile(pattern) for name, pattern in {**WORDS, **KIND_WORDS}.items()}


def _planted(path):
    """Is `path` in (or is it) a directory anyone may write to?"""
    path = path.rstrip("/") + "/"
    return any(path.startswith(prefix) for prefix in WORLD_WRITABLE)


def _word_ok(kind, word):
    if not _COMPILED[kind].fullmatch(word):
        return False
    if kind == "ASSIGN":
        name, value = word.split("=", 1)
        if name == "PATH":
            return not any(_planted(entry) for entry in value.split(":") if entry)
        return name not in DENIED_ENV
    if kind == "PYTHON":
        return ".." not in word.split("/") and not _planted(word)
    return True


def _match(items, words, pos, probe):
    """Yield (position after, the probe's stdin marker or False) for every way `items` match
    words[pos:]."""
    if not items:
        yield pos, probe
        return
    item, rest = items[0], items[1:]
    if isinstance(item, str):
        if pos < len(words) and words[pos] == item:
            yield from _match(rest, words, pos + 1, probe)
        return
    kind, arg = item
    if kind == "WORD":
        if pos < len(words) and _word_ok(arg, words[pos]):
            yield from _match(rest, words, pos + 1, probe)
    elif kind == "stdin":
        yield from _match(rest, words, pos, arg)
    elif kind == "ref":
        yield from _match(FRAGMENTS[arg] + rest, words, pos, probe)
    elif kind == "opt":
        yield from _match(arg + rest, words, pos, probe)
        yield from _match(rest, words, pos, probe)
    elif kind == "rep":
        # At least one word per round, so the recursion ends.
        for after, got in _match(arg, words, pos, probe):
            if after > pos:
                yield from _match([item] + rest, words, after, got)
        yield from _match(rest, words, pos, probe)
    elif kind == "one":
        for alternative in arg:
            yield from _match(alternative + rest, words, pos, probe)
    else:
        raise ValueError("unknown grammar item %r" % (kind,))


def classify(words):
    """(shape name, how the probe comes on stdin: "probe", "probe-zlib", or False when the
    request runs none) for an argv the grammar accepts, else None."""
    for name, shape in SHAPES.items():
        for after, probe in _match(shape, words, 0, False):
            if after == len(words):
                return name, probe
    return None


class Refused(Exception):
    """A request the gatekeeper will not run; the message is its one-line reason."""


def parse_request(command):
    """The argv of SSH_ORIGINAL_COMMAND, its shape and whether it runs the probe; raises
    Refused."""
    words, shape, stdin = _parse(command)
    return words, shape, bool(stdin)


def _parse(command):
    """parse_request's, with how the probe comes on stdin (classify's) for its last."""
    if command is None or not command.strip():
        raise Refused("no command given (interactive login is not allowed)")
    if len(command) > COMMAND_MAX:
        raise Refused("command longer than %d characters" % COMMAND_MAX)
    if any(ord(char) < 32 or 0x7F <= ord(char) < 0xA0 for char in command):
        raise Refused("control character in the command")
    try:
        words = shlex.split(command)
    except ValueError as exc:
        raise Refused("cannot split the command: %s" % exc) from None
    shape = classify(words)
    if shape is None:
        raise Refused("not a command an audit sends: " + _clip(command))
    return words, shape[0], shape[1]


def _clip(text, limit=160):
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


# ---------------------------------------------------------------------------------------------
# The probe allow-list: one lowercase hex SHA-256 per line; `#` starts a comment.

def read_allowed(path):
    """The set of probe hashes in `path`; raises Refused when it cannot be read."""
    try:
        with open(path, encoding="ascii") as handle:
            lines = handle.read().splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise Refused("cannot read the probe allow-list %s: %s" % (path, exc)) from None
    allowed = set()
    for line in lines:
        word = line.split("#", 1)[0].strip().lower()
        if re.fullmatch(r"[0-9a-f]{64}", word):
            allowed.add(word)
    return allowed


def read_probe(stream, limit=PROBE_MAX, seconds=None):
    """All of stdin, up to `limit` bytes and `seconds`; raises Refused beyond either.

    The deadline matters because the outer `timeout` does not run yet: a client that never
    closes stdin would otherwise hold the gatekeeper (and an sshd session) forever.
    """
    seconds = READ_SECONDS if seconds is None else seconds
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):
        fd = None  # an in-memory stream (tests): nothing to wait for
    deadline = time.monotonic() + seconds
    chunks = []
    size = 0
    while True:
        if fd is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise Refused("stdin not closed within %g s of the request" % seconds)
            chunk = os.read(fd, 65536)
        else:
            chunk = stream.read(65536)
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > limit:
            raise Refused("probe on stdin larger than %d bytes" % limit)
        chunks.append(chunk)


def inflate(data, limit=PROBE_MAX):
    """The probe that zlib `data` holds, at most `limit` bytes; raises Refused for anything
    else (not zlib, more than one stream, or more than `limit` once inflated)."""
    import zlib  # only a compressed probe needs it

    inflater = zlib.decompressobj()
    try:
        script = inflater.decompress(data, limit + 1)
    except zlib.error as exc:
        raise Refused("probe on stdin is not zlib data: %s" % exc) from None
    if len(script) > limit or inflater.unconsumed_tail:
        raise Refused("probe on stdin larger than %d bytes once inflated" % limit)
    if not inflater.eof or inflater.unused_data:
        raise Refused("probe on stdin is not one whole zlib stream")
    return script


def _probe_fd(data):
    """A readable descriptor holding `data` at offset 0, with no name on any file system."""
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("fleetcheck-probe", 0)
    else:
        import tempfile  # only without memfd_create: imported late, it costs every request

        fd, path = tempfile.mkstemp(prefix="fleetcheck-probe-")
        os.unlink(path)
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


# ---------------------------------------------------------------------------------------------
# Logging: syslog (facility auth) by default, or a file (--log) where there is no syslog.

class Log:
    """One line per request: "allowed|refused from CLIENT-ADDRESS: what"."""

    def __init__(self, path=None, ssh_client=None):
        self.path = path
        self.client = (ssh_client or "").split(" ")[0] or "local"

    def __call__(self, level, message):
        line = "%s from %s: %s" % (level, self.client, message)
        try:
            if self.path:
                with open(self.path, "a", encoding="utf-8", errors="replace") as handle:
                    handle.write("%s[%d]: %s\n" % (NAME, os.getpid(), line))
                return
            import syslog

            syslog.openlog(NAME, syslog.LOG_PID, syslog.LOG_AUTH)
            priority = syslog.LOG_WARNING if level == "refused" else syslog.LOG_INFO
            syslog.syslog(priority, line)
        except (OSError, ImportError):
            pass  # no log must never turn a refusal into an acceptance, nor stop an audit


def refuse(log, reason):
    log("refused", reason)
    sys.stderr.write("%s: refused: %s\n" % (NAME, reason))
    sys.stderr.flush()
    return EXIT_REFUSED


def gate(argv, environ, stdin, log, execvp=os.execvp):
    """Check the request in `environ` and exec it; returns an exit status only on refusal."""
    allow_path = None
    args = list(argv)
    while args:
        flag = args.pop(0)
        if flag == "--allow" and args:
            allow_path = args.pop(0)
        elif flag == "--log" and args:
            args.pop(0)
        else:
            return refuse(log, "gatekeeper misconfigured: unknown argument %r" % flag)
    try:
        words, shape, probe = _parse(environ.get("SSH_ORIGINAL_COMMAND"))
        if probe:
            if allow_path is None:
                raise Refused("no probe allow-list configured (--allow FILE)")
            allowed = read_allowed(allow_path)
            data = read_probe(stdin)
            # The source is what is pinned; compressed, the bootstrap inflates the same bytes.
            source = inflate(data) if probe == "probe-zlib" else data
            digest = hashlib.sha256(source).hexdigest()
            if digest not in allowed:
                # A prefix keeps the node's reason on one readable line.
                raise Refused("probe sha256 %s... is not in %s" % (digest[:16], allow_path))
            fd = _probe_fd(data)
            detail = "sha256 %s%s" % (digest, " (zlib)" if probe == "probe-zlib" else "")
        else:
            fd = os.open(os.devnull, os.O_RDONLY)
            detail = ""
    except Refused as exc:
        return refuse(log, str(exc))
    os.dup2(fd, 0)
    os.close(fd)
    log("allowed", "%s%s: %s" % (shape, " " + detail if detail else "",
                                 _clip(shlex.join(words) if hasattr(shlex, "join")
                                       else " ".join(words))))
    try:
        execvp(words[0], words)
    except OSError as exc:
        sys.stderr.write("%s: cannot run %s: %s\n" % (NAME, words[0], exc.strerror))
        return 127
    return 0  # only when `execvp` is a test double that returns


# ---------------------------------------------------------------------------------------------
# Installation (the copy `fleetcheck host-setup` prints, run with `python3 -` on the host).

def _write_atomic(path, text, mode):
    import tempfile

    directory = os.path.dirname(path) or "."
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".fleetcheck-")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def install(plan):
    """Write the gatekeeper, add the probe hashes, put the key's line in authorized_keys.

    Idempotent: a second run (after a fleetcheck upgrade) adds the new probe hash beside the
    old ones and replaces the key's line rather than adding another.
    """
    _write_atomic(plan["script_path"], plan["script"], 0o755)
    hash_path = plan["hash_path"]
    try:
        with open(hash_path, encoding="ascii") as handle:
            lines = handle.read().splitlines()
    except FileNotFoundError:
        lines = ["# SHA-256 of each fleetcheck probe the gatekeeper may run (one per line)"]
    present = {line.split("#", 1)[0].strip().lower() for line in lines}
    for digest, note in plan["hashes"]:
        if digest not in present:
            lines.append("%s  # %s" % (digest, note))
    _write_atomic(hash_path, "\n".join(lines) + "\n", 0o644)
    keys_path = os.path.expanduser(plan["authorized_keys"])
    try:
        with open(keys_path, encoding="utf-8") as handle:
            keys = handle.read().splitlines()
    except FileNotFoundError:
        keys = []
    blob = plan["key_blob"]
    kept = [line for line in keys if blob not in line.split()]
    kept.append(plan["key_line"])
    os.makedirs(os.path.dirname(keys_path) or ".", mode=0o700, exist_ok=True)
    _write_atomic(keys_path, "\n".join(kept) + "\n", 0o600)
    sys.stdout.write("fleetcheck gatekeeper installed: %s\nprobe hashes: %s\nkey line in %s\n"
                     % (plan["script_path"], hash_path, keys_path))
    return 0


def main(argv):
    if INSTALL is not None:
        import json

        return install(json.loads(INSTALL))
    log_path = None
    if "--log" in argv:
        index = argv.index("--log")
        log_path = argv[index + 1] if index + 1 < len(argv) else None
    stdin = getattr(sys.stdin, "buffer", sys.stdin)
    return gate(argv, os.environ, stdin, Log(log_path, os.environ.get("SSH_CLIENT")))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
