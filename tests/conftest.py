"""Shared fixtures: the loopback fleet (real sshd per host, `pct` stand-in, containers)."""

from __future__ import annotations

import os
import shutil
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from tests.fleet import Fleet


def pytest_configure(config: pytest.Config) -> None:
    # A run started as a background job of a non-interactive shell inherits SIGINT ignored, and
    # Python then installs no KeyboardInterrupt handler: the tests that press Ctrl-C (os.kill
    # of their own process, as a terminal would) would wait for an interrupt that never comes.
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)

# Property tests explore a fixed sequence of examples: a CI run never fails on a draw that the
# run before it did not make (fresh failures are found by running with --hypothesis-seed).
settings.register_profile("fleetcheck", derandomize=True, deadline=None, database=None)
settings.load_profile("fleetcheck")

SSHD_MISSING = not (os.path.exists("/usr/sbin/sshd") and shutil.which("ssh-keygen"))


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[Fleet]:
    """A fresh, empty fleet under tmp_path; add hosts and containers, then write_inventory().

    At teardown every sshd is stopped, and the test fails if any probe process outlived it.
    """
    if SSHD_MISSING:
        pytest.skip("needs OpenSSH sshd and ssh-keygen (apt-get install openssh-server)")
    kit = Fleet(tmp_path / "fleet")
    try:
        yield kit
    finally:
        leftovers = kit.close()
    assert leftovers == [], f"processes left running on the test hosts: {leftovers}"
