"""No shell injection: VMIDs, names, interpreter paths and env values from the inventory or from
discovery reach the node as single argv words, through the real sshd and the pct stand-in (where
a login shell parses the command line). A canary file must never appear."""

from __future__ import annotations

import asyncio
import glob
import json
import os
import shutil
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleetcheck.inventory.discovery import parse_pct_list
from fleetcheck.inventory.load import load_inventory, parse_inventory
from fleetcheck.inventory_data.errors import DiscoveryError, InventoryError
from fleetcheck.inventory_data.pveapi import containers_from_resources
from fleetcheck.transport.interface import CommandResult
from fleetcheck.transport.pct import PctTransport
from fleetcheck.transport.ssh import SshTransport, remote_command
from tests.fleet import Fleet
from tests.reliability.support import run_cli

CANARY_DIR = Path("/tmp")
RUN = uuid.uuid4().hex[:8]


def canary(index: int) -> str:
    return str(CANARY_DIR / f"fleetcheck-canary-{RUN}-{index}")


def payloads(index: int) -> list[str]:
    """Ways a shell could be talked into creating canary(index)."""
    c = canary(index)
    return [
        f"$(touch {c})", f"`touch {c}`", f";touch {c}", f"; touch {c} #", f"|touch {c}",
        f"&& touch {c}", f"\ntouch {c}\n", f"' ; touch {c} ; '", f'" ; touch {c} ; "',
        f"$(touch${{IFS}}{c})", f"x\\'; touch {c}; echo \\'", f"{{touch,{c}}}",
        f">{c}", f"$'\\x3btouch' {c}", f"\r\ntouch {c}", f"-oProxyCommand=touch {c}",
        f"--keep-env 1 -- touch {c}",
    ]


def canaries() -> list[str]:
    found = glob.glob(str(CANARY_DIR / f"fleetcheck-canary-{RUN}-*"))
    found += glob.glob(f"/root/*canary-{RUN}*") + glob.glob(f"*canary-{RUN}*")
    return found


RECORDER = """#!{python}
import json, os, sys
with open({record!r}, "w") as handle:
    json.dump({{"argv": sys.argv, "env": dict(os.environ)}}, handle)
"""


def _recorder(path: Path, record: Path, python: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(RECORDER.format(python=python, record=str(record)))
    path.chmod(0o755)


@pytest.mark.sshd
@pytest.mark.timeout(120)
@pytest.mark.parametrize("sudo", [False, True], ids=["root-login", "sudo"])
def test_inventory_values_never_reach_a_shell(sudo: bool, fleet: Fleet, tmp_path: Path,
                                              figures: Any) -> None:
    """Each payload goes in as a container's name, its interpreter path and an env value."""
    fleet.add_host("pve1", containers="listed", sudo=sudo)
    data_payloads = payloads(0 if not sudo else 1000)
    containers = []
    for index, payload in enumerate(data_payloads):
        vmid = 101 + index
        cdir = fleet.add_container("pve1", vmid, "healthy")
        # The interpreter path carries the payload; a recorder sits exactly there. ('=' in a
        # path has its own test: test_interpreter_path_with_an_equals_sign.)
        python = cdir / "bin" / f"py{payload.replace('=', '_')}"
        _recorder(python, cdir / "record.json", fleet.python)
        containers.append({"vmid": vmid, "name": payload, "python": str(python),
                           "env": {"FC_PAYLOAD": payload}})
    data = fleet.inventory_data(timeout=20)
    data["hosts"]["pve1"]["containers"] = containers
    data["defaults"]["env"] = {"FC_HOST_PAYLOAD": data_payloads[0]}
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(yaml.safe_dump(data, sort_keys=False))
    run = run_cli(["audit", str(inventory), "--format", "json", "-o",
                   str(tmp_path / "report.json"), "--no-progress"], deadline=90, cwd=tmp_path)
    assert "Traceback" not in run.err, run.err
    found = canaries()
    for payload in data_payloads:
        figures.injection(payload, bool(found))
    assert found == [], found
    report = json.loads((tmp_path / "report.json").read_text())
    names = {node["id"]: node["name"] for node in report["nodes"]}
    for index, spec in enumerate(containers):
        cdir = fleet.hosts["pve1"].dir / "containers" / str(spec["vmid"])
        record = json.loads((cdir / "record.json").read_text())
        assert record["argv"][0] == spec["python"], (index, record["argv"])
        assert record["env"]["FC_PAYLOAD"] == spec["env"]["FC_PAYLOAD"], index
        assert record["env"]["FC_HOST_PAYLOAD"] == data_payloads[0]
        assert names[f"pve1/{spec['vmid']}"] == spec["name"]


@pytest.mark.sshd
@pytest.mark.timeout(60)
def test_interpreter_path_with_an_equals_sign(fleet: Fleet, tmp_path: Path,
                                              figures: Any) -> None:
    figures.tried("inventory value: interpreter path")
    fleet.add_host("pve1", containers="listed")
    cdir = fleet.add_container("pve1", 101, "healthy")
    python = cdir / "opt" / "py=3.12" / "bin" / "python3"
    _recorder(python, cdir / "record.json", fleet.python)
    data = fleet.inventory_data(timeout=20)
    data["hosts"]["pve1"]["containers"] = [{"vmid": 101, "python": str(python),
                                            "env": {"A": "b"}}]
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(yaml.safe_dump(data, sort_keys=False))
    run_cli(["audit", str(inventory), "--format", "json", "-o", str(tmp_path / "r.json"),
             "--no-progress"], deadline=40, cwd=tmp_path)
    assert (cdir / "record.json").exists(), (tmp_path / "r.json").read_text()[:2000]


def _argv_text() -> st.SearchStrategy[str]:
    chars = st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",))
    return st.one_of(st.text(chars, max_size=40), st.sampled_from(payloads(2000)))


@pytest.mark.parametrize("shell", ["sh", "bash"])
@settings(max_examples=80, deadline=None, derandomize=True, database=None)
@given(args=st.lists(_argv_text(), min_size=1, max_size=6))
def test_remote_command_survives_a_real_shell(shell: str, args: list[str], figures: Any) -> None:
    """remote_command's line, run as sshd runs it (`$SHELL -c LINE`), gives back argv as is."""
    if shutil.which(shell) is None:
        pytest.skip(f"no {shell}")
    figures.tried("command-line quoting")
    line = remote_command(["printf", "%s\\0", *args], 10)
    done = subprocess.run([shell, "-c", line], capture_output=True, timeout=20, cwd="/tmp")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split(b"\0")[:-1] == [a.encode("utf-8") for a in args]
    assert canaries() == []


@pytest.fixture
def through_sshd(fleet: Fleet, tmp_path: Path) -> Iterator[Callable[..., CommandResult]]:
    """Run argv on the fleet's host (vmid None) or in its container 101, over fleetcheck's own
    SSH and pct transports; one event loop and one connection for the whole test."""
    fleet.add_host("pve1", containers="listed")
    fleet.add_container("pve1", 101, "healthy")
    host = load_inventory(str(fleet.write_inventory(timeout=20))).hosts[0]
    loop = asyncio.new_event_loop()
    transport = SshTransport(host)

    def run(argv: list[str], vmid: int | None = None) -> CommandResult:
        target = transport if vmid is None else PctTransport(transport, vmid)
        return loop.run_until_complete(target.run(argv, timeout=15))

    try:
        yield run
    finally:
        loop.run_until_complete(transport.close())
        loop.close()


@pytest.mark.sshd
@pytest.mark.timeout(120)
@settings(max_examples=30, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(args=st.lists(_argv_text(), min_size=1, max_size=4))
def test_fuzzed_argv_over_real_sshd_and_pct(args: list[str],
                                             through_sshd: Callable[..., CommandResult],
                                             figures: Any) -> None:
    figures.tried("argv over sshd + pct", 2)
    expected = [a.encode("utf-8") for a in args]
    on_host = through_sshd(["printf", "%s\\0", *args])
    assert on_host.stdout.split(b"\0")[:-1] == expected, on_host.stderr
    # In the container only the kit's tools exist: sh runs a fixed script, args stay data.
    in_container = through_sshd(["sh", "-c", 'printf "%s\\0" "$@"', "sh", *args], vmid=101)
    assert in_container.stdout.split(b"\0")[:-1] == expected, in_container.stderr
    found = canaries()
    for arg in args:
        figures.injection(arg, bool(found))
    assert found == []


@pytest.mark.parametrize("vmid", ["101; touch /tmp/x", "$(id)", "101\n102", "0x65", "1e2",
                                  "-1", "99", "101.5", "'101'", "`101`"])
def test_inventory_refuses_vmids_that_are_not_numbers(vmid: str, figures: Any) -> None:
    figures.tried("inventory loader")
    text = f"hosts:\n  pve1:\n    address: x\n    containers: [{json.dumps(vmid)}]\n"
    with pytest.raises(InventoryError):
        parse_inventory(text, "inv.yaml")


@pytest.mark.parametrize("field", ["env", "python"])
def test_inventory_refuses_nul_characters(field: str, figures: Any) -> None:
    figures.tried("inventory loader")
    value = '{A: "a\\0b"}' if field == "env" else '"/usr/bin/py\\0thon3"'
    text = f"hosts:\n  pve1:\n    address: x\n    probe_host: true\n    {field}: {value}\n"
    with pytest.raises(InventoryError):
        parse_inventory(text, "inv.yaml")


_PCT_HEADER = "VMID       Status     Lock         Name\n"


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(rows=st.lists(st.tuples(st.text(max_size=12), st.sampled_from(["running", "stopped"]),
                               st.text(max_size=12)), max_size=4))
def test_pct_list_gives_numeric_vmids_or_a_discovery_error(rows: Any, figures: Any) -> None:
    figures.tried("pct list parser")
    ascii_rows = [(v.encode("ascii", "ignore").decode(), s, n) for v, s, n in rows]
    text = _PCT_HEADER + "".join(f"{v:<10} {s:<10} {'':<12} {n:<20}\n" for v, s, n in ascii_rows)
    try:
        found = parse_pct_list(text)
    except DiscoveryError:
        return
    assert all(isinstance(c.vmid, int) and c.vmid >= 0 for c in found if not c.problem)
    # Every row is accounted for: parsed, or one entry that says why not.
    assert len(found) == len([line for line in text.splitlines()[1:] if line.strip()])


_HOSTILE_VMIDS = ["²", "١٠١", 101.7, True, -1, 10**12, "  101 ", "101\n"]


@pytest.mark.parametrize("vmid", _HOSTILE_VMIDS, ids=[repr(v) for v in _HOSTILE_VMIDS])
def test_discovered_vmids_are_checked_like_the_inventorys(vmid: Any, figures: Any) -> None:
    figures.tried("discovery")
    row = {"type": "lxc", "node": "pve1", "vmid": vmid, "status": "running", "id": "lxc/x"}
    try:
        found = containers_from_resources([row], "pve1", "pve1")
    except DiscoveryError:
        found = []
    good = [c for c in found if not c.problem]
    assert all(c.vmid is not None and 100 <= c.vmid <= 999_999_999 and c.vmid == vmid
               for c in good), found
    assert all(c.vmid is None for c in found if c.problem), found
    if isinstance(vmid, str):
        try:
            listed = parse_pct_list(f"{_PCT_HEADER}{vmid.strip():<10} running    ct\n")
        except DiscoveryError:
            listed = []
        assert all(str(c.vmid) == vmid.strip() for c in listed if not c.problem)


def teardown_module() -> None:
    for path in canaries():
        os.unlink(path)
