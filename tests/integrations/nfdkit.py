"""node-feature-discovery's own rules for feature files, labels, taints and rules, in Python.

No nfd-worker or nfd-master runs here (no cluster), so the tests read fleetcheck's files the way
NFD's source does, ported line by line from kubernetes-sigs/node-feature-discovery at commit
76e6cc8cc0d54b8bce037098b72611ffdf66ef5a:
- source/local/local.go: parseFeatureFile, parseDirectives, MaxFeatureFileSize, dot files;
- pkg/apis/nfd/validate/validate.go: Label, Taint, MatchFeatures;
- k8s.io/apimachinery/pkg/util/validation: IsQualifiedName, IsValidLabelValue (which Label uses);
- pkg/apis/nfd/nodefeaturerule (the In, NotIn and Exists operators, which the rule uses).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

MAX_FEATURE_FILE_SIZE = 65536
DIRECTIVE_PREFIX = "# +"
FEATURE_LABEL_NS = "feature.node.kubernetes.io"
PROFILE_LABEL_NS = "profile.node.kubernetes.io"
TAINT_NS = "feature.node.kubernetes.io"
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")

# apimachinery: qualifiedNameFmt, labelValueFmt, DNS1123SubdomainFmt.
_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_DNS1123_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN = re.compile(rf"^{_DNS1123_LABEL}(\.{_DNS1123_LABEL})*$")


class NfdError(ValueError):
    """What NFD would log or refuse, in its own words where it has them."""


def parse_feature_file(text: str, now: datetime | None = None) -> dict[str, str]:
    """local.go's parseFeatureFile: the labels of one feature file (directive errors raise)."""
    moment = now or datetime.now(timezone.utc)
    if len(text.encode()) > MAX_FEATURE_FILE_SIZE:
        raise NfdError("feature file is bigger than the maximum allowed size")
    expiry = moment
    labels: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            if line.startswith(DIRECTIVE_PREFIX):
                key, _, value = line[len(DIRECTIVE_PREFIX):].partition("=")
                if key != "expiry-time":
                    raise NfdError(f"unknown feature file directive {key!r}")
                expiry = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
            continue
        if expiry < moment:
            continue
        key, sep, value = line.partition("=")
        labels[key] = value if sep else "true"
    return labels


def _split_ns(name: str) -> tuple[str, str]:
    ns, sep, rest = name.partition("/")
    return (ns, rest) if sep else ("", name)


def is_qualified_name(key: str) -> list[str]:
    prefix, name = _split_ns(key)
    errors = []
    if "/" in key and (not prefix or len(prefix) > 253 or not _DNS1123_SUBDOMAIN.match(prefix)):
        errors.append("prefix part must be a DNS-1123 subdomain")
    if not name or len(name) > 63 or not _NAME.match(name):
        errors.append("name part must consist of alphanumeric characters, '-', '_' or '.'")
    return errors


def validate_label(key: str, value: str) -> None:
    """validate.go's Label."""
    problems = is_qualified_name(key)
    if problems:
        raise NfdError(f"invalid label key {key!r}: {'; '.join(problems)}")
    ns, _ = _split_ns(key)
    if not ns:
        raise NfdError("unprefixed keys are not allowed")
    if ns == "kubernetes.io" or ns.endswith(".kubernetes.io"):
        if ns not in (FEATURE_LABEL_NS, PROFILE_LABEL_NS) and not ns.endswith(
                ("." + FEATURE_LABEL_NS, "." + PROFILE_LABEL_NS)):
            raise NfdError("namespace is not allowed")
    if len(value) > 63 or not _LABEL_VALUE.match(value):
        raise NfdError(f"invalid value {value!r}")


def validate_taint(taint: Mapping[str, str]) -> None:
    """validate.go's Taint."""
    ns, _ = _split_ns(taint.get("key", ""))
    if not ns:
        raise NfdError("unprefixed keys are not allowed")
    if (ns == "kubernetes.io" or ns.endswith(".kubernetes.io")) and not (
            ns == TAINT_NS or ns.endswith("." + TAINT_NS)):
        raise NfdError("namespace is not allowed")
    if not taint.get("effect"):
        raise NfdError("empty taint effect")
    if taint["effect"] not in TAINT_EFFECTS:
        raise NfdError("invalid taint effect")


def validate_rule(rule: Mapping[str, Any]) -> None:
    """What nfd-master checks of one rule before applying it: features, labels, taints."""
    for match in rule.get("matchFeatures", []):
        if len(match["feature"].split(".")) != 2:
            raise NfdError(f"invalid feature name {match['feature']} (not <domain>.<feature>)")
    for key, value in rule.get("labels", {}).items():
        validate_label(key, value)
    for taint in rule.get("taints", []):
        validate_taint(taint)


def rule_matches(rule: Mapping[str, Any], features: Mapping[str, Mapping[str, str]]) -> bool:
    """Whether every matchFeatures term holds (In, NotIn, Exists, DoesNotExist)."""
    for match in rule.get("matchFeatures", []):
        elements = features.get(match["feature"], {})
        for name, expression in match["matchExpressions"].items():
            op, values = expression["op"], expression.get("value", [])
            present = name in elements
            if op == "In" and not (present and elements[name] in values):
                return False
            if op == "NotIn" and present and elements[name] in values:
                return False
            if op == "Exists" and not present:
                return False
            if op == "DoesNotExist" and present:
                return False
            if op not in ("In", "NotIn", "Exists", "DoesNotExist"):
                raise NfdError(f"operator {op} is not ported here")
    return True
