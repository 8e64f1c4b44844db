"""The host gatekeeper's refusal as the SSH transport reads it: its exit status and its line."""

from __future__ import annotations

from fleetcheck.host_setup import script_module
from fleetcheck.transport.gatekeeper_refusal import refusal_reason

GK = script_module()


def test_refusal_reason_names_the_gatekeeper() -> None:
    stderr = "fleetcheck-gatekeeper: refused: probe sha256 ab is not in /etc/f\n"
    assert refusal_reason(stderr, GK.EXIT_REFUSED) == (
        "refused by the host's fleetcheck gatekeeper: probe sha256 ab is not in /etc/f")
    assert refusal_reason(stderr, 1) is None
    assert refusal_reason("some probe said 77\n", GK.EXIT_REFUSED) is None
