"""The repair planner on AMD nodes: real probe output of fake ROCm nodes (tests/nodeenv.py)."""

from __future__ import annotations

from pathlib import Path

from fleetcheck.fix import plan_node
from tests.fix.support import probed

APT = ["env", "LC_ALL=C", "DEBIAN_FRONTEND=noninteractive", "apt-get"]


def test_no_compiler_on_an_amd_node_is_installed_as_on_nvidia(tmp_path: Path) -> None:
    plan = plan_node(probed(tmp_path / "n", amd=True, compiler=False))
    assert plan is not None
    assert plan.causes == ("no_c_compiler",)
    assert [list(step.argv) for step in plan.steps] == [
        [*APT, "update"],
        [*APT, "install", "-y", "--no-install-recommends", "--no-upgrade", "gcc", "libc6-dev"],
    ]


def test_lxc_without_kfd_prints_the_amd_lines_for_the_host(tmp_path: Path) -> None:
    plan = plan_node(probed(tmp_path / "n", amd=True, mode="no-dev-nodes", container="lxc"))
    assert plan is not None and plan.steps == ()
    assert plan.causes[0] == "dev_nodes_missing"
    first = plan.manual[0]
    assert (first.cause, first.who) == ("dev_nodes_missing", "host")
    assert first.lines[1:5] == (
        "lxc.cgroup2.devices.allow: c 510:* rwm",
        "lxc.cgroup2.devices.allow: c 226:* rwm",
        "lxc.mount.entry: /dev/kfd dev/kfd none bind,optional,create=file",
        "lxc.mount.entry: /dev/dri dev/dri none bind,optional,create=dir")
    assert not any("nvidia" in line for action in plan.manual for line in action.lines)


def test_a_userspace_driver_mismatch_is_the_host_s_amdgpu(tmp_path: Path) -> None:
    plan = plan_node(probed(tmp_path / "n", amd=True, mode="insufficient-driver"))
    assert plan is not None and plan.steps == ()
    action = plan.manual[0]
    assert (action.cause, action.who) == ("driver_userspace_mismatch", "host")
    assert action.lines == (
        "install, on pve1, the amdgpu-dkms of the ROCm release the node's userspace comes from "
        "(HIP 6.4.43482), or give the node a ROCm userspace that supports the host's amdgpu "
        "driver (6.12.12)",)


def test_libamdhip64_of_another_rocm_is_the_workload_owner_s(tmp_path: Path) -> None:
    plan = plan_node(probed(tmp_path / "n", amd=True, mode="system-rocm"))
    assert plan is not None and plan.steps == ()
    action = plan.manual[0]
    assert (action.cause, action.who) == ("libamdhip64_other_rocm", "person")
    assert action.lines[0].startswith("make Triton use torch's HIP runtime: unset "
                                      "TRITON_LIBHIP_PATH or set it to ")
