"""What every transport offers: run one argv on a node, with input and a timeout.

Owns the transport contract (`Transport`, `CommandResult`, `TransportError`) and a node's
time budget (`NodeBudget`): every deadline derived from a node's timeout is computed here.
"""

from __future__ import annotations

import abc
import contextlib
import math
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

#: Most stdout bytes kept per command; a node printing more is cut off and marked truncated.
OUTPUT_CAP = 8 * 1024 * 1024
STDERR_CAP = 256 * 1024
#: A node's timeout when the inventory names none (`defaults.timeout`, `fleetcheck probe`).
DEFAULT_NODE_TIMEOUT = 60.0
#: The same for `--deep`, whose compile and kernel checks take longer.
DEFAULT_DEEP_NODE_TIMEOUT = 180.0


def node_timeout(given: float | None, *, deep: bool) -> float:
    """The node timeout asked for, else the default for a plain or a deep probe."""
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


class TransportError(Exception):
    """A node could not be reached or a command could not be run on it.

    `kind` sorts the failure for the report: "unreachable" (DNS, refused, auth, host key,
    connection lost before the command ran) or "error" (anything after that).
    """

    def __init__(self, message: str, kind: str = "unreachable") -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class CommandResult:
    """What a remote command left: exit status, output and whether it ran out of time."""

    returncode: int | None
    stdout: bytes
    stderr: bytes
    timed_out: bool = False
    #: True when stdout was cut at the transport's output cap.
    truncated: bool = False
    #: The signal that ended the command ("KILL", "SEGV"...), when one did; returncode is None.
    signal: str | None = None


#: Builds a node's budget from its timeout; `NodeBudget` itself, or a variant a test passes.
BudgetFor = Callable[[float], NodeBudget]


class RunCommand(Protocol):
    """`Transport.run`'s signature, for the callable `Transport.session` yields."""

    def __call__(
        self, argv: list[str], *, input: bytes | None = None, timeout: float
    ) -> Awaitable[CommandResult]: ...


class Transport(abc.ABC):
    """Runs commands on one node (or, for SSH, on one host and its containers)."""

    @abc.abstractmethod
    async def run(
        self, argv: list[str], *, input: bytes | None = None, timeout: float
    ) -> CommandResult:
        """Run `argv` (never a shell string), feed it `input`, wait at most `timeout` seconds.

        Raises TransportError when the node cannot be reached; a command that fails or
        times out is a CommandResult, not an exception.
        """

    @contextlib.asynccontextmanager
    async def session(self) -> AsyncIterator[RunCommand]:
        """Hold one of this transport's command slots; yields a `run` that uses it.

        Waiting here (for the connection, for a free SSH session) is queueing, not command
        time: a caller that times its command starts the clock once this has been entered.
        Raises TransportError like `run`. Transports without a bound yield `run` itself.
        """
        yield self.run

    def explain_failure(self, result: CommandResult) -> tuple[str, str] | None:
        """(status, reason) when this transport's own tool, not the command, refused to run.

        Read only for a command that printed no probe document and exited non-zero. Each
        transport owns the wording of its tool's stderr and exit codes (pct's, sudo's...);
        a plain transport has none.
        """
        del result
        return None

    def connection_facts(self) -> dict[str, object]:
        """Facts about how the node was reached (SSH: the effective address, port, user,
        known_hosts, the key exchange and cipher negotiated), merged into the node's facts."""
        return {}

    async def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections; safe to call more than once."""


class NestedTransport(Transport):
    """Runs each command through an outer transport (`pct exec`, `qm guest exec`, `docker
    exec` around the node it sits in): the outer's session slots, so one SSH connection and
    its channel bound per host, and the outer's refusals read before this tool's own.

    A subclass says how its tool wraps a command (`wrap`, or `through` when the reply must
    be unpacked too) and what its tool's refusals mean (`explain_own`).
    """

    @property
    @abc.abstractmethod
    def outer(self) -> Transport:
        """The transport this node's commands run through."""

    def wrap(self, argv: list[str]) -> list[str]:
        """The outer transport's argv that runs `argv` in this node."""
        raise NotImplementedError

    async def through(
        self, outer_run: RunCommand, argv: list[str], input: bytes | None, timeout: float
    ) -> CommandResult:
        """Run `argv` in this node with the outer transport's `outer_run`."""
        return await outer_run(self.wrap(argv), input=input, timeout=timeout)

    def explain_own(self, result: CommandResult) -> tuple[str, str] | None:
        """(status, reason) when this transport's own tool refused to run."""
        del result
        return None

    def explain_failure(self, result: CommandResult) -> tuple[str, str] | None:
        # What stands before this tool (the host's gatekeeper, pct, qm...) refuses first.
        return self.outer.explain_failure(result) or self.explain_own(result)

    def connection_facts(self) -> dict[str, object]:
        return self.outer.connection_facts()

    async def run(
        self, argv: list[str], *, input: bytes | None = None, timeout: float
    ) -> CommandResult:
        return await self.through(self.outer.run, argv, input, timeout)

    @contextlib.asynccontextmanager
    async def session(self) -> AsyncIterator[RunCommand]:
        """One of the outer transport's session slots, running commands in this node."""
        async with self.outer.session() as outer_run:

            async def run(
                argv: list[str], *, input: bytes | None = None, timeout: float
            ) -> CommandResult:
                return await self.through(outer_run, argv, input, timeout)

            yield run
