"""The gatekeeper on a loopback host as an operator installs it, an audit key, its log."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

from fleetcheck.audit import run_audit
from fleetcheck.inventory import load_inventory
from fleetcheck.report.content import Report
from tests.fleet import Fleet, FleetHost


def keygen(path: Path) -> Path:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "fleetcheck-audit",
                    "-f", str(path)], check=True, stdin=subprocess.DEVNULL)
    return path


def install_gatekeeper(host: FleetHost, public_key: Path) -> Path:
    """`fleetcheck host-setup ... | python3 -` for `host`; returns its gatekeeper log."""
    gk = host.dir / "gatekeeper"
    setup = subprocess.run(
        [sys.executable, "-m", "fleetcheck", "host-setup", "--key", str(public_key),
         "--python", sys.executable, "--script-path", str(gk / "gatekeeper.py"),
         "--hash-file", str(gk / "probe.sha256"),
         "--authorized-keys", str(host.dir / "sshd" / "authorized_keys"),
         "--log", str(gk / "gatekeeper.log")],
        check=True, capture_output=True)
    installed = subprocess.run([sys.executable, "-"], input=setup.stdout, check=True,
                               capture_output=True)
    assert b"fleetcheck gatekeeper installed" in installed.stdout
    return gk / "gatekeeper.log"


def audit_with(fleet: Fleet, path: Path, key: Path | None, **defaults: Any) -> Report:
    ssh = {"identity_file": str(key)} if key else {}
    fleet.write_inventory(path, timeout=30, ssh=ssh, **defaults)
    return asyncio.run(run_audit(load_inventory(str(path))))


def log_lines(log: Path, level: str) -> list[str]:
    if not log.exists():
        return []
    return [line for line in log.read_text().splitlines() if f"]: {level} from " in line]
