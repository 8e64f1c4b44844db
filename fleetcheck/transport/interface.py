"""What every transport offers: run one argv on a node, with input and a timeout."""

from __future__ import annotations

import abc
import contextlib
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass
from typing import Protocol


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

    async def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections; safe to call more than once."""
