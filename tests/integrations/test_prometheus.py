"""Prometheus end to end: a node's textfile, the shipped alerting rules, the Grafana dashboard.

promtool (Debian's `prometheus` package, installed by scripts/test.sh) checks the rules and
runs their unit tests (deploy/prometheus/fleetcheck-rules.test.yml), and lints the exposition
`fleetcheck probe --format prometheus` writes.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from fleetcheck.render.prometheus import _HELP
from tests.nodeenv import make_node

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "deploy" / "prometheus" / "fleetcheck-rules.yml"
RULE_TESTS = REPO / "deploy" / "prometheus" / "fleetcheck-rules.test.yml"
DASHBOARD = REPO / "deploy" / "grafana" / "fleetcheck-dashboard.json"

#: The node_exporter metrics the rules use besides fleetcheck's own.
NODE_EXPORTER = {"node_textfile_mtime_seconds", "node_textfile_scrape_error"}


def promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        pytest.skip("needs promtool (apt-get install prometheus; scripts/test.sh does)")
    return path


def test_rules_pass_promtool_check_and_their_unit_tests() -> None:
    tool = promtool()
    check = subprocess.run([tool, "check", "rules", str(RULES)], capture_output=True,
                           text=True, timeout=60, check=False)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "SUCCESS" in check.stdout
    tested = subprocess.run([tool, "test", "rules", RULE_TESTS.name], cwd=RULE_TESTS.parent,
                            capture_output=True, text=True, timeout=60, check=False)
    assert tested.returncode == 0, tested.stdout + tested.stderr


def _metric_names(expr: str) -> set[str]:
    return {name for name in re.findall(r"\b((?:fleetcheck|node)_[a-z_]+)\b", expr)}


def test_rules_and_dashboard_use_only_metrics_fleetcheck_writes() -> None:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    used = {name for group in groups for rule in group["rules"]
            for name in _metric_names(rule["expr"])}
    dashboard = json.loads(DASHBOARD.read_text())
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            used |= _metric_names(target["expr"])
    assert used - NODE_EXPORTER <= set(_HELP), used - NODE_EXPORTER - set(_HELP)
    alerts = {rule["alert"] for group in groups for rule in group["rules"]}
    assert {"FleetcheckTritonCPUFallback", "FleetcheckNodeUnverifiable",
            "FleetcheckResultsStale", "FleetcheckVersionDrift"} <= alerts


def test_probe_writes_the_textfile_atomically_and_it_lints(tmp_path: Path) -> None:
    node = make_node(tmp_path / "node", compiler=False)
    textfiles = tmp_path / "node-exporter"
    textfiles.mkdir()
    prom = textfiles / "fleetcheck.prom"
    prom.write_text("# the previous run's metrics\n")
    done = subprocess.run(
        [sys.executable, "-m", "fleetcheck", "probe", "--format", "prometheus", "-o", str(prom),
         "--python", node.python], env={**os.environ, **node.env}, capture_output=True,
        text=True, timeout=120, check=False)
    assert done.returncode == 1, done.stderr
    assert done.stdout == ""
    # Only the finished file: the temporary one (not *.prom, so the collector never reads it)
    # was renamed over it.
    assert [p.name for p in textfiles.iterdir()] == ["fleetcheck.prom"]
    text = prom.read_text()
    families = {family.name: family for family in text_string_to_metric_families(text)}
    fallback = families["fleetcheck_triton_fallback"].samples
    assert [(s.labels["cause"], s.value) for s in fallback] == [("no_c_compiler", 1.0)]
    versions = {s.labels["key"]: s.labels["version"]
                for s in families["fleetcheck_node_version"].samples}
    assert versions["triton"] == "3.6.0" and versions["torch"] == "2.11.0+cu130"
    if shutil.which("promtool"):
        lint = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True,
                              text=True, timeout=60, check=False)
        assert lint.returncode == 0, lint.stdout + lint.stderr


def test_probe_infers_the_format_from_the_file_name_and_refuses_a_missing_folder(
        tmp_path: Path) -> None:
    prom = tmp_path / "fleetcheck.prom"
    done = subprocess.run([sys.executable, "-m", "fleetcheck", "probe", "-o", str(prom)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode in (0, 1, 3), done.stderr
    assert "# TYPE fleetcheck_node_status gauge" in prom.read_text()
    missing = subprocess.run([sys.executable, "-m", "fleetcheck", "probe", "--cache",
                              str(tmp_path / "no" / "node.json")], capture_output=True,
                             text=True, timeout=120, check=False)
    assert missing.returncode == 2
    assert missing.stderr == (f"fleetcheck: error: {tmp_path / 'no' / 'node.json'}: folder "
                              f"{tmp_path / 'no'} does not exist\n")
