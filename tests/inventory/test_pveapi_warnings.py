"""`verify_tls: false` prints no urllib3 warning: fleetcheck ignores InsecureRequestWarning itself
(pveapi.quiet_unverified_tls), not through proxmoxer's process-wide silencing of urllib3."""

from __future__ import annotations

import warnings

import pytest

from tests.fakes.pve_api import FakePveApi
from tests.inventory.test_pveapi import TOKEN_ENV, discover, host_for


def test_an_unverified_api_is_read_without_urllib3s_warning(
    pve_api: FakePveApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    # proxmoxer's https backend disables urllib3's warnings when it is first imported: import it
    # now, so that the filters set below are the ones in force.
    import proxmoxer.backends.https  # noqa: F401

    monkeypatch.setenv(TOKEN_ENV, pve_api.secret)
    with warnings.catch_warnings():
        warnings.resetwarnings()
        warnings.simplefilter("error")  # every warning an exception, proxmoxer's filter gone
        found = discover(host_for(pve_api, verify_tls=False))
    assert [container.vmid for container in found] == [101, 102, 103, 9000]
