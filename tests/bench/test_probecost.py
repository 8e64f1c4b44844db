"""bench/probecost.py's probe variants and bench/profile_diff.py's reading of py-spy stacks."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from bench.probecost import padded, sleeping
from bench.profile_diff import area, spy_times


def test_padded_probe_has_the_size_asked_and_prints_the_same(tmp_path: Path) -> None:
    source = tmp_path / "trivial.py"
    source.write_text("import sys\nsys.stdout.write('{\"ok\": 1}')\nsys.exit(0)\n")
    big = padded(source, 4096, tmp_path / "big.py")
    assert big.stat().st_size == 4096
    slow = sleeping(big, 0.0, tmp_path / "slow.py")
    for script in (source, big, slow):
        done = subprocess.run([sys.executable, "-"], input=script.read_bytes(),
                              capture_output=True, check=True, timeout=60)
        assert done.stdout == b'{"ok": 1}'


def test_spy_times_charge_each_leaf_its_samples(tmp_path: Path) -> None:
    raw = tmp_path / "stacks.txt"
    raw.write_text(
        "main (bench/x.py:1);send_packet (/v/asyncssh/connection.py:1790) 30\n"
        "main (bench/x.py:1);send_packet (/v/asyncssh/connection.py:1801) 20\n"
        "main (bench/x.py:1);parse (/r/fleetcheck/probe/results.py:70) 50\n")
    total, table = spy_times(str(raw), rate=100.0)
    assert total == 1.0
    assert table["v/asyncssh/connection.py(send_packet)"] == (0.5, 50)
    assert area("asyncssh/connection.py(send_packet)") == "asyncssh packets, channel, window"
    assert area("fleetcheck/probe/results.py(parse)").startswith("fleetcheck parse")
