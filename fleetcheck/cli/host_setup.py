"""`fleetcheck host-setup`: the installer that restricts an audit key to the probe on a host
(the least-privilege key's gatekeeper, docs/security.md)."""

from __future__ import annotations

import argparse
from typing import Any

from fleetcheck.cli.exits import EXIT_PASS
from fleetcheck.cli.output import emit

NAME = "host-setup"


def add_parser(sub: Any) -> argparse.ArgumentParser:
    from fleetcheck.host_setup import (
        DEFAULT_AUTHORIZED_KEYS,
        DEFAULT_HASH_PATH,
        DEFAULT_HOST_PYTHON,
        DEFAULT_SCRIPT_PATH,
    )

    parser: argparse.ArgumentParser = sub.add_parser(
        NAME, help="restrict an audit key to running the probe (prints an installer)",
        description="Print a standard-library program that, run as root on a Proxmox host "
        "(fleetcheck host-setup --key KEY.pub | ssh root@HOST python3 -), installs the "
        "fleetcheck gatekeeper, adds this fleetcheck's probe hash to the host's allow-list and "
        "puts KEY in authorized_keys as restrict,command=\"gatekeeper\": the key can then run "
        "nothing but the audit's commands and the pinned probe. Run it again after an upgrade.",
    )
    parser.add_argument("--key", required=True, metavar="FILE",
                        help="the audit key's public key (.pub)")
    parser.add_argument("--python", default=DEFAULT_HOST_PYTHON, metavar="PATH",
                        help=f"the host's Python 3 (default: {DEFAULT_HOST_PYTHON})")
    parser.add_argument("--script-path", default=DEFAULT_SCRIPT_PATH, metavar="PATH",
                        help=f"where the gatekeeper goes (default: {DEFAULT_SCRIPT_PATH})")
    parser.add_argument("--hash-file", default=DEFAULT_HASH_PATH, metavar="PATH",
                        help=f"the probe hash allow-list (default: {DEFAULT_HASH_PATH})")
    parser.add_argument("--authorized-keys", default=DEFAULT_AUTHORIZED_KEYS, metavar="PATH",
                        help="the login's authorized_keys on the host "
                        f"(default: {DEFAULT_AUTHORIZED_KEYS})")
    parser.add_argument("--from", dest="from_patterns", metavar="PATTERNS",
                        help="also restrict the key to these client addresses (from=\"...\")")
    parser.add_argument("--log", metavar="PATH",
                        help="log to this file instead of syslog (hosts without syslog)")
    shown = parser.add_mutually_exclusive_group()
    shown.add_argument("--print-line", action="store_true",
                       help="print only the authorized_keys line")
    shown.add_argument("--print-script", action="store_true",
                       help="print only the gatekeeper script")
    return parser


def run(args: argparse.Namespace) -> int:
    from fleetcheck.host_setup import HostSetup

    setup = HostSetup.for_key_file(
        args.key, python=args.python, script_path=args.script_path, hash_path=args.hash_file,
        authorized_keys=args.authorized_keys, log_path=args.log,
        from_patterns=args.from_patterns)
    if args.print_line:
        emit(setup.key_line() + "\n")
    elif args.print_script:
        emit(setup.script())
    else:
        emit(setup.installer())
    return EXIT_PASS
