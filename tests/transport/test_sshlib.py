"""Importing asyncssh through fleetcheck does not run a compiler: asyncssh looks for liboqs with
ctypes.util.find_library, which on Linux falls back to gcc and ld (0.2 s per start)."""

from __future__ import annotations

import ctypes.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fleetcheck.transport.sshlib import ld_cache_only

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.timeout(60)


def test_ld_cache_only_is_scoped_to_its_block() -> None:
    original = ctypes.util.find_library
    with ld_cache_only():
        if sys.platform.startswith("linux"):
            assert ctypes.util.find_library is ctypes.util._findSoname_ldconfig
            assert ctypes.util.find_library("c")  # libc is in every ld cache
    assert ctypes.util.find_library is original


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
