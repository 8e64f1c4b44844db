"""One library call per command: the outcome holds what the CLI prints and its exit code."""

from __future__ import annotations

import socket
from pathlib import Path

from fleetcheck import commands
from fleetcheck.inventory_data.model import HostSpec, Inventory
from fleetcheck.judgement.exit_codes import exit_code_for


def test_audit_returns_the_report_with_fleet_checks_history_and_exit_code(tmp_path: Path
                                                                          ) -> None:
    host = HostSpec(name=socket.gethostname() or "localhost", address=None, transport="local",
                    probe_host=True)
    inventory = Inventory(path="<test>", hosts=(host,))
    request = commands.AuditRequest(inventory, history=str(tmp_path / "runs"))
    first = commands.audit(request)
    assert [node.id for node in first.report.nodes] == [host.name]
    # The fleet checks ran: the policy that judged them is named (the audit alone names none).
    assert first.report.playbook == request.policy.name == "default"
    assert first.exit_code == int(exit_code_for(first.report))
    assert first.keep_run and first.changes == [] and first.limit_error is None
    assert first.record() == []
    # The second run compares with the first, which record() kept.
    second = commands.audit(request)
    assert len(second.history) == 1
    assert second.render("json").startswith("{")
    before = commands.fix_before(request)
    assert before.report.playbook == "default"
    assert before.report.fleet_checks == second.report.fleet_checks
    assert not before.keep_run  # fix keeps its own history
