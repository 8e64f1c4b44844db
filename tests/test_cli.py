"""The command line end to end on this machine: exit codes, one-line errors, every command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fleetcheck.probe import probe_source

ROOT = Path(__file__).resolve().parents[1]


def fleetcheck(*args: str, cwd: Path = ROOT, stdin: str | None = None,
               env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fleetcheck", *args], cwd=cwd, input=stdin, text=True,
        capture_output=True, timeout=120, env={**os.environ, **(env or {})},
    )


def assert_one_line_error(result: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert result.returncode == 2, result
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("fleetcheck: error: ")
    assert "Traceback" not in result.stderr
    for needle in needles:
        assert needle in lines[0]


def test_no_command_is_a_usage_error() -> None:
    result = fleetcheck()
    assert result.returncode == 2
    assert "usage: fleetcheck" in result.stderr


def test_help_documents_the_exit_codes() -> None:
    for command in ((), ("audit",), ("gate",), ("probe",)):
        result = fleetcheck(*command, "--help")
        assert result.returncode == 0
        assert "3  nothing failed, but some nodes could not be verified" in result.stdout


def test_missing_inventory_is_one_line_and_exit_2(tmp_path: Path) -> None:
    assert_one_line_error(fleetcheck("audit", str(tmp_path / "nope.yaml")), "nope.yaml")


def test_malformed_inventory_names_file_line_and_key(tmp_path: Path) -> None:
    bad = tmp_path / "fleet.yaml"
    bad.write_text("hosts:\n  pve1:\n    address: 10.0.0.1\n    containers: [101, abc]\n")
    for command in ("audit", "gate", "inventory"):
        result = fleetcheck(command, str(bad))
        assert_one_line_error(result, "fleet.yaml:4", "containers")


def test_unknown_playbook_is_exit_2() -> None:
    result = fleetcheck("audit", "inventory.example.yaml", "--playbook", "no-such-playbook")
    assert_one_line_error(result, "no-such-playbook")


def test_on_change_needs_history() -> None:
    result = fleetcheck("audit", "inventory.example.yaml", "--on-change", "cat")
    assert_one_line_error(result, "--on-change needs --history")


def test_probe_script_is_the_probe_and_runs_isolated_by_hand() -> None:
    script = fleetcheck("probe", "--script")
    assert script.returncode == 0
    assert script.stdout == probe_source()
    ran = subprocess.run([sys.executable, "-I", "-"], input=script.stdout, text=True,
                         capture_output=True, timeout=120)
    document = json.loads(ran.stdout)
    assert document["schema"] == "fleetcheck.probe/1"
    assert ran.returncode in (0, 1, 3)


def test_probe_json_is_one_node_object_and_exit_code_matches_status() -> None:
    result = fleetcheck("probe", "--format", "json")
    node = json.loads(result.stdout)
    assert {"id", "host", "vmid", "name", "status", "reason", "triton", "checks", "facts",
            "duration_s"} <= set(node)
    assert node["vmid"] is None
    expected = {"ok": 0, "warn": 0, "skipped": 0, "fail": 1}.get(node["status"], 3)
    assert result.returncode == expected


def test_audit_writes_json_and_report_rerenders_it(tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    audit = fleetcheck("audit", "inventory.example.yaml", "-o", str(out))
    assert audit.stdout == ""
    data = json.loads(out.read_text())
    assert data["schema"] == "fleetcheck.audit/1"
    assert [node["id"] for node in data["nodes"]] == ["this-machine"]
    statuses = {node["status"] for node in data["nodes"]}
    assert audit.returncode == (1 if "fail" in statuses else 3 if statuses & {"error"} else 0)
    assert oct(out.stat().st_mode & 0o022) == "0o0"

    html = tmp_path / "run.html"
    assert fleetcheck("report", str(out), "-o", str(html)).returncode == 0
    assert html.read_text().lstrip().lower().startswith("<!doctype html>")
    table = fleetcheck("report", str(out), "--format", "table")
    assert table.returncode == 0
    assert "this-machine" in table.stdout
    assert "\x1b[" not in table.stdout

    same = fleetcheck("diff", str(out), str(out))
    assert same.returncode == 0


def test_report_on_a_bad_file_is_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "run.json"
    bad.write_text("[1, 2")
    assert_one_line_error(fleetcheck("report", str(bad)), "run.json")


def test_unwritable_output_is_one_line_and_leaves_nothing(tmp_path: Path) -> None:
    target = tmp_path / "missing-dir" / "run.json"
    result = fleetcheck("audit", "inventory.example.yaml", "-o", str(target))
    assert_one_line_error(result, "run.json")
    assert not target.parent.exists()


def test_inventory_command_resolves_without_connecting() -> None:
    result = fleetcheck("inventory", "inventory.example.yaml")
    assert result.returncode == 0
    assert "this-machine" in result.stdout
    as_json = fleetcheck("inventory", "inventory.example.yaml", "--json")
    assert as_json.returncode == 0
    assert json.loads(as_json.stdout)


@pytest.mark.parametrize("fmt", ["html", "junit", "prometheus", "json", "table"])
def test_every_format_renders_the_local_audit(fmt: str) -> None:
    result = fleetcheck("audit", "--format", fmt, "-o", "-")
    assert result.returncode in (0, 1, 3)
    assert result.stdout.strip()


def test_limit_matching_no_host_is_refused_before_probing() -> None:
    for command in ("audit", "gate"):
        result = fleetcheck(command, "inventory.example.yaml", "--limit", "pve9")
        assert_one_line_error(result, "--limit 'pve9'", "no host or group matches")


@pytest.mark.parametrize("value", ["0", "-5", "nan", "inf", "soon"])
def test_timeouts_must_be_positive_finite_seconds(value: str) -> None:
    for command in (("audit",), ("gate", "inventory.example.yaml"), ("probe",)):
        result = fleetcheck(*command, "--timeout", value)
        assert result.returncode == 2
        assert "--timeout" in result.stderr
        assert "Traceback" not in result.stderr


def test_unusable_outputs_are_refused_before_probing(tmp_path: Path) -> None:
    a_file = tmp_path / "plain-file"
    a_file.write_text("x")
    cases = [
        (("-o", str(tmp_path / "missing" / "r.html")), "does not exist"),
        (("-o", str(tmp_path)), "is a folder"),
        (("--history", str(a_file)), "is not a folder"),
        (("--history", str(a_file / "runs")), "is not a folder"),
    ]
    for extra, needle in cases:
        result = fleetcheck("audit", "inventory.example.yaml", *extra)
        assert_one_line_error(result, needle)


def test_dev_stdout_is_stdout_and_dev_null_stays_a_device() -> None:
    result = fleetcheck("audit", "--format", "json", "-o", "/dev/stdout")
    assert json.loads(result.stdout)["schema"] == "fleetcheck.audit/1"
    result = fleetcheck("audit", "--format", "json", "-o", "/dev/null")
    assert result.returncode in (0, 1, 3)
    assert os.path.exists("/dev/null") and not os.path.isfile("/dev/null")


def test_a_closed_pipe_keeps_the_exit_code() -> None:
    alone = fleetcheck("audit", "--format", "json")
    piped = subprocess.run(
        ["bash", "-o", "pipefail", "-c",
         f"{sys.executable} -m fleetcheck audit --format json | head -c 1 >/dev/null"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert piped.returncode == alone.returncode
    assert "Traceback" not in piped.stderr and "BrokenPipe" not in piped.stderr


def _previous_run_with_another_status(history: Path) -> None:
    """A saved run in which this machine had another status, so the next run is a change."""
    from fleetcheck.report.content import NodeResult, Report
    from fleetcheck.report.history import save_run

    node = NodeResult(id="this-machine", host="this-machine", vmid=None, name="this-machine",
                      status="unreachable", reason="ssh: connection refused")
    old = Report("2026-01-01T00:00:00Z", "2026-01-01T00:00:01Z", (node,),
                 inventory="inventory.example.yaml")
    save_run(history, old, keep=10)


def test_on_change_runs_after_the_report_is_written(tmp_path: Path) -> None:
    history = tmp_path / "runs"
    _previous_run_with_another_status(history)
    report = tmp_path / "latest.json"
    seen = tmp_path / "seen"
    hook = f"sh -c 'cat > {seen}.stdin; cp {report} {seen}.report'"
    result = fleetcheck("audit", "inventory.example.yaml", "--history", str(history),
                        "--on-change", hook, "-o", str(report))
    assert result.returncode in (0, 1, 3), result.stderr
    assert "this-machine: unreachable" in Path(f"{seen}.stdin").read_text()
    # The hook saw this run's report, not an older one.
    assert Path(f"{seen}.report").read_text() == report.read_text()
    assert len(list(history.iterdir())) == 2


def test_an_interrupted_run_is_not_kept_and_fires_no_hook(tmp_path: Path) -> None:
    history = tmp_path / "runs"
    _previous_run_with_another_status(history)
    seen = tmp_path / "seen"
    result = fleetcheck("audit", "inventory.example.yaml", "--history", str(history),
                        "--timeout", "0.001", "--on-change", f"touch {seen}")
    assert result.returncode == 3
    assert "not kept in the history" in result.stderr
    assert not seen.exists()
    assert len(list(history.iterdir())) == 1


def test_keep_needs_history() -> None:
    assert_one_line_error(fleetcheck("audit", "--keep", "3"), "--keep needs --history")


def test_a_closed_pipe_keeps_the_gate_and_diff_exit_codes(tmp_path: Path) -> None:
    plain = fleetcheck("gate", "inventory.example.yaml", "--json")
    piped = subprocess.run(
        ["bash", "-o", "pipefail", "-c",
         f"{sys.executable} -m fleetcheck gate inventory.example.yaml --json | true"],
        cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert piped.returncode == plain.returncode
    assert "Traceback" not in piped.stderr


def test_a_damaged_gzip_report_is_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "run.json.gz"
    bad.write_bytes(b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03" + b"\xff" * 40)
    assert_one_line_error(fleetcheck("report", str(bad)), "run.json.gz: cannot read")
    good = tmp_path / "good.json"
    assert fleetcheck("audit", "-o", str(good)).returncode in (0, 1, 3)
    result = fleetcheck("diff", str(bad), str(good))
    assert_one_line_error(result, "run.json.gz")


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: /proc passes the writability check")
def test_a_history_that_fails_to_save_still_writes_the_report(tmp_path: Path) -> None:
    report = tmp_path / "run.json"
    result = fleetcheck("audit", "inventory.example.yaml", "-o", str(report),
                        "--history", "/proc/fleetcheck-history")
    assert result.returncode in (0, 1, 3)
    assert "fleetcheck: warning: " in result.stderr
    assert json.loads(report.read_text())["schema"] == "fleetcheck.audit/1"


@pytest.mark.sshd
def test_a_limit_typo_after_discovery_keeps_history_and_hook_untouched(fleet, tmp_path) -> None:
    fleet.add_host("pve1")
    fleet.add_container("pve1", 101)
    inventory = str(fleet.write_inventory(timeout=30))
    history, hook_ran, report = tmp_path / "runs", tmp_path / "hook-ran", tmp_path / "r.json"
    assert fleetcheck("audit", inventory, "--history", str(history), "-o", str(report)
                      ).returncode == 0
    result = fleetcheck("audit", inventory, "--limit", "pve1/999", "--history", str(history),
                        "--on-change", f"touch {hook_ran}", "-o", str(report))
    assert_one_line_error(result, "--limit pve1/999: matched no node after discovery")
    assert len(list(history.iterdir())) == 1
    assert not hook_ran.exists()
    assert json.loads(report.read_text())["nodes"] == []

    emptied = fleetcheck("audit", inventory, "--limit", "pve1/101,!pve1/101")
    assert_one_line_error(emptied, "selects no node of pve1/101 (after discovery and the ! and &")


def test_writing_stdout_to_a_full_disk_is_one_line_error() -> None:
    with open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, "-m", "fleetcheck", "probe", "--script"],
                              cwd=ROOT, stdout=full, stderr=subprocess.PIPE, text=True,
                              timeout=120)
    assert done.returncode == 2
    assert done.stderr == ("fleetcheck: error: standard output: cannot write report: "
                           "No space left on device\n")


def _finish(code: int, then: str = "", chars: int = 200_000) -> subprocess.CompletedProcess[str]:
    # Unflushed text still in Python's buffer when finish() ends the process; `then` runs
    # between the write and finish.
    script = ("import os, sys\nfrom fleetcheck.cli import finish\nsys.stdout.write('x' * "
              f"{chars})\nprint('last', file=sys.stderr)\n{then}\nfinish({code})\n")
    # Buffered as a command's stdout is by default (PYTHONUNBUFFERED would write through).
    env = {key: value for key, value in os.environ.items() if key != "PYTHONUNBUFFERED"}
    return subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                          text=True, timeout=60, env=env)


def test_finish_ends_the_process_with_everything_written() -> None:
    done = _finish(3)
    assert (done.returncode, len(done.stdout), done.stderr) == (3, 200_000, "last\n")


def test_finish_says_when_stdout_could_not_be_written() -> None:
    # The last of the text is still buffered when stdout's descriptor goes away under it.
    done = _finish(0, then="os.close(1)", chars=10)
    assert done.returncode == 120  # CPython's own status for a failed flush at exit
    assert done.stderr.splitlines() == [
        "last", "fleetcheck: error: writing standard output: [Errno 9] Bad file descriptor"]


def test_finish_keeps_the_code_when_the_reader_left() -> None:
    # The text stays in stdout's buffer (a pipe is block-buffered), and the writer waits until
    # the pipe reports POLLERR (its reader is gone) before `finish` flushes it: the flush, and
    # only the flush, meets the closed pipe, whatever the scheduler does.
    writer = ("import select, sys; from fleetcheck.cli import finish; "
              "sys.stdout.write('x' * 100); poll = select.poll(); poll.register(1, 0); "
              "poll.poll(); finish(1)")
    piped = subprocess.run(
        ["bash", "-o", "pipefail", "-c", f'{sys.executable} -c "{writer}" | true'],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
        env={key: value for key, value in os.environ.items() if key != "PYTHONUNBUFFERED"})
    assert piped.returncode == 1
    assert piped.stderr == ""


def test_schema_lists_and_prints_the_published_schemas() -> None:
    from fleetcheck.schemas import DOCUMENTS, shipped

    listed = fleetcheck("schema")
    assert listed.returncode == 0
    assert [line.split()[:3] for line in listed.stdout.splitlines()] == [
        ["probe", "fleetcheck.probe/1", "probe-1.json"],
        ["node", "fleetcheck.node/1", "node-1.json"],
        ["audit", "fleetcheck.audit/1", "audit-1.json"]]
    assert fleetcheck("schema", "--list").stdout == listed.stdout
    for name in DOCUMENTS:
        printed = fleetcheck("schema", name)
        assert (printed.returncode, printed.stdout) == (0, shipped(name))
    assert fleetcheck("schema", "nodes").returncode == 2
    assert_one_line_error(fleetcheck("schema", "node", "--list"), "give NAME or --list")


def test_completion_and_manpage_print_the_shipped_files() -> None:
    from fleetcheck.cli import build_parser
    from fleetcheck.completion import shipped, subparsers

    assert set(subparsers(build_parser())) >= {"schema", "completion", "manpage"}
    for shell in ("bash", "zsh"):
        printed = fleetcheck("completion", shell)
        assert (printed.returncode, printed.stdout) == (0, shipped(shell))
    page = fleetcheck("manpage")
    assert (page.returncode, page.stdout) == (0, shipped(None))
    assert page.stdout.startswith('.TH FLEETCHECK "1"')
    assert fleetcheck("completion", "fish").returncode == 2


def test_every_document_the_cli_prints_is_valid_under_its_published_schema(
        tmp_path: Path) -> None:
    from tests.contracts import validated, validated_json

    script = fleetcheck("probe", "--script")
    ran = subprocess.run([sys.executable, "-I", "-"], input=script.stdout, text=True,
                         capture_output=True, timeout=120)
    probe_document = validated_json(ran.stdout, "probe")
    node_document = validated_json(fleetcheck("probe", "--format", "json").stdout, "node")
    audit = fleetcheck("audit", "inventory.example.yaml", "--format", "json")
    validated_json(audit.stdout, "audit")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "bare.json").write_text(json.dumps(probe_document))
    (docs / "node.json").write_text(json.dumps(
        {**node_document, "origin": {"hostname": "other"}, "id": "other"}))
    merged = fleetcheck("merge", str(docs), "--format", "json")
    report = validated(json.loads(merged.stdout))
    assert sorted(node["id"] for node in report["nodes"]) == sorted(
        [probe_document["facts"]["hostname"], "other"])
