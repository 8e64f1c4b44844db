"""The node document: what `fleetcheck probe --format json` prints, and reading one back.

A node document is the audit JSON's node object (`reportio.node_to_dict`) plus a schema tag,
the fleetcheck that wrote it, when the node was probed and where the probe ran (`origin`: the
host name, and the Slurm node or Kubernetes node and pod when the probe ran under them). It is
the unit that Slurm (`srun … fleetcheck probe`), a Kubernetes DaemonSet or a node's timer
gathers, and that `fleetcheck merge` assembles into one audit report (fleetcheck/report/merge.py).

The probe script's own document (`fleetcheck.probe/1`: what `fleetcheck probe --script |
python3 -` prints on a node where fleetcheck is not installed) is read too: parsed and judged
by the same path an audit takes for the same reply (`probe/results.py`), named by its host name.

This module owns the schema tags a merge accepts, and what it does with each: read it, read it
as an older fleetcheck wrote it, or refuse it saying what it is and what was expected.
"""

from __future__ import annotations

import dataclasses
import os
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from fleetcheck import __version__
from fleetcheck.judgement.gpustate import graded
from fleetcheck.judgement.policy import Policy, evaluate_node
from fleetcheck.judgement.statuses import PROBE_STATUSES
from fleetcheck.probe.results import (
    ProbeOutput,
    ProbeOutputError,
    judge_probe_output,
    probe_output_from_json,
)
from fleetcheck.report.content import AUDIT_SCHEMA, PROBE_SCHEMA, NodeResult
from fleetcheck.report.reportio import node_from_dict, node_to_dict
from fleetcheck.text import clip
from fleetcheck.timestamps import parse_time

#: The node document's schema tag; a later, incompatible one is refused, never guessed at.
NODE_SCHEMA = "fleetcheck.node/1"
#: The node-health cache (integrations/health_check.py) wraps a node document: also merged.
CACHE_SCHEMA = "fleetcheck.nodehealth/1"

#: Where a probe ran, as the document's `origin` says it; the fields of `merge --id`.
ORIGIN_FIELDS = ("hostname", "slurm_node", "slurm_job", "k8s_node", "pod", "namespace")

#: Kubernetes mounts the pod's namespace here for its service account.
_K8S_NAMESPACE_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

_SCHEMA_TAG = re.compile(r"^(fleetcheck\.[a-z]+)/(\d+)$")

#: What a merge reads, as every refusal says it.
EXPECTED = (f"expected the probe script's document ({PROBE_SCHEMA}), `fleetcheck probe --format "
            f"json`'s ({NODE_SCHEMA}), a node cache ({CACHE_SCHEMA}) or an audit report "
            f"({AUDIT_SCHEMA})")


class NodeDocumentError(Exception):
    """A document that is not a node document fleetcheck can read; one line, naming it."""


def node_origin(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Where the probe runs: the host name, and what Slurm or Kubernetes say about the node.

    Slurm sets SLURMD_NODENAME and SLURM_JOB_ID in every task and prolog. Kubernetes sets
    KUBERNETES_SERVICE_HOST in every pod; the node's and pod's names come from the downward
    API (NODE_NAME, POD_NAME, POD_NAMESPACE, as deploy/kubernetes/ sets them), the pod's name
    otherwise from its host name, which Kubernetes makes the pod's.
    """
    env = os.environ if environ is None else environ
    origin = {"hostname": socket.gethostname()}
    for key, name in (("slurm_node", "SLURMD_NODENAME"), ("slurm_job", "SLURM_JOB_ID")):
        value = env.get(name, "").strip()
        if value:
            origin[key] = value
    if env.get("KUBERNETES_SERVICE_HOST"):
        origin["pod"] = env.get("POD_NAME", "").strip() or origin["hostname"]
        for key, name in (("k8s_node", "NODE_NAME"), ("namespace", "POD_NAMESPACE")):
            value = env.get(name, "").strip()
            if value:
                origin[key] = value
        if "namespace" not in origin:
            try:
                with open(_K8S_NAMESPACE_FILE, encoding="utf-8") as handle:
                    origin["namespace"] = handle.read().strip() or "default"
            except OSError:
                pass
    return origin


def node_document(node: NodeResult, probed_at: str,
                  origin: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The node document for a probed node: its audit JSON object, tagged, dated and placed."""
    return {
        "schema": NODE_SCHEMA,
        **node_to_dict(node),
        "probed_at": probed_at,
        "fleetcheck": __version__,
        "origin": dict(node_origin() if origin is None else origin),
    }


@dataclass(frozen=True)
class NodeDocument:
    """One node as a document gave it: the node, when it was probed, where, and from what."""

    node: NodeResult
    #: Where it was read: "docs/gpu01.json", "nodes.tar.gz:gpu01.json", "<stdin>#2".
    source: str
    probed_at: datetime | None
    #: What dated it: "probed_at", "written_at" (a cache), "report" (an audit's start).
    dated_by: str = ""
    origin: Mapping[str, str] = field(default_factory=dict)
    #: A note for the reader: "written by an older fleetcheck (no schema)".
    note: str = ""
    #: The probe script's own reply, for a `fleetcheck.probe/1` document (judged as an audit
    #: judges that reply); None for a node document, whose node is already judged.
    probe: ProbeOutput | None = None

    def judged(self, policy: Policy) -> NodeResult:
        """The node under the merge's playbook, as an audit with it would have judged it.

        A probe document goes the audit's own way (`judge_probe_output`). A node document's
        status and reason follow from its checks, Triton verdict and facts under the policy
        (verdict.evaluate_node); the document's were the probing node's playbook's. A node
        without checks (its probe never printed a document) keeps what it says.
        """
        node = self.node
        if self.probe is not None:
            judged = judge_probe_output(self.probe, policy)
            return dataclasses.replace(node, status=judged.status, reason=judged.reason,
                                       triton=judged.triton, checks=judged.checks,
                                       facts=judged.facts)
        if not node.checks or node.status not in PROBE_STATUSES:
            return node
        status, reason = evaluate_node(node.checks, node.triton, policy, facts=node.facts)
        checks = graded(node.checks, policy.gpu, policy.name)
        if (status, reason, checks) == (node.status, node.reason, node.checks):
            return node
        return dataclasses.replace(node, status=status, reason=reason, checks=checks)


def _schema_version(tag: str) -> tuple[str, int] | None:
    match = _SCHEMA_TAG.match(tag)
    return (match.group(1), int(match.group(2))) if match else None


def _refuse_newer(tag: str, known: str, source: str) -> None:
    """Refuse a document of a later schema than this fleetcheck reads."""
    parsed, mine = _schema_version(tag), _schema_version(known)
    if parsed and mine and parsed[0] == mine[0] and parsed[1] > mine[1]:
        raise NodeDocumentError(
            f"{source}: written by a newer fleetcheck (schema {tag}; fleetcheck {__version__} "
            f"reads {known}): upgrade fleetcheck where you merge")
    if parsed and mine and parsed[0] == mine[0]:
        raise NodeDocumentError(f"{source}: unknown schema {tag} (this fleetcheck reads {known})")


def _origin(data: Mapping[str, Any]) -> dict[str, str]:
    raw = data.get("origin")
    if not isinstance(raw, Mapping):
        return {}
    return {key: value for key, value in raw.items()
            if key in ORIGIN_FIELDS and isinstance(value, str) and value}


def _looks_like_node(data: Mapping[str, Any]) -> bool:
    return (isinstance(data.get("id"), str) and isinstance(data.get("status"), str)
            and isinstance(data.get("checks"), list))


def _one_node(data: Mapping[str, Any], source: str, dated: tuple[datetime | None, str],
              note: str = "") -> NodeDocument:
    moment, how = dated
    own = data.get("probed_at")
    if isinstance(own, str) and parse_time(own) is not None:
        moment, how = parse_time(own), "probed_at"
    elif own is not None:
        raise NodeDocumentError(f"{source}: key 'probed_at': not an ISO 8601 time: {own!r}")
    node = node_from_dict(data)
    origin = _origin(data)
    if "hostname" not in origin:
        hostname = data.get("facts", {}).get("hostname") if isinstance(
            data.get("facts"), Mapping) else None
        if isinstance(hostname, str) and hostname:
            origin["hostname"] = hostname
    return NodeDocument(node=node, source=source, probed_at=moment, dated_by=how,
                        origin=origin, note=note)


def _probe_document(data: Mapping[str, Any], source: str) -> NodeDocument:
    """The probe script's document: its reply parsed as an audit parses it, named by the
    host name the probe found (merge's `--id` may name it otherwise), undated (a file's time
    dates it)."""
    try:
        output = probe_output_from_json(data)
    except ProbeOutputError as exc:
        raise NodeDocumentError(f"{source}: malformed probe document ({PROBE_SCHEMA}): "
                                f"{exc}") from None
    hostname = output.facts.get("hostname")
    name = hostname if isinstance(hostname, str) and hostname else ""
    # As the probe judged itself; `NodeDocument.judged` judges it under the merge's playbook.
    node = NodeResult(id=name, host=name, vmid=None, name=name, status=output.status,
                      reason=output.reason, triton=output.triton, checks=output.checks,
                      facts=output.facts, duration_s=output.duration_s)
    return NodeDocument(node=node, source=source, probed_at=None,
                        origin={"hostname": name} if name else {}, probe=output)


def documents_from_json(data: Any, source: str) -> list[NodeDocument]:
    """The nodes one JSON document holds: a probe script's document, a node document, a node
    cache or an audit report.

    A node object without a schema tag is what fleetcheck printed before node documents had
    one: it is read, undated, with a note. A later schema of any of them is refused, and so
    is anything else, saying what it is and what was expected.
    """
    if not isinstance(data, Mapping):
        raise NodeDocumentError(f"{source}: a JSON {_json_type(data)}, not a fleetcheck "
                                f"document; {EXPECTED}")
    tag = data.get("schema")
    if tag == PROBE_SCHEMA:
        return [_probe_document(data, source)]
    if tag == NODE_SCHEMA:
        if not _looks_like_node(data):
            raise NodeDocumentError(f"{source}: malformed node document: needs 'id', "
                                    "'status' and 'checks'")
        return [_one_node(data, source, (None, ""))]
    if tag == CACHE_SCHEMA:
        node = data.get("node")
        written = data.get("written_at")
        if not isinstance(node, Mapping) or not _looks_like_node(node):
            raise NodeDocumentError(f"{source}: malformed node cache: key 'node'")
        moment = None
        if isinstance(written, (int, float)) and not isinstance(written, bool):
            moment = datetime.fromtimestamp(float(written), timezone.utc)
        inner = node.get("schema")
        if inner is not None and inner != NODE_SCHEMA:
            _refuse_newer(str(inner), NODE_SCHEMA, source)
        return [_one_node(node, source, (moment, "written_at" if moment else ""))]
    if tag == AUDIT_SCHEMA:
        nodes = data.get("nodes")
        if not isinstance(nodes, list):
            raise NodeDocumentError(f"{source}: key 'nodes' must be a list")
        started = data.get("started_at")
        moment = parse_time(started) if isinstance(started, str) else None
        found = []
        for index, item in enumerate(nodes):
            where = f"{source}: nodes[{index}]"
            if not isinstance(item, Mapping) or not _looks_like_node(item):
                raise NodeDocumentError(f"{where}: malformed node: needs 'id', 'status', 'checks'")
            found.append(_one_node(item, where, (moment, "report" if moment else "")))
        return found
    if tag is None:
        if _looks_like_node(data):
            return [_one_node(data, source, (None, ""),
                              note="written by an older fleetcheck (no schema tag)")]
        keys = clip(", ".join(repr(key) for key in list(data)[:4]), 80) or "no keys"
        raise NodeDocumentError(f"{source}: a JSON object without 'schema' ({keys}), not a "
                                f"fleetcheck document; {EXPECTED}")
    if isinstance(tag, str):
        for known in (PROBE_SCHEMA, NODE_SCHEMA, CACHE_SCHEMA, AUDIT_SCHEMA):
            _refuse_newer(tag, known, source)
        shown = clip(tag, 80)
        what = (f"a {shown} document" if _schema_version(tag) else
                f"a document of schema {shown!r}")
        raise NodeDocumentError(f"{source}: {what}, which holds no node; {EXPECTED}")
    raise NodeDocumentError(f"{source}: 'schema' is a JSON {_json_type(tag)}, not a schema "
                            f"tag; {EXPECTED}")


def _json_type(value: Any) -> str:
    """A value's JSON type, as the document spells it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "array"
    return "object"
