"""The documented nightly command lines (systemd unit, crontab) parse with today's CLI."""

from __future__ import annotations

import shlex
from pathlib import Path

from fleetcheck.cli import build_parser
from fleetcheck.playbook import load_playbook

REPO = Path(__file__).resolve().parents[2]


def exec_start(unit: Path) -> list[str]:
    text = unit.read_text(encoding="utf-8").replace("\\\n", " ")
    (line,) = [line for line in text.splitlines() if line.startswith("ExecStart=")]
    return shlex.split(line.removeprefix("ExecStart="))


def check_nightly_argv(argv: list[str]) -> None:
    assert argv[0] == "/usr/local/bin/fleetcheck"
    args = build_parser().parse_args(argv[1:])
    assert (args.command, args.playbook, args.history, args.keep) == (
        "audit", "nightly", "/var/lib/fleetcheck/runs", 90)
    assert args.on_change
    assert load_playbook(args.playbook).name == "nightly"


def test_systemd_unit_command_parses() -> None:
    check_nightly_argv(exec_start(REPO / "examples" / "fleetcheck-nightly.service"))
    timer = (REPO / "examples" / "fleetcheck-nightly.timer").read_text(encoding="utf-8")
    assert "OnCalendar=*-*-* 02:15:00" in timer.splitlines()


def test_crontab_line_in_the_docs_parses() -> None:
    doc = (REPO / "docs" / "nightly.md").read_text(encoding="utf-8")
    (line,) = [line for line in doc.splitlines() if line.startswith("15 2 * * * ")]
    fields = shlex.split(line)
    # minute hour day month weekday user command...; the redirection is cron's shell's business
    command = fields[6:fields.index(next(f for f in fields if f.startswith(">>")))]
    check_nightly_argv(command)
