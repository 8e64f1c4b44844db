"""The listings discovery reads: pct list, qm list, pvesh JSON, docker/podman ps; odd lines
stay local."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fleetcheck.inventory import DiscoveredContainer, DiscoveryError
from fleetcheck.inventory_data.listings import (
    parse_guest_rows,
    parse_oci_ps,
    parse_pct_list,
    parse_pvesh_json,
    parse_qm_list,
)
from fleetcheck.inventory_data.model import DiscoveredOci


def pct_row(vmid: str, status: str, lock: str, name: str) -> str:
    """One line exactly as pct prints it (src/PVE/CLI/pct.pm)."""
    # pct's own printf format, kept verbatim.
    return "%-10s %-10s %-12s %-20s\n" % (vmid, status, lock, name)  # noqa: UP031


HEADER = pct_row("VMID", "Status", "Lock", "Name")


def test_the_fixture_parses(fixtures_dir: Path) -> None:
    text = (fixtures_dir / "pct_list.txt").read_text()
    assert parse_pct_list(text) == [
        DiscoveredContainer(vmid=101, status="running", name="gpu-worker-1"),
        DiscoveredContainer(vmid=102, status="running", name="gpu-worker-2"),
        DiscoveredContainer(vmid=103, status="stopped", name="ci-runner", lock="backup"),
        DiscoveredContainer(vmid=9000, status="stopped", name="debian-13-tmpl"),
    ]


@pytest.mark.parametrize("text", ["", "\n", "   \n"], ids=["nothing", "newline", "blank"])
def test_no_containers_prints_nothing_at_all(text: str) -> None:
    assert parse_pct_list(text) == []


def test_a_header_alone_is_no_containers() -> None:
    assert parse_pct_list(HEADER) == []


def test_locks_and_names_longer_than_their_columns() -> None:
    long_name = "a-very-long-hostname-that-overflows-the-column.example.internal"
    text = (
        HEADER
        + pct_row("104", "running", "snapshot-delete", "gpu-3")
        + pct_row("105", "running", "", long_name)
        + pct_row("999999999", "stopped", "migrate", "CT999999999")
    )
    assert parse_pct_list(text) == [
        DiscoveredContainer(vmid=104, status="running", name="gpu-3", lock="snapshot-delete"),
        DiscoveredContainer(vmid=105, status="running", name=long_name),
        DiscoveredContainer(vmid=999999999, status="stopped", name="CT999999999", lock="migrate"),
    ]


def test_output_that_is_not_pct_list_is_a_discovery_error() -> None:
    with pytest.raises(DiscoveryError) as info:
        parse_pct_list("please run as root\n")
    assert str(info.value) == "unexpected `pct list` output: please run as root"


def test_one_odd_line_is_one_entry_and_the_others_still_parse() -> None:
    text = (HEADER + pct_row("101", "running", "", "a") + "102        running\n"
            + pct_row("abc", "running", "", "x") + "\x00garbage \u00e9\n"
            + pct_row("105", "running", "", "e"))
    assert parse_pct_list(text) == [
        DiscoveredContainer(vmid=101, status="running", name="a"),
        DiscoveredContainer(vmid=102, status="unknown", name="",
                            problem="unexpected line: 102 running",
                            where="`pct list` line 3"),
        DiscoveredContainer(vmid=None, status="unknown", name="",
                            problem="unexpected line (VMID 'abc'): abc running x",
                            where="`pct list` line 4"),
        DiscoveredContainer(vmid=None, status="unknown", name="",
                            problem="unexpected line: \x00garbage \u00e9",
                            where="`pct list` line 5"),
        DiscoveredContainer(vmid=105, status="running", name="e"),
    ]


def qm_row(vmid: object, name: str, status: str, mem: object = "8192", disk: float = 32.0,
           pid: int = 0) -> str:
    """One line exactly as qm.pm prints it."""
    return "%10s %-20s %-10s %-10s %12.2f %-10s\n" % (  # noqa: UP031 - qm's printf
        vmid, name, status, mem, disk, pid)


QM_HEADER = "%10s %-20s %-10s %-10s %12s %-10s\n" % (  # noqa: UP031
    "VMID", "NAME", "STATUS", "MEM(MB)", "BOOTDISK(GB)", "PID")


def test_qm_list_rows_default_names_with_spaces_and_long_names() -> None:
    long = "a-training-vm-with-a-name-longer-than-twenty"
    text = (QM_HEADER + qm_row(100, "VM 100", "stopped") + qm_row(101, long, "running",
                                                                  pid=4242)
            + qm_row(102, "odd", "running", mem="1536.5", pid=7))
    assert parse_qm_list(text) == [
        DiscoveredContainer(vmid=100, status="stopped", name="VM 100"),
        DiscoveredContainer(vmid=101, status="running", name=long),
        DiscoveredContainer(vmid=102, status="running", name="odd"),
    ]
    assert parse_qm_list("") == []


def test_qm_list_odd_lines_are_entries_and_other_programs_are_errors() -> None:
    text = QM_HEADER + qm_row(100, "a", "running") + "       101 truncated\n"
    found = parse_qm_list(text)
    assert found[0] == DiscoveredContainer(vmid=100, status="running", name="a")
    assert found[1] == DiscoveredContainer(vmid=101, status="unknown", name="",
                                           problem="unexpected line: 101 truncated",
                                           where="`qm list` line 3")
    with pytest.raises(DiscoveryError):
        parse_qm_list("ipcc_send_rec[1] failed: Connection refused\n")


def test_pvesh_rows_templates_tags_and_a_bad_row() -> None:
    rows = [{"vmid": 301, "name": "gpu", "status": "running", "tags": "gpu;a100"},
            {"vmid": 9000, "status": "stopped", "template": 1},
            {"vmid": "x", "name": "bad"}, "not an object"]
    found = parse_pvesh_json(json.dumps(rows), "pvesh get /nodes/pve1/qemu", "VM {vmid}")
    assert found[:2] == [
        DiscoveredContainer(vmid=301, status="running", name="gpu", tags=("gpu", "a100")),
        DiscoveredContainer(vmid=9000, status="stopped", name="VM 9000", template=True),
    ]
    assert [(g.vmid, g.where, bool(g.problem)) for g in found[2:]] == [
        (None, "`pvesh get /nodes/pve1/qemu` row 3", True),
        (None, "`pvesh get /nodes/pve1/qemu` row 4", True),
    ]
    with pytest.raises(DiscoveryError):
        parse_pvesh_json("no such node", "pvesh get /nodes/x/lxc", "CT{vmid}")
    with pytest.raises(DiscoveryError):
        parse_guest_rows({"data": []}, "pvesh", "CT{vmid}")


def test_docker_and_podman_ps_json_lines() -> None:
    docker = ('{"ID":"0123456789ab","Names":"trainer,alias","State":"running"}\n'
              '{"ID":"ba9876543210","Names":"idle","State":"paused"}\n')
    assert parse_oci_ps(docker, "docker") == [DiscoveredOci("trainer", "running"),
                                             DiscoveredOci("idle", "paused")]
    podman = '{"Id":"ab","Names":["infer"],"State":"running"}\n'
    assert parse_oci_ps(podman, "podman") == [DiscoveredOci("infer", "running")]
    odd = parse_oci_ps("WARNING: cgroups v1\n" + podman, "podman")
    assert odd[0].problem == "unexpected line: WARNING: cgroups v1"
    assert odd[0].where == "`podman ps` line 1"
    assert odd[1] == DiscoveredOci("infer", "running")
