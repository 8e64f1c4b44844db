"""A `kubectl` stand-in: `get pods -o json` and `exec -i` against a cluster kept in a file.

No cluster can run here, so this plays kubectl and the API server behind it, with their
texts and exit codes: kubectl's own from a real kubectl 1.32 run without a server (`error:
stat F: no such file or directory`, `Error in configuration: context was not found for
specified context: C`, `The connection to the server H:P was refused - did you specify the
right host or port?`; tests/audit/test_audit_pods.py compares them with a real kubectl when
one is on PATH; Debian 12 packages kubectl 1.20 as kubernetes-client), the API server's
through kubectl's CheckErr (`Error from server (NotFound): pods "P" not found`, `Error from
server (Forbidden): pods "P" is forbidden: User "U" cannot create resource "pods/exec" in API
group "" in the namespace "N"`), exec.go's `cannot exec into a container in a completed pod;
current phase is Succeeded`, the kubelet's `unable to upgrade connection: container not found
("C")`, the runtime's `OCI runtime exec failed: ... executable file not found in $PATH` and
kubectl's `command terminated with exit code N` (exit N). `-o json` prints a `List` of `Pod`s
as the API serves them (metadata, spec.nodeName and containers, status.phase).

The cluster behind a kubeconfig is the JSON file beside it, `KUBECONFIG.cluster.json`:
{"reachable": true, "user": "...", "forbid": ["list pods training", "create pods/exec *"],
 "pods": [{"namespace", "name", "node", "phase", "labels", "annotations",
           "containers": [{"name", "env": {...}, "cwd"}]}]}
A container's command runs here with that environment only (its PATH decides what exists).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml


def fail(text: str, code: int = 1) -> None:
    sys.stderr.write(text + "\n")
    sys.exit(code)


def forbidden(state: dict[str, Any], verb: str, resource: str, namespace: str | None) -> bool:
    rules = state.get("forbid", [])
    return any(rule in (f"{verb} {resource} {namespace or '*'}", f"{verb} {resource} *")
               for rule in rules)


def refuse(state: dict[str, Any], verb: str, resource: str, name: str | None,
           namespace: str | None) -> None:
    user = state.get("user", "system:serviceaccount:fleetcheck:audit")
    what = f'pods "{name}"' if name else "pods"
    scope = f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
    fail(f'Error from server (Forbidden): {what} is forbidden: User "{user}" cannot {verb} '
         f'resource "{resource}" in API group "" {scope}')


def pod_json(pod: dict[str, Any]) -> dict[str, Any]:
    containers = pod.get("containers", [])
    running = pod.get("phase", "Running") == "Running"
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": pod["name"], "namespace": pod["namespace"],
                     "labels": pod.get("labels", {}),
                     "annotations": pod.get("annotations", {}),
                     "uid": f"uid-{pod['namespace']}-{pod['name']}"},
        "spec": {"nodeName": pod.get("node"),
                 "containers": [{"name": c["name"], "image": c.get("image", "img")}
                                for c in containers]},
        "status": {"phase": pod.get("phase", "Running"),
                   "containerStatuses": [
                       {"name": c["name"], "ready": running,
                        "state": {"running": {"startedAt": "2026-12-01T00:00:00Z"}} if running
                        else {"terminated": {"exitCode": 0, "reason": "Completed"}}}
                       for c in containers]},
    }


def selected(pod: dict[str, Any], selector: str | None) -> bool:
    if not selector:
        return True
    labels = pod.get("labels", {})
    return all(labels.get(k) == v for k, _, v in (t.partition("=") for t in selector.split(",")))


def main(argv: list[str]) -> None:
    kubeconfig = os.environ.get("KUBECONFIG") or str(Path.home() / ".kube" / "config")
    context = None
    words: list[str] = []
    index = 0
    while index < len(argv):
        word = argv[index]
        if word == "--kubeconfig":
            kubeconfig, index = argv[index + 1], index + 2
        elif word == "--context":
            context, index = argv[index + 1], index + 2
        elif word == "--":
            words += argv[index:]
            break
        else:
            words.append(word)
            index += 1
    if not os.path.exists(kubeconfig):
        fail(f"error: stat {kubeconfig}: no such file or directory")
    config = yaml.safe_load(Path(kubeconfig).read_text()) or {}
    context = context or config.get("current-context")
    contexts = {c["name"]: c["context"] for c in config.get("contexts", [])}
    if context not in contexts:
        fail(f"Error in configuration: context was not found for specified context: {context}")
    clusters = {c["name"]: c["cluster"] for c in config.get("clusters", [])}
    server = clusters.get(contexts[context].get("cluster"), {}).get("server", "")
    state = json.loads(Path(kubeconfig + ".cluster.json").read_text())
    if not state.get("reachable", True):
        fail(f"The connection to the server {urlsplit(server).netloc} was refused - did you "
             "specify the right host or port?")
    default_ns = contexts[context].get("namespace", "default")
    if words[:2] == ["get", "pods"]:
        get_pods(state, words[2:], default_ns)
    elif words[:1] == ["exec"]:
        exec_pod(state, words[1:], default_ns)
    else:
        fail(f"error: unknown command {' '.join(words[:2])!r} for the kubectl stand-in")


def get_pods(state: dict[str, Any], words: list[str], default_ns: str) -> None:
    namespace: str | None = default_ns
    selector = None
    for index, word in enumerate(words):
        if word in ("-n", "--namespace"):
            namespace = words[index + 1]
        elif word in ("-A", "--all-namespaces"):
            namespace = None
        elif word in ("-l", "--selector"):
            selector = words[index + 1]
    if forbidden(state, "list", "pods", namespace):
        refuse(state, "list", "pods", None, namespace)
    pods = [pod_json(p) for p in state.get("pods", [])
            if (namespace is None or p["namespace"] == namespace) and selected(p, selector)]
    print(json.dumps({"apiVersion": "v1", "items": pods, "kind": "List",
                      "metadata": {"resourceVersion": ""}}, indent=4))


def exec_pod(state: dict[str, Any], words: list[str], default_ns: str) -> None:
    separator = words.index("--")
    options, command = words[:separator], words[separator + 1:]
    namespace, container, name = default_ns, None, None
    index = 0
    while index < len(options):
        word = options[index]
        if word in ("-n", "--namespace"):
            namespace, index = options[index + 1], index + 2
        elif word in ("-c", "--container"):
            container, index = options[index + 1], index + 2
        elif word.startswith("-"):
            index += 1
        else:
            name, index = word, index + 1
    if forbidden(state, "get", "pods", namespace):
        refuse(state, "get", "pods", name, namespace)
    pod = next((p for p in state.get("pods", [])
                if p["namespace"] == namespace and p["name"] == name), None)
    if pod is None:
        fail(f'Error from server (NotFound): pods "{name}" not found')
    assert pod is not None
    phase = pod.get("phase", "Running")
    if phase in ("Succeeded", "Failed"):
        fail(f"error: cannot exec into a container in a completed pod; current phase is {phase}")
    containers = {c["name"]: c for c in pod.get("containers", [])}
    if container is None:
        container = pod.get("annotations", {}).get("kubectl.kubernetes.io/default-container") \
            or next(iter(containers))
        if len(containers) > 1:
            sys.stderr.write(f'Defaulted container "{container}" out of: '
                             f'{", ".join(containers)}\n')
    if forbidden(state, "create", "pods/exec", namespace):
        refuse(state, "create", "pods/exec", name, namespace)
    if container not in containers or phase != "Running":
        fail(f'error: unable to upgrade connection: container not found ("{container}")')
    spec = containers[container]
    env = {k: str(v) for k, v in spec.get("env", {}).items()}
    found = shutil.which(command[0], path=env.get("PATH", "")) if "/" not in command[0] \
        else (command[0] if os.access(command[0], os.X_OK) else None)
    if found is None:
        fail(f'OCI runtime exec failed: exec failed: unable to start container process: exec: '
             f'"{command[0]}": executable file not found in $PATH: unknown\n'
             "command terminated with exit code 126", 126)
    done = subprocess.run([found, *command[1:]], env=env, cwd=spec.get("cwd", "/"),
                          check=False)
    if done.returncode != 0:
        fail(f"command terminated with exit code {done.returncode}", done.returncode)


if __name__ == "__main__":
    main(sys.argv[1:])
