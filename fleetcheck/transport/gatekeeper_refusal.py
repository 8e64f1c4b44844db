"""The host's fleetcheck gatekeeper as the SSH transport meets it: a refusal (the script's exit
status and its one line on stderr) turned into a node's reason.

The script is `fleetcheck/data/gatekeeper.py`, read here as shipped: its exit status and texts
do not depend on the node kinds' grammar that `fleetcheck host-setup` writes into the copy it
installs (`fleetcheck/host_setup.py`, which sits above the kinds this module sits below).
"""

from __future__ import annotations

import functools
from types import ModuleType

#: Where the script lies in the package.
SCRIPT = "data/gatekeeper.py"


def shipped_text() -> str:
    """The script's source as shipped, no node kind's grammar written in."""
    # Imported here: only a refusal or `host-setup` reads the script, not every audit's start.
    from importlib import resources

    return resources.files("fleetcheck").joinpath(SCRIPT).read_text("utf-8")


@functools.cache
def shipped_script() -> ModuleType:
    """The script as shipped, loaded as a module: its exit status and refusal text."""
    import importlib.util
    from importlib import resources

    source = resources.files("fleetcheck").joinpath(SCRIPT)
    with resources.as_file(source) as path:
        spec = importlib.util.spec_from_file_location("fleetcheck_gatekeeper_script", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return module


def refusal_reason(stderr: str, exit_status: int | None) -> str | None:
    """The node reason when the host's gatekeeper refused the command, else None."""
    script = shipped_script()
    if exit_status != script.EXIT_REFUSED:
        return None
    marker = f"{script.NAME}: refused: "
    for line in stderr.splitlines():
        if line.startswith(marker):
            reason = line[len(marker):].strip()
            if len(reason) > 240:
                reason = reason[:237] + "..."
            return f"refused by the host's fleetcheck gatekeeper: {reason}"
    return None
