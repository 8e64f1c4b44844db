"""Fixtures of the inventory tests: the shared Proxmox fixtures and the fake PVE API."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fakes.pve_api import FIXTURES_DIR, FakePveApi, serve_pve_api


@pytest.fixture
def fixtures_dir() -> Path:
    """<repo>/../shared/fixtures/proxmox, where CI lays the shared fixtures."""
    if not (FIXTURES_DIR / "FIXTURES.md").is_file():
        pytest.skip(f"shared Proxmox fixtures not found at {FIXTURES_DIR}")
    return FIXTURES_DIR


@pytest.fixture
def pve_api(fixtures_dir: Path, tmp_path: Path) -> Iterator[FakePveApi]:
    """The fake Proxmox API over HTTPS on 127.0.0.1, serving the shared fixtures."""
    with serve_pve_api(FakePveApi(fixtures_dir), tmp_path / "tls") as api:
        yield api
