"""Owns every default of time and scale, and a node's time budget: the lowest floor.

`NodeBudget` derives every deadline of a node from its timeout; the audit hands one
`BudgetFor` to the probe and to every transport (through `TransportFactory`). The other
defaults here (a listing's timeout, the Proxmox API's, the concurrency) are written once and
read by the inventory's model and loader and by the node kinds.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

#: A node's timeout when the inventory names none (`defaults.timeout`, `fleetcheck probe`).
DEFAULT_NODE_TIMEOUT = 60.0
#: The same for `--deep`, whose compile and kernel checks take longer.
DEFAULT_DEEP_NODE_TIMEOUT = 180.0


def node_timeout(given: float | None, *, deep: bool) -> float:
    """The node timeout asked for (`--timeout`, the inventory's `timeout`), else the default
    for a plain or a deep probe: the one rule of `audit --deep`, `probe --deep`, `fix`."""
    if given is not None:
        return given
    return DEFAULT_DEEP_NODE_TIMEOUT if deep else DEFAULT_NODE_TIMEOUT


@dataclass(frozen=True)
class NodeBudget:
    """Every deadline of one node, derived from its timeout in one place.

    probe_deadline < timeout (remote TERM) < timeout + kill_after (remote KILL)
    < client_wait (the transport gives up on the exit status) < outer_bound (the scheduler
    gives up on the transport, e.g. a stalled channel open). In a VM reached through its
    guest agent: guest_timeout + guest_kill_after < guest_wait (qm's --timeout, also the API
    polling bound's whole seconds) < timeout.
    """

    timeout: float
    #: Seconds the probe keeps for itself below the timeout, so it reports before it is killed.
    probe_margin: float = 5.0
    #: Seconds between the remote `timeout`'s TERM and its KILL (also the local TERM->KILL).
    kill_after: int = 5
    #: Extra seconds the client waits beyond the remote kill, for the exit status to arrive.
    client_grace: float = 2.0
    #: Seconds beyond the timeout and the remote kill: bounds a stalled channel open.
    channel_slack: float = 10.0
    #: Seconds between a VM's own `timeout` TERM and KILL (the guest agent cannot kill).
    guest_kill_after: int = 2

    @property
    def probe_deadline(self) -> float:
        """The probe's own deadline: short of the node timeout, never below half of it."""
        return round(max(self.timeout - self.probe_margin, self.timeout / 2), 1)

    @property
    def remote_timeout(self) -> float:
        """What the far side's coreutils `timeout` is given (it refuses less than a second)."""
        return max(self.timeout, 1.0)

    @property
    def client_wait(self) -> float:
        """How long a transport waits for a command's exit status."""
        return self.timeout + self.kill_after + self.client_grace

    @property
    def guest_wait(self) -> int:
        """`qm guest exec --timeout`: whole seconds (qm polls once a second), short of the
        host's `timeout` around qm, so that qm answers before it is killed."""
        return max(1, math.floor(self.timeout) - 1)

    @property
    def guest_timeout(self) -> int:
        """The VM's own `timeout -k guest_kill_after` around the command: TERM and KILL both
        land, and qm sees the exit on its next poll, before `guest_wait` ends."""
        return max(1, self.guest_wait - self.guest_kill_after - 1)

    @property
    def outer_bound(self) -> float:
        """How long the scheduler waits for a transport, whatever the transport does."""
        return self.timeout + self.kill_after + self.channel_slack


#: Builds a node's budget from its timeout; `NodeBudget` itself, or a variant a test passes.
BudgetFor = Callable[[float], NodeBudget]


#: How long one listing (pvesh, pct list, qm list, docker ps) may take on a node.
LISTING_TIMEOUT = 30.0
#: Seconds for each request to the Proxmox API when `api.timeout` is not set.
DEFAULT_API_TIMEOUT = 10.0
#: Nodes probed at once fleet-wide when `defaults.concurrency` is not set.
DEFAULT_CONCURRENCY = 64

#: How long a TCP connect plus SSH handshake may take when neither the inventory's
#: `ssh.connect_timeout` nor an ssh_config `ConnectTimeout` says.
DEFAULT_CONNECT_TIMEOUT = 10.0
#: Seconds beyond the connect timeout that the client waits for asyncssh's own answer.
CONNECT_SLACK = 1.0


def connect_wait(connect_timeout: float) -> float:
    """How long one SSH connection (or jump hop) is waited for."""
    return connect_timeout + CONNECT_SLACK


#: How long closing an SSH connection, or the best-effort kill of abandoned commands, may take.
CLOSE_WAIT = 5.0
#: How long the scheduler waits for its cancelled tasks, and then for its transports to close.
STOP_WAIT = 10.0
#: How long a local command's pipe is read once the command ended (a grandchild may hold it).
PIPE_DRAIN_WAIT = 1.0
#: How long a source's own command may take (`ansible-inventory --list`) when the
#: inventory's `timeout` of the source says nothing.
SOURCE_COMMAND_TIMEOUT = 60.0
#: Most seconds for the one state question asked after a probe killed without a word
#: (`pct status`, `docker|podman inspect`): did its container stop under it?
STATE_QUESTION_TIMEOUT = 15.0
#: How long each Slurm command (scontrol, sinfo) of `fleetcheck health --slurm` may take.
SLURM_COMMAND_TIMEOUT = 15.0
#: Default age after which a cached verdict or a node document no longer says anything about
#: the node (`--max-age`): two missed runs of the 10-minute timer in examples/, plus slack.
DEFAULT_MAX_AGE_S = 1800.0


def api_deadline(api_timeout: float) -> float:
    """The whole exchange with the Proxmox API: the per-request timeout bounds each socket
    operation, this bounds the two requests together."""
    return 2 * api_timeout + 1
