"""The terminal matrix: exact output wide, narrow and coloured; hostile names stay inert."""

from __future__ import annotations

import re

import pytest

from fleetcheck.render import render
from fleetcheck.render.terminal import render_terminal

from .golden import assert_golden
from .sample import (
    COMPILER_ERROR,
    SAMPLE_CHANGES,
    SAMPLE_FAILING_SINCE,
    sample_report,
)

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def test_plain_wide_matches_golden() -> None:
    text = render_terminal(sample_report(), failing_since=SAMPLE_FAILING_SINCE,
                           changes=SAMPLE_CHANGES)
    assert_golden("table.txt", text)


def test_narrow_terminal_drops_columns_instead_of_wrapping() -> None:
    text = render_terminal(sample_report(), width=60)
    assert_golden("table-60.txt", text)
    table = text.split("\n\n")[0].splitlines()
    assert table[0] == "NODE                     STATUS       TRITON        COMPILER"
    assert table[2] == "pve1/201 trainer         FAIL         CPU-FALLBACK  missing"
    assert all(len(line) <= 60 for line in text.splitlines())
    assert ("(hidden for width: Frameworks, FLA, libcuda, Headers,\n"
            "Driver, CUDA/torch, GPUs, Cache, GPU mem)") in text


def test_medium_width_drops_the_quiet_columns_first() -> None:
    lines = render_terminal(sample_report(), width=110).splitlines()
    # Cache holds a warning (stale), and GPU mem one (a GPU held), so they outlive Headers,
    # libcuda and Driver, which are all ok.
    assert lines[0].split() == ["NODE", "STATUS", "GPUS", "GPU", "MEM", "CUDA/TORCH", "TRITON",
                                "COMPILER", "CACHE"]
    assert "(hidden for width: Frameworks, FLA, libcuda, Headers, Driver)" in lines


def test_colour_matches_golden_and_marks_the_fallback_row() -> None:
    text = render_terminal(sample_report(), width=185, color=True)
    assert_golden("table-color.txt", text)
    # The Triton cell of the cpu-fallback row is bold white on red.
    assert "\x1b[1;37;41mCPU-FALLBACK\x1b[0m" in text


def test_hostile_names_print_literally_and_inert() -> None:
    text = render_terminal(sample_report(), width=185, color=True)
    without_styles = ANSI.sub("", text)
    # The only escape sequences are our own SGR styles: the node's ESC is shown as text.
    assert "\x1b" not in without_styles
    assert "pve3/302 \\x1b[31mred[bold]x" in without_styles
    assert "probe output is not JSON: \\x1b[2J[red]boom" in without_styles
    assert "pve3/301 <img src=x onerror=alert(1)>" in without_styles


def test_plain_output_has_no_escape_codes_and_the_exact_error() -> None:
    text = render_terminal(sample_report())
    assert "\x1b" not in text
    assert f"  error: {COMPILER_ERROR}\n" in text
    assert text.endswith(
        "7 nodes: 2 ok, 1 skipped, 1 warn, 1 unreachable, 1 error, 1 fail; "
        "Triton falls back to CPU on 1: pve1/201\n"
    )


@pytest.mark.parametrize("no_color", ["1", None])
def test_auto_colour_is_off_without_a_tty(monkeypatch: pytest.MonkeyPatch,
                                          no_color: str | None) -> None:
    if no_color is None:
        monkeypatch.delenv("NO_COLOR", raising=False)
    else:
        monkeypatch.setenv("NO_COLOR", no_color)
    # pytest captures stdout, so this is the no-TTY case: plain text, no width limit.
    assert render(sample_report(), "table") == render_terminal(sample_report())


class _FakeTty:
    def isatty(self) -> bool:
        return True


def test_auto_colour_honours_no_color_on_a_tty(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdout", _FakeTty())
    monkeypatch.setenv("COLUMNS", "160")
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert render(sample_report(), "table") == render_terminal(sample_report(), width=160,
                                                               color=True)
    monkeypatch.setenv("NO_COLOR", "1")
    assert render(sample_report(), "table") == render_terminal(sample_report(), width=160)
    # What the CLI asks for when writing a file: no colour, no width limit.
    assert render(sample_report(), "table", width=0, color=False) == render_terminal(
        sample_report())
