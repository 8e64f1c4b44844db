"""`python -m fleetcheck`: the same as the `fleetcheck` command."""

import sys

from fleetcheck.cli import main

sys.exit(main())
