"""API discovery through proxmoxer against a real HTTPS server playing the Proxmox API."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import pytest

from fleetcheck.inventory import (
    ApiOptions,
    DiscoveredContainer,
    DiscoveryError,
    HostSpec,
    discover_via_api,
    targets_for_host,
)
from tests.fakes.pve_api import FakePveApi, serve_pve_api

TOKEN_ENV = "FLEETCHECK_TEST_PVE_TOKEN"


def host_for(api: FakePveApi, **changes: object) -> HostSpec:
    options = ApiOptions(
        url=api.url,
        user="fleet@pve",
        token_name="audit",
        token_env=TOKEN_ENV,
        verify_tls=str(api.ca_path),
        node="pve1",
        timeout=5.0,
    )
    return HostSpec(
        name="pve1",
        address="127.0.0.1",
        containers="all",
        labels=("fleet",),
        api=dataclasses.replace(options, **changes),  # type: ignore[arg-type]
    )


def discover(host: HostSpec) -> list[DiscoveredContainer]:
    return asyncio.run(discover_via_api(host))


def failure(host: HostSpec) -> DiscoveryError:
    with pytest.raises(DiscoveryError) as info:
        discover(host)
    return info.value


def test_lxc_of_this_node_only_with_tags_and_templates(
    pve_api: FakePveApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TOKEN_ENV, pve_api.secret)
    found = discover(host_for(pve_api))
    # cluster_resources_vm.json also holds qemu/200 on pve1 and lxc/201 on pve2.
    assert found == [
        DiscoveredContainer(101, "running", "gpu-worker-1", tags=("gpu", "prod")),
        DiscoveredContainer(102, "running", "gpu-worker-2", tags=("gpu",)),
        DiscoveredContainer(103, "stopped", "ci-runner", lock="backup"),
        DiscoveredContainer(9000, "stopped", "debian-13-tmpl", template=True),
    ]
    assert pve_api.requests == [
        ("GET", "/api2/json/nodes", True),
        ("GET", "/api2/json/cluster/resources?type=vm", True),
    ]
    nodes = targets_for_host(host_for(pve_api), found)
    assert [(n.id, type(n).__name__, n.labels) for n in nodes] == [
        ("pve1/101", "Target", ("fleet", "gpu", "prod")),
        ("pve1/102", "Target", ("fleet", "gpu")),
        ("pve1/103", "SkippedTarget", ("fleet",)),
        ("pve1/9000", "SkippedTarget", ("fleet",)),
    ]
    assert [getattr(n, "reason", None) for n in nodes] == [
        None,
        None,
        "container stopped, locked: backup",
        "template",
    ]


def test_old_hosts_send_vmids_as_strings_and_tags_with_any_separator(
    fixtures_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = [
        {
            "id": "lxc/101",
            "vmid": "101",
            "type": "lxc",
            "node": "pve1",
            "name": "a",
            "status": "running",
            "template": "0",
            "tags": "gpu, prod;team-a  x",
        },
        {"id": "lxc/100", "vmid": "100", "type": "lxc", "node": "pve1", "status": "stopped"},
    ]
    fake = FakePveApi(fixtures_dir, overrides={"/cluster/resources?type=vm": rows})
    with serve_pve_api(fake, tmp_path) as api:
        monkeypatch.setenv(TOKEN_ENV, api.secret)
        assert discover(host_for(api)) == [
            DiscoveredContainer(100, "stopped", "CT100"),
            DiscoveredContainer(101, "running", "a", tags=("gpu", "prod", "team-a", "x")),
        ]


def test_a_token_file(pve_api: FakePveApi, tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text(pve_api.secret + "\n")
    host = host_for(pve_api, token_env=None, token_file=str(token))
    assert [c.vmid for c in discover(host)] == [101, 102, 103, 9000]


def test_a_wrong_token_is_refused_and_never_shown(
    fixtures_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wrong = "0badc0de-0000-4000-8000-000000000000"
    with serve_pve_api(FakePveApi(fixtures_dir, unauthorized_delay=0.05), tmp_path) as api:
        monkeypatch.setenv(TOKEN_ENV, wrong)
        error = failure(host_for(api))
        assert str(error) == (
            f"pve1: Proxmox API {api.url}: 401 invalid token value!: token fleet@pve!audit "
            f"refused (check the secret in ${TOKEN_ENV})"
        )
        assert error.host == "pve1"
        assert api.requests == [("GET", "/api2/json/nodes", True)]
    for text in (str(error), repr(error), repr(error.args)):
        assert wrong not in text and api.secret not in text
    # Nothing chained: a traceback of this error shows no library frame holding the token.
    assert error.__cause__ is None and error.__context__ is None


def test_an_untrusted_certificate_is_a_clear_error(
    pve_api: FakePveApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TOKEN_ENV, pve_api.secret)
    error = failure(host_for(pve_api, verify_tls=True))
    assert str(error) == (
        f"pve1: Proxmox API {pve_api.url}: TLS certificate not trusted (self-signed "
        "certificate); set api.verify_tls to the cluster's CA file (/etc/pve/pve-root-ca.pem "
        "on any node)"
    )
    assert pve_api.secret not in repr(error)
    assert pve_api.requests == []  # the token never left this machine


def test_a_missing_ca_file(
    pve_api: FakePveApi, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TOKEN_ENV, pve_api.secret)
    missing = tmp_path / "nope.pem"
    error = failure(host_for(pve_api, verify_tls=str(missing)))
    assert str(error) == (
        f"pve1: Proxmox API {pve_api.url}: api.verify_tls: Could not find a suitable TLS CA "
        f"certificate bundle, invalid path: {missing}"
    )


@pytest.mark.parametrize(
    ("node", "problem"),
    [
        ("pve2", "node 'pve2' is offline"),
        ("pve9", "no node 'pve9' in the cluster (nodes: pve1, pve2); set api.node"),
    ],
)
def test_a_node_that_is_offline_or_unknown(
    pve_api: FakePveApi, monkeypatch: pytest.MonkeyPatch, node: str, problem: str
) -> None:
    monkeypatch.setenv(TOKEN_ENV, pve_api.secret)
    assert str(failure(host_for(pve_api, node=node))) == (
        f"pve1: Proxmox API {pve_api.url}: {problem}"
    )


def test_a_server_error_keeps_pve_s_reason(
    fixtures_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The fake answers PVE's 500 shape for an unknown container: proxmoxer keeps the reason.
    with serve_pve_api(FakePveApi(fixtures_dir), tmp_path) as api:
        monkeypatch.setenv(TOKEN_ENV, api.secret)
        from proxmoxer import ProxmoxAPI, ResourceException

        client = ProxmoxAPI(
            "127.0.0.1",
            port=int(api.url.rsplit(":", 1)[1]),
            user=api.user,
            token_name=api.token_name,
            token_value=api.secret,
            verify_ssl=str(api.ca_path),
        )
        with pytest.raises(ResourceException) as info:
            client.nodes("pve1").lxc(999).config.get()
        assert str(info.value) == (
            "500 Internal Server Error: Configuration file 'nodes/pve1/lxc/999.conf' does not exist"
        )
        # An endpoint the server lacks (501): the reason phrase reaches the message.
        api.overrides["/nodes"] = None
        api.overrides["/cluster/resources?type=vm"] = None
        error = failure(host_for(api))
    assert (
        str(error) == f"pve1: Proxmox API {api.url}: 501 Method 'GET /api2/json/nodes' not "
        "implemented"
    )


def test_nothing_listening(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    with socket.socket() as sock:  # a port that was free a moment ago and is closed now
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv(TOKEN_ENV, "not-the-secret")
    fake = FakePveApi(tmp_path, secret="not-the-secret")
    fake.url = f"https://127.0.0.1:{port}"
    assert str(failure(host_for(fake, verify_tls=True))) == (
        f"pve1: Proxmox API https://127.0.0.1:{port}: cannot connect: Connection refused"
    )


def test_the_token_variable_unset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    fake = FakePveApi(tmp_path)
    fake.url = "https://127.0.0.1:9"
    assert str(failure(host_for(fake))) == (
        f"pve1: api.token_env: environment variable {TOKEN_ENV} is not set"
    )


def test_an_unreadable_token_file(tmp_path: Path) -> None:
    fake = FakePveApi(tmp_path)
    fake.url = "https://127.0.0.1:9"
    missing = tmp_path / "token"
    host = host_for(fake, token_env=None, token_file=str(missing))
    assert str(failure(host)) == (
        f"pve1: api.token_file: cannot read {missing}: No such file or directory"
    )


def test_a_token_file_that_is_not_utf8_is_named_never_shown(tmp_path: Path) -> None:
    fake = FakePveApi(tmp_path)
    fake.url = "https://127.0.0.1:9"
    token = tmp_path / "token"
    token.write_bytes(b"s3cr3t-\xff\xfe-part")
    error = failure(host_for(fake, token_env=None, token_file=str(token)))
    assert str(error) == f"pve1: api.token_file: {token} is not UTF-8 text"
    assert error.__suppress_context__  # no traceback quoting the bytes either
    assert "s3cr3t" not in str(error)


def test_no_answer_within_the_timeout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    # A listener that accepts TCP but never speaks TLS: the handshake waits for the timeout.
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        monkeypatch.setenv(TOKEN_ENV, "not-the-secret")
        fake = FakePveApi(tmp_path, secret="not-the-secret")
        fake.url = f"https://127.0.0.1:{server.getsockname()[1]}"
        error = failure(host_for(fake, timeout=0.2, verify_tls=True))
    assert str(error) == f"pve1: Proxmox API {fake.url}: no answer within 0.2 s"


def test_a_host_without_api_section() -> None:
    host = HostSpec(name="pve1", address="x", containers="all")
    assert str(failure(host)) == "pve1: no api: section in the inventory"
