"""The node document's origin: where the probe ran, from Slurm's and Kubernetes' environment."""

from __future__ import annotations

from fleetcheck.nodedoc import node_origin


def test_origin_reads_slurm_and_kubernetes() -> None:
    assert node_origin({"SLURMD_NODENAME": "gpu07", "SLURM_JOB_ID": "42"}) == {
        "hostname": node_origin({})["hostname"], "slurm_node": "gpu07", "slurm_job": "42"}
    k8s = node_origin({"KUBERNETES_SERVICE_HOST": "10.0.0.1", "NODE_NAME": "worker-3",
                       "POD_NAME": "fleetcheck-abcde", "POD_NAMESPACE": "gpu-health"})
    assert (k8s["k8s_node"], k8s["pod"], k8s["namespace"]) == (
        "worker-3", "fleetcheck-abcde", "gpu-health")
    assert "k8s_node" not in node_origin({"NODE_NAME": "not-in-a-pod"})
