"""Distribution families: the install line's package names are checked before any command."""

from __future__ import annotations

import pytest

from fleetcheck.fix.distro import UnsafeName, family_for, install_argv
from tests.fix.support import node_facts as _facts


def test_package_names_are_checked() -> None:
    family, _ = family_for(_facts("debian"))
    assert family is not None
    with pytest.raises(UnsafeName):
        install_argv(family, ["gcc", "--allow-unauthenticated"])
    with pytest.raises(UnsafeName):
        install_argv(family, ["python3.12-dev\nx"])
