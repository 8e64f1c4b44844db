"""Docker/Podman containers inside any node: `docker|podman exec -i` through the parent's transport.

Owns the runtime's argv and the wording of its refusals (docker cli + moby daemon texts and
exit codes, podman's `Error: ...` texts and 125/126/127). The parent is whatever transport
reaches the node the container runs in: the host's SSH connection, `pct exec` into an LXC
container, or `qm guest exec` into a VM, so nesting costs no extra connection.

`-i` keeps stdin open for the probe and the transport closes it after the probe; never `-t`
(a TTY would mangle the JSON and merge stderr). The node's environment goes as `--env`, so
the image needs no `env` binary.
"""

from __future__ import annotations

from fleetcheck import failures
from fleetcheck.failures import Refusal
from fleetcheck.text import last_line
from fleetcheck.transport.interface import CommandResult, NestedTransport, RunCommand, Transport
from fleetcheck.transport.refusals import (
    KILLED,
    run_asking_after_a_silent_kill,
    sudo_wants_password,
)

#: docker: `Error response from daemon: ...` (client/request.go), exit 1 for every daemon
#: refusal of `docker exec`; podman: `Error: ...`, 125 for its own errors.
DAEMON_ERROR = "Error response from daemon:"
#: `RUNTIME inspect --format {{.State.Status}}` of a container that is not running (docker's
#: and podman's State.Status words).
NOT_RUNNING_STATES = ("exited", "stopped", "dead", "created", "paused", "removing")


def oci_exec_argv(runtime: str, container: str, argv: list[str], *, user: str | None = None,
                  ) -> list[str]:
    """`RUNTIME exec -i [--user U] [--env VAR=V]... NAME ARGV...`.

    A leading `env VAR=V...` of `argv` (how the scheduler sets a node's environment) becomes
    `--env` options: the runtime sets them itself. Options precede NAME (docker's exec
    stops reading options at the first word).
    """
    options = ["-i"]
    if user:
        options += ["--user", user]
    if argv and argv[0] == "env":
        index = 1
        while index < len(argv) and "=" in argv[index] and not argv[index].startswith("-"):
            options += ["--env", argv[index]]
            index += 1
        argv = argv[index:]
    return [runtime, "exec", *options, container, *argv]


def oci_exec_failure(
    result: CommandResult, runtime: str, container: str, parent: str
) -> Refusal | None:
    """(status, reason) when the runtime, not the probe, refused (its texts and exit codes)."""
    stderr = result.stderr.decode("utf-8", "replace")
    stdout = result.stdout.decode("utf-8", "replace")
    code = result.returncode
    where = f"{runtime} container {container!r} on {parent}"
    lowered = stderr.lower()
    asked = sudo_wants_password(stderr, parent, runtime)
    if asked is not None:
        return asked
    if code == KILLED and stderr.strip() in NOT_RUNNING_STATES:
        # The exec was killed without a word (137), and inspect (OciTransport.through) says
        # the container is no longer running: it stopped, or its daemon restarted and
        # stopped it, while the probe ran.
        why = "; it stopped, or its daemon restarted" if runtime == "docker" else ""
        return Refusal("error", f"{where} stopped while probed ({runtime} inspect: "
                       f"{stderr.strip()}{why})", failures.NODE_NOT_RUNNING)
    if "is not running" in lowered or "can only create exec sessions on running" in lowered \
            or "when their container is running" in lowered:
        return Refusal("skipped", "container not running", failures.NODE_NOT_RUNNING)
    if "is paused" in lowered:
        return Refusal("skipped", "container paused", failures.NODE_NOT_RUNNING)
    if "is restarting" in lowered:
        return Refusal("error", f"{where} is restarting", failures.NODE_BUSY)
    if "no such container" in lowered:
        return Refusal("error", f"no {runtime} container {container!r} on {parent}",
                       failures.NO_SUCH_NODE)
    if "permission denied while trying to connect" in lowered:
        return Refusal("error", f"{runtime} on {parent}: permission denied on its socket (add "
                       f"the login to the {runtime} group, or sudo: true)", failures.ACCESS_DENIED)
    if "cannot connect to the docker daemon" in lowered or "failed to connect to the docker" \
            in lowered:
        return Refusal("error", f"{runtime} daemon on {parent} is not running",
                       failures.SERVICE_DOWN)
    if code == 127 and (f"env: '{runtime}'" in stderr or f"{runtime}: not found" in stderr
                        or f"\"{runtime}\"" in stderr or f"“{runtime}”" in stderr):
        return Refusal("error", f"{runtime} not found on {parent}", failures.TOOL_NOT_FOUND)
    # The runtime could not start the command: docker writes the OCI error to the exec's
    # stdout (moby's exec router), podman to stderr. The codes overlap (docker 20.10 exits
    # 126 for a command not found, 127 from 23.0 on; podman 127), so the text decides: a
    # path that is not there is runc's `stat PATH: no such file or directory` (docker 20.10,
    # exit 126), a name not on PATH `executable file not found`; anything else (permission
    # denied, exec format error) cannot be run.
    oci = next((line.strip() for line in (stdout + "\n" + stderr).splitlines()
                if "OCI runtime" in line or "executable file not found" in line), "")
    if code in (126, 127) and oci:
        missing = "not found" in oci or "no such file or directory" in oci.lower()
        problem = "not found" if missing else "cannot be run"
        return Refusal("error", f"{_command_of(oci) or 'the probe interpreter'} {problem} in "
                       f"{where}", failures.INTERPRETER_MISSING)
    if code == 125 or (code == 1 and DAEMON_ERROR in stderr):
        said = last_line(result.stderr) or "no message"
        return Refusal("error", f"{runtime} exec refused: {said}", failures.TOOL_REFUSED)
    return None


def oci_list_argv(runtime: str) -> list[str]:
    """Every container of `runtime`, running or not (`-a`: stopped ones are reported skipped).

    docker: `{{json .}}`, one object a line (docker/cli 20.10 to 28); `--format json` is
    only known from 23.0 on. podman: `--format json`, one array in every release (podman 4.3
    prints `{{json .}}` as that same array, later releases one object a line).
    """
    if runtime == "podman":
        return [runtime, "ps", "-a", "--format", "json"]
    return [runtime, "ps", "-a", "--format", "{{json .}}"]


def _command_of(text: str) -> str:
    """`python3` from `exec: "python3": executable file not found` or crun's backquotes."""
    for opening, closing in (('exec: "', '"'), ("`", "`")):
        start = text.find(opening)
        if start >= 0:
            end = text.find(closing, start + len(opening))
            if end > start:
                return text[start + len(opening):end]
    return ""


class OciTransport(NestedTransport):
    """Runs commands in one Docker/Podman container through its parent node's transport."""

    def __init__(
        self, parent: Transport, runtime: str, container: str, *, user: str | None = None,
        sudo: bool = False, parent_name: str = "its node",
    ) -> None:
        super().__init__(parent)
        self.runtime = runtime
        self.container = container
        self.user = user
        self.sudo = sudo
        self.parent_name = parent_name

    def wrap(self, argv: list[str]) -> list[str]:
        # `sudo -n` only where the parent is the host's own login (not inside pct/qm).
        prefix = ["sudo", "-n"] if self.sudo else []
        return [*prefix, *oci_exec_argv(self.runtime, self.container, argv, user=self.user)]

    async def through(
        self, outer_run: RunCommand, argv: list[str], input: bytes | None, timeout: float
    ) -> CommandResult:
        # docker/podman exec say nothing when the container stops under them (a stop, a
        # daemon restart): the runtime is asked for the container's state.
        prefix = ["sudo", "-n"] if self.sudo else []
        return await run_asking_after_a_silent_kill(
            outer_run, self.wrap(argv), input, timeout,
            [*prefix, self.runtime, "inspect", "--format", "{{.State.Status}}", self.container])

    def explain_own(self, result: CommandResult) -> Refusal | None:
        # Read after the parent's tool: `pct exec` or `qm guest exec` may have refused before
        # the runtime ran at all (container or VM stopped, no agent...).
        return oci_exec_failure(result, self.runtime, self.container, self.parent_name)
