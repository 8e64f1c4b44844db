"""Kubernetes pods as nodes: a namespace audited through `kubectl` (the stand-in, on PATH)."""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleetcheck.audit import run_audit
from fleetcheck.inventory import check_limit, load_inventory
from fleetcheck.report.content import Report
from tests.audit.support import GPU_OK, rows
from tests.nodeenv import make_node

pytestmark = pytest.mark.timeout(180)
STANDIN = Path(__file__).resolve().parents[1] / "fleet" / "kubectl_standin.py"
USER = "system:serviceaccount:fleetcheck:audit"
NO_CC = "Triton cpu-fallback: no C compiler: CC unset, no gcc or clang on PATH"


class Cluster:
    """A kubeconfig, the cluster state beside it, and kubectl on PATH."""

    def __init__(self, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.root = root
        bindir = root / "bin"
        bindir.mkdir(parents=True)
        kubectl = bindir / "kubectl"
        kubectl.write_text(f"#!{sys.executable}\n" + STANDIN.read_text())
        kubectl.chmod(0o755)
        monkeypatch.setenv("PATH", f"{bindir}:{Path(sys.executable).parent}:/usr/bin:/bin")
        self.kubeconfig = root / "kubeconfig"
        self.kubeconfig.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "lab",
            "clusters": [{"name": "lab", "cluster": {"server": "https://10.0.0.1:6443"}}],
            "contexts": [{"name": "lab", "context": {"cluster": "lab", "user": "audit",
                                                     "namespace": "training"}}],
            "users": [{"name": "audit", "user": {"token": "not-used-by-the-stand-in"}}]}))
        self.state: dict[str, Any] = {"reachable": True, "user": USER, "forbid": [],
                                      "pods": []}
        self.healthy = self.image(root / "node-ok", compiler=True)
        self.broken = self.image(root / "node-nocc", compiler=False)
        slim = root / "slim-bin"
        slim.mkdir()
        for tool in ("env", "sh"):
            (slim / tool).symlink_to(shutil.which(tool) or f"/bin/{tool}")
        self.slim_env = {"PATH": str(slim)}

    @staticmethod
    def image(root: Path, *, compiler: bool) -> dict[str, str]:
        """A container's environment: the fake GPU node, python3 first on its PATH."""
        node = make_node(root, compiler=compiler)
        (root / "image-bin").mkdir()
        (root / "image-bin" / "python3").symlink_to(node.python)
        env = dict(node.env)
        env["PATH"] = f"{root / 'image-bin'}:{env.get('PATH', '')}".rstrip(":")
        return env

    def pod(self, namespace: str, name: str, env: dict[str, str], *, phase: str = "Running",
            node: str = "gpu-node-1", containers: tuple[str, ...] = ("main",),
            annotations: dict[str, str] | None = None) -> None:
        self.state["pods"].append({
            "namespace": namespace, "name": name, "node": node, "phase": phase,
            "labels": {"app": name.split("-")[0]}, "annotations": annotations or {},
            "containers": [{"name": c, "env": env if c == containers[-1] else
                            self.slim_env} for c in containers]})

    def inventory(self, **kubernetes: Any) -> Path:
        (self.root / "kubeconfig.cluster.json").write_text(json.dumps(self.state))
        path = self.root / "inventory.yaml"
        path.write_text(yaml.safe_dump({
            "defaults": {"timeout": 60},
            "hosts": {"lab": {"labels": ["k8s"], "kubernetes": {
                "kubeconfig": str(self.kubeconfig), **kubernetes}}}}, sort_keys=False))
        return path


@pytest.fixture
def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Cluster:
    return Cluster(tmp_path, monkeypatch)


def audit(path: Path, limit: list[str] | None = None) -> Report:
    inventory = load_inventory(str(path))
    if limit:
        check_limit(inventory, limit)
    return asyncio.run(run_audit(inventory, limit=limit))


def test_a_namespace_is_audited_pod_by_pod(cluster: Cluster) -> None:
    cluster.pod("training", "trainer-0", cluster.healthy, node="gpu-node-1")
    cluster.pod("training", "trainer-1", cluster.broken, node="gpu-node-2")
    cluster.pod("training", "done-job", cluster.healthy, phase="Succeeded")
    cluster.pod("training", "slim", cluster.slim_env)
    # Two containers: the annotation names the one `kubectl exec` picks.
    cluster.pod("inference", "server-0", cluster.healthy, containers=("sidecar", "main"),
                annotations={"kubectl.kubernetes.io/default-container": "main"})
    cluster.state["forbid"] = ["list pods secret"]
    path = cluster.inventory(namespaces=["training", "inference", "secret"])

    report = audit(path)

    assert [(n.id, n.kind, n.parent, n.labels) for n in report.nodes] == [
        ("lab/inference/server-0", "pod", "lab", ("k8s",)),
        ("lab/secret/*", "pod", "lab", ("k8s",)),
        ("lab/training/done-job", "pod", "lab", ("k8s",)),
        ("lab/training/slim", "pod", "lab", ("k8s",)),
        ("lab/training/trainer-0", "pod", "lab", ("k8s",)),
        ("lab/training/trainer-1", "pod", "lab", ("k8s",)),
    ]
    assert rows(report) == [
        ("lab/inference/server-0", *GPU_OK),
        ("lab/secret/*", "error",
         f"pod discovery failed: forbidden by RBAC: {USER} may not list pods in namespace "
         "secret; grant it with deploy/kubernetes/fleetcheck-audit-rbac.yaml (kubectl: Error "
         f'from server (Forbidden): pods is forbidden: User "{USER}" cannot list resource '
         '"pods" in API group "" in the namespace "secret")'),
        ("lab/training/done-job", "skipped", "pod Succeeded"),
        ("lab/training/slim", "error",
         "python3 not found in pod training/slim (no such file in the image)"),
        ("lab/training/trainer-0", *GPU_OK),
        ("lab/training/trainer-1", "fail", NO_CC),
    ]
    facts = {n.id: n.facts.get("kubernetes") for n in report.nodes if n.status != "error"
             and n.status != "skipped"}
    assert facts["lab/training/trainer-0"] == {
        "cluster": "lab", "namespace": "training", "pod": "trainer-0", "container": "main",
        "node": "gpu-node-1"}
    assert facts["lab/training/trainer-1"]["node"] == "gpu-node-2"  # type: ignore[index]
    assert facts["lab/inference/server-0"]["container"] == "main"  # type: ignore[index]


def test_every_container_selector_and_limit(cluster: Cluster) -> None:
    cluster.pod("training", "trainer-0", cluster.healthy, containers=("sidecar", "main"))
    cluster.pod("training", "other-0", cluster.healthy)
    path = cluster.inventory(container="all", selector="app=trainer")

    report = audit(path, limit=["lab/training/trainer-0/main"])

    assert rows(report) == [("lab/training/trainer-0/main", *GPU_OK)]
    everything = audit(path)
    assert rows(everything) == [
        ("lab/training/trainer-0/main", *GPU_OK),
        ("lab/training/trainer-0/sidecar", "error",
         "python3 not found in pod training/trainer-0 (no such file in the image)")]


@pytest.mark.parametrize(
    ("change", "status", "reason"),
    [
        ({"forbid": ["create pods/exec training"]}, "error",
         f"forbidden by RBAC: {USER} may not create pods/exec in namespace training; grant it "
         "with deploy/kubernetes/fleetcheck-audit-rbac.yaml (kubectl: Error from server "
         f'(Forbidden): pods "trainer-0" is forbidden: User "{USER}" cannot create resource '
         '"pods/exec" in API group "" in the namespace "training")'),
        ({"reachable": False}, "unreachable",
         "pod discovery failed: Kubernetes API unreachable (kubectl: The connection to the "
         "server 10.0.0.1:6443 was refused - did you specify the right host or port?)"),
    ],
    ids=["exec-forbidden", "unreachable"],
)
def test_refusals_are_statuses_in_kubectls_words(
    cluster: Cluster, change: dict[str, Any], status: str, reason: str
) -> None:
    cluster.pod("training", "trainer-0", cluster.healthy)
    cluster.state.update(change)
    report = audit(cluster.inventory())
    node = report.nodes[0]
    assert (node.status, node.reason) == (status, reason)
    assert node.id in ("lab/training/trainer-0", "lab/*")


def test_a_pods_failing_interpreter_is_read_in_its_own_words(cluster: Cluster) -> None:
    # kubectl adds `command terminated with exit code N` after the command's stderr: the node
    # says what the interpreter said. A CPython before 3.7 (its own text) is named as too old;
    # a crash keeps its last line.
    for name, said, code in (
            ("old", '  File "<stdin>", line 12\nSyntaxError: future feature annotations is '
                    "not defined", 1),
            ("crash", "Traceback (most recent call last):\nMemoryError", 3)):
        image = cluster.root / f"image-{name}"
        image.mkdir()
        python = image / "python3"
        python.write_text(f"#!/bin/sh\ncat > /dev/null\nprintf '%s\\n' '{said}' >&2\n"
                          f"exit {code}\n")
        python.chmod(0o755)
        cluster.pod("training", f"{name}-0", {"PATH": f"{image}:/usr/bin:/bin"})
    nodes = {node.id: node for node in audit(cluster.inventory()).nodes}
    old, crash = nodes["lab/training/old-0"], nodes["lab/training/crash-0"]
    assert (old.status, old.triton.cause, old.reason) == (
        "error", "interpreter_too_old",
        "python3 in pod training/old-0 container main is too old for the probe (it needs "
        "Python 3.8 or newer): SyntaxError: future feature annotations is not defined")
    assert (crash.status, crash.triton.cause, crash.reason) == (
        "error", None, "probe exited with status 3: MemoryError")


def test_a_missing_kubeconfig_and_a_wrong_context(cluster: Cluster) -> None:
    path = cluster.inventory()
    cluster.kubeconfig.unlink()
    assert rows(audit(path)) == [(
        "lab/*", "error",
        f"pod discovery failed: kubeconfig missing (kubectl: error: stat {cluster.kubeconfig}: "
        "no such file or directory)")]
    path = cluster.root / "inventory.yaml"
    cluster.kubeconfig.write_text(yaml.safe_dump({"contexts": [], "clusters": []}))
    assert rows(audit(path))[0][2] == (
        "pod discovery failed: kubeconfig unusable (kubectl: Error in configuration: context "
        "was not found for specified context: None)")


REAL_KUBECTL = shutil.which("kubectl")


@pytest.mark.skipif(REAL_KUBECTL is None, reason="needs a real kubectl (Debian: kubernetes-client)")
def test_the_stand_in_says_what_a_real_kubectl_says_without_a_server(tmp_path: Path) -> None:
    import subprocess

    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "lab",
        "clusters": [{"name": "lab", "cluster": {"server": "https://127.0.0.1:1"}}],
        "contexts": [{"name": "lab", "context": {"cluster": "lab", "user": "u"}}],
        "users": [{"name": "u", "user": {"token": "t"}}]}))
    (tmp_path / "kubeconfig.cluster.json").write_text(json.dumps({"reachable": False}))
    cases = [
        ["--kubeconfig", str(tmp_path / "missing"), "get", "pods", "-o", "json"],
        ["--kubeconfig", str(kubeconfig), "--context", "nope", "get", "pods", "-o", "json"],
        ["--kubeconfig", str(kubeconfig), "get", "pods", "-o", "json"],
    ]
    for args in cases:
        real = subprocess.run([str(REAL_KUBECTL), *args], capture_output=True, text=True,
                              timeout=60, check=False)
        ours = subprocess.run([sys.executable, str(STANDIN), *args], capture_output=True,
                              text=True, timeout=60, check=False)
        last = [line for line in real.stderr.splitlines() if line.strip()][-1]
        assert (ours.returncode, ours.stderr.strip()) == (real.returncode, last.strip())
