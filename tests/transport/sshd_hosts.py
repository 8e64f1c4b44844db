"""A loopback fleet host as SshTransport sees it, and one command run on it, for the tests of
both SSH clients against the real sshd (test_ssh_sshd.py, test_ssh_libssh2.py)."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from fleetcheck.inventory_data.model import HostSpec, SshOptions
from fleetcheck.transport.interface import TransportError
from fleetcheck.transport.ssh import SshTransport
from tests.fleet import Fleet


def host_spec(fleet: Fleet, name: str, **ssh: object) -> HostSpec:
    """`name` on 127.0.0.1 with the fleet's key and known_hosts, no ssh_config; `ssh` sets
    any other option (`client` among them)."""
    options = SshOptions(user="root", port=fleet.hosts[name].port,
                         identity_file=str(fleet.client_key),
                         known_hosts=str(fleet.known_hosts), config_file="")
    return HostSpec(name=name, address="127.0.0.1",
                    ssh=dataclasses.replace(options, **ssh))  # type: ignore[arg-type]


async def run_once(transport: SshTransport, argv: list[str], **kwargs: object) -> object:
    """One command, then the transport closed."""
    try:
        return await transport.run(argv, **kwargs)  # type: ignore[arg-type]
    finally:
        await transport.close()


def unreachable_message(transport: SshTransport) -> tuple[str, str]:
    """The kind and text of the TransportError a command on `transport` meets."""
    with pytest.raises(TransportError) as caught:
        asyncio.run(run_once(transport, ["true"], timeout=10))
    return caught.value.kind, str(caught.value)
