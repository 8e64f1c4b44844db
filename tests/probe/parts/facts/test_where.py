"""Where the probe runs (facts.where): the signs LXC, Docker, Podman, Kubernetes and a
hypervisor leave, read from a fake node's files (the real ones: tests/runtimes)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetcheck.probe.parts.facts import where as facts_where

SIGNS = {
    "bare-metal": {},
    "lxc": {"proc/1/environ": "container=lxc\0"},
    "docker": {".dockerenv": "", "proc/self/cgroup": "12:pids:/docker/0123abcd\n"},
    "podman": {"run/.containerenv": "", "proc/1/environ": "container=podman\0"},
    "kubernetes": {"var/run/secrets/kubernetes.io/serviceaccount/token": "x",
                   "proc/self/cgroup": "0::/kubepods/besteffort/pod1/abc\n", ".dockerenv": ""},
    "qemu": {"sys/class/dmi/id/sys_vendor": "QEMU\n",
             "sys/class/dmi/id/product_name": "Standard PC (Q35 + ICH9, 2009)\n"},
}


def _where(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, files: dict[str, str]) -> dict:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    monkeypatch.setattr(facts_where, "host_path", lambda path: f"{tmp_path}{path}")
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    return facts_where.where_it_runs()


@pytest.mark.parametrize("kind", sorted(SIGNS))
def test_each_place_is_told_by_its_signs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         kind: str) -> None:
    where = _where(tmp_path, monkeypatch, SIGNS[kind])
    assert where["kind"] == kind
    assert where["container"] == (kind if kind not in ("bare-metal", "qemu") else None)
    assert where["virtual"] == ("qemu" if kind == "qemu" else None)
    assert bool(where["signs"]) == (kind != "bare-metal")


def test_a_container_in_a_vm_is_the_container_on_that_hypervisor(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    where = _where(tmp_path, monkeypatch, {**SIGNS["docker"], **SIGNS["qemu"]})
    assert (where["kind"], where["container"], where["virtual"]) == ("docker", "docker", "qemu")
    assert where["signs"] == ["/.dockerenv", "/proc/self/cgroup: /docker", "DMI: QEMU"]


def test_a_hypervisor_flag_alone_is_an_unknown_hypervisor(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    where = _where(tmp_path, monkeypatch, {"proc/cpuinfo": "flags\t\t: fpu vme hypervisor\n"})
    assert (where["kind"], where["virtual"]) == ("vm", "unknown")
