"""Run the real `fleetcheck` CLI with another probe script in place of the shipped one.

Usage: python bench/fleetcheck_with_probe.py PROBE.py audit INVENTORY --format json -o FILE

Used only when fleetcheck offers no option or environment variable to choose the probe
source: it replaces `fleetcheck.probe.probe_source` before the audit module is imported (and
again after, in case that module bound the name itself), then calls `fleetcheck.cli.main`.
Everything else — inventory, SSH, rendering, the JSON file — is the shipped code path.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main(argv: list[str]) -> int:
    source = Path(argv[0]).read_text()

    def probe_source() -> str:
        return source

    probe = importlib.import_module("fleetcheck.probe")
    probe.probe_source = probe_source  # type: ignore[attr-defined]
    try:
        audit = importlib.import_module("fleetcheck.audit")
    except ImportError:
        audit = None
    if audit is not None and hasattr(audit, "probe_source"):
        audit.probe_source = probe_source
    from fleetcheck.cli import main as cli_main

    return cli_main(argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
