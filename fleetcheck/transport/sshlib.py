"""asyncssh, imported without find_library's compiler run and cryptography's warnings about it.

Importing asyncssh looks for liboqs (asyncssh.crypto.pq: `find_library("oqs")`, then
`find_library("liboqs")`, for the sntrup761 key exchange). On Linux, for a library that is not
in the ld cache, `ctypes.util.find_library` runs `ldconfig -p`, then gcc (compiling and linking
a test program), then `ld -t`: on a machine with gcc and ld that is seven processes at every
fleetcheck start (30 ms on an idle 2-core machine, much more on a busy one; docs/scaling.md),
paid again by each gate, health check and cron run.

While asyncssh is imported, `find_library` is given its first step alone, the ld-cache lookup:
a liboqs installed by a package (or put in the cache by ldconfig) is still found and used, as
the dynamic loader would find it; one found only on gcc's own search path is not. Every other
caller of `find_library` is unaffected: it is restored as soon as the import returns. That
lookup runs `ldconfig -p` once per name asked (oqs, liboqs, nettle...: three to five
processes at every start, 4 ms of CPU and up to 15 ms of a loaded 2-core machine's time); a name
that is nowhere in the cache file ldconfig prints is answered without it (`in_ld_cache`).

asyncssh's X.509 certificate support is left out the same way (`without_x509`): it imports
cryptography's whole x509 package (a fifth of asyncssh's import time) and then needs pyOpenSSL,
which fleetcheck does not depend on; OpenSSH has no X.509 certificates, and fleetcheck offers
none and accepts none (host keys are checked against known_hosts, client keys are plain keys
or OpenSSH certificates). asyncssh itself treats the module's absence as "no X.509 support".

cryptography's deprecation warnings that asyncssh's own code raises are ignored
(`quiet_asyncssh_deprecations`): cryptography 51 deprecates DSA, and asyncssh, at import and
again whenever it meets an ssh-dss key, names cryptography's DSA classes, which printed ten
lines of `CryptographyDeprecationWarning` before anything of fleetcheck's own (and took the
place of the gate's one line where its first line is a message, as a Slurm job's comment).
They are asyncssh's to act on, not the user's. The filter is narrow: that one category, raised
from asyncssh's modules; every other warning, fleetcheck's own included, is shown as before.
It stays for the process's life (not only the import) because asyncssh names those classes
again when it reads an ssh-dss key from known_hosts or an identity file.

Every module of fleetcheck imports asyncssh from here (`from fleetcheck.transport.sshlib
import asyncssh`), so whichever comes first takes this path.
"""

from __future__ import annotations

import contextlib
import ctypes.util
import sys
import warnings
from collections.abc import Iterator

from fleetcheck.transport.ldcache import in_ld_cache, read_ld_cache


@contextlib.contextmanager
def ld_cache_only() -> Iterator[None]:
    """`ctypes.util.find_library` as its ld-cache lookup alone, for the `with` block (Linux).

    Every name the lookup's regex can find (`lib` + name + `.` after white space) is a name the
    cache file holds, so a name absent from the file's bytes is None without `ldconfig -p`;
    any other is asked of `ldconfig -p` as before.
    """
    ld_cache = getattr(ctypes.util, "_findSoname_ldconfig", None)
    if not sys.platform.startswith("linux") or not callable(ld_cache):
        yield
        return
    cache = read_ld_cache()

    def lookup(name: str) -> str | None:
        return ld_cache(name) if in_ld_cache(name, cache) else None

    original = ctypes.util.find_library
    ctypes.util.find_library = lookup
    try:
        yield
    finally:
        ctypes.util.find_library = original


#: asyncssh's X.509 module (`asyncssh.crypto.x509`, imported under a `try`).
X509_MODULE = "asyncssh.crypto.x509"


@contextlib.contextmanager
def without_x509() -> Iterator[None]:
    """asyncssh imported without its X.509 module (see above); nothing else is affected: the
    block is lifted as soon as the import returns."""
    blocked = X509_MODULE not in sys.modules
    if blocked:
        sys.modules[X509_MODULE] = None  # type: ignore[assignment]  # import system: absent
    try:
        yield
    finally:
        if blocked and sys.modules.get(X509_MODULE, ...) is None:
            del sys.modules[X509_MODULE]


#: The modules whose cryptography deprecation warnings are ignored: asyncssh's own.
ASYNCSSH_MODULES = r"asyncssh(\.|$)"


def quiet_asyncssh_deprecations() -> None:
    """Ignore cryptography's deprecation warnings raised from asyncssh's modules (see above)."""
    try:
        from cryptography.utils import CryptographyDeprecationWarning
    except ImportError:  # a cryptography without the class warns with none of it
        return
    warnings.filterwarnings("ignore", category=CryptographyDeprecationWarning,
                            module=ASYNCSSH_MODULES)


quiet_asyncssh_deprecations()
with ld_cache_only(), without_x509():
    import asyncssh
    import asyncssh.config
    import asyncssh.encryption
    import asyncssh.mac

__all__ = ["asyncssh", "ld_cache_only"]
