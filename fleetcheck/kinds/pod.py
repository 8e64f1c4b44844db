"""The Kubernetes pod kind: `CLUSTER/NAMESPACE/POD[/CONTAINER]` under a host with
`kubernetes:`, listed with `kubectl get pods -o json` and reached with `kubectl exec -i`
through the transport of the machine kubectl runs on (`transport/kubectl.py` words kubectl's
refusals).

Running pods are probed; pods in another phase are skipped nodes saying it; a namespace
that cannot be listed (RBAC, an unreachable API, a missing kubeconfig) is one error node
`CLUSTER/NAMESPACE/*` in kubectl's words, and the other namespaces are still audited.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fleetcheck.budget import LISTING_TIMEOUT
from fleetcheck.inventory_data.model import (
    ALL_CONTAINERS,
    HostSpec,
    KubernetesSpec,
    PodPlace,
    SkippedTarget,
    Target,
)
from fleetcheck.kinds.base import NOT_MINE, Discovery, IdShape, NodeKind, Nodes, NotMine
from fleetcheck.text import clip
from fleetcheck.transport.kubectl import PodTransport, kubectl_failure, pods_argv

if TYPE_CHECKING:
    from fleetcheck.budget import BudgetFor
    from fleetcheck.inventory_data.reader import InventoryReader
    from fleetcheck.report.content import Check, NodeResult
    from fleetcheck.transport.interface import Transport

#: kubectl's annotation naming the container `kubectl exec` picks without `-c`.
DEFAULT_CONTAINER = "kubectl.kubernetes.io/default-container"


@dataclass(frozen=True)
class DiscoveredPod:
    """A pod as `kubectl get pods -o json` shows it, or a namespace that could not be listed
    (`problem` and `status` set, `name` "*")."""

    namespace: str
    name: str
    phase: str = ""
    node: str | None = None
    containers: tuple[str, ...] = ()
    default_container: str | None = None
    problem: str = ""
    status: str = "error"


def parse_pods(text: str, namespace: str) -> list[DiscoveredPod]:
    """`kubectl get pods -o json` (a `List` of `Pod`s) -> pods; a document that is not one
    is one entry with `problem` set."""
    try:
        document = json.loads(text)
    except ValueError:
        return [DiscoveredPod(namespace, "*", problem="kubectl get pods printed no JSON")]
    items = document.get("items") if isinstance(document, dict) else None
    if not isinstance(items, list):
        return [DiscoveredPod(namespace, "*", problem="kubectl get pods: no items list")]
    pods = []
    for item in items:
        meta = item.get("metadata") if isinstance(item, dict) else None
        if not isinstance(meta, dict) or not isinstance(meta.get("name"), str):
            continue
        spec: dict[str, Any] = item["spec"] if isinstance(item.get("spec"), dict) else {}
        status: dict[str, Any] = item["status"] if isinstance(item.get("status"), dict) else {}
        annotations: dict[str, Any] = meta["annotations"] if isinstance(
            meta.get("annotations"), dict) else {}
        names = tuple(c["name"] for c in spec.get("containers") or ()
                      if isinstance(c, dict) and isinstance(c.get("name"), str))
        pods.append(DiscoveredPod(
            namespace=str(meta.get("namespace") or namespace), name=meta["name"],
            phase=str(status.get("phase") or "Unknown"),
            node=spec.get("nodeName") if isinstance(spec.get("nodeName"), str) else None,
            containers=names, default_container=annotations.get(DEFAULT_CONTAINER)))
    return pods


def kubernetes_scope(host: HostSpec) -> str:
    """The pods `fleetcheck inventory` says a host lists: namespaces, context, selector."""
    spec = host.kubernetes
    assert spec is not None
    namespaces = spec.namespaces
    parts = ["all namespaces" if namespaces == ALL_CONTAINERS else
             "namespaces " + ",".join(namespaces) if namespaces else "the context's namespace"]
    if spec.context:
        parts.append(f"context {spec.context}")
    if spec.selector:
        parts.append(f"selector {spec.selector}")
    parts.append("every container" if spec.container == ALL_CONTAINERS else
                 f"container {spec.container or '(the default)'}")
    return ", ".join(parts)


#: The keys of a host's `kubernetes:`.
KUBERNETES_KEYS = ("kubeconfig", "context", "namespaces", "selector", "container")
#: A Kubernetes name (RFC 1123 label: namespaces, containers).
K8S_LABEL_RE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


def _k8s_name(reader: InventoryReader, value: Any, path: tuple[Any, ...]) -> str:
    text = reader.string(value, path)
    if not K8S_LABEL_RE.match(text):
        raise reader.fail(path, "must be a Kubernetes name (lower-case letters, digits and "
                                f"'-', at most 63), got {reader.shown(clip(text, 80))}")
    assert isinstance(text, str)
    return text


class PodIds(IdShape):
    """`CLUSTER/NAMESPACE/POD[/CONTAINER]`: known only once the pods are listed."""

    words = "CLUSTER/NAMESPACE/POD"
    rank = 2

    def problem(self, hosts: Sequence[HostSpec], rest: str) -> str | NotMine | None:
        if not rest or ":" in rest or not any(
                host.kubernetes is not None for host in hosts):
            return NOT_MINE
        return None

    def may_select(self, kind: NodeKind, parent: Target, patterns: Sequence[str],
                   groups: Mapping[str, Sequence[str]]) -> bool:
        del kind, parent, patterns, groups
        return True  # a pod's name is known only from the listing: it always runs


POD_IDS = PodIds()


class PodKind(NodeKind):
    name = "pod"
    runs_in = ("host",)
    depth = 1
    listing_fails_parent = False
    id_shape = POD_IDS
    inventory_key = "kubernetes"
    local_by_default = True

    def schema_keys(self) -> tuple[str, ...]:
        return tuple(f".{key}" for key in KUBERNETES_KEYS)

    def read_declaration(self, reader: InventoryReader, value: Any, path: tuple[Any, ...],
                         transport: str) -> KubernetesSpec:
        """`kubernetes: {kubeconfig, context, namespaces, selector, container}`."""
        raw = reader.mapping(value, path, KUBERNETES_KEYS)
        kubeconfig = None
        if "kubeconfig" in raw:
            # A file of the machine kubectl runs on: this one's paths resolve as others do.
            kubeconfig = (reader.local_path(raw["kubeconfig"], (*path, "kubeconfig"))
                          if transport == "local" else reader.python(raw["kubeconfig"],
                                                                   (*path, "kubeconfig")))
        namespaces: str | tuple[str, ...] = ()
        if "namespaces" in raw:
            listed = raw["namespaces"]
            if listed != ALL_CONTAINERS:
                if not isinstance(listed, list) or not listed:
                    got = reader.shown(listed)
                    raise reader.fail((*path, "namespaces"),
                                      f"must be 'all' or a list of namespaces, got {got}")
                namespaces = tuple(_k8s_name(reader, item, (*path, "namespaces", index))
                                   for index, item in enumerate(listed))
            else:
                namespaces = ALL_CONTAINERS
        container = None
        if "container" in raw:
            container = raw["container"] if raw["container"] == ALL_CONTAINERS else \
                _k8s_name(reader, raw["container"], (*path, "container"))
        selector = None
        if "selector" in raw:
            selector = reader.string(raw["selector"], (*path, "selector"))
            if selector.startswith("-"):
                raise reader.fail((*path, "selector"), "must not start with '-'")
        context = None
        if "context" in raw:
            context = reader.string(raw["context"], (*path, "context"))
            if context.startswith("-"):
                raise reader.fail((*path, "context"), "must not start with '-'")
        return KubernetesSpec(kubeconfig=kubeconfig, context=context, namespaces=namespaces,
                              selector=selector, container=container)

    def graph_rows(self, host: HostSpec, known: Sequence[Target]) -> list[str]:
        if host.kubernetes is None:
            return []
        return [f"{host.name}/*  running pods: discovered at audit time via kubectl get pods "
                f"({kubernetes_scope(host)})  python={host.python}"]

    def declared(self, parent: Target) -> str | Sequence[Any] | None:
        if parent.host.kubernetes is None:
            return None
        return ALL_CONTAINERS  # pods are always found by listing them

    async def discover(
        self, parent: Target, transport: Transport, context: Discovery
    ) -> Sequence[Any]:
        del context
        spec = parent.host.kubernetes
        assert spec is not None
        scopes: list[str | None]
        if spec.namespaces == ALL_CONTAINERS:
            scopes = [None]
        else:
            scopes = list(spec.namespaces) or [""]

        async def one(namespace: str | None) -> list[DiscoveredPod]:
            shown = namespace if namespace is not None else "*"
            result = await transport.run(pods_argv(spec, namespace), timeout=LISTING_TIMEOUT)
            if result.returncode == 0 and not result.timed_out:
                return parse_pods(result.stdout.decode("utf-8", "replace"), shown)
            where = f"namespace {shown}" if namespace else "the cluster"
            refused = transport.explain_failure(result) or kubectl_failure(result, where)
            status, reason = refused or ("error", "kubectl get pods timed out"
                                         if result.timed_out else
                                         f"kubectl get pods failed ({result.returncode})")
            # The context's own namespace is not known here: the cluster's pods, `CLUSTER/*`.
            return [DiscoveredPod(shown or "*", "*", problem=reason, status=status)]

        found = await asyncio.gather(*(one(scope) for scope in scopes))
        return [pod for group in found for pod in group]

    def expand(self, parent: Target, listing: Sequence[Any] | None) -> Nodes:
        spec = parent.host.kubernetes
        if spec is None or listing is None:
            return []
        host = parent.host
        nodes: Nodes = []
        for pod in sorted(listing, key=lambda p: (p.namespace, p.name)):
            place = PodPlace(pod.namespace, pod.name, node=pod.node)
            if pod.problem:
                nodes.append(SkippedTarget(host, None, PodPlace(pod.namespace, "*").path,
                                           f"pod discovery failed: {pod.problem}",
                                           parent.labels, kind=self.name, status=pod.status,
                                           pod=place))
                continue
            if spec.container == ALL_CONTAINERS:
                chosen = [(c, True) for c in pod.containers]
            else:
                chosen = [(spec.container or pod.default_container
                           or (pod.containers[0] if pod.containers else None), False)]
            for container, in_id in chosen:
                place = PodPlace(pod.namespace, pod.name, container, in_id, pod.node)
                name = f"{pod.namespace}/{pod.name}"
                if pod.phase != "Running":
                    nodes.append(SkippedTarget(host, None, name, f"pod {pod.phase}",
                                               parent.labels, kind=self.name, pod=place))
                elif container is not None and pod.containers \
                        and container not in pod.containers:
                    nodes.append(SkippedTarget(
                        host, None, name, f"container {container} not found in pod {name} "
                        f"(containers: {', '.join(pod.containers)})", parent.labels,
                        kind=self.name, status="error", pod=place))
                else:
                    nodes.append(Target(host=host, vmid=None, name=name, python=host.python,
                                        env=dict(host.env), labels=parent.labels,
                                        timeout=host.timeout, kind=self.name, pod=place))
        return nodes

    def transport(self, target: Target, outer: Transport, budget: BudgetFor) -> Transport:
        del budget  # `kubectl exec` has no wait of its own: the transport it runs on bounds it
        assert target.pod is not None and target.host.kubernetes is not None
        return PodTransport(outer, target.host.kubernetes, target.pod, target.host.name)

    where_name = "kubernetes"

    def gpu_passthrough(self, node: NodeResult, check: Check, vendor: str
                        ) -> tuple[str, ...] | None:
        if vendor == "amd":
            return None
        return ("request the GPUs in the pod spec: resources.limits nvidia.com/gpu: N, on a "
                "node running the NVIDIA device plugin or GPU operator",)

    def inside(self, target: Target) -> str:
        container = target.pod.container if target.pod is not None else None
        return f"in pod {target.name}" + (f" container {container}" if container else "")

    def where_it_runs(self, node: NodeResult) -> str:
        return (f"inside pod {node.name} of cluster {node.host}, as the image's user, "
                "through `kubectl exec -i`")

    def describe(self, target: Target) -> str | None:
        pod = target.pod
        if pod is None:
            return None
        return f"(pod on {pod.node or 'an unknown node'}, container {pod.container or '-'})"


POD = PodKind()
