"""One record per cause: every cause and every classified message has an actionable fix, every
field of a record is one its readers know, no table keyed by cause ids lives outside the
records, and docs/checks.md's table of causes is the records'."""

from __future__ import annotations

import ast
import errno
import json
import re
from pathlib import Path

import pytest

from fleetcheck.checks import CHECKS, COLUMNS, VERDICT_COLUMN, causes_table, node_fix_values
from fleetcheck.judgement.gpustate import GpuPolicy
from fleetcheck.probe.parts.catalogue import (
    CAUSES,
    CAUSES_BY_ID,
    MESSAGE_RULES,
    PLACE_RULES,
    REPAIRS,
    fill_fix,
)
from fleetcheck.probe.parts.evaluation.diagnose import diagnoses

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "probe" / "fixtures" / "toolchain_texts.json"

#: A node's values and an object's or a limit's, as the probe fills them.
VALUES = dict(
    node_fix_values({"python": {"executable": "/opt/venv/bin/python", "version": "3.12.3"},
                     "os": {"id": "ubuntu"}, "triton": {"version": "3.6.0"},
                     "torch": {"version": "2.11.0+cu130"},
                     "triton_cache_dir": "/home/job/.triton/cache"}),
    tmp_dir="/tmp", libcuda_dir="/usr/lib/x86_64-linux-gnu", dists="triton pytorch-triton",
    path="/home/job/.triton/cache/ab/cuda_utils.so", target="/scratch/job/.triton",
    component="/home/job/.triton/cache/ab", owner="root (uid 0)", uid="0", user="job (uid 1000)",
    mount="/home/job/.triton/cache (mount /home)", limit="AS (ulimit -v)",
    value="16 GiB (16777216 KiB)", source="soft = hard limit; the login's (pam_limits: "
    "/etc/security/limits.conf)", how="'job hard as unlimited' in /etc/security/limits.conf, "
    "then a new login", library="libfoo.so.3",
    missing="missing: /home/job/x",
    free="512 MiB", errno="ENOSPC")

#: A fix says what to run or what to change: a command, a setting, a file or dir to act on.
ACTION = re.compile(
    r"\b(pip|apt-get|dnf|install|reinstall|uninstall|export|unset|set|chmod|chown|rm|mkdir|mv|"
    r"ln -s|ulimit|ldconfig|nvidia-smi|nvidia-ctk|systemctl|remount|raise|upgrade|restart|"
    r"run|free|delete|create|pass|point|take|use|load|move|give|replace|check)\b")
#: What a fix that says nothing concrete sounds like.
GENERIC = re.compile(r"see the|investigate|underlying cause|the checks above|is in the evidence"
                     r"|fix the driver layer|^fix it$", re.IGNORECASE)


def assert_actionable(cause: str, fix: str) -> None:
    assert fix, f"{cause}: empty fix"
    assert not GENERIC.search(fix), f"{cause}: generic fix {fix!r}"
    assert ACTION.search(fix), f"{cause}: no action in {fix!r}"
    # Every value a template names is one the probe fills ("<a dir with space>" is advice).
    assert not re.search(r"<[a-z_0-9]+>", fix), f"{cause}: unfilled value in {fix!r}"


@pytest.mark.parametrize("cause", [c.id for c in CAUSES])
def test_every_cause_has_an_actionable_fix(cause: str) -> None:
    assert_actionable(cause, fill_fix(cause, VALUES))


def _messages() -> list[str]:
    rows = json.loads(FIXTURE.read_text())["rows"]
    return [row["text"].replace("<bench>", "/tmp/bench") for row in rows] + [
        "FileExistsError: [Errno 17] File exists: '/home/job/.triton'",
        "PermissionError: [Errno 13] Permission denied: '/home/job/.triton/cache/ab/x.json'",
        "OSError: [Errno 28] No space left on device",
        "OSError: [Errno 122] Disk quota exceeded: '/home/job/.triton/cache/ab/x.so'",
        "OSError: [Errno 24] Too many open files",
        "OSError: [Errno 36] File name too long: '/x'",
        "ImportError: /x/cuda_utils.so: failed to map segment from shared object",
        "/sbin/ldconfig: Can't open cache file /etc/ld.so.cache",
        "/usr/bin/ld: cannot find crti.o: No such file or directory",
        "gcc: fatal error: cannot execute 'cc1': execvp: No such file or directory",
        "RuntimeError: cannot locate libamdhip64.so after attempted paths []",
        "ModuleNotFoundError: No module named 'triton.backends.nvidia'",
    ]


@pytest.mark.parametrize("text", _messages())
def test_every_classified_message_names_a_cause_with_a_fix(text: str) -> None:
    found = diagnoses({"error": text}, {"cache": ["/home/job/.triton/cache"], "tmp": ["/tmp"]})
    assert found, f"no cause for {text!r}"
    for cause, _, values in found:
        assert cause in CAUSES_BY_ID, cause
        assert_actionable(cause, fill_fix(cause, dict(VALUES, **values)))


def test_every_message_rule_is_a_record_and_compiles() -> None:
    for pattern, cause in MESSAGE_RULES:
        re.compile(pattern)
        assert cause in CAUSES_BY_ID


def test_the_hosts_checks_are_the_records_checks_in_causal_order() -> None:
    assert [info.id for info in CHECKS] == [c.id for c in CAUSES if c.check]
    assert {info.id: info.vendor for info in CHECKS} == {
        c.id: c.vendor for c in CAUSES if c.check}


def test_docs_checks_md_holds_the_records_table() -> None:
    text = (ROOT / "docs" / "checks.md").read_text()
    assert causes_table() in text, ("docs/checks.md's table of causes is not the records': "
                                    "paste fleetcheck.checks.causes_table()")


def test_an_unknown_value_stays_visible() -> None:
    assert fill_fix("address_space_limit", {}).count("<limit>") == 1
    assert fill_fix("no_such_cause", VALUES) == ""


def test_every_check_record_says_how_the_host_shows_it() -> None:
    # The host would fall back on the label and the verdict's column; the records say better.
    columns = {key for key, _ in COLUMNS} | {VERDICT_COLUMN}
    for cause in CAUSES:
        if cause.check:
            assert cause.title and cause.column in columns, cause.id
        else:  # how a check is shown, judged or graded means nothing for a cause without one
            assert (cause.title, cause.amd_title, cause.column, cause.short, cause.stack,
                    cause.maskable, cause.scope, cause.graded_by) == (
                None, None, None, None, False, False, "triton", None), cause.id


def test_every_field_is_of_its_readers_vocabulary() -> None:
    playbook_keys = {"max_gpu_memory_used", "foreign_processes", "memory_health"}
    assert len(playbook_keys) == len(GpuPolicy.__dataclass_fields__)
    errnos = set(errno.errorcode.values()) | {"noexec"}
    for cause in CAUSES:
        assert cause.repair in REPAIRS, cause.id
        assert cause.vendor in (None, "nvidia", "amd"), cause.id
        assert cause.scope in ("triton", "framework", "gpu_state"), cause.id
        assert cause.graded_by in playbook_keys | {None}, cause.id
        assert (cause.graded_by is None) or cause.scope == "gpu_state", cause.id
        assert set(cause.errnos) <= errnos, cause.id
        for place, names in (cause.places or {}).items():
            assert place in ("cache", "tmp") and set(names) <= errnos, cause.id
    # An errno in a workload dir names one cause: a second record would silently replace it.
    claimed = [(place, name) for cause in CAUSES for place, names in (
        cause.places or {}).items() for name in names]
    assert len(claimed) == len(set(claimed)) == sum(len(rules) for rules in PLACE_RULES.values())


def _cause_id_tables(path: Path) -> list[int]:
    """The lines of literal tables in `path` that hold two cause ids or more as their
    elements or keys (a set, tuple, list, or a dict's keys)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        items = node.keys if isinstance(node, ast.Dict) else (
            node.elts if isinstance(node, ast.Set | ast.Tuple | ast.List) else [])
        ids = [item for item in items
               if isinstance(item, ast.Constant) and item.value in CAUSES_BY_ID]
        if len(ids) >= 2:
            found.append(node.lineno)
    return found


def test_no_table_keyed_by_cause_ids_lives_outside_the_records() -> None:
    # A table of ids typed beside the records is a cause half-added: derive it from a field.
    catalogue = ROOT / "fleetcheck" / "probe" / "parts" / "catalogue.py"
    built = ROOT / "fleetcheck" / "probe" / "probe.py"
    found = {str(path.relative_to(ROOT)): lines for path in sorted(
        (ROOT / "fleetcheck").rglob("*.py")) if path not in (catalogue, built)
        for lines in [_cause_id_tables(path)] if lines}
    assert found == {}
