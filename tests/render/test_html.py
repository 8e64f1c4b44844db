"""The HTML report as text: exact golden output, escaping, the CSP and self-containment."""

from __future__ import annotations

import base64
import hashlib
import html as html_lib
import re

from fleetcheck.render import render
from fleetcheck.report.content import NodeResult, Report

from .golden import assert_golden
from .sample import (
    SAMPLE_CHANGES,
    SAMPLE_FAILING_SINCE,
    sample_history,
    sample_report,
)


def _html() -> str:
    return render(sample_report(), "html", history=sample_history(),
                  failing_since=SAMPLE_FAILING_SINCE, changes=SAMPLE_CHANGES)


def _sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def test_html_matches_golden() -> None:
    assert_golden("report.html", _html())


def test_csp_allows_exactly_the_inline_style_and_script_and_no_network() -> None:
    html = _html()
    csp = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]+)">', html)
    assert csp is not None
    style = re.search(r"<style>(.*?)</style>", html, re.S)
    script = re.search(r"<script>(.*?)</script>", html, re.S)
    assert style is not None and script is not None
    assert html_lib.unescape(csp.group(1)) == (
        "default-src 'none'; img-src data:; base-uri 'none'; form-action 'none'; "
        f"style-src {_sha256(style.group(1))}; script-src {_sha256(script.group(1))}"
    )
    assert html.count("<script") == 1 and html.count("<style") == 1
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html)


def test_node_strings_are_escaped_and_escape_sequences_made_visible() -> None:
    html = _html()
    assert "<img" not in html
    assert "pve3/301 &lt;img src=x onerror=alert(1)&gt;" in html
    assert "\x1b" not in html
    assert "pve3/302 \\x1b[31mred[bold]x" in html


def test_a_script_end_tag_in_a_name_cannot_break_out() -> None:
    node = NodeResult("h/1", "h", 1, "</script><script>alert(1)</script>", "ok", "</style>")
    html = render(Report("t0", "t1", (node,)), "html")
    assert html.count("<script") == 1 and html.count("</script>") == 1
    assert html.count("</style>") == 1
    assert "&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_without_history_there_is_no_trend_and_without_fallback_a_clear_banner() -> None:
    node = NodeResult("h", "h", None, "h", "ok", "Triton gpu")
    html = render(Report("t0", "t1", (node,)), "html")
    assert 'id="trend"' not in html and 'id="changes"' not in html
    assert "Triton runs on the GPU on every node that answered" in html


def test_each_kind_says_where_its_node_sits_in_its_own_words() -> None:
    nodes = (
        NodeResult("pve1", "pve1", None, "pve1", "ok", "ok"),
        NodeResult("pve1/101", "pve1", 101, "ct", "ok", "ok", kind="lxc"),
        NodeResult("pve1/300", "pve1", 300, "vm", "ok", "ok", kind="qemu"),
        NodeResult("pve1/300/docker:web", "pve1", None, "web", "ok", "ok", kind="docker",
                   parent="pve1/300"),
        NodeResult("pve1/podman:<b>", "pve1", None, "p", "ok", "ok", kind="podman",
                   parent="pve1\x1b"),
        NodeResult("k8s/ml/trainer", "k8s", None, "trainer", "ok", "ok", kind="pod"),
        # A kind another version wrote: read as a node without a kind is.
        NodeResult("pve1/102", "pve1", 102, "x", "ok", "ok", kind="widget"),
    )
    html = render(Report("t0", "t1", nodes), "html")
    places = re.findall(r'<p class="muted">host (.*?) · Triton', html)
    assert sorted(places) == sorted([
        "pve1", "pve1 · container 101", "pve1 · VM 300", "pve1 · docker container in pve1/300",
        "pve1 · podman container in pve1\\x1b", "k8s", "pve1 · container 102",
    ])


def test_a_node_s_facts_list_its_gpus_memory_processes_modes_and_health() -> None:
    page = _html()
    start = page.index('<table class="kv gpus">', page.index('<template id="facts-2">'))
    rows = re.findall(r"<tr><th>(\d+)</th><td>(.*?)</td><td>(.*?)</td><td>(.*?)</td>"
                      r"<td>(.*?)</td></tr>", page[start:page.index("</table>", start)])
    assert rows == [
        ("0", "0.5 of 140 GiB in use", "none", "persistence on, Default", "ok"),
        ("1", "0.5 of 140 GiB in use", "none", "persistence on, Default", "ok"),
        ("2", "117 of 140 GiB in use", "pid 4242 python train.py --resume (alice) 117 GiB",
         "persistence on, Default", "ok"),
        ("3", "0.5 of 140 GiB in use", "none", "persistence on, Default", "ok"),
    ]
    # A node probed before the GPU state has no such table.
    trainer = page[page.index('<template id="facts-1">'):page.index('<template id="facts-2">')]
    assert 'class="kv gpus"' not in trainer
