"""deploy/kubernetes/ against the validators of Kubernetes, node-feature-discovery and NPD.

- Every manifest against the Kubernetes OpenAPI schema, strictly (unknown keys refused), with
  kubernetes-validate (its bundled schemas; installed with the test extras).
- The NodeFeatureRule against NFD's own CRD schema (tests/fixtures/nfd, with its provenance)
  and NFD's label, taint and feature-name rules (nfdkit.py, ported from NFD's source).
- `fleetcheck probe --nfd` on fake GPU nodes: the file as NFD's local source parses it, every
  label valid to NFD, the taint rule matching the node that falls back and no other.
- The NPD plugin config: every key one of node-problem-detector's, skip_initial_status on.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from kubernetes_validate import utils as kubernetes_validate

from fleetcheck.integrations.nfd import LABEL_NS
from fleetcheck.inventory import load_inventory
from tests.nodeenv import make_node

from . import nfdkit

REPO = Path(__file__).resolve().parents[2]
KUBE = REPO / "deploy" / "kubernetes"
CRD = REPO / "tests" / "fixtures" / "nfd" / "nodefeaturerules-crd.yaml"
#: The Kubernetes release the manifests are checked against (kubernetes-validate's schemas).
KUBERNETES_VERSION = "1.31.0"
MANIFESTS = sorted(KUBE.glob("*.yaml"))

#: node-problem-detector's plugin config keys (pkg/custompluginmonitor/types/config.go's
#: json tags, at kubernetes/node-problem-detector master).
NPD_TOP_KEYS = {"plugin", "pluginConfig", "source", "conditions", "rules", "metricsReporting"}
NPD_PLUGIN_KEYS = {"invoke_interval", "timeout", "max_output_length", "concurrency",
                   "enable_message_change_based_condition_update", "skip_initial_status"}


def documents(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
def test_manifests_pass_the_kubernetes_openapi_schema(path: Path) -> None:
    for document in documents(path):
        if document["apiVersion"].startswith("nfd.k8s-sigs.io/"):
            continue  # a custom resource: checked against NFD's CRD below
        kubernetes_validate.validate(document, KUBERNETES_VERSION, strict=True)


def test_the_schema_check_can_fail() -> None:
    (cronjob,) = [d for d in documents(KUBE / "fleetcheck-audit-cronjob.yaml")
                  if d["kind"] == "CronJob"]
    cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["restartPolicyy"] = "Never"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(cronjob, KUBERNETES_VERSION, strict=True)


def crd_schema() -> dict[str, Any]:
    (crd,) = documents(CRD)
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1alpha1"]
    schema: dict[str, Any] = version["schema"]["openAPIV3Schema"]
    return schema


def taint_rule() -> dict[str, Any]:
    (rule,) = documents(KUBE / "fleetcheck-nfd-taint-rule.yaml")
    return rule


def test_the_taint_rule_passes_nfds_crd_schema_and_its_validation() -> None:
    rule = taint_rule()
    assert (rule["apiVersion"], rule["kind"]) == ("nfd.k8s-sigs.io/v1alpha1", "NodeFeatureRule")
    jsonschema.validate(rule, crd_schema())
    for item in rule["spec"]["rules"]:
        nfdkit.validate_rule(item)
    # A broken rule is refused by both: the check is not a formality.
    broken = json.loads(json.dumps(rule))
    broken["spec"]["rules"][0]["taints"][0]["effect"] = "NoScheduling"
    with pytest.raises(nfdkit.NfdError, match="invalid taint effect"):
        nfdkit.validate_rule(broken["spec"]["rules"][0])
    broken["spec"]["rules"][0]["matchFeatures"] = "local.label"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, crd_schema())


def probe_nfd(tmp_path: Path, name: str, **kind: Any) -> Path:
    node = make_node(tmp_path / name, **kind)
    folder = tmp_path / f"features-{name}"
    folder.mkdir()
    target = folder / "fleetcheck"
    done = subprocess.run([sys.executable, "-m", "fleetcheck", "probe", "--python", node.python,
                           "--playbook", "quick", "--nfd", str(target), "-o", os.devnull],
                          env={**os.environ, **node.env}, capture_output=True, text=True,
                          timeout=120, check=False)
    assert "Traceback" not in done.stderr, done.stderr
    # Only the file: its temporary (a dot file, which NFD ignores) is gone.
    assert [p.name for p in folder.iterdir()] == ["fleetcheck"]
    return target


def test_the_feature_file_is_nfds_and_the_rule_taints_only_the_fallback(tmp_path: Path) -> None:
    now = datetime.now(timezone.utc)
    rule = taint_rule()["spec"]["rules"]
    files = {"healthy": probe_nfd(tmp_path, "healthy"),
             "fallback": probe_nfd(tmp_path, "fallback", compiler=False)}
    labels = {name: nfdkit.parse_feature_file(path.read_text(), now)
              for name, path in files.items()}
    for found in labels.values():
        for key, value in found.items():
            assert key.startswith(LABEL_NS + "/")
            nfdkit.validate_label(key, value)
    assert labels["fallback"][f"{LABEL_NS}/triton-verdict"] == "cpu-fallback"
    assert labels["fallback"][f"{LABEL_NS}/cause"] == "no_c_compiler"
    assert labels["fallback"][f"{LABEL_NS}/status"] == "fail"
    assert labels["healthy"][f"{LABEL_NS}/triton-verdict"] == "gpu"
    assert labels["healthy"][f"{LABEL_NS}/torch"] == "2.11.0_cu130"  # '+' is no label value
    assert f"{LABEL_NS}/cause" not in labels["healthy"]
    tainted = {name: [t["key"] for item in rule
                      if nfdkit.rule_matches(item, {"local.label": found})
                      for t in item.get("taints", [])]
               for name, found in labels.items()}
    assert tainted == {"healthy": [], "fallback": [f"{LABEL_NS}/triton-cpu-fallback"]}
    # The labels expire with the node timer's two missed runs: NFD then drops them.
    later = now + timedelta(minutes=31)
    assert nfdkit.parse_feature_file(files["fallback"].read_text(), later) == {}


def test_npd_config_skips_the_initial_status_and_uses_only_npds_keys() -> None:
    config = json.loads((KUBE / "fleetcheck-plugin-monitor.json").read_text())
    assert set(config) <= NPD_TOP_KEYS
    assert set(config["pluginConfig"]) <= NPD_PLUGIN_KEYS
    # After an NPD restart the node keeps its last condition until the first run ends,
    # rather than reading healthy (the default condition) in between.
    assert config["pluginConfig"]["skip_initial_status"] is True


def test_the_cronjobs_inventory_is_one_fleetcheck_loads(tmp_path: Path) -> None:
    (config,) = [d for d in documents(KUBE / "fleetcheck-audit-cronjob.yaml")
                 if d["kind"] == "ConfigMap"]
    path = tmp_path / "inventory.yaml"
    path.write_text(config["data"]["inventory.yaml"])
    inventory = load_inventory(path)
    assert [host.name for host in inventory.hosts][:2] == ["gpu001", "gpu002"]
    assert len(inventory.hosts) == 64
