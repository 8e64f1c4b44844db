"""A mixed fleet, NVIDIA and AMD nodes side by side: one audit, one matrix, a cause per AMD row.

The containers are the loopback fleet's (real sshd, the pct stand-in); their nodes are
tests/nodeenv.py's fakes: make_node for NVIDIA, make_amd_node for AMD (docs/checks.md, "AMD
GPUs": never seen on real AMD hardware).
"""

from __future__ import annotations

import pytest

from fleetcheck.render.html import render_html
from fleetcheck.render.terminal import render_terminal
from tests.audit.support import GPU_OK, audit
from tests.fleet import Fleet

pytestmark = [pytest.mark.sshd, pytest.mark.timeout(300)]

#: vmid -> (container kind, node options, expected status, verdict, cause).
NODES = {
    101: ("healthy", {}, "ok", "gpu", None),
    102: ("no-compiler", {}, "fail", "cpu-fallback", "no_c_compiler"),
    110: ("healthy", {"amd": {}}, "ok", "gpu", None),
    111: ("no-compiler", {"amd": {}}, "fail", "cpu-fallback", "no_c_compiler"),
    112: ("healthy", {"amd": {"mode": "no-dev-nodes", "container": "lxc"}}, "fail",
          "cpu-fallback", "dev_nodes_missing"),
    113: ("healthy", {"amd": {"mode": "insufficient-driver"}}, "fail", "cpu-fallback",
          "driver_userspace_mismatch"),
    114: ("healthy", {"amd": {"mode": "no-device"}}, "fail", "cpu-fallback",
          "zero_active_drivers"),
    115: ("healthy", {"amd": {"mode": "cpu-torch"}}, "fail", "cpu-fallback", "torch_cuda"),
    116: ("healthy", {"amd": {"gfx_target_version": 110500, "gpu_name": "AMD Radeon 890M"}},
          "fail", "cpu-fallback", "torch_lacks_arch"),
    117: ("healthy", {"amd": {"mode": "libhip-path"}}, "fail", "cpu-fallback",
          "libhip_path_invalid"),
    118: ("healthy", {"amd": {"mode": "no-libhip"}}, "fail", "cpu-fallback",
          "libamdhip64_not_found"),
    119: ("healthy", {"amd": {"mode": "system-rocm"}}, "fail", "cpu-fallback",
          "libamdhip64_other_rocm"),
    120: ("healthy", {"amd": {"gfx_target_version": 100302, "gpu_name": "AMD Radeon RX 6700 XT",
                              "env": {"HSA_OVERRIDE_GFX_VERSION": "10.3.0"}}},
          "warn", "gpu", None),
}


def test_one_matrix_for_nvidia_and_amd_nodes(fleet: Fleet) -> None:
    fleet.add_host("pve1")
    for vmid, (kind, node, *_) in NODES.items():
        fleet.add_container("pve1", vmid, kind, node=node)
    fleet.write_inventory(timeout=120)

    report = audit(fleet)

    got = {n.id: (n.status, n.triton.verdict, n.triton.cause) for n in report.nodes}
    assert got == {f"pve1/{vmid}": tuple(want[2:]) for vmid, want in NODES.items()}
    by_id = {n.id: n for n in report.nodes}
    assert (by_id["pve1/101"].status, by_id["pve1/101"].reason) == GPU_OK
    assert (by_id["pve1/110"].status, by_id["pve1/110"].reason) == ("ok", "Triton gpu (hip)")
    text = render_terminal(report, width=250)
    lines = {line.split()[0]: line for line in text.splitlines() if line.startswith("pve1/")}
    # The GPU column names the vendor of AMD's GPUs; torch's column its ROCm.
    assert "1× H200" in lines["pve1/101"] and "AMD" not in lines["pve1/101"]
    assert "1× AMD Instinct MI300X" in lines["pve1/110"]
    assert "2.9.0/ROCm 6.4" in lines["pve1/110"]
    assert "2.11.0/13.0" in lines["pve1/101"]
    assert "libamdhip64 from another ROCm than torch's: make Triton use torch's HIP runtime" in (
        text)
    # The HTML report titles a shared check in the node's vendor's terms.
    html = render_html(report)
    assert "/dev/kfd and /dev/dri render nodes usable" in html
    assert "/dev/nvidia* nodes usable" in html
    assert fleet.accepted_logins("pve1") == 1
