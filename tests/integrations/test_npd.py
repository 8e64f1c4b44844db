"""`fleetcheck health --npd` against node-problem-detector's custom-plugin protocol, on fake nodes.

The protocol, from node-problem-detector's pkg/custompluginmonitor (plugin.go, types.go,
config.go): exit 0 is OK, 1 NonOK, anything else Unknown; stdout, trimmed of surrounding
white space and cut at max_output_length (80 by default), is the condition's message; a rule's
timeout may not exceed the global one, and a permanent rule's condition needs a default.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from fleetcheck.integrations.health_check import CACHE_SCHEMA, NPD_MAX_MESSAGE
from tests.nodeenv import make_node

REPO = Path(__file__).resolve().parents[2]
PLUGIN_CONFIG = REPO / "deploy" / "kubernetes" / "fleetcheck-plugin-monitor.json"
DAEMONSET = REPO / "deploy" / "kubernetes" / "fleetcheck-npd-daemonset.yaml"

#: What one probe costs on an H200 node (docs/probe-performance.md: 4-6 s), and the factor
#: the plugin's deadline must leave above it (a cold page cache, a busy node).
PROBE_COST_S = 6.0
HEADROOM = 5


def npd_status(code: int) -> str:
    """node-problem-detector's reading of an exit code (plugin.go, the switch on ExitStatus)."""
    return {0: "OK", 1: "NonOK"}.get(code, "Unknown")


def npd_message(stdout: str) -> str:
    """What node-problem-detector keeps of stdout: trimmed, cut at max_output_length bytes."""
    return stdout.strip()[:NPD_MAX_MESSAGE]


def run_plugin(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "fleetcheck", "health", "--npd", *args],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})}, check=False)


def assert_protocol(done: subprocess.CompletedProcess[str], status: str) -> str:
    assert npd_status(done.returncode) == status, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    # One line that node-problem-detector keeps whole: nothing of it is cut.
    assert done.stdout.endswith("\n") and done.stdout.count("\n") == 1, done.stdout
    message = done.stdout.strip()
    assert npd_message(done.stdout) == message and len(message.encode()) <= NPD_MAX_MESSAGE
    assert re.fullmatch(r"[ -~]+", message), message
    return message


def seconds(text: str) -> float:
    """A Go duration as node-problem-detector's configs use them: "50s", "5m"."""
    match = re.fullmatch(r"(\d+)(s|m)", text)
    assert match, text
    return int(match[1]) * (60 if match[2] == "m" else 1)


def test_healthy_node_is_ok(tmp_path: Path) -> None:
    node = make_node(tmp_path / "node")
    done = run_plugin("--python", node.python, env=node.env)
    assert assert_protocol(done, "OK").startswith("fleetcheck ok: ")


def test_triton_cpu_fallback_is_nonok_with_its_cause(tmp_path: Path) -> None:
    node = make_node(tmp_path / "node", compiler=False)
    done = run_plugin("--python", node.python, env=node.env)
    message = assert_protocol(done, "NonOK")
    assert message.startswith("fleetcheck FAIL: no_c_compiler")


def test_a_probe_that_cannot_run_is_unknown(tmp_path: Path) -> None:
    done = run_plugin("--python", str(tmp_path / "no-such-python"))
    assert assert_protocol(done, "Unknown").startswith("fleetcheck unknown: ")


@pytest.mark.parametrize("content", ["", "{", "[]", json.dumps({"schema": "other/1"}),
                                     json.dumps({"schema": CACHE_SCHEMA, "written_at": "x"})])
def test_a_broken_cache_is_unknown(tmp_path: Path, content: str) -> None:
    cache = tmp_path / "node.json"
    cache.write_text(content)
    assert_protocol(run_plugin("--cache", str(cache)), "Unknown")


def test_a_missing_or_stale_cache_is_unknown_and_a_long_hostile_reason_fits(
        tmp_path: Path) -> None:
    cache = tmp_path / "node.json"
    assert "no cached result" in assert_protocol(run_plugin("--cache", str(cache)), "Unknown")
    node = make_node(tmp_path / "node", compiler=False)
    probe = subprocess.run([sys.executable, "-m", "fleetcheck", "probe", "--python", node.python,
                            "--cache", str(cache)], env={**os.environ, **node.env},
                           capture_output=True, text=True, timeout=120, check=False)
    assert probe.returncode == 1, probe.stderr
    document = json.loads(cache.read_text())
    document["node"]["reason"] = "Тритон\n\x1b[31m" + "x" * 500
    cache.write_text(json.dumps(document))
    assert_protocol(run_plugin("--cache", str(cache)), "NonOK")
    document["written_at"] -= 3600
    cache.write_text(json.dumps(document))
    message = assert_protocol(run_plugin("--cache", str(cache), "--max-age", "600"), "Unknown")
    assert "stale" in message


def _validate_plugin_config(config: dict[str, object]) -> None:
    """node-problem-detector's CustomPluginConfig.Validate, less the rule path's existence."""
    assert config["plugin"] == "custom"
    plugin = config["pluginConfig"]
    assert isinstance(plugin, dict)
    assert seconds(plugin["invoke_interval"]) > 0
    rules = config["rules"]
    assert isinstance(rules, list) and rules
    conditions = config["conditions"]
    assert isinstance(conditions, list)
    for rule in rules:
        assert seconds(rule["timeout"]) <= seconds(plugin["timeout"])
        if rule["type"] == "permanent":
            assert rule["condition"] in {c["type"] for c in conditions}


def test_plugin_config_is_valid_and_its_deadlines_cover_the_probe() -> None:
    config = json.loads(PLUGIN_CONFIG.read_text())
    _validate_plugin_config(config)
    assert config["pluginConfig"]["max_output_length"] == NPD_MAX_MESSAGE
    (rule,) = config["rules"]
    args = rule["args"]
    assert rule["path"].endswith("/fleetcheck") and args[:2] == ["health", "--npd"]
    probe_timeout = float(args[args.index("--timeout") + 1])
    # The probe's own deadline covers its real cost with headroom, and ends before
    # node-problem-detector kills the plugin, so a slow node reads "unknown", not a kill.
    assert probe_timeout >= PROBE_COST_S * HEADROOM
    assert probe_timeout < seconds(rule["timeout"])
    assert seconds(rule["timeout"]) <= seconds(config["pluginConfig"]["invoke_interval"])
    # The arguments are ones `fleetcheck health` accepts.
    done = subprocess.run([sys.executable, "-m", "fleetcheck", *args, "--help"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr


def test_daemonset_carries_the_same_plugin_config() -> None:
    documents = list(yaml.safe_load_all(DAEMONSET.read_text()))
    kinds = {doc["kind"]: doc for doc in documents}
    assert set(kinds) == {"ConfigMap", "DaemonSet"}
    shipped = json.loads(kinds["ConfigMap"]["data"]["fleetcheck-plugin-monitor.json"])
    assert shipped == json.loads(PLUGIN_CONFIG.read_text())
    (container,) = kinds["DaemonSet"]["spec"]["template"]["spec"]["containers"]
    assert ("--config.custom-plugin-monitor=/config/fleetcheck-plugin-monitor.json"
            in container["command"])
    assert container["securityContext"]["runAsNonRoot"] is True
