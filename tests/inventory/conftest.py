"""Fixtures of the inventory tests: the Proxmox fixtures in tests/fixtures and the fake PVE API."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes.pve_api import FIXTURES_DIR, FakePveApi, serve_pve_api


@pytest.fixture
def fixtures_dir() -> Path:
    """tests/fixtures/proxmox: the fixtures ship with the tests, so a fresh clone has them."""
    assert (FIXTURES_DIR / "FIXTURES.md").is_file(), f"Proxmox fixtures missing: {FIXTURES_DIR}"
    return FIXTURES_DIR


@pytest.fixture
def pve_api(fixtures_dir: Path, tmp_path: Path) -> Iterator[FakePveApi]:
    """The fake Proxmox API over HTTPS on 127.0.0.1, serving those fixtures."""
    with serve_pve_api(FakePveApi(fixtures_dir), tmp_path / "tls") as api:
        yield api
