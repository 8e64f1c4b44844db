"""fleetcheck's own known_hosts reading (transport/known_hosts.py) against asyncssh's, the one it
stands in for: wherever it is sure of a file, it finds for every host what asyncssh finds."""

from __future__ import annotations

import base64
import hashlib
import hmac
import random

import pytest

from fleetcheck.transport.known_hosts import KnownHostsText, Unsure, key_blob
from fleetcheck.transport.sshlib import asyncssh

pytestmark = pytest.mark.timeout(120)


def _line(key: asyncssh.SSHKey) -> str:
    return key.export_public_key("openssh").decode().strip()


@pytest.fixture(scope="module")
def keys() -> dict[str, list[str]]:
    """Key fields ("type base64 comment") of real keys, certificates and malformed ones."""
    made = {name: [asyncssh.generate_private_key(name) for _ in range(2)]
            for name in ("ssh-ed25519", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384",
                         "ecdsa-sha2-nistp521")}
    made["ssh-rsa"] = [asyncssh.generate_private_key("ssh-rsa", key_size=1024)]
    ca = made["ssh-ed25519"][1]
    certificate = ca.generate_host_certificate(made["ecdsa-sha2-nistp256"][0], "host",
                                               principals=["pve1"])
    plain = [_line(key) for found in made.values() for key in found]
    ed = made["ssh-ed25519"][0]
    ed_blob = ed.public_data
    ec_blob = bytearray(made["ecdsa-sha2-nistp256"][0].public_data)
    ec_blob[-1] ^= 1  # a point off the curve
    ed_line = _line(ed).split()[:2]
    rsa = made["ssh-rsa"][0].public_data
    size = int.from_bytes(rsa[11:15], "big")  # e's mpint after the type's string
    padded_e = rsa[:11] + (size + 1).to_bytes(4, "big") + b"\0" + rsa[15:]
    odd = [
        " ".join(ed_line) + " café",                                   # asyncssh skips it
        ed_line[0] + "\x1f" + ed_line[1],                              # not ASCII white space
        ed_line[0] + "\u00a0" + ed_line[1],
        "ssh-ed25519-cert-v01@openssh.com AAAA",                       # a certificate, bogus
        "ssh-rsa " + base64.b64encode(padded_e).decode(),              # e not minimal
        "ssh-ed25519 " + base64.b64encode(ed_blob[:-1]).decode(),      # truncated key
        "ssh-rsa " + base64.b64encode(ed_blob).decode(),               # type mismatch
        "ecdsa-sha2-nistp256 " + base64.b64encode(bytes(ec_blob)).decode(),
        "ssh-ed25519 !!notbase64!!",
        "ssh-dss AAAAB3NzaC1kc3MAAACBAP",
        "garbage",
        certificate.export_certificate("openssh").decode().strip(),
    ]
    return {"plain": plain, "odd": odd}


def _hashed(name: str, rng: random.Random) -> str:
    salt = rng.randbytes(20)
    digest = hmac.new(salt, name.encode(), hashlib.sha1).digest()
    return f"|1|{base64.b64encode(salt).decode()}|{base64.b64encode(digest).decode()}"


NAMES = ["pve1", "pve2", "10.0.0.5", "127.0.0.1", "::1", "gpu01.example", "[pve1]:2222",
         "[127.0.0.1]:2200", "[10.0.0.5]:22"]
PATTERNS = ["pve*", "gpu0?.example", "!pve2", "10.0.0.0/24", "*", "[pve1]:*", "127.0.0.*",
            "::/0", "[127.0.0.1]:22??", "!10.0.0.5", "pve[12]", "*.example", ""]
QUERIES = [("pve1", None), ("pve1", 2222), ("pve2", None), ("10.0.0.5", None),
           ("10.0.0.5", 2201), ("127.0.0.1", 2200), ("127.0.0.1", None), ("::1", None),
           ("gpu01.example", None), ("gpu01.example", 2022), ("other", None)]


def _random_file(rng: random.Random, keys: dict[str, list[str]], odd: bool) -> str:
    lines = []
    for _ in range(rng.randint(0, 8)):
        kind = rng.random()
        if kind < 0.45:
            host = ",".join(rng.sample(NAMES, rng.randint(1, 3)))
        elif kind < 0.7:
            host = ",".join(rng.sample(PATTERNS + NAMES, rng.randint(1, 3)))
        elif kind < 0.9:
            name = rng.choice(NAMES)
            host = _hashed(name, rng)
        else:
            host = rng.choice(["#comment", "", "|1|bad", "|2|abc|def"])
        marker = rng.choice(["", "", "", "", "@revoked ", "@cert-authority ", "@weird "])
        pool = keys["plain"] + (keys["odd"] if odd and rng.random() < 0.3 else [])
        lines.append(f"{marker}{host} {rng.choice(pool)}".strip())
    return "\n".join(lines) + "\n"


def _theirs(text: str, host: str, port: int | None) -> tuple[object, ...] | None:
    try:
        known = asyncssh.import_known_hosts(text)
    except ValueError:
        return None
    matched = known.match(host, "", port)
    return ([key.public_data for key in matched[0]], [key.public_data for key in matched[2]],
            bool(matched[1]) or any(matched[3:]), any(matched[:4]))


def _ours(text: str, host: str, port: int | None) -> tuple[object, ...] | str:
    try:
        found = KnownHostsText(text).match(host, port)
    except Unsure:
        return "unsure"
    return (list(found.keys), list(found.revoked), found.authorities, found.known)


@pytest.mark.parametrize("seed", range(12))
def test_where_it_is_sure_it_finds_what_asyncssh_finds(keys: dict[str, list[str]],
                                                        seed: int) -> None:
    rng = random.Random(seed)
    sure = 0
    for _ in range(40):
        text = _random_file(rng, keys, odd=rng.random() < 0.5)
        for host, port in QUERIES:
            ours, theirs = _ours(text, host, port), _theirs(text, host, port)
            if ours == "unsure":
                continue
            sure += 1
            assert theirs is not None, f"asyncssh refuses a file read here:\n{text}"
            assert ours == theirs, f"{host}:{port} in\n{text}"
    assert sure > 100  # the generator mostly makes files this reading is sure of


def test_the_common_files_are_read_here(keys: dict[str, list[str]]) -> None:
    # What ssh and ssh-keyscan write: plain, hashed, [host]:port, several types per host.
    ed, ec = keys["plain"][0], keys["plain"][2]
    rng = random.Random(1)
    text = (f"pve1 {ed}\n[127.0.0.1]:2200 {ec}\n{_hashed('gpu01', rng)} {ed}\n"
            f"10.0.0.5,pve2 {ec}\n@revoked pve9 {ec}\n")
    assert KnownHostsText(text).match("pve1", None).keys
    assert KnownHostsText(text).match("127.0.0.1", 2200).keys
    assert KnownHostsText(text).match("gpu01", None).keys
    assert KnownHostsText(text).match("pve9", None).revoked
    assert _ours(text, "pve2", 2222) == _theirs(text, "pve2", 2222)


@pytest.mark.parametrize("field", ["odd"])
def test_what_it_cannot_be_sure_of_is_left_to_asyncssh(keys: dict[str, list[str]],
                                                       field: str) -> None:
    for data in keys[field]:
        with pytest.raises(Unsure):
            KnownHostsText(f"pve1 {data}\n")
    for line in ("@weird pve1 " + keys["plain"][0], "|2|abc|def " + keys["plain"][0],
                 "fe80::1%eth0 " + keys["plain"][0], "nospace",
                 # asyncssh reads addresses through getaddrinfo(), which normalises these.
                 "\uff1a\uff1a1/128 " + keys["plain"][0], "*,!::\u00b9/128 " + keys["plain"][0]):
        with pytest.raises(Unsure):
            KnownHostsText(line + "\n").match("fe80::1%eth0", None)
    with pytest.raises(Unsure):
        KnownHostsText("pve* " + keys["plain"][0] + "\n").match("fe80::\uff11", None)


def test_a_key_is_taken_only_as_asyncssh_would_import_it(keys: dict[str, list[str]]) -> None:
    for data in keys["plain"]:
        algorithm, encoded = data.split()[:2]
        blob = base64.b64decode(encoded)
        assert key_blob(algorithm, blob) == blob
        assert asyncssh.import_public_key(data).public_data == blob
        with pytest.raises(Unsure):
            key_blob(algorithm, blob + b"\0")


def test_asyncssh_quirks_are_read_as_asyncssh_reads_them(keys: dict[str, list[str]]) -> None:
    rng = random.Random(2)
    ed, ec = keys["plain"][0], keys["plain"][2]
    cases = [
        # A revoked key for [host]:port does not stop the lookup without the port; a CA does.
        f"@revoked [pve1]:2222 {ec}\npve1 {ed}\n",
        f"@cert-authority [pve1]:2222 {ec}\npve1 {ed}\n",
        # An empty name (hashed, or between commas) is asyncssh's address field: every host.
        f"{_hashed('', rng)} {ec}\n",
        f"pve7,,pve8 {ec}\n",
    ]
    for text in cases:
        for host, port in QUERIES:
            assert _ours(text, host, port) == _theirs(text, host, port), f"{host}:{port}\n{text}"


def test_a_line_asyncssh_skips_is_never_one_read_here(keys: dict[str, list[str]]) -> None:
    # A key field with a non-ASCII comment is skipped by asyncssh: read here, it would hide the
    # host's other entries (the port's lookup stops at it) and its revocation.
    ed, ec = keys["plain"][0], keys["plain"][2]
    text = f"@revoked pve1 {ed}\n[pve1]:2222 {ed} café\n"
    assert _theirs(text, "pve1", 2222)[1] != []  # asyncssh: the key is revoked
    assert _ours(text, "pve1", 2222) == "unsure"
    assert _ours(f"[pve1]:2222 {ed} café\npve1 {ec}\n", "pve1", 2222) == "unsure"


def test_a_key_recorded_into_a_file_without_a_last_line_break_is_a_line_of_its_own(
        tmp_path, keys: dict[str, list[str]]) -> None:
    from fleetcheck.transport.ssh_hostkeys import HostKeyPlan, KnownHostsFiles

    ed, ec = keys["plain"][0], keys["plain"][2]
    path = tmp_path / "known_hosts"
    path.write_text(f"pve1 {ed}")  # no final newline
    store = KnownHostsFiles()
    plan = HostKeyPlan.for_host(store, (str(path),), "pve2", None, "accept-new")
    assert plan.trust_new and plan.own is not None
    blob = base64.b64decode(ec.split()[1])
    plan.record_blob(blob)
    assert path.read_text().splitlines() == [f"pve1 {ed}", f"pve2 {' '.join(ec.split()[:2])}"]
    # The audit's later hosts see both keys, through either reading; so does the next audit.
    for store_now in (store, KnownHostsFiles()):
        assert store_now.match_own((str(path),), "pve1", None).keys
        assert store_now.match_own((str(path),), "pve2", None).keys == (blob,)
        assert [key.public_data for key in store_now.match((str(path),), "pve2", None)[0]] == [
            blob]
