"""What an audit holds on to: host connections released early, the open-files limit lifted."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap

from fleetcheck.audit import run_audit
from fleetcheck.inventory import load_inventory
from fleetcheck.observer import NullObserver
from fleetcheck.report.content import NodeResult

#: A container's "python3" that runs until the fast host's sshd logs the end of its session,
#: then prints a line that is not the probe's document; bounded by the node's timeout.
WAIT_FOR_DISCONNECT = """\
import pathlib, time
log = pathlib.Path({log!r})
while "Disconnected from user" not in log.read_text():
    time.sleep(0.05)
print("the fast host was let go")
"""


def test_a_finished_host_is_disconnected_while_others_still_run(fleet) -> None:
    fleet.add_host("fast", containers="listed")
    fleet.add_container("fast", 101)
    fleet.add_host("slow", containers="listed")
    slow = fleet.add_container("slow", 201, "hang")
    # The slow node runs until the fast host is disconnected (a real condition, not a time):
    # an audit that kept every connection to its end would leave it running to its timeout,
    # and the fast host's log read then would still show no disconnection.
    (slow / "bin" / "python3").unlink()
    (slow / "bin" / "python3").write_text(
        f"#!{sys.executable}\n" + WAIT_FOR_DISCONNECT.format(log=str(fleet.hosts["fast"].log)))
    (slow / "bin" / "python3").chmod(0o755)
    inventory = load_inventory(str(fleet.write_inventory(timeout=120)))
    fast_log_when_slow_ended: list[str] = []

    class Watch(NullObserver):
        def node_finished(self, node: NodeResult) -> None:
            if node.id == "slow/201":
                fast_log_when_slow_ended.append(fleet.hosts["fast"].log.read_text())

    report = asyncio.run(run_audit(inventory, observer=Watch()))
    assert {node.id: node.status for node in report.nodes} == {"fast/101": "ok",
                                                               "slow/201": "error"}
    # The fast host's session ended while the slow one was still probing.
    assert "Disconnected from user" in fast_log_when_slow_ended[0]


def test_the_open_files_soft_limit_is_raised_to_the_hard_limit() -> None:
    script = textwrap.dedent("""
        import resource
        from fleetcheck.audit import raise_open_files_limit
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
        raise_open_files_limit()
        print(resource.getrlimit(resource.RLIMIT_NOFILE)[0] == hard or hard)
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=60, check=True)
    assert result.stdout.strip() == "True"
