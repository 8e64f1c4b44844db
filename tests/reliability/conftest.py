"""Figures for the reliability suite: counters the tests record, printed after the run."""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterator

import pytest


class Figures:
    """What the reliability tests tried and what they found, for the terminal summary.

    Tests record through the `figures` fixture; the summary is printed only when at least one
    reliability test recorded something, so a run of other tests prints nothing extra.
    """

    def __init__(self) -> None:
        self.faults: dict[str, bool] = {}
        self.inputs: Counter[str] = Counter()
        self.secret_scans = 0
        self.secret_leaks: list[str] = []
        self.injections_tried = 0
        self.injections_run: list[str] = []
        self.process_checks = 0
        self.leftover_processes: list[str] = []
        self.write_faults = 0
        self.damaged_reports: list[str] = []
        self.probe_runs = 0
        self.probe_leftovers: list[str] = []
        self.host_key_checks = 0
        self.host_key_accepted: list[str] = []

    @contextlib.contextmanager
    def fault(self, name: str) -> Iterator[None]:
        """Counts the block as one fault: survived when it ends without an exception."""
        self.faults[name] = False
        yield
        self.faults[name] = True

    def tried(self, target: str, count: int = 1) -> None:
        """`count` hostile or broken inputs were fed to `target`."""
        self.inputs[target] += count

    def secrets_scanned(self, leaks: list[str], artefacts: int = 1) -> None:
        self.secret_scans += artefacts
        self.secret_leaks += leaks

    def injection(self, payload: str, ran: bool) -> None:
        self.injections_tried += 1
        if ran:
            self.injections_run.append(payload)

    def processes(self, leftovers: list[str]) -> None:
        """One sweep of the remote side for processes that should be gone."""
        self.process_checks += 1
        self.leftover_processes += leftovers

    def report_write(self, damaged: str | None) -> None:
        self.write_faults += 1
        if damaged:
            self.damaged_reports.append(damaged)

    def probe_run(self, leftovers: list[str]) -> None:
        self.probe_runs += 1
        self.probe_leftovers += leftovers

    def host_key(self, accepted: str | None) -> None:
        self.host_key_checks += 1
        if accepted:
            self.host_key_accepted.append(accepted)

    @property
    def recorded(self) -> bool:
        return bool(
            self.faults or self.inputs or self.secret_scans or self.injections_tried
            or self.process_checks or self.write_faults or self.probe_runs
            or self.host_key_checks
        )

    def lines(self) -> list[str]:
        survived = sum(self.faults.values())
        out = [f"faults survived: {survived}/{len(self.faults)}"]
        out += [f"  NOT survived: {name}" for name, ok in sorted(self.faults.items()) if not ok]
        total = sum(self.inputs.values())
        detail = ", ".join(f"{k} {v}" for k, v in sorted(self.inputs.items()))
        out.append(f"hostile/broken inputs tried: {total}" + (f" ({detail})" if detail else ""))
        out.append(
            f"secret leaks: {len(self.secret_leaks)} "
            f"(artefacts scanned: {self.secret_scans})"
        )
        out += [f"  LEAK: {leak}" for leak in self.secret_leaks]
        out.append(
            f"shell injections that ran: {len(self.injections_run)} "
            f"(payloads tried: {self.injections_tried})"
        )
        out += [f"  RAN: {payload!r}" for payload in self.injections_run]
        out.append(
            f"leftover remote processes: {len(self.leftover_processes)} "
            f"(sweeps: {self.process_checks})"
        )
        out += [f"  LEFT: {proc}" for proc in self.leftover_processes]
        out.append(
            f"damaged or truncated report files: {len(self.damaged_reports)} "
            f"(failed writes tried: {self.write_faults})"
        )
        out += [f"  DAMAGED: {what}" for what in self.damaged_reports]
        out.append(
            f"files the probe left on the node: {len(self.probe_leftovers)} "
            f"(probe runs checked: {self.probe_runs})"
        )
        out += [f"  LEFT: {path}" for path in self.probe_leftovers]
        out.append(
            f"changed/unknown host keys accepted: {len(self.host_key_accepted)} "
            f"(connections tried: {self.host_key_checks})"
        )
        return out


_FIGURES = Figures()


@pytest.fixture(scope="session")
def figures() -> Figures:
    """The suite's counters (see Figures)."""
    return _FIGURES


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _FIGURES.recorded:
        return
    terminalreporter.section("fleetcheck reliability figures")
    for line in _FIGURES.lines():
        terminalreporter.write_line(line)


#: Strings a compromised or broken node (or a careless inventory) could hand us.
HOSTILE_STRINGS = (
    "\x1b[2J\x1b[H\x1b[31mOWNED\x1b[0m",  # clear screen, colours
    "\x1b]0;pwned\x07",  # set the terminal title (OSC)
    "\x1b]8;;http://evil.invalid/\x1b\\click\x1b]8;;\x1b\\",  # OSC 8 hyperlink
    "\x9b31mC1-CSI",  # one-byte CSI
    "line1\nline2\r\nline3\rX",
    "\x00NUL\x01\x02\x7f",
    "<script>alert(1)</script>",
    '"><img src=x onerror=alert(1)>',
    "</td></tr></table><h1>injected</h1>",
    "javascript:alert(1)",
    "{{ 7*7 }}{% raw %}",
    "]]><!--<![CDATA[",
    "&amp;&lt;&#0;&#x1b;",
    "a\u202egnp.exe",  # right-to-left override
    "\ufeffBOM\u2028LS\u2029PS",
    "\ud800",  # lone surrogate (what surrogateescape makes of invalid UTF-8)
    "'; DROP TABLE nodes; --",
    '$(touch /tmp/x) `id` ;id|id&&id',
    'metric{label="x"} 1\n# TYPE evil counter\nevil 1',
    "\\\"\\n\\",
    "x" * 10_000,
    "\U0001f525" * 50,
)


@pytest.fixture(scope="session")
def hostile_strings() -> tuple[str, ...]:
    """Hostile strings for names, reasons, facts and check summaries."""
    return HOSTILE_STRINGS
