"""`fleetcheck merge`: node documents in every shape, and what is never merged silently."""

from __future__ import annotations

import gzip
import io
import json
import os
import tarfile
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from fleetcheck.cli import main
from fleetcheck.integrations.health_check import cache_document
from fleetcheck.judgement.policy import DEFAULT_POLICY
from fleetcheck.report.merge import merge_inputs
from fleetcheck.report.nodedoc import EXPECTED, NODE_SCHEMA
from fleetcheck.report.reportio import dumps_report, load_report, report_to_dict
from fleetcheck.timestamps import REPORT_FORMAT
from tests import nodedocs
from tests.contracts import validated
from tests.nodedocs import doc, set_now, when, write


@pytest.fixture(autouse=True)
def fresh_now(monkeypatch: pytest.MonkeyPatch) -> None:
    set_now(monkeypatch)


def merge(tmp_path: Path, *inputs: str, **kwargs: Any) -> Any:
    outcome = merge_inputs(list(inputs), policy=DEFAULT_POLICY,
                           now=kwargs.pop("now", nodedocs.NOW),
                           max_age_s=kwargs.pop("max_age_s", 1800), **kwargs)
    validated(report_to_dict(outcome.report))
    return outcome


def test_probe_json_is_a_node_document_with_origin(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["probe", "--format", "json", "--timeout", "30"]) in (0, 1, 3)
    document = json.loads(capsys.readouterr().out)
    assert document["schema"] == NODE_SCHEMA
    assert document["fleetcheck"]
    assert datetime.strptime(document["probed_at"], REPORT_FORMAT)
    assert document["origin"]["hostname"] == document["id"]


def test_folder_file_gzip_tarball_and_stdin(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    write(folder / "a.json", doc("gpu01"))
    (folder / "b.json.gz").write_bytes(gzip.compress(json.dumps(doc("gpu02")).encode()))
    (folder / "notes.txt").write_text("not ours")
    tarball = tmp_path / "more.tar.gz"
    with tarfile.open(tarball, "w:gz") as archive:
        data = json.dumps(doc("gpu10")).encode()
        info = tarfile.TarInfo("x/gpu10.json")
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
    stdin = io.BytesIO((json.dumps(doc("gpu03")) + "\n" + json.dumps(doc("gpu04"))).encode())
    outcome = merge_inputs([str(folder), str(tarball), "-"], policy=DEFAULT_POLICY,
                           now=nodedocs.NOW,
                           max_age_s=1800, stdin=stdin)  # type: ignore[arg-type]
    assert [n.id for n in outcome.report.nodes] == ["gpu01", "gpu02", "gpu03", "gpu04", "gpu10"]
    assert outcome.problems == ()
    assert outcome.exit_code == 0
    assert outcome.report.started_at == when(1)


def test_fleet_checks_are_computed_over_the_merged_nodes(tmp_path: Path) -> None:
    a = write(tmp_path / "a.json", doc("gpu01"))
    b = write(tmp_path / "b.json", doc("gpu02", torch="2.10.0+cu130"))
    outcome = merge(tmp_path, str(a), str(b))
    assert [(c.id, c.status) for c in outcome.report.fleet_checks] == [
        ("fleet_torch_mismatch", "warn")]


def test_a_duplicate_keeps_the_newest_and_is_reported(tmp_path: Path, capsys) -> None:
    old = write(tmp_path / "old.json", doc("gpu01", minutes_ago=10, status="fail",
                                            verdict="cpu-fallback"))
    new = write(tmp_path / "new.json", doc("gpu01", minutes_ago=2))
    code = main(["merge", str(old), str(new), "--format", "json"])
    out = capsys.readouterr()
    report = json.loads(out.out)
    assert [(n["id"], n["status"]) for n in report["nodes"]] == [("gpu01", "ok")]
    assert [(c["id"], c["status"]) for c in report["fleet_checks"]] == [
        ("fleet_duplicate_documents", "warn")]
    line = (f"fleetcheck: merge: duplicate: gpu01: given twice; {new} kept (probed_at "
            f"{json.loads(new.read_text())['probed_at']}), {old} left out (probed_at "
            f"{json.loads(old.read_text())['probed_at']})")
    assert out.err.splitlines() == [line]
    assert code == 0


def test_a_stale_document_leaves_its_node_unverified(tmp_path: Path) -> None:
    fresh = write(tmp_path / "a.json", doc("gpu01"))
    stale = write(tmp_path / "b.json", doc("gpu02", minutes_ago=180, torch="2.9.0"))
    outcome = merge(tmp_path, str(fresh), str(stale))
    gpu02 = outcome.report.nodes[1]
    assert (gpu02.id, gpu02.status, gpu02.triton.verdict) == ("gpu02", "error", "unknown")
    assert gpu02.reason == (f"stale node document: probed {when(180)}, 3 h before the merge "
                            "(--max-age 30 min)")
    assert [c.id for c in gpu02.checks] == ["node_document_stale"]
    # Its three-hour-old torch is no evidence of a mismatch now.
    assert outcome.report.fleet_checks == ()
    assert [(p.kind, p.source) for p in outcome.problems] == [("stale", str(stale))]
    assert outcome.exit_code == 3


def test_the_file_time_dates_an_older_fleetchecks_document(tmp_path: Path) -> None:
    legacy = {key: value for key, value in doc("gpu01").items()
              if key not in ("schema", "probed_at", "fleetcheck", "origin")}
    path = write(tmp_path / "legacy.json", legacy)
    written = (nodedocs.NOW - timedelta(minutes=3)).timestamp()
    os.utime(path, (written, written))
    outcome = merge(tmp_path, str(path))
    assert [(n.id, n.status) for n in outcome.report.nodes] == [("gpu01", "ok")]
    assert outcome.notes == (f"{path}: written by an older fleetcheck (no schema tag)",)
    assert outcome.exit_code == 0
    old = (nodedocs.NOW - timedelta(hours=2)).timestamp()
    os.utime(path, (old, old))
    assert [n.status for n in merge(tmp_path, str(path)).report.nodes] == ["error"]


def test_a_newer_schema_is_refused_and_the_rest_merged(tmp_path: Path, capsys) -> None:
    future = write(tmp_path / "future.json", {**doc("gpu01"), "schema": "fleetcheck.node/2"})
    good = write(tmp_path / "good.json", doc("gpu02"))
    broken = tmp_path / "broken.json"
    broken.write_text('{"schema": "fleetcheck.node/1",\n "id": ')
    other = write(tmp_path / "other.json", {"kind": "Pod"})
    code = main(["merge", str(future), str(good), str(broken), str(other), "--format", "json"])
    out = capsys.readouterr()
    assert [n["id"] for n in json.loads(out.out)["nodes"]] == ["gpu02"]
    assert out.err.splitlines() == [
        f"fleetcheck: merge: unread: {future}: written by a newer fleetcheck (schema "
        "fleetcheck.node/2; fleetcheck 0.1.0 reads fleetcheck.node/1): upgrade fleetcheck "
        "where you merge",
        f"fleetcheck: merge: unread: {broken}:2: not valid JSON: Expecting value",
        f"fleetcheck: merge: unread: {other}: a JSON object without 'schema' ('kind'), not a "
        f"fleetcheck document; {EXPECTED}",
    ]
    assert code == 3


def test_id_templates_name_nodes_from_the_origin(tmp_path: Path, capsys) -> None:
    pods = tmp_path / "pods"
    pods.mkdir()
    for index, worker in enumerate(("worker-1", "worker-2")):
        origin = {"hostname": f"fc-{index}", "k8s_node": worker, "pod": f"fc-{index}",
                  "namespace": "gpu-health"}
        write(pods / f"{index}.json", doc(f"fc-{index}", origin=origin))
    auto = merge(tmp_path, str(pods))
    assert [n.id for n in auto.report.nodes] == ["worker-1", "worker-2"]
    templated = merge(tmp_path, str(pods), id_template="prod/{namespace}/{pod}")
    assert [n.id for n in templated.report.nodes] == ["prod/gpu-health/fc-0",
                                                      "prod/gpu-health/fc-1"]
    missing = merge(tmp_path, str(pods), id_template="{slurm_node}")
    assert missing.report.nodes == ()
    assert missing.problems[0].message == (
        f"{pods / '0.json'}: --id '{{slurm_node}}': the document has no slurm_node (its "
        "origin: hostname=fc-0, k8s_node=worker-1, pod=fc-0, namespace=gpu-health)")
    assert main(["merge", str(pods), "--id", "{node}"]) == 2
    assert capsys.readouterr().err == (
        "fleetcheck: error: --id '{node}': unknown field {node}; fields: {id}, {file}, "
        "{hostname}, {slurm_node}, {slurm_job}, {k8s_node}, {pod}, {namespace}\n")


def test_caches_and_site_reports_merge_too(tmp_path: Path) -> None:
    written = (nodedocs.NOW - timedelta(minutes=5)).timestamp()
    cache = tmp_path / "node.json"
    cache.write_text(cache_document(doc("gpu01"), 0, now=written))
    site = merge(tmp_path, str(write(tmp_path / "b.json", doc("gpu02")))).report
    site_file = tmp_path / "site-b.json"
    site_file.write_text(dumps_report(site))
    outcome = merge(tmp_path, str(cache), str(site_file))
    assert [n.id for n in outcome.report.nodes] == ["gpu01", "gpu02"]
    assert outcome.problems == ()


def test_merge_keeps_history_and_renders_every_format(tmp_path: Path, capsys) -> None:
    history = tmp_path / "history"
    first = write(tmp_path / "a.json", doc("gpu01", minutes_ago=0))
    assert main(["merge", str(first), "--history", str(history), "-o",
                 str(tmp_path / "r1.json")]) == 0
    second = write(tmp_path / "a.json", doc("gpu01", minutes_ago=0, status="fail",
                                            verdict="cpu-fallback"))
    for suffix in ("html", "xml", "prom", "txt"):
        assert main(["merge", str(second), "-o", str(tmp_path / f"r.{suffix}")]) == 1
    hook = tmp_path / "hook.sh"
    hook.write_text(f"#!/bin/sh\ncat > {tmp_path / 'changes.txt'}\n")
    hook.chmod(0o755)
    assert main(["merge", str(second), "--history", str(history), "--on-change",
                 str(hook)]) == 1
    table = capsys.readouterr().out
    assert "gpu01: ok -> fail" in table
    assert "gpu01: ok -> fail" in (tmp_path / "changes.txt").read_text()
    assert len(list(history.iterdir())) == 2
    assert load_report(tmp_path / "r1.json").nodes[0].status == "ok"
    assert "<html" in (tmp_path / "r.html").read_text()
    assert "fleetcheck_node_status" in (tmp_path / "r.prom").read_text()


def test_no_input_is_a_usage_error(capsys) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["merge"])
    assert stop.value.code == 2
    assert main(["merge", "/nonexistent/docs"]) == 3
    assert capsys.readouterr().err.splitlines()[-1] == (
        "fleetcheck: merge: unread: /nonexistent/docs: no such file or folder")


def test_nodes_are_judged_under_the_merges_playbook(tmp_path: Path) -> None:
    path = write(tmp_path / "a.json", doc("gpu01"))
    playbook = tmp_path / "eight.yaml"
    playbook.write_text("min_gpus: 8\n")
    from fleetcheck.playbook import load_playbook

    outcome = merge_inputs([str(path)], policy=load_playbook(str(playbook)), now=nodedocs.NOW,
                           max_age_s=1800)
    assert [(n.status, n.reason) for n in outcome.report.nodes] == [
        ("fail", "1 GPU(s), playbook eight requires 8")]


# --- the probe script's own document (fleetcheck.probe/1) -------------------------------------


def probe_documents(tmp_path: Path) -> dict[str, bytes]:
    """What the bare probe script printed on two fake nodes: one healthy, one without a C
    compiler (its stdout, as a site's `srun … python3 - < probe.py` keeps it)."""
    from tests.nodeenv import make_node, run_probe

    printed = {}
    for name, kind in (("gpu01", {}), ("gpu02", {"compiler": False})):
        _code, document, _err = run_probe(make_node(tmp_path / name, **kind))
        printed[name] = json.dumps(document).encode()
    return printed


def audited(name: str, stdout: bytes, policy: Any) -> Any:
    """The node an audit makes of the same reply from a node of that name (audit.py's own
    node_from_result, on the local transport)."""
    from fleetcheck.audit import node_from_result
    from fleetcheck.inventory_data.model import HostSpec, Target
    from fleetcheck.transport.interface import CommandResult
    from fleetcheck.transport.local import LocalTransport

    host = HostSpec(name=name, address=None, transport="local", probe_host=True)
    target = Target(host=host, vmid=None, name=name, python="python3", env={}, labels=(),
                    timeout=60)
    return node_from_result(target, LocalTransport(), CommandResult(0, stdout, b""), policy,
                            duration_s=0.0)


def test_the_probe_scripts_documents_are_judged_as_an_audit_judges_the_reply(
        tmp_path: Path) -> None:
    from fleetcheck.playbook import load_playbook

    printed = probe_documents(tmp_path)
    folder = tmp_path / "docs"
    folder.mkdir()
    for name, stdout in printed.items():
        (folder / f"{name}.json").write_bytes(stdout)
    eight = tmp_path / "eight.yaml"
    eight.write_text("min_gpus: 8\n")
    for policy in (DEFAULT_POLICY, load_playbook("pre-training"), load_playbook(str(eight))):
        outcome = merge_inputs([str(folder)], policy=policy, id_template="{file}",
                               now=nodedocs.NOW, max_age_s=1800)
        assert outcome.problems == ()
        merged = {node.id: node for node in outcome.report.nodes}
        assert list(merged) == ["gpu01", "gpu02"]
        for name, stdout in printed.items():
            direct = audited(name, stdout, policy)
            node = merged[name]
            assert (node.status, node.reason, node.triton, node.checks, node.facts) == (
                direct.status, direct.reason, direct.triton, direct.checks, direct.facts)
            assert (node.host, node.kind, node.vmid) == (name, "host", None)
    assert merged["gpu02"].status == "fail"
    assert merged["gpu02"].triton.cause == "no_c_compiler"
    # The probe reports its own status under no playbook: the merge's decides.
    assert merged["gpu01"].status == "fail"
    assert merged["gpu01"].reason.endswith("playbook eight requires 8")


def test_a_probe_document_is_named_by_its_host_name_and_dated_by_its_file(
        tmp_path: Path, capsys) -> None:
    printed = probe_documents(tmp_path)
    folder = tmp_path / "docs"
    folder.mkdir()
    for index, (name, stdout) in enumerate(printed.items()):
        document = json.loads(stdout)
        document["facts"]["hostname"] = f"{name}.example.org"
        write(folder / f"task-{index}.json", document)
    outcome = merge(tmp_path, str(folder))
    assert [(n.id, n.status) for n in outcome.report.nodes] == [
        ("gpu01.example.org", "ok"), ("gpu02.example.org", "fail")]
    assert outcome.problems == outcome.notes == ()
    by_file = merge(tmp_path, str(folder), id_template="{file}")
    assert [n.id for n in by_file.report.nodes] == ["task-0", "task-1"]
    # No host name in its facts and no file: nothing names the node but --id.
    nameless = json.loads(printed["gpu01"])
    del nameless["facts"]["hostname"]
    stdin = io.BytesIO(json.dumps(nameless).encode())
    outcome = merge_inputs(["-"], policy=DEFAULT_POLICY, now=nodedocs.NOW, max_age_s=1800,
                           stdin=stdin)  # type: ignore[arg-type]
    assert outcome.report.nodes == ()
    assert [p.message for p in outcome.problems] == [
        "<stdin>: names no node (no host name in its facts, no file name): name it with --id"]
    # An hour-old file is stale as any document: the file's time dates a probe document.
    old = (nodedocs.NOW - timedelta(hours=1)).timestamp()
    os.utime(folder / "task-0.json", (old, old))
    stale = merge(tmp_path, str(folder))
    assert [(n.id, n.status) for n in stale.report.nodes] == [
        ("gpu01.example.org", "error"), ("gpu02.example.org", "fail")]


def test_gate_from_probe_documents_speaks_in_the_gates_words(tmp_path: Path, capsys) -> None:
    printed = probe_documents(tmp_path)
    folder = tmp_path / "docs"
    folder.mkdir()
    for name, stdout in printed.items():
        document = json.loads(stdout)
        document["facts"]["hostname"] = name
        write(folder / f"{name}.json", document)
    write(folder / "verdict.json", {"schema": "fleetcheck.gate/1", "result": "pass"})
    # The job's own node was read: an input that holds none is said, and blocks nothing.
    assert main(["gate", "--documents", str(folder), "--nodes", "gpu01",
                 "--playbook", "default"]) == 0
    assert capsys.readouterr().err.splitlines() == [
        f"fleetcheck: gate: unread: {folder / 'verdict.json'}: a fleetcheck.gate/1 document, "
        f"which holds no node; {EXPECTED}"]
    (folder / "verdict.json").unlink()
    assert main(["gate", "--documents", str(folder), "--nodes", "gpu[01-02]",
                 "--playbook", "default"]) == 1
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(
        "gpu02: fail: Triton cpu-fallback: no C compiler: CC unset, no gcc or clang on PATH "
        "(fix: " + json.loads(printed["gpu02"])["triton"]["fix"] + ")"), line
