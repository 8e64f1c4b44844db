"""`python -m fleetcheck`: the same as the `fleetcheck` command."""

from fleetcheck.cli import run

run()
