"""The node document's origin (where the probe ran, from Slurm's and Kubernetes'
environment), reading the probe script's own document, and what a refusal says."""

from __future__ import annotations

from typing import Any

import pytest

from fleetcheck.judgement.policy import Policy
from fleetcheck.probe.results import judge_probe_output, probe_output_from_json
from fleetcheck.report.nodedoc import EXPECTED, NodeDocumentError, documents_from_json, node_origin
from tests.contracts import validated


def test_origin_reads_slurm_and_kubernetes() -> None:
    assert node_origin({"SLURMD_NODENAME": "gpu07", "SLURM_JOB_ID": "42"}) == {
        "hostname": node_origin({})["hostname"], "slurm_node": "gpu07", "slurm_job": "42"}
    k8s = node_origin({"KUBERNETES_SERVICE_HOST": "10.0.0.1", "NODE_NAME": "worker-3",
                       "POD_NAME": "fleetcheck-abcde", "POD_NAMESPACE": "gpu-health"})
    assert (k8s["k8s_node"], k8s["pod"], k8s["namespace"]) == (
        "worker-3", "fleetcheck-abcde", "gpu-health")
    assert "k8s_node" not in node_origin({"NODE_NAME": "not-in-a-pod"})


def probe_reply(**changes: Any) -> dict[str, Any]:
    """What the probe script prints when it breaks (its own `failure_document`), as a reply
    to read: every check an error, verdict unknown."""
    from fleetcheck.probe.parts.main import failure_document

    document = failure_document("no GPU stack here", False, 0.0)
    document["facts"] = {"hostname": "gpu07", "gpu_count": 1}
    document["duration_s"] = 1.5
    document.update(changes)
    return validated(document)


def test_a_probe_document_is_the_node_its_reply_makes_judged_by_the_audits_path() -> None:
    [document] = documents_from_json(probe_reply(), "docs/x.json")
    assert document.probe == probe_output_from_json(probe_reply())
    assert (document.node.id, document.node.host, document.node.kind) == ("gpu07", "gpu07",
                                                                          "host")
    assert (document.origin, document.probed_at, document.note) == ({"hostname": "gpu07"},
                                                                   None, "")
    every_check = frozenset(check.id for check in document.node.checks)
    eight = Policy(name="eight", min_gpus=8, ignore=every_check)
    judged = judge_probe_output(document.probe, eight)
    node = document.judged(eight)
    assert (node.status, node.reason, node.triton, node.checks, node.facts) == (
        judged.status, judged.reason, judged.triton, judged.checks, judged.facts)
    assert (node.status, node.reason) == ("fail", "1 GPU(s), playbook eight requires 8")
    # The probe's own judgement is not the merge's: nothing of it is kept.
    lenient = document.judged(Policy(ignore=every_check,
                                     failing_verdicts=frozenset({"unknown"})))
    assert (lenient.status, lenient.reason) == ("fail", "Triton unknown: unknown cause")


def test_a_nameless_probe_document_is_named_by_merge_not_here() -> None:
    reply = probe_reply(facts={})
    [document] = documents_from_json(reply, "<stdin>")
    assert (document.node.id, document.origin) == ("", {})


@pytest.mark.parametrize(("document", "said"), [
    ({"schema": "fleetcheck.probe/1", "facts": {}, "checks": {}, "duration_s": 1},
     "malformed probe document (fleetcheck.probe/1): 'checks' must be a list"),
    ({"schema": "fleetcheck.probe/2"},
     "written by a newer fleetcheck (schema fleetcheck.probe/2; fleetcheck 0.1.0 reads "
     "fleetcheck.probe/1): upgrade fleetcheck where you merge"),
    ({"schema": "fleetcheck.gate/1", "result": "pass"},
     f"a fleetcheck.gate/1 document, which holds no node; {EXPECTED}"),
    ({"schema": "acme.inventory/3"}, "a document of schema 'acme.inventory/3', which holds no "
     f"node; {EXPECTED}"),
    ({"schema": 7}, f"'schema' is a JSON number, not a schema tag; {EXPECTED}"),
    ({"kind": "Pod", "spec": {}}, "a JSON object without 'schema' ('kind', 'spec'), not a "
     f"fleetcheck document; {EXPECTED}"),
    ([1, 2], f"a JSON array, not a fleetcheck document; {EXPECTED}"),
    ("text", f"a JSON string, not a fleetcheck document; {EXPECTED}"),
])
def test_a_refused_document_says_what_it_is_and_what_was_expected(document: Any,
                                                                   said: str) -> None:
    with pytest.raises(NodeDocumentError) as refused:
        documents_from_json(document, "x.json")
    assert str(refused.value) == f"x.json: {said}"
