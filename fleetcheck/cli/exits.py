"""How a command ends: every exit code the command line returns (the audit's 0-3 from
`judgement/exit_codes.py`, and its own for Ctrl-C, a closed pipe and a failed flush), which
failure ends with which, and the end of the process once its output is flushed."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from typing import NoReturn

from fleetcheck.cli.output import flush_streams, say, silence_stdout
from fleetcheck.errors import FleetcheckError
from fleetcheck.judgement.exit_codes import EXIT_FAIL, EXIT_PASS, EXIT_UNVERIFIED, EXIT_USAGE

__all__ = ["EXIT_BROKEN_PIPE", "EXIT_FAIL", "EXIT_FLUSH_FAILED", "EXIT_INTERRUPTED",
           "EXIT_PASS", "EXIT_UNVERIFIED", "EXIT_USAGE", "exit_code", "finish"]

#: CPython's own exit status when flushing stdout fails at exit (Py_FinalizeEx).
EXIT_FLUSH_FAILED = 120
#: Ctrl-C: 128 + SIGINT, as a shell reports a death by it.
EXIT_INTERRUPTED = 130
#: A write to a pipe whose reader left, outside `output.emit`: 128 + SIGPIPE.
EXIT_BROKEN_PIPE = 141


def exit_code(command: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """Run `command` and say how it ended: its own code, or the one its failure ends with."""
    try:
        return command(args)
    except KeyboardInterrupt:
        say(["interrupted"])
        return EXIT_INTERRUPTED
    except FleetcheckError as exc:
        # Every stage's own exception (fleetcheck/errors.py): one line, exit code 2.
        say([f"error: {exc}"])
        return EXIT_USAGE
    except BrokenPipeError:
        # Output goes through output.emit, which survives a closed pipe; anything else that
        # meets one ends as a shell reports a death by SIGPIPE, never as a pass.
        silence_stdout()
        return EXIT_BROKEN_PIPE


def finish(code: int) -> NoReturn:
    """End the process with `code` at once, once stdout and stderr are flushed.

    Python's own shutdown (a full garbage collection, then every module's objects freed one
    by one) took 65-90 ms after a gate of 100 nodes, a sixth of all the gate may add to the
    slowest probe (bench/results.md), and gives nothing back: every file fleetcheck writes is
    closed, and renamed into place, before `main` returns, and it registers no exit handler.
    A reader that left (`fleetcheck audit | head`) does not change the code.
    """
    if not flush_streams():
        code = EXIT_FLUSH_FAILED
    os._exit(code)
