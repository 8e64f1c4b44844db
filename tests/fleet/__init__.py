"""The loopback test fleet (real sshd, `pct` stand-in, containers as dirs); see kit.py."""

from tests.fleet.kit import KINDS, Fleet, FleetHost, build_fleet, free_port, marker_pattern

__all__ = ["KINDS", "Fleet", "FleetHost", "build_fleet", "free_port", "marker_pattern"]
