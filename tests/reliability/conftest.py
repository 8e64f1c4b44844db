"""Figures for the reliability suite: counters the tests record, printed after the run."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.reliability.support import HOSTILE_STRINGS, mount_tmpfs


class Figures:
    """What the reliability tests tried and what they found, for the terminal summary.

    Tests record through the `figures` fixture. Findings of tests marked xfail (known bugs,
    each named in its mark) are counted apart, so the headline numbers say what holds today
    and the known bugs stay visible. The summary is printed only when a reliability test
    recorded something.
    """

    def __init__(self) -> None:
        self.current = ""
        self.xfailed: set[str] = set()
        self.faults: dict[str, tuple[str, bool]] = {}
        self.inputs: Counter[str] = Counter()
        self.tries: Counter[str] = Counter()
        self.findings: dict[str, list[tuple[str, str]]] = {}
        self.measures: dict[str, str] = {}

    def _find(self, kind: str, items: list[str]) -> None:
        self.findings.setdefault(kind, []).extend((self.current, item) for item in items)

    @contextlib.contextmanager
    def fault(self, name: str) -> Iterator[None]:
        """Counts the block as one fault: survived when it ends without an exception."""
        self.faults[name] = (self.current, False)
        yield
        self.faults[name] = (self.current, True)

    def measure(self, name: str, value: str) -> None:
        """A measured value worth printing (e.g. peak memory under a fault)."""
        self.measures[name] = value

    def tried(self, target: str, count: int = 1) -> None:
        """`count` hostile or broken inputs were fed to `target`."""
        self.inputs[target] += count

    def secrets_scanned(self, leaks: list[str], artefacts: int = 1) -> None:
        self.tries["secret"] += artefacts
        self._find("secret", leaks)

    def injection(self, payload: str, ran: bool) -> None:
        self.tries["injection"] += 1
        self._find("injection", [repr(payload)] if ran else [])

    def processes(self, leftovers: list[str]) -> None:
        """One sweep of the node side for processes that should be gone."""
        self.tries["process"] += 1
        self._find("process", leftovers)

    def report_write(self, damaged: str | None) -> None:
        self.tries["write"] += 1
        self._find("write", [damaged] if damaged else [])

    def probe_run(self, leftovers: list[str]) -> None:
        self.tries["probe"] += 1
        self._find("probe", leftovers)

    def host_key(self, accepted: str | None) -> None:
        self.tries["host_key"] += 1
        self._find("host_key", [accepted] if accepted else [])

    def state(self) -> dict[str, Any]:
        """What was recorded, as JSON (a pytest-xdist worker hands it to the controller)."""
        return {"xfailed": sorted(self.xfailed), "faults": self.faults, "inputs": self.inputs,
                "tries": self.tries, "findings": self.findings, "measures": self.measures}

    def merge(self, state: dict[str, Any]) -> None:
        """Add a worker's `state()` (the controller prints the whole run's figures)."""
        self.xfailed.update(state["xfailed"])
        self.faults.update({name: (test, ok) for name, (test, ok) in state["faults"].items()})
        self.inputs.update(state["inputs"])
        self.tries.update(state["tries"])
        for kind, items in state["findings"].items():
            self.findings.setdefault(kind, []).extend((test, text) for test, text in items)
        self.measures.update(state["measures"])

    @property
    def recorded(self) -> bool:
        return bool(self.faults or self.inputs or self.tries)

    def _split(self, kind: str) -> tuple[list[str], list[str]]:
        items = self.findings.get(kind, [])
        return ([text for test, text in items if test not in self.xfailed],
                [text for test, text in items if test in self.xfailed])

    def _line(self, kind: str, headline: str, tried: str) -> list[str]:
        found, known = self._split(kind)
        extra = f"; {len(known)} more in known bugs (xfail)" if known else ""
        out = [f"{headline}: {len(found)} ({tried}: {self.tries[kind]}{extra})"]
        return out + [f"  {text}" for text in found]

    def lines(self) -> list[str]:
        current = {n: ok for n, (test, ok) in self.faults.items() if test not in self.xfailed}
        known = [n for n, (test, _) in self.faults.items() if test in self.xfailed]
        out = [f"faults survived: {sum(current.values())}/{len(current)}"
               + (f" (known bugs, xfail: {', '.join(sorted(known))})" if known else "")]
        out += [f"  NOT survived: {name}" for name, ok in sorted(current.items()) if not ok]
        total = sum(self.inputs.values())
        detail = ", ".join(f"{k} {v}" for k, v in sorted(self.inputs.items()))
        out.append(f"hostile/broken inputs tried: {total}" + (f" ({detail})" if detail else ""))
        out += self._line("secret", "secret leaks", "artefacts scanned")
        out += self._line("injection", "shell injections that ran", "payloads tried")
        out += self._line("process", "leftover node processes", "sweeps")
        out += self._line("write", "damaged or truncated report files", "failed writes tried")
        out += self._line("probe", "files the probe left on the node", "probe runs checked")
        out += self._line("host_key", "changed or unknown host keys accepted",
                          "connections tried")
        out += [f"{name}: {value}" for name, value in sorted(self.measures.items())]
        return out


_FIGURES = Figures()
#: The key of a worker's figures in its `workeroutput` (pytest-xdist).
FIGURES_KEY = "fleetcheck_reliability_figures"


@pytest.fixture(scope="session")
def figures() -> Figures:
    """The suite's counters (see Figures)."""
    return _FIGURES


@pytest.fixture(autouse=True)
def _figures_test(request: pytest.FixtureRequest) -> None:
    _FIGURES.current = request.node.nodeid


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if getattr(report, "wasxfail", None) is not None:
        _FIGURES.xfailed.add(report.nodeid)


def pytest_sessionfinish(session: pytest.Session) -> None:
    # A pytest-xdist worker: its figures go to the controller (tests/conftest.py prints them).
    output = getattr(session.config, "workeroutput", None)
    if output is not None and _FIGURES.recorded:
        output[FIGURES_KEY] = json.dumps(_FIGURES.state())


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    print_figures(terminalreporter, _FIGURES)


def merged_figures(states: list[dict[str, Any]]) -> Figures:
    """The figures of a run's pytest-xdist workers, as one (their `state()`s)."""
    figures = Figures()
    for state in states:
        figures.merge(state)
    return figures


def print_figures(terminalreporter: pytest.TerminalReporter, figures: Figures) -> None:
    if not figures.recorded:
        return
    terminalreporter.section("fleetcheck reliability figures")
    for line in figures.lines():
        terminalreporter.write_line(line)


@pytest.fixture(scope="session")
def hostile_strings() -> tuple[str, ...]:
    """Hostile strings for names, reasons, facts and check summaries."""
    return HOSTILE_STRINGS


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port on 127.0.0.1 that accepts TCP connections and never speaks."""
    from tests.reliability.support import silent_server

    with silent_server() as port:
        yield port


@pytest.fixture
def tiny_fs(tmp_path: Path) -> Iterator[Path]:
    """A real 64 KiB filesystem (tmpfs), so ENOSPC comes from the kernel, not a mock."""
    mount_point = tmp_path / "tiny"
    mount_point.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    try:
        mount_tmpfs(mount_point, "size=64k,mode=0755")
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"cannot mount a tmpfs here: {exc}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False, capture_output=True)
