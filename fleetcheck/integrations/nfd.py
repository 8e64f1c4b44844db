"""The node-feature-discovery feature file: a node's verdict as labels a scheduler selects on.

`fleetcheck probe --nfd FILE` writes it into NFD's local source folder
(/etc/kubernetes/node-feature-discovery/features.d/), from which nfd-worker makes node labels,
and NodeFeatureRules taints (deploy/kubernetes/fleetcheck-nfd-taint-rule.yaml). The format is
NFD's (source/local/local.go): `# +expiry-time=RFC3339` directive, then `name=value` lines. The
labels' namespace is a subdomain of feature.node.kubernetes.io, which NFD allows without
configuration (pkg/apis/nfd/validate: FeatureLabelSubNsSuffix). Values are made valid label
values (63 characters of [A-Za-z0-9._-], alphanumeric at both ends): `2.11.0+cu130` becomes
`2.11.0_cu130`. The file is replaced atomically through a dot file, which NFD ignores.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime, timedelta, timezone
from typing import Any

from fleetcheck.judgement.consistency import fact_value

#: The labels' namespace: feature.node.kubernetes.io's, which nfd-master accepts as it is.
LABEL_NS = "fleetcheck.feature.node.kubernetes.io"

#: After this long without a new file, NFD drops the labels (its expiry-time directive): the
#: node timer's two missed runs, as `health --max-age`.
DEFAULT_EXPIRY_S = 1800.0

#: Label name (after the namespace) -> the consistency key whose value it carries.
VERSION_LABELS = {
    "driver": "driver", "cuda-driver": "cuda_driver", "torch-cuda": "cuda", "torch": "torch",
    "triton-version": "triton", "python": "python", "fla": "fla", "gpu-model": "gpu_model",
    "gpus": "gpu_count",
}

#: Kubernetes' label value: at most 63 characters, alphanumeric at both ends.
MAX_VALUE = 63
_INVALID = re.compile(r"[^A-Za-z0-9._-]+")


def label_value(text: str) -> str:
    """`text` as a valid Kubernetes label value (possibly empty: then the label is left out)."""
    value = _INVALID.sub("_", text.strip())[:MAX_VALUE]
    return value.strip("._-")


def node_labels(node: Mapping[str, Any]) -> dict[str, str]:
    """The labels for one node document (its audit JSON object): status, verdict, versions."""
    triton = node.get("triton") if isinstance(node.get("triton"), Mapping) else {}
    assert isinstance(triton, Mapping)
    facts = node.get("facts") if isinstance(node.get("facts"), Mapping) else {}
    assert isinstance(facts, Mapping)
    labels = {
        "status": str(node.get("status") or "error"),
        "triton-verdict": str(triton.get("verdict") or "unknown"),
    }
    if triton.get("cause"):
        labels["cause"] = str(triton["cause"])
    for name, key in VERSION_LABELS.items():
        value = fact_value(facts, key)
        if value is not None:
            labels[name] = value
    cleaned = {f"{LABEL_NS}/{name}": label_value(value) for name, value in labels.items()}
    return {name: value for name, value in cleaned.items() if value}


def feature_file(node: Mapping[str, Any], now: datetime | None = None,
                 expiry_s: float = DEFAULT_EXPIRY_S) -> str:
    """The feature file's text for one node: the expiry directive, then one label a line."""
    moment = now or datetime.now(timezone.utc)
    expires = (moment + timedelta(seconds=expiry_s)).astimezone(timezone.utc)
    lines = [
        "# fleetcheck's verdict for this node (fleetcheck probe --nfd); NFD's local source.",
        f"# +expiry-time={expires.strftime('%Y-%m-%dT%H:%M:%SZ')}",
    ]
    lines += [f"{name}={value}" for name, value in sorted(node_labels(node).items())]
    return "\n".join(lines) + "\n"
