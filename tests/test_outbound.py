"""The remediation bound: a share or a count, at least one node."""

from __future__ import annotations

import pytest

from fleetcheck.cli import main
from fleetcheck.outbound import OutBoundError, parse_out_bound


@pytest.mark.parametrize(("text", "total", "allowed"), [
    ("10%", 4, 1), ("10%", 30, 3), ("10%", 39, 3), ("10%", 1000, 100), ("50%", 4, 2),
    ("100%", 7, 7), ("2", 4, 2), ("5", 3, 5), ("0.5%", 10, 1),
])
def test_allowed(text: str, total: int, allowed: int) -> None:
    assert parse_out_bound(text).allowed(total) == allowed


@pytest.mark.parametrize(("text", "message"), [
    ("0", "'0': at least 1 node"),
    ("0%", "'0%': a share must be above 0% and at most 100%"),
    ("150%", "'150%': a share must be above 0% and at most 100%"),
    ("ten", "'ten': give a share (10%) or a number of nodes (3)"),
    ("1.5", "'1.5': give a share (10%) or a number of nodes (3)"),
])
def test_refused(text: str, message: str) -> None:
    with pytest.raises(OutBoundError) as caught:
        parse_out_bound(text)
    assert str(caught.value) == message


def test_a_bad_bound_is_a_usage_error_before_anything_runs(capsys) -> None:
    assert main(["health", "--slurm", "--cache", "/nonexistent", "--max-out", "0"]) == 2
    assert capsys.readouterr().err == "fleetcheck: error: --max-out '0': at least 1 node\n"
