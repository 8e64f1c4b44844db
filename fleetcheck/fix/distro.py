"""Distribution families: /etc/os-release facts -> package manager, package names, install argv.

Owns the per-family table (apt, dnf, apk, zypper) and the strict check every package name
passes before it goes into a command: names are built from the probe's facts (a Python
version), and a node's facts are input from that node, never trusted.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: Debian policy's package name rule (lower case, digits, + - .), which the other families'
#: names used here also satisfy. Anything else never reaches a command line.
PACKAGE_NAME = re.compile(r"^[a-z0-9][a-z0-9+.-]{0,99}$")
#: A Python version as the probe reports it ("3.12.3"); only major.minor is used.
_PYTHON_VERSION = re.compile(r"^(\d{1,2})\.(\d{1,3})(?:\.\d{1,4})?(?:[abc]|rc)?\d{0,3}\+?$")
#: Texts stay English (the package managers' messages are read back and shown as they are).
LOCALE = "LC_ALL=C"


class UnsafeName(ValueError):
    """A package name built from a node's facts does not pass PACKAGE_NAME."""


@dataclass(frozen=True)
class Family:
    """One package-manager family: how it installs, and its names for what a fix needs."""

    name: str
    manager: str
    #: argv before the package names (an `env` prefix sets the locale and non-interactivity).
    install: tuple[str, ...]
    #: Commands run before the install (apt's package lists may be empty in a fresh container).
    refresh: tuple[tuple[str, ...], ...]
    compiler: tuple[str, ...]
    linker: tuple[str, ...]
    libc_headers: tuple[str, ...]
    #: Python headers package, `{xy}` = "3.12", `{x}{y}` style as `{xy_compact}` = "312".
    python_headers: str
    #: What Triton needs that the family cannot give (printed, never run).
    caveat: str = ""


FAMILIES: dict[str, Family] = {
    "apt": Family(
        name="debian", manager="apt-get",
        install=("env", LOCALE, "DEBIAN_FRONTEND=noninteractive", "apt-get", "install", "-y",
                 "--no-install-recommends", "--no-upgrade"),
        refresh=(("env", LOCALE, "DEBIAN_FRONTEND=noninteractive", "apt-get", "update"),),
        compiler=("gcc", "libc6-dev"), linker=("binutils",), libc_headers=("libc6-dev",),
        python_headers="python{xy}-dev",
    ),
    "dnf": Family(
        name="rhel", manager="dnf",
        install=("env", LOCALE, "dnf", "install", "-y", "--setopt=install_weak_deps=False"),
        refresh=(),
        compiler=("gcc", "glibc-devel"), linker=("binutils",), libc_headers=("glibc-devel",),
        python_headers="python{xy}-devel",
    ),
    "apk": Family(
        name="alpine", manager="apk",
        install=("env", LOCALE, "apk", "add", "--no-cache"),
        refresh=(),
        compiler=("gcc", "musl-dev"), linker=("binutils",), libc_headers=("musl-dev",),
        python_headers="python3-dev",
        caveat="PyPI publishes no musllinux Triton wheel: Triton itself cannot run on Alpine",
    ),
    "zypper": Family(
        name="suse", manager="zypper",
        install=("env", LOCALE, "zypper", "--non-interactive", "install", "--no-recommends"),
        refresh=(),
        compiler=("gcc", "glibc-devel"), linker=("binutils",), libc_headers=("glibc-devel",),
        python_headers="python{xy_compact}-devel",
    ),
}

#: os-release ID (then each ID_LIKE word) -> family key.
_BY_ID = {
    "debian": "apt", "ubuntu": "apt",
    "rhel": "dnf", "fedora": "dnf", "centos": "dnf", "rocky": "dnf", "almalinux": "dnf",
    "ol": "dnf", "amzn": "dnf",
    "alpine": "apk",
    "suse": "zypper", "opensuse": "zypper", "sles": "zypper", "opensuse-leap": "zypper",
    "opensuse-tumbleweed": "zypper",
}
#: Releases whose package manager is yum and whose glibc is older than Triton's wheels need.
_TOO_OLD = {("amzn", "2"), ("centos", "7"), ("rhel", "7")}


def os_facts(facts: Mapping[str, Any]) -> tuple[str, tuple[str, ...], str]:
    """(ID, ID_LIKE words, VERSION_ID) from the probe's `os` fact, "" / () where unknown."""
    raw = facts.get("os")
    os_info: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}

    def text(key: str) -> str:
        value = os_info.get(key)
        return value.strip().strip("\"'").lower() if isinstance(value, str) else ""

    return text("id"), tuple(text("id_like").split()), text("version_id")


def family_for(facts: Mapping[str, Any]) -> tuple[Family | None, str]:
    """The node's family, or None and why (unknown distribution, or one too old to fix)."""
    os_id, id_like, version = os_facts(facts)
    if not os_id:
        return None, "the probe found no /etc/os-release"
    major = version.split(".")[0]
    if (os_id, major) in _TOO_OLD:
        return None, (f"{os_id} {version}: its glibc is older than Triton's wheels need "
                      "(manylinux_2_27); upgrade the distribution")
    for word in (os_id, *id_like):
        key = _BY_ID.get(word)
        if key is not None:
            return FAMILIES[key], ""
    like = f" (ID_LIKE {' '.join(id_like)})" if id_like else ""
    return None, f"unknown distribution {os_id!r}{like}: no package manager known for it"


def python_xy(facts: Mapping[str, Any]) -> str | None:
    """"3.12" from the probe's python version fact, or None when absent or malformed."""
    raw = facts.get("python")
    version = raw.get("version") if isinstance(raw, Mapping) else None
    match = _PYTHON_VERSION.match(version) if isinstance(version, str) else None
    return f"{match.group(1)}.{match.group(2)}" if match else None


def python_headers_package(family: Family, xy: str) -> str:
    """The package holding Python.h for Python `xy` ("3.12") on this family."""
    major, minor = xy.split(".")
    return checked(family.python_headers.format(xy=xy, xy_compact=f"{major}{minor}"))


def checked(name: str) -> str:
    """`name` when it is a plain package name; UnsafeName otherwise."""
    if not PACKAGE_NAME.match(name):
        raise UnsafeName(f"refusing package name {name!r}")
    return name


def install_argv(family: Family, packages: list[str]) -> list[str]:
    """argv installing `packages` (each checked) non-interactively, upgrading nothing."""
    return [*family.install, *(checked(name) for name in packages)]
