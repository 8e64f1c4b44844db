"""Owns the reading of the ld cache (glibc's /etc/ld.so.cache): whether a library may be in it,
without `ldconfig -p` or `ctypes.util.find_library`'s compiler runs (see sshlib.py)."""

from __future__ import annotations

#: The ld cache that `ldconfig -p` prints (glibc's LD_SO_CACHE).
LD_SO_CACHE = "/etc/ld.so.cache"


def in_ld_cache(name: str, cache: bytes | None) -> bool:
    """Whether `ldconfig -p` may list a library `name` (`find_library`'s `lib` + name + `.`):
    False only when no entry's name can begin so, the cache file being read (None: unknown)."""
    return cache is None or b"lib" + name.encode() + b"." in cache


def read_ld_cache() -> bytes | None:
    """The ld cache's bytes; None where it cannot be read."""
    try:
        with open(LD_SO_CACHE, "rb") as handle:
            return handle.read()
    except OSError:
        return None
