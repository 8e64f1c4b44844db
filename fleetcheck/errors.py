"""The one base of fleetcheck's own exceptions, and what each stage raises.

Every stage's exception is a `FleetcheckError`: its message is one line (file, line, key,
node where they apply) and the command line prints it and exits 2 (`EXIT_USAGE`). The stage
modules define their subclass beside the code that raises it (`inventory_data/errors.py`,
`playbook.py`, `report/reportio.py`, `report/history.py`, `render/`, `host_setup.py`,
`report/merge.py`, `transport/interface.py`); a caller that wants one stage catches that stage's
class.
"""

from __future__ import annotations


class FleetcheckError(Exception):
    """Something fleetcheck was given, or a stage, went wrong; the message is one line."""
