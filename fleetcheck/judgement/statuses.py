"""Owns what a node's status means: failing, unverified, gate-unverified, healthy, probed, the
probe's own, the ones that need a look; the status vocabulary itself is the data contract in
`report/content.py`."""

from __future__ import annotations

#: Node statuses that mean "could not be verified" (exit code 3 when nothing failed).
UNVERIFIED_STATUSES = frozenset({"error", "unreachable"})
#: For a gate, a node it could not look at is not a pass: skipped (stopped) ones included.
GATE_UNVERIFIED = UNVERIFIED_STATUSES | {"skipped"}
#: Statuses that need someone's attention (history's "failing since", the failing-only views).
FAILING_STATUSES = frozenset({"fail"}) | UNVERIFIED_STATUSES
#: Statuses of a node that was verified and may run jobs.
HEALTHY_STATUSES = frozenset({"ok", "warn"})
#: Statuses a node can have once the probe printed its document (what fleet rules compare).
PROBED_STATUSES = HEALTHY_STATUSES | {"fail", "error"}
#: The statuses the probe itself may report (its document's `status`).
PROBE_STATUSES = ("ok", "warn", "fail", "error")
#: Node statuses that need a look, most urgent first (the list below the matrix).
PROBLEM_STATUSES = ("fail", "error", "unreachable", "warn")
#: Check statuses that are a problem, worst first: a root cause is a check of the worst one
#: found, a matrix cell in one of them names its check.
PROBLEM_CHECK_STATUSES = ("fail", "error", "warn")
