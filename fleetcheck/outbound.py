"""The blast radius of remediation: how many nodes fleetcheck may take out of service at once.

One bad image, driver push or playbook makes every node fail at the same moment; a health check
that drains each failing node on its own would then empty the partition (medik8s'
`maxUnhealthy` and karpenter's disruption budgets bound exactly this). Both ways fleetcheck
takes nodes out, `health --slurm` (drains) and `fix --apply` (repairs), go through the bound
defined here: a share (`10%`) or a count (`3`) of the partition or selection, 10% by default,
and at least one node.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

#: The bound when none is given: a tenth of the partition (at least one node).
DEFAULT_OUT_BOUND = "10%"


class OutBoundError(ValueError):
    """A bound that does not parse; the message is one line."""


@dataclass(frozen=True)
class OutBound:
    """At most `count` nodes, or `share` of them (at least one), out at once."""

    text: str
    share: float | None = None
    count: int | None = None

    def allowed(self, total: int) -> int:
        """How many of `total` nodes may be out at once."""
        if self.count is not None:
            return self.count
        assert self.share is not None
        # A hair of slack so that 10% of 30 is 3, not 2.9999999.
        return max(1, math.floor(self.share * total + 1e-9))

    def describe(self, total: int) -> str:
        """`10%: at most 1 of 8` — the bound's part of a refusal."""
        return f"{self.text}: at most {self.allowed(total)} of {total}"


def parse_out_bound(text: str) -> OutBound:
    """`10%` (a share, 0 < share <= 100) or `3` (a count, at least 1)."""
    value = text.strip()
    try:
        if value.endswith("%"):
            share = float(value[:-1])
            if not 0 < share <= 100:
                raise OutBoundError(f"{text!r}: a share must be above 0% and at most 100%")
            return OutBound(text=value, share=share / 100)
        count = int(value)
    except ValueError as exc:
        if isinstance(exc, OutBoundError):
            raise
        raise OutBoundError(f"{text!r}: give a share (10%) or a number of nodes (3)") from None
    if count < 1:
        raise OutBoundError(f"{text!r}: at least 1 node")
    return OutBound(text=value, count=count)
