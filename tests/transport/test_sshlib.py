"""Importing asyncssh through fleetcheck does not run a compiler: asyncssh looks for liboqs with
ctypes.util.find_library, which on Linux falls back to gcc and ld (0.2 s per start); and prints
no warning of cryptography's about asyncssh's own code, while every other warning shows."""

from __future__ import annotations

import ctypes.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fleetcheck.transport.ldcache import in_ld_cache
from fleetcheck.transport.sshlib import ld_cache_only

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.timeout(60)


def test_ld_cache_only_is_scoped_to_its_block() -> None:
    original = ctypes.util.find_library
    with ld_cache_only():
        if sys.platform.startswith("linux"):
            assert ctypes.util.find_library is not original
            assert ctypes.util.find_library("c")  # libc is in every ld cache
    assert ctypes.util.find_library is original


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the ld cache is Linux's")
def test_a_name_the_ld_cache_lacks_is_answered_without_ldconfig(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # `ldconfig -p` is a process per name; a name whose bytes the cache file does not hold
    # cannot be in its listing, and every other name is still asked of it.
    asked: list[str] = []

    def ldconfig(name: str) -> str:
        asked.append(name)
        return f"lib{name}.so.1"

    monkeypatch.setattr(ctypes.util, "_findSoname_ldconfig", ldconfig)
    with ld_cache_only():
        assert ctypes.util.find_library("fleetcheck-no-such-lib") is None
        assert ctypes.util.find_library("c") == "libc.so.1"
    assert asked == ["c"]


def test_in_ld_cache_reads_the_names_the_listing_can_show() -> None:
    cache = b"glibc-ld.so.cache1.1\x00libnettle.so.8\x00/usr/lib/x86_64-linux-gnu/liboqs\x00"
    assert in_ld_cache("nettle", cache)
    assert in_ld_cache("oqs", None)  # no cache file read: ask ldconfig
    # "liboqs" without the "." of a soname (a folder's name) is no library of that name.
    assert not in_ld_cache("oqs", cache)
    assert not in_ld_cache("liboqs", cache)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="find_library's gcc is Linux's")
def test_importing_the_ssh_transport_runs_no_compiler(tmp_path: Path) -> None:
    # A gcc, cc and ld first on PATH that record being run: ctypes.util.find_library("oqs")
    # runs them when liboqs is not in the ld cache, and asyncssh asks for it at import.
    fakebin = tmp_path / "bin"
    fakebin.mkdir()
    ran = tmp_path / "ran"
    for tool in ("gcc", "cc", "ld"):
        script = fakebin / tool
        script.write_text(f'#!/bin/sh\necho {tool} "$@" >> "{ran}"\nexit 1\n')
        script.chmod(0o755)
    env = dict(os.environ, PATH=f"{fakebin}{os.pathsep}{os.environ.get('PATH', '')}",
               PYTHONPATH=str(REPO))
    probe = ("import ctypes.util, sys\n"
             "assert 'asyncssh' not in sys.modules\n"
             "import fleetcheck.transport.ssh\n"
             "assert 'asyncssh' not in sys.modules, 'imported before a connection needs it'\n"
             "import fleetcheck.transport.sshlib\n"
             "assert 'asyncssh' in sys.modules\n"
             "ctypes.util.find_library('fleetcheck-no-such-lib')\n")
    done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    # The last line shows the fake tools do run for any other caller (the test can fail):
    # find_library is itself again once the import is done.
    assert ran.read_text().split("\n")[0].split()[0] == "gcc"
    assert "oqs" not in ran.read_text()


def test_asyncssh_is_imported_without_its_x509_module() -> None:
    # cryptography's x509 package is not loaded for asyncssh's sake, and the block is lifted
    # once the import is done: a later import of the module itself still works.
    probe = ("import sys\n"
             "import fleetcheck.transport.ssh\n"
             "from fleetcheck.transport.sshlib import X509_MODULE, asyncssh\n"
             "assert 'cryptography.x509' not in sys.modules, 'x509 loaded'\n"
             "assert X509_MODULE not in sys.modules, 'block left behind'\n"
             "assert not asyncssh.public_key._x509_available\n"
             "assert asyncssh.connect and asyncssh.kex.get_kex_algs()\n"
             "import cryptography.x509\n")
    done = subprocess.run([sys.executable, "-c", probe], env=dict(os.environ, PYTHONPATH=str(REPO)),
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr


#: An ssh-dss public key: asyncssh names cryptography's deprecated DSA classes to read it.
DSA_KEY = ("ssh-dss "
           "AAAAB3NzaC1kc3MAAACBAOCZnqYsgIaxPqQ/7qysj+fJ4YvQimkwRQdQ36YJ0gIbSuajPrXSkrS3jYk+bcqh"
           "5Ikj69i+AG4gysKkRU46QgQDlfKvOWnRHHwrscINmXUCXlGaF4tm++erOO4blFdrlH2Z04IID7YUV0DzFZFP"
           "cEQsTyjwWYksqjyBOJ+ZTHpZAAAAFQD4D14ubGGamxjawS1R3qhIb2m9JwAAAIAgZw1EPGavLg/cnXGqR17J"
           "et6/9LbeTuOH8VdC78uysT4Cj38DQcZImCLArNKcpUyCxOKuNWPuyw03lSD75dRWi/aRRh0KsG5jTZYt5NdQ"
           "50LQxYZTZL8rNDLmla1j+Hj36iGEXJsRME1/yBJa2+VYTjQ982u7LQOfhuPxku54tgAAAIEAzAeY9V6f2teE"
           "5hAMK2KTkOCiagJAfmTcrMfTtcCRv4mCgeZHmMtzf2CGYMjNgaL1rsD1m77SWOZuZh3XAhgXRUuBm6jE5Wu4"
           "x/lqi33/eBVGnwmagHN3wMBFK6P4MJoN2ISbvQFGspH6ddHLQZQ6CJqNcqSVfucfRAcD7vfl5fo=")


def run_python(probe: str, *options: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *options, "-c", probe],
                          env=dict(os.environ, PYTHONPATH=str(REPO)), capture_output=True,
                          text=True, timeout=60, check=False)


def test_asyncssh_warns_of_deprecated_dsa_neither_at_import_nor_at_use() -> None:
    # Under -W error any warning is an exception. cryptography 51 deprecates DSA; asyncssh names
    # its classes at import and again when it reads an ssh-dss key (here, a known_hosts line).
    probe = ("from fleetcheck.transport.sshlib import asyncssh\n"
             f"assert asyncssh.import_known_hosts('gpu01 {DSA_KEY}\\n')\n")
    done = run_python(probe, "-W", "error")
    assert (done.returncode, done.stderr) == (0, ""), done.stderr


def test_only_asyncssh_modules_cryptography_deprecations_are_ignored() -> None:
    # The same category raised from anywhere else is shown as Python shows it: fleetcheck's
    # own modules, the user's script, a module whose name merely starts with "asyncssh".
    probe = ("import warnings\n"
             "from fleetcheck.transport.sshlib import asyncssh\n"
             "from cryptography.utils import CryptographyDeprecationWarning as Deprecated\n"
             "for module in ('asyncssh', 'asyncssh.crypto.dsa'):\n"
             "    warnings.warn_explicit('hidden', Deprecated, 'a.py', 1, module=module)\n"
             "for module in ('fleetcheck.transport.ssh', '__main__', 'asyncsshd'):\n"
             "    warnings.warn_explicit('shown', Deprecated, 'b.py', 2, module=module)\n"
             "warnings.warn_explicit('shown', UserWarning, 'c.py', 3, module='asyncssh.misc')\n")
    done = run_python(probe, "-W", "always")
    assert done.returncode == 0, done.stderr
    assert "hidden" not in done.stderr
    assert done.stderr.count("CryptographyDeprecationWarning: shown") == 3, done.stderr
    assert done.stderr.count("UserWarning: shown") == 1, done.stderr
