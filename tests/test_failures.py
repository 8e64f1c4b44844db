"""Failures outside the probe carry an id where they happen; the verdict reads the id."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import pytest

from fleetcheck import failures
from fleetcheck.model import NodeResult, TritonVerdict
from fleetcheck.transport.interface import TransportError
from fleetcheck.transport.ssh import SshTransport
from fleetcheck.verdict import blocking_fix, failure_id
from tests.transport.sshserver import FakeHost, echo_stdin


def _node(status: str, reason: str, cause: str | None) -> NodeResult:
    return NodeResult(id="pve1", host="pve1", vmid=None, name="pve1", status=status,
                      reason=reason, triton=TritonVerdict(cause=cause))


def test_the_id_decides_whatever_the_wording_says() -> None:
    changed = _node("unreachable", "a sentence another version words otherwise",
                    failures.HOST_KEY_CHANGED)
    assert failure_id(changed) == failures.HOST_KEY_CHANGED
    assert "ssh-keygen -R HOST" in blocking_fix(changed)
    # Wording that reads like a host-key refusal does not override the id set at the source.
    plain = _node("unreachable", "host key for pve1 (x) is not in /k", failures.UNREACHABLE)
    assert failure_id(plain) == failures.UNREACHABLE
    assert blocking_fix(plain).startswith("check that the node is up")
    timed = _node("error", "anything", failures.TIMED_OUT)
    assert blocking_fix(timed).startswith("raise `timeout`")


def test_a_report_from_before_ids_is_read_by_its_wording() -> None:
    old = _node("unreachable", "host key for pve1 (10.0.0.1:22) is not in /root/.ssh/kh", None)
    assert failure_id(old) == failures.HOST_KEY_UNKNOWN


def test_an_unknown_host_key_is_refused_with_its_id(tmp_path: Path) -> None:
    fake = FakeHost(tmp_path, echo_stdin)

    async def main() -> TransportError:
        async with fake as spec:
            # Another known_hosts: the server's key is unknown there.
            other = tmp_path / "other_known_hosts"
            other.write_text("")
            spec = dataclasses.replace(spec, ssh=dataclasses.replace(
                spec.ssh, known_hosts=str(other)))
            ssh = SshTransport(spec)
            try:
                with pytest.raises(TransportError) as caught:
                    await ssh.run(["true"], timeout=10)
            finally:
                await ssh.close()
            return caught.value

    error = asyncio.run(main())
    assert (error.kind, error.cause) == ("unreachable", failures.HOST_KEY_UNKNOWN)
    assert "is not in" in str(error)
