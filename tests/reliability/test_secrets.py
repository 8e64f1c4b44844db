"""API tokens never appear in any output, report, history, log, or on the nodes: a token planted
in the environment variable the inventory names, every format, good and failing API calls."""

from __future__ import annotations

import gzip
import json
import logging
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleetcheck.cli import main
from tests.fakes.pve_api import FIXTURES_DIR, FakePveApi, serve_pve_api
from tests.fleet import Fleet, free_port

SECRET = f"5ec7e7-{uuid.uuid4()}"
TOKEN_ENV = "FLEETCHECK_RELIABILITY_TOKEN"
FORMATS = ("table", "html", "json", "junit", "prometheus")
SCENARIOS = ("accepted", "token-file", "wrong-token", "tls-untrusted", "api-down")

pytestmark = [pytest.mark.sshd, pytest.mark.timeout(120)]

RECORD_ENV = """#!{python}
import json, os, sys
sys.stdin.read()
with open({record!r}, "w") as handle:
    json.dump(dict(os.environ), handle)
print("not the probe")
"""


@pytest.fixture
def api_fleet(fleet: Fleet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
              ) -> Iterator[tuple[Fleet, FakePveApi]]:
    """pve1 over real sshd, its containers discovered through the fake Proxmox API."""
    fleet.add_host("pve1")
    cdir = fleet.add_container("pve1", 101, "healthy")
    spy = cdir / "bin" / "python3"
    spy.unlink()
    spy.write_text(RECORD_ENV.format(python=fleet.python, record=str(cdir / "environ.json")))
    spy.chmod(0o755)
    fleet.write_inventory(timeout=20)
    monkeypatch.setenv(TOKEN_ENV, SECRET)
    api = FakePveApi(fixtures_dir=FIXTURES_DIR, secret=SECRET, overrides={
        "/cluster/resources?type=vm": [
            {"id": "lxc/101", "vmid": 101, "node": "pve1", "type": "lxc", "status": "running",
             "name": "ct101"}]})
    with serve_pve_api(api, tmp_path / "pve-cert") as served:
        yield fleet, served


def _inventory(fleet: Fleet, api: FakePveApi, scenario: str, tmp_path: Path) -> Path:
    data = fleet.inventory_data(timeout=20)
    section: dict[str, Any] = {"url": api.url, "user": api.user, "token_name": api.token_name,
                               "token_env": TOKEN_ENV, "verify_tls": str(api.ca_path),
                               "timeout": 5}
    if scenario == "token-file":
        del section["token_env"]
        token_file = tmp_path / "token"
        token_file.write_text(SECRET + "\n")
        token_file.chmod(0o600)
        section["token_file"] = str(token_file)
    elif scenario == "wrong-token":
        api.secret = f"other-{uuid.uuid4()}"
    elif scenario == "tls-untrusted":
        section["verify_tls"] = True
    elif scenario == "api-down":
        section["url"] = f"https://127.0.0.1:{free_port()}"
    data["hosts"]["pve1"]["api"] = section
    path = tmp_path / "inventory.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _artefacts(root: Path) -> Iterator[tuple[str, bytes]]:
    """Every file under root (gzip opened), except the token file we wrote ourselves."""
    for folder, _, files in os.walk(root):
        for name in files:
            path = Path(folder) / name
            if name == "token" or path.is_symlink():
                continue
            data = path.read_bytes()
            if data[:2] == b"\x1f\x8b":
                data = gzip.decompress(data)
            yield str(path), data


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_token_never_appears_anywhere(scenario: str, api_fleet: tuple[Fleet, FakePveApi],
                                      tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                      caplog: pytest.LogCaptureFixture, figures: Any) -> None:
    fleet, api = api_fleet
    inventory = _inventory(fleet, api, scenario, tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    caplog.set_level(logging.DEBUG)
    codes = {}
    for fmt in FORMATS:
        codes[fmt] = main(["audit", str(inventory), "--format", fmt, "-o", str(out / f"r.{fmt}"),
                           "--no-progress", "--history", str(out / "history")])
    codes["stdout"] = main(["audit", str(inventory), "--no-progress"])
    codes["gate"] = main(["gate", str(inventory), "--json"])
    codes["inventory"] = main(["inventory", str(inventory), "--json"])
    captured = capsys.readouterr()
    texts = [("stdout", captured.out.encode()), ("stderr", captured.err.encode()),
             ("log", caplog.text.encode()),
             ("log records", "\n".join(repr(r.__dict__) for r in caplog.records).encode())]
    texts += list(_artefacts(tmp_path))
    texts += list(_artefacts(fleet.root))  # sshd logs, what the node saw (environ.json)
    leaks = [name for name, data in texts if SECRET.encode() in data]
    figures.secrets_scanned(leaks, artefacts=len(texts))
    assert leaks == []
    report = json.loads((out / "r.json").read_text())
    nodes = {node["id"]: node for node in report["nodes"]}
    if scenario in ("accepted", "token-file"):
        assert "pve1/101" in nodes and api.requests, nodes
        assert (fleet.hosts["pve1"].dir / "containers" / "101" / "environ.json").exists()
    else:
        assert nodes["pve1"]["status"] == "error", nodes
        assert "Proxmox API" in nodes["pve1"]["reason"]
        assert "\n" not in nodes["pve1"]["reason"]
        expected = {"wrong-token": "401", "tls-untrusted": "TLS", "api-down": "connect"}
        assert expected[scenario] in nodes["pve1"]["reason"], nodes["pve1"]["reason"]
    assert codes["inventory"] == 0 and codes["json"] in (1, 3), codes


def test_the_token_is_not_in_the_process_list_or_the_nodes_environment(
    api_fleet: tuple[Fleet, FakePveApi], tmp_path: Path, figures: Any
) -> None:
    """The secret stays in this process: no argv carries it, no node's environment holds it."""
    fleet, api = api_fleet
    inventory = _inventory(fleet, api, "accepted", tmp_path)
    main(["audit", str(inventory), "--format", "json", "-o", str(tmp_path / "r.json"),
          "--no-progress"])
    environ = json.loads((fleet.hosts["pve1"].dir / "containers" / "101" /
                          "environ.json").read_text())
    seen = [f"node environment {k}" for k, v in environ.items() if SECRET in v or k == TOKEN_ENV]
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if SECRET.encode() in (entry / "cmdline").read_bytes():
                    seen.append(f"argv of pid {entry.name}")
            except OSError:
                continue
    figures.secrets_scanned(seen, artefacts=2)
    assert seen == []
