"""Running a node's plan: each step through the node's own transport, stopping at the first failure.

Owns what is recorded of each command (exit status, clipped output, time) and how a node's
before -> after is judged (fixed, still failing, fix failed, interrupted). The record is
filled in as each command returns, so an interrupted apply still has every command that ran.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from fleetcheck.fix.plan import NodePlan, Step
from fleetcheck.judgement.statuses import HEALTHY_STATUSES, UNVERIFIED_STATUSES
from fleetcheck.report.content import NodeResult
from fleetcheck.transport.interface import (
    CommandResult,
    NodeBudget,
    RunCommand,
    TransportError,
)

#: Output kept per command and stream in the record (the end: apt's errors come last).
OUTPUT_TAIL = 4000

#: A node's outcome after --apply (the before -> after table's last column).
FIXED = "fixed"
STILL_FAILING = "still failing"
FIX_FAILED = "fix failed"
INTERRUPTED = "interrupted"
NOT_APPLIED = "not applied"
NOT_REACHED = "not reached"
UNVERIFIED = "unverified"
OUTCOMES = (FIXED, STILL_FAILING, FIX_FAILED, INTERRUPTED, NOT_APPLIED, NOT_REACHED, UNVERIFIED)


def _tail(data: bytes) -> str:
    text = data.decode("utf-8", "replace")
    return text if len(text) <= OUTPUT_TAIL else "…" + text[-(OUTPUT_TAIL - 1):]


@dataclass
class StepRun:
    """One command as it ran: its argv, exit status and output (the end of each stream)."""

    step: Step
    argv: tuple[str, ...]
    returncode: int | None = None
    stdout: str = ""
    stderr: str = ""
    duration_s: float = 0.0
    timed_out: bool = False
    signal: str | None = None
    #: Why the command could not be run at all (the transport's error), or "".
    error: str = ""

    @property
    def ok(self) -> bool:
        return (self.returncode == 0 and not self.timed_out and self.signal is None
                and not self.error)

    def failure(self) -> str:
        """One line: how the command failed, with its last line of output."""
        if self.error:
            return self.error
        if self.timed_out:
            return f"timed out after {self.duration_s:.0f} s"
        lines = [line.strip() for line in (self.stderr or self.stdout).splitlines()
                 if line.strip()]
        last = lines[-1] if lines else "no output"
        if self.signal:
            return f"killed by signal {self.signal}: {last}"
        return f"exit status {self.returncode}: {last}"


@dataclass
class NodeOutcome:
    """A node's plan, what of it ran, and the after-probe."""

    plan: NodePlan
    ran: list[StepRun] = field(default_factory=list)
    #: True once every step ran or one failed (nothing more will run on this node).
    finished: bool = False
    after: NodeResult | None = None

    @property
    def node_id(self) -> str:
        return self.plan.node.id

    @property
    def failed_step(self) -> StepRun | None:
        return next((run for run in self.ran if not run.ok), None)

    @property
    def outcome(self) -> str:
        """One of OUTCOMES."""
        if not self.plan.steps:
            return NOT_APPLIED
        if not self.ran and self.after is not None and self.after.status in (
                UNVERIFIED_STATUSES):
            # Its host could not be reached (or its guests listed): nothing ran.
            return NOT_REACHED
        if not self.finished:
            return INTERRUPTED
        if self.failed_step is not None:
            return FIX_FAILED
        if self.after is None:
            return INTERRUPTED
        if self.after.status in HEALTHY_STATUSES:
            return FIXED
        if self.after.status == "fail":
            return STILL_FAILING
        return UNVERIFIED


def with_privilege(argv: tuple[str, ...], prefix: list[str]) -> list[str]:
    """argv behind the node's privilege prefix (`sudo -n` on a host whose login is not root)."""
    return [*prefix, *argv]


async def run_steps(
    outcome: NodeOutcome, run: RunCommand, *, budget: NodeBudget,
    prefix: list[str] | None = None,
) -> bool:
    """Run the plan's steps in order through `run`; stop at the first failure. True if all ran.

    Each command gets the node's budget as its probe does: the transport's timeout
    (`budget.timeout`), and `budget.outer_bound` for a transport that does not answer at all;
    either counts as a failed step. `outcome.ran` grows as each command returns.
    """
    for step in outcome.plan.steps:
        argv = with_privilege(step.argv, prefix or [])
        record = StepRun(step=step, argv=tuple(argv))
        started = time.monotonic()
        data = step.input.encode() if step.input is not None else None
        try:
            result: CommandResult = await asyncio.wait_for(
                run(argv, input=data, timeout=budget.timeout), budget.outer_bound)
        except TransportError as exc:
            record.error = str(exc)
        except asyncio.TimeoutError:
            record.timed_out = True
        except asyncio.CancelledError:
            # Ctrl-C or the deadline: the command may have done part of its work; say so.
            record.error = "interrupted while running"
            record.duration_s = time.monotonic() - started
            outcome.ran.append(record)
            raise
        else:
            record.returncode = result.returncode
            record.stdout = _tail(result.stdout)
            record.stderr = _tail(result.stderr)
            record.timed_out = result.timed_out
            record.signal = result.signal
        record.duration_s = time.monotonic() - started
        outcome.ran.append(record)
        if not record.ok:
            outcome.finished = True
            return False
    outcome.finished = True
    return True
