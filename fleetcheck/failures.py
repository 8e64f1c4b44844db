"""Owns the ids of the failures that happen outside the probe (the probe's own causes are
the catalogue's, `checks.py`): set where the failure happens, carried in the node's
`triton.cause`, and read by the verdict, the fix and the renderers instead of the wording.
"""

from __future__ import annotations

#: The node could not be reached (DNS, refused, authentication, connection lost).
UNREACHABLE = "unreachable"
#: SSH refused the host's key: not in known_hosts yet.
HOST_KEY_UNKNOWN = "host_key_unknown"
#: SSH refused the host's key: it differs from the one known_hosts has.
HOST_KEY_CHANGED = "host_key_changed"
#: SSH refused the key of a jump host (`proxy_jump`).
JUMP_HOST_KEY = "jump_host_key_refused"
#: The probe (or the command reaching it) ran out of its node's time.
TIMED_OUT = "timed_out"
#: The audit ended (its deadline, Ctrl-C) before the node's probe was done.
INTERRUPTED = "interrupted"
#: The audit ended before a host's nodes were discovered (the host stands for them).
DISCOVERY_INTERRUPTED = "discovery_interrupted"


# The refusals of the tools a command passes through before the probe runs (the host's
# gatekeeper, sudo, pct, qm and the guest agent, docker/podman, kubectl, the Proxmox API),
# each set by the transport that reads its tool's text (`Transport.explain_failure`).

#: The host's forced command (`fleetcheck host-setup`'s gatekeeper) refused the command.
GATEKEEPER_REFUSED = "gatekeeper_refused"
#: `sudo -n` wants a password for the login.
SUDO_PASSWORD = "sudo_password_required"  # noqa: S105 - an id, not a secret
#: The tool (pct, qm) runs only as root, and the login is not.
NEEDS_ROOT = "tool_needs_root"
#: The tool that reaches the node (sudo, pct, qm, docker, podman, kubectl) is not installed.
TOOL_NOT_FOUND = "tool_not_found"
#: The node (container, VM, pod) does not exist where the inventory says.
NO_SUCH_NODE = "no_such_node"
#: The node exists but is not running (stopped, paused, a completed pod).
NODE_NOT_RUNNING = "node_not_running"
#: The node is in a state its tool will not run a command in (restarting).
NODE_BUSY = "node_busy"
#: The VM has no QEMU guest agent configured.
AGENT_NOT_CONFIGURED = "guest_agent_not_configured"
#: The VM's guest agent does not answer (not started in the guest, or disabled).
AGENT_NOT_ANSWERING = "guest_agent_not_answering"
#: The guest agent answered with an error, or the VM went away while probed.
AGENT_FAILED = "guest_agent_error"
#: The guest is not a Linux system (a Windows guest's own `timeout`).
NOT_LINUX = "guest_not_linux"
#: The tool refused the probe on stdin (qm's 1 MiB limit).
INPUT_REFUSED = "probe_input_refused"
#: The login may not use the tool (the docker socket's group, RBAC, the API token's rights).
ACCESS_DENIED = "access_denied"
#: The credentials were refused, or the tool's configuration is missing or unusable.
CREDENTIALS = "credentials_refused"
#: The service behind the tool is down (the docker daemon).
SERVICE_DOWN = "service_down"
#: The probe's interpreter is not there (or cannot be run) where it was looked for.
INTERPRETER_MISSING = "interpreter_not_found"
#: The probe's interpreter is too old to run it (Python 2, or 3 before 3.7: the probe needs
#: 3.8 or newer), read from what that interpreter said.
INTERPRETER_TOO_OLD = "interpreter_too_old"
#: The tool refused otherwise, in its own words (docker exec's 125, an unknown text).
TOOL_REFUSED = "tool_refused"

#: Every id this module owns.
FAILURE_IDS = (UNREACHABLE, HOST_KEY_UNKNOWN, HOST_KEY_CHANGED, JUMP_HOST_KEY, TIMED_OUT,
               INTERRUPTED, DISCOVERY_INTERRUPTED, GATEKEEPER_REFUSED, SUDO_PASSWORD,
               NEEDS_ROOT, TOOL_NOT_FOUND, NO_SUCH_NODE, NODE_NOT_RUNNING, NODE_BUSY,
               AGENT_NOT_CONFIGURED, AGENT_NOT_ANSWERING, AGENT_FAILED, NOT_LINUX,
               INPUT_REFUSED, ACCESS_DENIED, CREDENTIALS, SERVICE_DOWN, INTERPRETER_MISSING,
               INTERPRETER_TOO_OLD, TOOL_REFUSED)


class Refusal(tuple[str, str]):
    """A tool's refusal as a node sees it: the pair (status, reason), which is what it
    compares and unpacks as, and its `cause`, one of this module's ids."""

    cause: str

    def __new__(cls, status: str, reason: str, cause: str) -> Refusal:
        refusal = super().__new__(cls, (status, reason))
        refusal.cause = cause
        return refusal

    def __getnewargs__(self) -> tuple[str, str, str]:
        return self[0], self[1], self.cause

    @property
    def status(self) -> str:
        return self[0]

    @property
    def reason(self) -> str:
        return self[1]
