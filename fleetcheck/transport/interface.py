"""What every transport offers: run one argv on a node, with input and a timeout.

Owns the transport contract (`Transport`, `CommandResult`, `TransportError`); a node's time
budget (`NodeBudget`) is `fleetcheck/budget.py`'s, handed to every transport.
"""

from __future__ import annotations

import abc
import contextlib
import signal
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass
from typing import Protocol

from fleetcheck.budget import (  # the time budget's names, re-exported for transports
    DEFAULT_DEEP_NODE_TIMEOUT,
    DEFAULT_NODE_TIMEOUT,
    BudgetFor,
    NodeBudget,
    node_timeout,
)
from fleetcheck.errors import FleetcheckError
from fleetcheck.failures import Refusal

__all__ = [
    "DEFAULT_DEEP_NODE_TIMEOUT",
    "DEFAULT_NODE_TIMEOUT",
    "OUTPUT_CAP",
    "STDERR_CAP",
    "BudgetFor",
    "CappedOutput",
    "CommandResult",
    "NestedTransport",
    "NodeBudget",
    "RunCommand",
    "Transport",
    "TransportError",
    "node_timeout",
]

#: Most stdout bytes kept per command; a node printing more is cut off and marked truncated.
OUTPUT_CAP = 8 * 1024 * 1024
STDERR_CAP = 256 * 1024


class CappedOutput:
    """One command's stdout and stderr as they arrive, each kept up to its cap: the one rule
    for an SSH channel's output, whichever client reads it."""

    def __init__(self, cap: int = OUTPUT_CAP, stderr_cap: int = STDERR_CAP) -> None:
        self.cap = cap
        self.stderr_cap = stderr_cap
        self.stdout: list[bytes] = []
        self.stderr: list[bytes] = []
        self.stdout_size = 0
        self.stderr_size = 0
        #: stdout passed its cap: what came after it is dropped, and the command is cut off.
        self.truncated = False

    def out(self, data: bytes) -> bool:
        """Keep stdout `data` up to the cap; False once the cap is passed (now truncated)."""
        room = self.cap - self.stdout_size
        if len(data) > room:
            self.stdout.append(data[:room])
            self.stdout_size = self.cap
            self.truncated = True
            return False
        self.stdout.append(data)
        self.stdout_size += len(data)
        return True

    def err(self, data: bytes) -> None:
        """Keep stderr `data` up to its cap (counted beyond it)."""
        if self.stderr_size < self.stderr_cap:
            self.stderr.append(data[:self.stderr_cap - self.stderr_size])
        self.stderr_size += len(data)

class TransportError(FleetcheckError):
    """A node could not be reached or a command could not be run on it.

    `kind` sorts the failure for the report: "unreachable" (DNS, refused, auth, host key,
    connection lost before the command ran) or "error" (anything after that). `cause` is
    the failure's id (`fleetcheck/failures.py`) where the transport knows one.
    """

    def __init__(self, message: str, kind: str = "unreachable", *,
                 cause: str | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.cause = cause


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


def signal_name(number: int) -> str:
    """"SEGV" for 11, as sshd's exit-signal names it (`CommandResult.signal`); real-time
    signals have no name: "36"."""
    try:
        return signal.Signals(number).name.removeprefix("SIG")
    except ValueError:
        return str(number)


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

    def explain_failure(self, result: CommandResult) -> Refusal | None:
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

    def packs_probe(self) -> bool:
        """Whether a large probe reaches this transport's nodes compressed behind a bootstrap
        (`transport/packing.py`): where its bytes cross a network (SSH, and the commands run
        through it) and on the local machine (the bootstrap's compile lets the script's parse
        tree go before it runs); not a transport that packs scripts its own way."""
        return False

    async def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections; safe to call more than once."""


class NestedTransport(Transport):
    """Runs each command through an outer transport (`pct exec`, `qm guest exec`, `docker
    exec` around the node it sits in): the outer's session slots, so one SSH connection and
    its channel bound per host, and the outer's refusals read before this tool's own.

    A subclass says how its tool wraps a command (`wrap`, or `through` when the reply must
    be unpacked too) and what its tool's refusals mean (`explain_own`).
    """

    def __init__(self, outer: Transport) -> None:
        #: The transport this node's commands run through.
        self.outer = outer

    def wrap(self, argv: list[str]) -> list[str]:
        """The outer transport's argv that runs `argv` in this node."""
        raise NotImplementedError

    async def through(
        self, outer_run: RunCommand, argv: list[str], input: bytes | None, timeout: float
    ) -> CommandResult:
        """Run `argv` in this node with the outer transport's `outer_run`."""
        return await outer_run(self.wrap(argv), input=input, timeout=timeout)

    def explain_own(self, result: CommandResult) -> Refusal | None:
        """(status, reason) when this transport's own tool refused to run."""
        del result
        return None

    def explain_failure(self, result: CommandResult) -> Refusal | None:
        # What stands before this tool (the host's gatekeeper, pct, qm...) refuses first.
        return self.outer.explain_failure(result) or self.explain_own(result)

    def connection_facts(self) -> dict[str, object]:
        return self.outer.connection_facts()

    def packs_probe(self) -> bool:
        # The probe rides the outer transport's channel: packed where that one packs it.
        return self.outer.packs_probe()

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
