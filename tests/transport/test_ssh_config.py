"""ssh_config resolved per host, against the real OpenSSH client's `ssh -G HOST -F FILE`.

Each row is a host name (and the inventory's user/port/known_hosts, passed to ssh as `-l`, `-p`
and `-o`); what fleetcheck resolves must be what OpenSSH prints for it. Algorithm lists are
compared through OpenSSH's own defaults (`ssh -G -F none`): `+`, `-` and `^` applied to them
must give the list ssh prints.

OpenSSH takes `~`, `%d`, `%u` and its default files from the passwd entry, never from `$HOME`
or `$USER`: the expected paths here are the passwd entry's too, and every row passes whatever
`HOME` and `USER` the suite runs under (CI runs it under a made-up `HOME` and `USER=nobody`).
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
from pathlib import Path

import pytest

from fleetcheck.transport.ssh_config import (
    Resolved,
    SshConfig,
    SshConfigError,
    algorithm_list,
)

pytestmark = pytest.mark.skipif(shutil.which("ssh") is None, reason="needs the OpenSSH client")

CONFIG = """\
# Comments, blank lines and `=` are read as OpenSSH reads them.
Host node1 node1-alias
    HostName 10.0.0.1
    Port 2201
    User alice
    IdentityFile ~/.ssh/%h-%p-%r.key
    IdentityFile /keys/second
    UserKnownHostsFile ~/kh/%h_%p known2
    StrictHostKeyChecking accept-new
    ConnectTimeout 7

Host node2
    HostName %h.cluster.example
    Port=2202
    IdentitiesOnly yes
    ProxyJump jump@bastion:2222,other
    Ciphers aes256-ctr,aes128-gcm@openssh.com
    MACs +hmac-sha1
    KexAlgorithms -sntrup*,diffie-hellman-group14-sha256

Host NODE3
    Port 2203

Host node* !node9
    User fallback
    Port 9999
    StrictHostKeyChecking no
    HostKeyAlgorithms ^ssh-ed25519
    UserKnownHostsFile "/known-hosts/%n_%C" %d/%u-%i-%L-%l-%k
    GlobalKnownHostsFile /etc/fleet_known_hosts

Match host *.cluster.example user fallback
    ConnectTimeout 3

Match originalhost node4 exec "test %p = 9999"
    User fromexec

Match !host node5,node6 all
    Ciphers chacha20-poly1305@openssh.com

Include {include}

Host *
    User last
    IdentityFile ~/.ssh/id_default
    StrictHostKeyChecking yes
    ProxyJump none

# Read again once the rest is settled (OpenSSH's second pass), HostName already applied.
Match final host 10.0.0.1 originalhost node1-alias
    IdentitiesOnly yes
    IdentityFile ~/.ssh/final-%h
"""

INCLUDED = """\
Host node5
    HostName included.example
    UserKnownHostsFile none
Host node7
    KexAlgorithms ^curve25519-sha256
    HostKeyAlias node7-key
"""

#: (host, user, port, known_hosts): the inventory's values, None where it names none.
ROWS = [
    ("node1", None, None, None),
    ("node1-alias", None, None, None),
    ("node1", "bob", 33, None),
    ("node2", None, None, None),
    ("node2", None, None, "/inventory/known_hosts"),
    ("NODE3", None, None, None),
    ("node3", None, None, None),
    ("node4", None, None, None),
    ("node5", None, None, None),
    ("node6", None, None, None),
    ("node7", None, None, None),
    ("node9", None, None, None),
    ("elsewhere", None, None, None),
    ("elsewhere", "carol", 2222, None),
]

ALGORITHMS = {"ciphers": "cipher", "macs": "mac", "kexalgorithms": "kex",
              "hostkeyalgorithms": "HostKeyAlgorithms"}


def passwd_home() -> str:
    """The home OpenSSH uses: the passwd entry's, whatever `HOME` says."""
    return pwd.getpwuid(os.getuid()).pw_dir


def ssh_g(config: Path | str, host: str, *extra: str) -> dict[str, list[str]]:
    """`ssh -G`'s answer: each option (lower case) to its values, one per line it printed."""
    out = subprocess.run(["ssh", "-G", "-F", str(config), *extra, host], check=True,
                         capture_output=True, text=True).stdout
    found: dict[str, list[str]] = {}
    for line in out.splitlines():
        key, _, value = line.partition(" ")
        found.setdefault(key, []).append(value)
    return found


def openssh_expand(path: str, shown: dict[str, list[str]]) -> str:
    """The reference for IdentityFile tokens (ssh -G prints them unexpanded)."""
    values = {"h": shown["hostname"][0], "p": shown["port"][0], "r": shown["user"][0]}
    text = passwd_home() + path[1:] if path.startswith("~/") else path
    for token, value in values.items():
        text = text.replace(f"%{token}", value)
    return text.replace("%%", "%")


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("ssh_config")
    (root / "extra.d").mkdir()
    (root / "extra.d" / "one.conf").write_text(INCLUDED)
    config = root / "config"
    config.write_text(CONFIG.format(include=root / "extra.d" / "*.conf"))
    return config


@pytest.fixture(scope="module")
def defaults(written: Path) -> dict[str, list[str]]:
    return ssh_g("none", "any")


@pytest.fixture(scope="module")
def available() -> dict[str, list[str]]:
    return {key: subprocess.run(["ssh", "-Q", query], check=True, capture_output=True,
                                text=True).stdout.split()
            for key, query in ALGORITHMS.items()}


@pytest.mark.parametrize(("host", "user", "port", "known_hosts"), ROWS)
def test_each_host_resolves_as_ssh_G_shows_it(
    written: Path, defaults: dict[str, list[str]], available: dict[str, list[str]],
    host: str, user: str | None, port: int | None, known_hosts: str | None,
) -> None:
    extra: list[str] = []
    first: dict[str, object] = {}
    if user:
        extra += ["-l", user]
    if port:
        extra += ["-p", str(port)]
    if known_hosts:
        extra += ["-o", f"UserKnownHostsFile={known_hosts}"]
        first["UserKnownHostsFile"] = (known_hosts,)
    shown = ssh_g(written, host, *extra)
    got = SshConfig([str(written)]).resolve(host, user=user, port=port, first=first)

    assert got.hostname == shown["hostname"][0]
    assert got.port == int(shown["port"][0])
    assert got.user == shown["user"][0]
    assert got.identities_only == (shown["identitiesonly"][0] == "yes")
    if got.identity_files:
        assert list(got.identity_files) == [openssh_expand(f, shown)
                                            for f in shown["identityfile"]]
    else:  # none named: OpenSSH's default keys (SshFiles gives them, tested below)
        assert shown["identityfile"] == defaults["identityfile"]
    known = shown["userknownhostsfile"][0]
    assert got.user_known_hosts == (() if known == "none" else tuple(known.split(" ")))
    assert got.global_known_hosts == tuple(shown["globalknownhostsfile"][0].split(" "))
    strict = {"true": "yes", "false": "no"}.get(*shown["stricthostkeychecking"] * 2)
    assert got.strict_host_key_checking == strict
    assert got.proxy_jump == (shown["proxyjump"][0] if "proxyjump" in shown else None)
    assert got.host_key_alias == (shown["hostkeyalias"][0] if "hostkeyalias" in shown else None)
    timeout = shown["connecttimeout"][0]
    assert got.connect_timeout == (None if timeout == "none" else float(timeout))
    for key, setting in (("ciphers", got.ciphers), ("macs", got.macs),
                         ("kexalgorithms", got.kex_algorithms),
                         ("hostkeyalgorithms", got.host_key_algorithms)):
        assert algorithm_list(setting, defaults[key][0].split(","), available[key]) == \
            shown[key][0].split(","), key


def test_a_quoted_path_with_a_space_is_one_file(tmp_path: Path) -> None:
    # (ssh -G joins the files with spaces, so this row cannot be read back from it.)
    config = tmp_path / "config"
    config.write_text('Host *\n    UserKnownHostsFile "/known hosts/%n" second\n')
    got = SshConfig([str(config)]).resolve("node3")
    assert isinstance(got, Resolved)
    assert got.user_known_hosts == ("/known hosts/node3", "second")


def test_a_host_line_of_plain_names_is_indexed_not_scanned(tmp_path: Path) -> None:
    # 2,000 blocks: resolving one host visits its own block and the pattern blocks only.
    lines = [f"Host n{i}\n    Port {10000 + i}\n" for i in range(2000)]
    config = tmp_path / "config"
    config.write_text("".join(lines) + "Host n*\n    User everyone\n")
    parsed = SshConfig([str(config)])
    assert parsed._candidates("n1234") == sorted({*parsed._general,
                                                  *parsed._by_name["n1234"]})
    assert len(parsed._candidates("n1234")) <= 4
    got = parsed.resolve("n1234")
    assert (got.port, got.user) == (11234, "everyone")
    shown = ssh_g(config, "n1234")
    assert (shown["port"], shown["user"]) == (["11234"], ["everyone"])


@pytest.mark.parametrize(("text", "problem"), [
    ("Host a\n    Port many\n", "line 2: Port must be a number, got 'many'"),
    ("Host a\n    StrictHostKeyChecking maybe\n",
     "line 2: StrictHostKeyChecking must be yes, no, ask or accept-new, got 'maybe'"),
    ("Match localnetwork 10.0.0.0/8\n", "line 1: unsupported Match criterion 'localnetwork'"),
    ("Host a\n    HostName \"unclosed\n", "line 2: No closing quotation"),
    ("Host a\n    UserKnownHostsFile ~/%z\n", "line 2: unknown token %z in"),
])
def test_a_line_openssh_refuses_is_one_line_naming_file_and_line(
    tmp_path: Path, text: str, problem: str,
) -> None:
    config = tmp_path / "config"
    config.write_text(text)
    with pytest.raises(SshConfigError) as caught:
        SshConfig([str(config)]).resolve("a")
    assert str(caught.value).startswith(f"ssh_config {config} {problem}")
    # OpenSSH refuses the same file (exit 255), so the row is not a guess about ssh.
    ran = subprocess.run(["ssh", "-G", "-F", str(config), "a"], capture_output=True, text=True)
    assert ran.returncode == 255


def test_a_passphrase_key_from_ssh_config_is_skipped_but_the_inventorys_must_load(
    tmp_path: Path,
) -> None:
    from fleetcheck.transport.interface import TransportError
    from fleetcheck.transport.ssh_settings import SshFiles

    locked, plain = tmp_path / "locked", tmp_path / "plain"
    for path, phrase in ((locked, "secret"), (plain, "")):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", phrase, "-f", str(path)],
                       check=True)
    files = SshFiles()
    # From ssh_config: the agent may hold the locked one; the plain one is offered.
    keys = files.client_keys((str(locked), str(plain), str(tmp_path / "gone")))
    assert [key.get_comment_bytes() is not None for key in keys] == [True]
    with pytest.raises(TransportError, match=r"cannot load SSH key .*locked: Passphrase"):
        files.client_keys((str(locked),), str(locked))


@pytest.fixture
def other_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """`HOME` and `USER` unlike the passwd entry's (as under `sudo -E`, cron, a unit file),
    with files of its own that OpenSSH must not read."""
    home = tmp_path / "other-home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "config").write_text("Host *\n    Port 2999\n    User from-home\n")
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f",
                    str(home / ".ssh" / "id_ed25519")], check=True)
    assert str(home) != passwd_home()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("USER", "someone-else")
    monkeypatch.setenv("LOGNAME", "someone-else")
    return home


def test_tilde_percent_d_and_u_are_the_passwd_entrys_not_HOME_or_USER(
    tmp_path: Path, other_home: Path,
) -> None:
    config = tmp_path / "config"
    config.write_text("Host *\n    UserKnownHostsFile ~/kh %d/kh-%u\n"
                      "    IdentityFile ~/key-%d\n")
    shown = ssh_g(config, "node1")
    got = SshConfig([str(config)]).resolve("node1")
    entry = pwd.getpwuid(os.getuid())
    assert got.user_known_hosts == tuple(shown["userknownhostsfile"][0].split(" ")) == (
        f"{entry.pw_dir}/kh", f"{entry.pw_dir}/kh-{entry.pw_name}")
    assert got.user == shown["user"][0] == entry.pw_name
    # ssh -G prints IdentityFile unexpanded; OpenSSH loads it from the passwd home.
    assert shown["identityfile"] == ["~/key-%d"]
    assert got.identity_files == (f"{entry.pw_dir}/key-{entry.pw_dir}",)


def test_the_default_files_are_the_passwd_homes_not_HOMEs(other_home: Path) -> None:
    from fleetcheck.inventory_data.model import HostSpec, SshOptions
    from fleetcheck.transport.ssh_settings import SshFiles

    home = passwd_home()
    # No -F: OpenSSH's own pair of files, ~/.ssh/config from the passwd home.
    out = subprocess.run(["ssh", "-G", "node1"], check=True, capture_output=True,
                         text=True).stdout
    shown = {key: value for key, _, value in (line.partition(" ") for line in out.splitlines())
             if key in ("port", "user", "userknownhostsfile")}
    shown_keys = [line.partition(" ")[2] for line in out.splitlines()
                  if line.startswith("identityfile ")]
    assert SshConfig.for_option(None).paths == tuple(
        p for p in (f"{home}/.ssh/config", "/etc/ssh/ssh_config") if os.path.isfile(p))
    settings = SshFiles().settings(HostSpec(name="node1", address="node1", ssh=SshOptions()))
    # $HOME/.ssh/config (Port 2999, User from-home) is not the one read.
    assert (settings.port, settings.user) == (int(shown["port"]), shown["user"])
    assert (settings.port, settings.user) != (2999, "from-home")
    # known_hosts and the keys offered: the passwd home's, as `ssh -G` lists them.
    assert settings.known_hosts[:2] == tuple(shown["userknownhostsfile"].split(" ")) == (
        f"{home}/.ssh/known_hosts", f"{home}/.ssh/known_hosts2")
    assert shown_keys and all(path.startswith("~/") for path in shown_keys)
    # In OpenSSH's order; an OpenSSH that has dropped a key type (id_dsa in 10.0) lists fewer.
    expected = [os.path.join(home, path[2:]) for path in shown_keys]
    assert [path for path in settings.identity_files if path in expected] == expected
    assert all(path.startswith(f"{home}/.ssh/id_") for path in settings.identity_files)
    assert not any(path.startswith(str(other_home)) for path in settings.identity_files)


def test_the_inventorys_tilde_is_the_passwd_homes_too(
    tmp_path: Path, other_home: Path,
) -> None:
    """`identity_file: ~/k` as `ssh -i '~/k'` and `-o UserKnownHostsFile=~/kh` read it."""
    from fleetcheck.inventory import parse_inventory
    from fleetcheck.transport.ssh_settings import SshFiles

    text = ("defaults:\n  ssh: {identity_file: ~/k, known_hosts: ~/kh, config_file: none}\n"
            "hosts:\n  node1: {address: node1, probe_host: true}\n")
    host = parse_inventory(text, str(tmp_path / "inventory.yaml")).hosts[0]
    home = passwd_home()
    assert (host.ssh.identity_file, host.ssh.known_hosts) == (f"{home}/k", f"{home}/kh")
    settings = SshFiles().settings(host)
    shown = ssh_g("none", "node1", "-o", "UserKnownHostsFile=~/kh")
    assert settings.known_hosts[:1] == tuple(shown["userknownhostsfile"]) == (f"{home}/kh",)
    assert settings.identity_files == (f"{home}/k",)
