"""Kubernetes pods: `kubectl exec -i POD -c CONTAINER -- ARGV` through the transport of the
machine kubectl runs on, and kubectl's refusals in words.

Owns kubectl's argv (`--kubeconfig`, `--context`, `-n`; `-i` keeps stdin open for the probe,
never `-t`) and the reading of its texts and exit codes (kubectl 1.2x: staging/src/k8s.io/
kubectl/pkg/cmd/exec/exec.go, pkg/cmd/util/helpers.go `CheckErr`, client-go's
`The connection to the server ... was refused`), so every refusal is a node status quoting
kubectl's own line.
"""

from __future__ import annotations

import dataclasses
import re

from fleetcheck import failures
from fleetcheck.failures import Refusal
from fleetcheck.inventory_data.model import KubernetesSpec, PodPlace
from fleetcheck.text import clip
from fleetcheck.transport.interface import (
    CommandResult,
    NestedTransport,
    RunCommand,
    Transport,
)

_FORBIDDEN = re.compile(r'User "([^"]*)" cannot (\w+) resource "([^"]+)"'
                        r'(?: in API group "[^"]*")?(?: in the namespace "([^"]*)")?')
_CONTAINER_NOT_FOUND = re.compile(r'container not found \("([^"]*)"\)')
_PHASE = re.compile(r"current phase is (\w+)")
_EXEC_NOT_FOUND = re.compile(r'exec: "([^"]+)": executable file not found')
#: How to grant what a read-only audit needs (deploy/kubernetes/ in the repository).
RBAC_HINT = "grant it with deploy/kubernetes/fleetcheck-audit-rbac.yaml"


def kubectl_base(spec: KubernetesSpec) -> list[str]:
    """`kubectl [--kubeconfig F] [--context C]`."""
    argv = ["kubectl"]
    if spec.kubeconfig:
        argv += ["--kubeconfig", spec.kubeconfig]
    if spec.context:
        argv += ["--context", spec.context]
    return argv


def pods_argv(spec: KubernetesSpec, namespace: str | None) -> list[str]:
    """`kubectl get pods -o json` in `namespace` (None: every namespace; "": the context's)."""
    scope = ["--all-namespaces"] if namespace is None else (["-n", namespace] if namespace
                                                            else [])
    selector = ["-l", spec.selector] if spec.selector else []
    return [*kubectl_base(spec), "get", "pods", *scope, *selector, "-o", "json"]


def exec_argv(spec: KubernetesSpec, place: PodPlace, argv: list[str]) -> list[str]:
    """`kubectl exec -i -n NS POD -c CONTAINER -- ARGV`."""
    container = ["-c", place.container] if place.container else []
    return [*kubectl_base(spec), "exec", "-i", "-n", place.namespace, place.pod, *container,
            "--", *argv]


def without_exit_trailer(result: CommandResult) -> CommandResult:
    """The pod's command's own result: kubectl's `command terminated with exit code N` line,
    which it adds after a command in the pod exits N, taken off stderr (the command's last
    line, where a crash or an interpreter says why, is then the last line again)."""
    code = result.returncode
    text = result.stderr.rstrip(b"\n")
    trailer = f"command terminated with exit code {code}".encode()
    if code is None or code == 0 or not text.endswith(trailer):
        return result
    head = text[:-len(trailer)]
    if head and not head.endswith(b"\n"):
        return result  # not a line of its own
    return dataclasses.replace(result, stderr=head)


def kubectl_failure(result: CommandResult, where: str) -> Refusal | None:
    """(status, reason) when kubectl itself, the API server or RBAC refused; None otherwise.

    `where` names the pod or namespace ("pod training/trainer-0"). The reason quotes
    kubectl's own line.
    """
    if result.returncode == 0:
        return None
    text = result.stderr.decode("utf-8", "replace")
    lines = [line.strip() for line in text.splitlines()
             if line.strip() and not re.match(r"^[EWI]\d{4} ", line.strip())]
    said = next((line for line in lines if line.startswith(("error:", "Error", "The connection",
                                                            "Unable to connect"))),
                lines[-1] if lines else "")
    quoted = clip(said, 240)
    if result.returncode == 127 and ("kubectl: not found" in text or "kubectl\"" in text
                                     or "kubectl: No such file" in text):
        return Refusal("error", "kubectl not found on the machine that reaches the cluster",
                       failures.TOOL_NOT_FOUND)
    if said.startswith("error: stat ") and "no such file or directory" in said:
        return Refusal("error", f"kubeconfig missing (kubectl: {quoted})", failures.CREDENTIALS)
    if said.startswith("Error in configuration"):
        return Refusal("error", f"kubeconfig unusable (kubectl: {quoted})", failures.CREDENTIALS)
    if said.startswith(("The connection to the server", "Unable to connect to the server")):
        return Refusal("unreachable", f"Kubernetes API unreachable (kubectl: {quoted})",
                       failures.UNREACHABLE)
    forbidden = _FORBIDDEN.search(text)
    if "(Forbidden)" in text and forbidden:
        user, verb, resource, namespace = forbidden.groups()
        scope = f" in namespace {namespace}" if namespace else ""
        return Refusal("error", f"forbidden by RBAC: {user} may not {verb} {resource}{scope}; "
                       f"{RBAC_HINT} (kubectl: {quoted})", failures.ACCESS_DENIED)
    if "(Unauthorized)" in text or "must be logged in" in text:
        return Refusal("error", f"the cluster refused the credentials (kubectl: {quoted})",
                       failures.CREDENTIALS)
    if "(NotFound)" in text:
        return Refusal("error", f"{where} not found (kubectl: {quoted})", failures.NO_SUCH_NODE)
    phase = _PHASE.search(text)
    if "cannot exec into a container in a completed pod" in text and phase:
        return Refusal("skipped", f"pod {phase.group(1)}", failures.NODE_NOT_RUNNING)
    container = _CONTAINER_NOT_FOUND.search(text)
    if container:
        return Refusal("error", f"container {container.group(1)} not found in {where} (kubectl: "
                       f"{quoted})", failures.NO_SUCH_NODE)
    missing = _EXEC_NOT_FOUND.search(text)
    if missing:
        return Refusal("error", f"{missing.group(1)} not found in {where} (no such file in the "
                       f"image)", failures.INTERPRETER_MISSING)
    return None


class PodTransport(NestedTransport):
    """Commands in one container of one pod, through the transport kubectl runs on."""

    def __init__(self, outer: Transport, spec: KubernetesSpec, place: PodPlace,
                 cluster: str) -> None:
        super().__init__(outer)
        self.spec = spec
        self.place = place
        self.cluster = cluster

    def wrap(self, argv: list[str]) -> list[str]:
        return exec_argv(self.spec, self.place, argv)

    async def through(
        self, outer_run: RunCommand, argv: list[str], input: bytes | None, timeout: float
    ) -> CommandResult:
        return without_exit_trailer(await outer_run(self.wrap(argv), input=input,
                                                    timeout=timeout))

    def explain_own(self, result: CommandResult) -> Refusal | None:
        return kubectl_failure(result, f"pod {self.place.namespace}/{self.place.pod}")

    def connection_facts(self) -> dict[str, object]:
        # Pods on the same machine group together by this fact.
        return {**self.outer.connection_facts(), "kubernetes": {
            "cluster": self.cluster, "namespace": self.place.namespace, "pod": self.place.pod,
            "container": self.place.container, "node": self.place.node}}
