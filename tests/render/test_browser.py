"""The HTML report in real headless Chromium: banner, filters, search, sorting, details, safety."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from fleetcheck.render import render

from .cdp import CHROMIUM, Browser
from .sample import (
    COMPILER_ERROR,
    COMPILER_FIX,
    SAMPLE_CHANGES,
    SAMPLE_FAILING_SINCE,
    sample_history,
    sample_report,
)

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is not installed"),
]

ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts"
# Records any dialog before the page's own script runs; CDP-injected code is outside the CSP.
DIALOG_TRAP = (
    "window.__dialogs = [];"
    "for (const name of ['alert', 'confirm', 'prompt'])"
    "  window[name] = (...args) => { window.__dialogs.push([name, ...args]); };"
)
VISIBLE_ROWS = (
    "Array.from(document.querySelectorAll('#matrix tbody tr'))"
    ".filter(r => !r.hidden && r.offsetParent !== null).map(r => r.cells[0].textContent)"
)


@pytest.fixture(scope="module")
def report_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    html = render(sample_report(), "html", history=sample_history(),
                  failing_since=SAMPLE_FAILING_SINCE, changes=SAMPLE_CHANGES)
    path = tmp_path_factory.mktemp("html") / "report.html"
    path.write_text(html, encoding="utf-8")
    return path.as_uri()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    chromium = Browser()
    try:
        for domain in ("Page", "Runtime", "Network", "Log"):
            chromium.send(f"{domain}.enable")
        chromium.send("Page.addScriptToEvaluateOnNewDocument", source=DIALOG_TRAP)
        chromium.send("Emulation.setDeviceMetricsOverride", width=1400, height=1000,
                      deviceScaleFactor=1, mobile=False)
        yield chromium
    finally:
        chromium.close()


@pytest.fixture()
def page(browser: Browser, report_url: str) -> Browser:
    browser.navigate(report_url)
    return browser


def test_banner_names_the_fallback_node_its_cause_and_fix(page: Browser) -> None:
    banner = page.evaluate("document.getElementById('banner').innerText")
    assert banner.splitlines() == [
        "Triton falls back to CPU on 1 node",
        "pve1/201 trainer no_c_compiler — no C compiler: CC unset, no gcc or clang on PATH "
        "failing since 2025-05-30T02:00:00Z",
        f"Fix: {COMPILER_FIX}",
    ]
    assert page.evaluate("document.getElementById('tile-fallback').innerText") == "1\ncpu-fallback"


def test_fallback_rows_are_highlighted(page: Browser) -> None:
    assert page.evaluate(
        "Array.from(document.querySelectorAll('tr.fallback')).map(r => r.cells[0].textContent)"
    ) == ["pve1/201 trainer"]
    style = page.evaluate(
        "(() => { const c = document.querySelector('tr.fallback td[data-col=triton]');"
        " const s = getComputedStyle(c); return [c.innerText, s.backgroundColor, s.color]; })()"
    )
    assert style == ["CPU-FALLBACK", "rgb(198, 40, 40)", "rgb(255, 255, 255)"]


def test_failing_only_filter_keeps_failing_rows(page: Browser) -> None:
    assert len(page.evaluate(VISIBLE_ROWS)) == 7
    page.click("#failing-only")
    assert page.evaluate(VISIBLE_ROWS) == ["pve1/201 trainer", "pve2",
                                           "pve3/302 \\x1b[31mred[bold]x"]
    assert page.evaluate("document.getElementById('shown-count').textContent") == "3 of 7 nodes"
    page.click("#failing-only")
    assert len(page.evaluate(VISIBLE_ROWS)) == 7


def test_search_filters_rows_by_any_text(page: Browser) -> None:
    page.click("#search")
    page.send("Input.insertText", text="STALE")
    assert page.evaluate(VISIBLE_ROWS) == ["pve1/202 inference"]
    page.evaluate("(() => { const s = document.getElementById('search'); s.value = 'timed out';"
                  " s.dispatchEvent(new Event('input')); })()")
    assert page.evaluate(VISIBLE_ROWS) == ["pve2"]


def test_sorting_by_status_both_ways(page: Browser) -> None:
    page.click("#matrix thead th[data-sort=status]")
    assert page.evaluate(VISIBLE_ROWS) == [
        "pve1", "pve3/301 <img src=x onerror=alert(1)>", "pve3/300 old-ci",
        "pve1/202 inference", "pve2", "pve3/302 \\x1b[31mred[bold]x", "pve1/201 trainer"]
    page.click("#matrix thead th[data-sort=status]")
    assert page.evaluate(VISIBLE_ROWS)[:3] == [
        "pve1/201 trainer", "pve3/302 \\x1b[31mred[bold]x", "pve2"]
    assert page.evaluate(
        "document.querySelector('th[data-sort=status]').getAttribute('aria-sort')"
    ) == "descending"


def test_cell_click_shows_evidence_error_text_and_fix(page: Browser) -> None:
    page.click("#row-1 td[data-col=compiler]")
    text = page.evaluate("document.getElementById('panel').hidden ? null :"
                         " document.getElementById('panel-body').innerText")
    assert text is not None
    assert f"error: {COMPILER_ERROR}" in text.splitlines()
    assert f"Fix: {COMPILER_FIX}" in text.splitlines()
    path = page.screenshot(ARTIFACTS / "report-details.png")
    print(f"screenshot: {path}")
    page.click("#panel-close")
    assert page.evaluate("document.getElementById('panel').hidden") is True


def test_node_click_shows_its_facts(page: Browser) -> None:
    page.click("#row-0 th.node")
    rows = page.evaluate("Array.from(document.querySelectorAll('#panel-body table.kv tr'))"
                         ".map(r => r.cells[0].textContent + '=' + r.cells[1].textContent)")
    assert "gpus[7].name=NVIDIA H200" in rows
    assert "driver.userspace=580.159.04" in rows


def test_hostile_names_stay_text_and_nothing_loads_or_alerts(page: Browser) -> None:
    assert page.evaluate("document.querySelectorAll('img').length") == 0
    assert page.evaluate("document.getElementById('row-5').cells[0].textContent") == (
        "pve3/301 <img src=x onerror=alert(1)>")
    assert page.evaluate("document.getElementById('row-6').cells[0].textContent") == (
        "pve3/302 \\x1b[31mred[bold]x")
    page.click("#row-5 th.node")
    assert page.evaluate("document.querySelectorAll('img').length") == 0
    assert page.evaluate("window.__dialogs") == []
    methods = [event["method"] for event in page.events]
    assert "Page.javascriptDialogOpening" not in methods
    requested = [e["params"]["request"]["url"] for e in page.events
                 if e["method"] == "Network.requestWillBeSent"]
    assert all(url.startswith("file://") for url in requested), requested
    problems = [e["params"]["entry"] for e in page.events if e["method"] == "Log.entryAdded"]
    assert problems == [], json.dumps(problems)[:2000]


def test_trend_chart_and_changes_are_drawn(page: Browser) -> None:
    bars = page.evaluate("document.querySelectorAll('#trend g.run').length")
    assert bars == 5
    assert page.evaluate("document.querySelectorAll('#trend circle.fallback-dot').length") == 5
    assert page.evaluate("document.getElementById('changes').innerText").splitlines()[1:] == list(
        SAMPLE_CHANGES)


def test_screenshot_of_the_whole_report(page: Browser) -> None:
    path = page.screenshot(ARTIFACTS / "report.png")
    print(f"screenshot: {path}")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
