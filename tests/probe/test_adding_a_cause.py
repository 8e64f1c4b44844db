"""A checked cause added as its record and one check method, nothing else changed.

In a copy of the probe's parts, `widget_broken` is one record in catalogue.py and one
`check_widget_broken` method in a check family's class: the probe builds, runs the check in
the record's causal place, and names the cause with the record's label and fix; the host reads
the document of a probe newer than itself. The build's refusal of a record without its method
is tests/probe/test_build.py's.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

from fleetcheck.checks import check_info
from fleetcheck.judgement.policy import DEFAULT_POLICY
from fleetcheck.probe import build as probe_build
from fleetcheck.probe.parts.catalogue import Cause
from fleetcheck.probe.results import judge_probe_output, parse_probe_output
from tests.nodeenv import make_node

#: The record, placed after inductor_ready: the last check of Triton's verdict's stretch.
RECORD = ('    Cause("widget_broken", "a broken widget", "{pip} install --upgrade widget",\n'
          '          check=True, title="widget intact", column="triton", short="broken"),\n')
#: Its check: a failure without a fix of its own gets the record's, filled for the node.
METHOD = ('    def check_widget_broken(self):\n'
          '        return ("fail", "the widget is broken", "", {"widget": "broken"})\n\n')


def _parts_with_the_cause(tmp_path: Path) -> Path:
    parts = tmp_path / "parts"
    shutil.copytree(probe_build.PARTS_DIR, parts)
    catalogue = parts / "catalogue.py"
    anchor = "    # The GPUs' state before a job"
    catalogue.write_text(catalogue.read_text().replace(anchor, RECORD + anchor, 1))
    family = parts / "checks" / "fla.py"
    head = '    """The flash-linear-attention checks."""\n\n'
    assert head in family.read_text()
    family.write_text(family.read_text().replace(head, head + METHOD, 1))
    return parts


def _run(text: str, tmp_path: Path) -> tuple[int, dict[str, Any]]:
    node = make_node(tmp_path / "node")
    done = subprocess.run([node.python, "-"], input=text.encode(), env=node.env,
                          capture_output=True, timeout=120, cwd=node.root, check=False)
    assert done.stderr == b"", done.stderr.decode()[-2000:]
    return done.returncode, json.loads(done.stdout)


def test_a_record_and_its_check_method_are_the_whole_cause(tmp_path: Path) -> None:
    text = probe_build.build(_parts_with_the_cause(tmp_path))
    rc, doc = _run(text, tmp_path)
    ids = [check["id"] for check in doc["checks"]]
    assert ids[ids.index("inductor_ready") + 1] == "widget_broken"
    widget = next(check for check in doc["checks"] if check["id"] == "widget_broken")
    python = doc["facts"]["python"]["executable"]
    assert (widget["status"], widget["fix"]) == ("fail", f"{python} -m pip install --upgrade "
                                                 "widget")
    assert (rc, doc["status"], doc["triton"]["verdict"], doc["triton"]["cause"],
            doc["triton"]["fix"]) == (1, "fail", "cpu-fallback", "widget_broken",
                                      f"a broken widget: {python} -m pip install --upgrade widget")
    # The host, whose records do not have it yet, reads and judges the newer probe's document.
    judged = judge_probe_output(parse_probe_output(json.dumps(doc).encode()), DEFAULT_POLICY)
    assert judged.status == "fail"


def test_the_host_shows_a_check_from_its_record_alone() -> None:
    # No table to fill beside the record: a record saying nothing of how it is shown gets its
    # label as the title and the verdict's column (tests/probe/test_causes.py asks the real
    # records for both).
    bare = check_info(Cause("widget_broken", "a broken widget", "fix it", check=True))
    assert (bare.title, bare.column, bare.catalogue, bare.short) == (
        "a broken widget", "verdict", True, None)
    shown = check_info(Cause("widget_broken", "a broken widget", "fix it", check=True,
                             title="widget intact", column="triton", short="broken",
                             catalogue=False, vendor="nvidia"))
    assert (shown.title, shown.column, shown.catalogue, shown.short, shown.vendor) == (
        "widget intact", "triton", False, "broken", "nvidia")
