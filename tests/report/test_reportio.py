"""The audit JSON: its round trip, reports saved before failure ids, atomic writes."""

from __future__ import annotations

import json
import os
import stat

import pytest

from fleetcheck import failures
from fleetcheck.report.content import Check, NodeResult, Report, TritonVerdict
from fleetcheck.report.reportio import (
    ReportFileError,
    dumps_report,
    load_report,
    node_from_dict,
    report_from_dict,
    write_atomic,
)


def test_audit_json_round_trips_and_keeps_the_contract_keys(tmp_path) -> None:
    original = Report(
        "2026-12-01T00:00:00Z", "2026-12-01T00:00:05Z",
        (NodeResult(
            id="pve1/101", host="pve1", vmid=101, name="gpu-worker-1", status="fail",
            reason="Triton cpu-fallback: no C compiler",
            triton=TritonVerdict("cpu-fallback", None, "no_c_compiler", "apt-get install gcc"),
            checks=(Check("no_c_compiler", "fail", "no C compiler", "install gcc",
                          {"error": "RuntimeError: Failed to find C compiler."}),),
            facts={"gpu_count": 8}, duration_s=1.25, labels=("gpu",)),),
        inventory="fleet.yaml",
    )
    text = dumps_report(original)
    data = json.loads(text)
    assert data["schema"] == "fleetcheck.audit/1"
    assert data["summary"]["fail"] == 1
    assert set(data["nodes"][0]) >= {"id", "host", "vmid", "name", "status", "reason", "triton",
                                     "checks", "facts", "duration_s"}
    assert set(data["nodes"][0]["triton"]) >= {"verdict", "backend", "cause"}
    assert report_from_dict(data) == original
    path = tmp_path / "run.json"
    write_atomic(path, text)
    assert load_report(path) == original


@pytest.mark.parametrize(("status", "reason", "cause", "read"), [
    ("unreachable", "host key for pve1 (10.0.0.1:22) is not in /root/.ssh/known_hosts", None,
     failures.HOST_KEY_UNKNOWN),
    ("unreachable", "host key for pve1 does not match known_hosts — possible man-in-the-middle",
     None, failures.HOST_KEY_CHANGED),
    ("unreachable", "jump host root@bastion for pve1 failed: its host key is not trusted by /k",
     None, failures.JUMP_HOST_KEY),
    ("error", "probe timed out after 60 s", None, failures.TIMED_OUT),
    # An id written by the audit stays, whatever the wording says.
    ("unreachable", "host key for pve1 (x) is not in /k", failures.UNREACHABLE,
     failures.UNREACHABLE),
    # Only a node that could not be verified was worded so; other wording gets no id.
    ("fail", "probe timed out after 60 s", None, None),
    ("unreachable", "ssh: connection refused", None, None),
])
def test_a_node_saved_before_failure_ids_gets_its_id_when_read(
    status: str, reason: str, cause: str | None, read: str | None
) -> None:
    saved = {"id": "pve1", "host": "pve1", "status": status, "reason": reason,
             "triton": {"verdict": "unknown", "cause": cause}}
    node = node_from_dict(saved)
    assert (node.status, node.reason, node.triton.cause) == (status, reason, read)


def test_load_report_names_the_file_on_bad_input(tmp_path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ReportFileError, match=r"bad\.json: not valid JSON"):
        load_report(bad)
    other = tmp_path / "other.json"
    other.write_text('{"schema": "something/else"}')
    with pytest.raises(ReportFileError, match="not a fleetcheck audit report"):
        load_report(other)


def test_write_atomic_leaves_the_old_file_whole_when_the_disk_fills(tmp_path, monkeypatch) -> None:
    target = tmp_path / "report.json"
    target.write_text("old")

    def disk_full(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", disk_full)
    with pytest.raises(OSError, match="No space left"):
        write_atomic(target, "new" * 1000)
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]


def test_write_atomic_sets_the_mode(tmp_path) -> None:
    target = tmp_path / "history.json.gz"
    write_atomic(target, b"x", mode=0o600)
    assert stat.S_IMODE(target.stat().st_mode) == 0o600


def test_write_atomic_follows_a_symlink_and_keeps_it(tmp_path) -> None:
    real = tmp_path / "reports" / "latest.html"
    real.parent.mkdir()
    real.write_text("old")
    link = tmp_path / "latest.html"
    link.symlink_to(real)
    write_atomic(link, "new")
    assert link.is_symlink()
    assert real.read_text() == "new"
    assert sorted(p.name for p in real.parent.iterdir()) == ["latest.html"]


def test_write_atomic_writes_through_a_fifo_instead_of_replacing_it(tmp_path) -> None:
    import threading

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()))
    reader.start()
    write_atomic(fifo, "through the pipe")
    reader.join(10)
    assert received == [b"through the pipe"]
    assert stat.S_ISFIFO(fifo.stat().st_mode)


def test_write_atomic_leaves_dev_null_a_device() -> None:
    write_atomic("/dev/null", "discarded")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
