"""The repair planner: real probe output of fake nodes -> steps per distribution family."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from fleetcheck.fix import plan_node, plan_report
from fleetcheck.fix.plan import LDCONF_FILE, LDCONFIG
from fleetcheck.report.content import Check, NodeResult, Report, TritonVerdict
from tests.fix.support import node_facts as _facts
from tests.fix.support import probed

APT = ["env", "LC_ALL=C", "DEBIAN_FRONTEND=noninteractive", "apt-get"]


def _node(facts: dict[str, Any], *checks: Check, node_id: str = "pve1/101",
          status: str = "fail") -> NodeResult:
    host, _, vmid = node_id.partition("/")
    return NodeResult(id=node_id, host=host, vmid=int(vmid) if vmid else None, name="n",
                      status=status, reason="Triton cpu-fallback: …",
                      triton=TritonVerdict("cpu-fallback", None, checks[0].id if checks else None),
                      checks=checks, facts=facts)


def _no_compiler(python_h: bool = False, include: str = "/usr/include/python3.12") -> tuple[
        Check, Check]:
    return (Check("no_c_compiler", "fail", "no C compiler"),
            Check("python_headers_missing", "pass" if python_h else "fail", "Python.h",
                  evidence={"include": include, "python_h_exists": python_h}))


def test_no_compiler_node_probed_for_real_plans_apt_install_in_the_container(
        tmp_path: Path) -> None:
    node = probed(tmp_path / "n", compiler=False)
    plan = plan_node(node)
    assert plan is not None
    assert plan.causes == ("no_c_compiler",)
    assert [list(step.argv) for step in plan.steps] == [
        [*APT, "update"],
        [*APT, "install", "-y", "--no-install-recommends", "--no-upgrade", "gcc", "libc6-dev"],
    ]
    assert plan.where == "inside LXC container 101 on pve1, as root, through `pct exec 101`"
    assert plan.manual == ()


@pytest.mark.parametrize(("os_id", "like", "expected"), [
    ("debian", None, [*APT, "install", "-y", "--no-install-recommends", "--no-upgrade",
                      "gcc", "libc6-dev", "python3.12-dev"]),
    ("ubuntu", "debian", [*APT, "install", "-y", "--no-install-recommends", "--no-upgrade",
                          "gcc", "libc6-dev", "python3.12-dev"]),
    ("rocky", "rhel centos fedora", ["env", "LC_ALL=C", "dnf", "install", "-y",
                                     "--setopt=install_weak_deps=False", "gcc", "glibc-devel",
                                     "python3.12-devel"]),
    ("pop", "ubuntu debian", [*APT, "install", "-y", "--no-install-recommends",
                              "--no-upgrade", "gcc", "libc6-dev", "python3.12-dev"]),
    ("alpine", None, ["env", "LC_ALL=C", "apk", "add", "--no-cache", "gcc", "musl-dev",
                      "python3-dev"]),
    ("opensuse-leap", "suse opensuse", ["env", "LC_ALL=C", "zypper", "--non-interactive",
                                        "install", "--no-recommends", "gcc", "glibc-devel",
                                        "python312-devel"]),
])
def test_each_family_gets_its_own_install_line(os_id: str, like: str | None,
                                               expected: list[str]) -> None:
    plan = plan_node(_node(_facts(os_id, like), *_no_compiler()))
    assert plan is not None
    assert list(plan.steps[-1].argv) == expected
    if os_id == "alpine":
        assert "musllinux" in plan.note  # Triton itself cannot run there: said, not hidden


@pytest.mark.parametrize(("path", "hinted"), [
    ("/opt/torch/.venv/bin", True),  # as on the H200 (docs/validation.md): CC=/opt/gcc/bin/gcc
    ("/opt/torch/.venv/bin:/usr/bin", False),
    ("/usr/local/bin:/bin", False),
])
def test_no_linker_installs_binutils_and_says_when_path_cannot_reach_it(
        path: str, hinted: bool) -> None:
    checks = (Check("no_linker", "fail", "no linker: collect2: fatal error: cannot find ‘ld’",
                    evidence={"argv": ["/opt/gcc/bin/gcc"], "ld": None}),
              Check("no_c_compiler", "pass", "compiler from CC: /opt/gcc/bin/gcc",
                    evidence={"PATH": path, "CC": "/opt/gcc/bin/gcc"}))
    plan = plan_node(_node(_facts("debian"), *checks))
    assert plan is not None
    assert list(plan.steps[-1].argv) == [*APT, "install", "-y", "--no-install-recommends",
                                         "--no-upgrade", "binutils"]
    if hinted:
        assert [(m.cause, m.who) for m in plan.manual] == [("no_linker", "person")]
        assert path in plan.manual[0].summary
        assert "CC=/usr/bin/gcc" in plan.manual[0].lines[0]
    else:
        assert plan.manual == ()


def test_headers_present_are_not_installed_again() -> None:
    plan = plan_node(_node(_facts("debian"), *_no_compiler(python_h=True)))
    assert plan is not None
    assert plan.steps[-1].argv[-2:] == ("gcc", "libc6-dev")


def test_interpreter_outside_the_distribution_gets_a_printed_hint_not_a_package() -> None:
    include = "/opt/conda/include/python3.12"
    checks = (Check("python_headers_missing", "fail", "Python.h missing",
                    evidence={"include": include, "python_h_exists": False}),)
    plan = plan_node(_node(_facts("debian"), *checks))
    assert plan is not None
    assert plan.steps == ()
    assert [(m.cause, m.who) for m in plan.manual] == [("python_headers_missing", "person")]
    assert include in plan.manual[0].summary


@pytest.mark.parametrize("version", ["3.12; rm -rf /", "3", "", None, "x.y"])
def test_a_hostile_or_odd_python_version_never_reaches_a_command(version: Any) -> None:
    facts = _facts("debian")
    facts["python"]["version"] = version
    plan = plan_node(_node(facts, *_no_compiler()))
    assert plan is not None
    argv = plan.steps[-1].argv
    assert argv[-2:] == ("gcc", "libc6-dev")
    assert all(";" not in word and " " not in word for word in argv)


@pytest.mark.parametrize(("facts", "why"), [
    ({}, "no /etc/os-release"),
    (_facts("gentoo"), "unknown distribution 'gentoo'"),
    (_facts("centos", "rhel fedora", "7"), "glibc is older"),
])
def test_unknown_or_too_old_distribution_plans_no_package(facts: dict[str, Any],
                                                          why: str) -> None:
    plan = plan_node(_node(facts, *_no_compiler()))
    assert plan is not None
    assert plan.steps == ()
    assert why in plan.note
    assert plan.manual[0].cause == "no_c_compiler"


def test_libcuda_not_in_ldcache_writes_our_own_ld_so_conf_entry(tmp_path: Path) -> None:
    node = probed(tmp_path / "n", ldcache_has_libcuda=False)
    plan = plan_node(node)
    assert plan is not None
    libdir = str(tmp_path / "n" / "lib")
    assert [(s.argv, s.input) for s in plan.steps] == [
        (("tee", LDCONF_FILE), libdir + "\n"), ((LDCONFIG,), None)]


def test_a_stale_ldcache_entry_gets_the_real_dir_listed(tmp_path: Path) -> None:
    node = probed(tmp_path / "n", ldcache_libcuda="/usr/local/cuda/compat/lib/libcuda.so.1")
    plan = plan_node(node)
    assert plan is not None
    assert plan.causes[0] == "ldcache_stale_libcuda_entry"
    libdir = str(tmp_path / "n" / "lib")
    assert [(s.argv, s.input) for s in plan.steps] == [
        (("tee", LDCONF_FILE), libdir + "\n"), ((LDCONFIG,), None)]


def test_two_causes_with_one_repair_get_its_steps_once() -> None:
    evidence = {"dlopen": "/usr/lib/x86_64-linux-gnu/libcuda.so.1"}
    plan = plan_node(_node(_facts("debian"),
                           Check("libcuda_not_in_ldcache", "fail", "a", evidence=evidence),
                           Check("ldcache_stale_libcuda_entry", "fail", "b", evidence=evidence)))
    assert plan is not None
    assert [s.argv for s in plan.steps] == [("tee", LDCONF_FILE), (LDCONFIG,)]


@pytest.mark.parametrize("loaded", ["/usr/local/cuda/compat/libcuda.so.1",
                                    "/usr/local/cuda/lib64/stubs/libcuda.so.1",
                                    "/x/../etc/libcuda.so.1", "/x y/libcuda.so.1",
                                    "/lib\n/etc/libcuda.so.1", "relative/libcuda.so.1"])
def test_a_compat_stub_or_odd_libcuda_dir_is_never_written(loaded: str) -> None:
    check = Check("libcuda_not_in_ldcache", "fail", "not in cache", evidence={"dlopen": loaded})
    plan = plan_node(_node(_facts("debian"), check))
    assert plan is not None
    assert plan.steps == ()
    assert "TRITON_LIBCUDA_PATH" in plan.manual[0].lines[0]


def test_unversioned_libcuda_gets_a_relative_symlink(tmp_path: Path) -> None:
    node = probed(tmp_path / "n", triton="3.5.0", libcuda_unversioned=False)
    plan = plan_node(node)
    assert plan is not None
    libdir = tmp_path / "n" / "lib"
    assert [s.argv for s in plan.steps] == [
        ("ln", "-s", "--", "libcuda.so.1", f"{libdir}/libcuda.so")]


def test_host_causes_are_printed_with_the_exact_lxc_lines(tmp_path: Path) -> None:
    node = probed(tmp_path / "n", gpu="no-dev-nodes", container="lxc", gpus=2)
    plan = plan_node(node)
    assert plan is not None
    assert plan.steps == ()
    lines = plan.manual[0].lines
    assert plan.manual[0].who == "host"
    assert lines[0] == "# on pve1: append to /etc/pve/lxc/101.conf, then pct stop 101 && " \
                       "pct start 101"
    assert "lxc.mount.entry: /dev/nvidia1 dev/nvidia1 none bind,optional,create=file" in lines


@pytest.mark.parametrize("runtime", ["docker", "podman"])
def test_a_docker_or_podman_node_gets_its_runtimes_gpu_options_not_lxc_lines(
        tmp_path: Path, runtime: str) -> None:
    probed_node = probed(tmp_path / "n", gpu="no-dev-nodes", container=runtime)
    assert probed_node.facts["where"]["kind"] == runtime
    check = probed_node.check("dev_nodes_missing")
    assert check is not None and "lxc." not in check.fix and "nvidia.com/gpu=all" in check.fix
    node = replace(probed_node, id=f"pve1/101/{runtime}:app", name="app", kind=runtime,
                   parent="pve1/101")
    plan = plan_node(node)
    assert plan is not None
    assert plan.where == f"inside {runtime} container app on pve1/101, through `{runtime} exec`"
    lines = plan.manual[0].lines
    assert lines[0].startswith("# on pve1/101: recreate container app with the GPUs")
    assert any("--device nvidia.com/gpu=all" in line for line in lines)
    assert not any("lxc.mount.entry:" in line and not line.startswith("#") for line in lines)


def test_a_node_document_from_inside_docker_is_planned_for_docker(tmp_path: Path) -> None:
    # `fleetcheck probe` run inside a container and merged as a host node: the probe's signs.
    node = replace(probed(tmp_path / "n", gpu="no-dev-nodes", container="docker"),
                   id="gpu7", host="gpu7", vmid=None, name="gpu7", kind="host")
    plan = plan_node(node)
    assert plan is not None
    assert plan.where == ("on gpu7, which the probe found to be inside a Docker container "
                          "(its own signs: facts.where)")
    assert "docker run --gpus all" in plan.manual[0].lines[1]


def test_cache_and_cc_env_are_the_workloads_and_only_printed(tmp_path: Path) -> None:
    node = probed(tmp_path / "n", cache="unwritable", env={"CC": "/nonexistent/gcc"})
    plan = plan_node(node)
    assert plan is not None
    assert {m.cause: m.who for m in plan.manual} == {
        "cc_env_invalid": "person", "cache_dir_unwritable": "person"}


def test_nodes_without_a_failing_cause_are_never_planned(tmp_path: Path) -> None:
    healthy = probed(tmp_path / "ok", "pve1/100")
    failing = probed(tmp_path / "cc", "pve1/101", compiler=False)
    gone = NodeResult(id="pve2", host="pve2", vmid=None, name="pve2", status="unreachable",
                      reason="connection refused")
    fix = plan_report(Report(started_at="", finished_at="", nodes=(healthy, failing, gone)))
    assert [plan.node.id for plan in fix.plans] == ["pve1/101"]
    assert fix.untouched == ("pve1/100",)
    assert fix.unverified == (("pve2", "unreachable", "connection refused"),)
    assert plan_node(healthy) is None
