"""Print pip constraints that pin each dependency of pyproject.toml to its declared lowest version.

    python3 scripts/lowest_constraints.py [pyproject.toml] > constraints.txt

`asyncssh>=2.14` becomes `asyncssh==2.14`: installed with `pip install -c constraints.txt .`,
fleetcheck gets the oldest release of every direct dependency that its bounds allow (what
`uv pip install --resolution lowest-direct` picks), and pip resolves everything below them as
usual. scripts/test-lowest.sh runs the unit tests there, so a bound that does not hold fails.
A dependency without a lower bound (`>=` or `~=`) is refused: it could not be tested.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: pip's own copy of the same parser
    from pip._vendor import tomli as tomllib

#: `NAME[extras] >= VERSION` (or `~=`), then more specifiers or a marker after a comma or `;`.
_REQUIREMENT = re.compile(
    r"^\s*(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*"
    r"(?P<specs>[^;]*)(?:;.*)?$")
_LOWER = re.compile(r"(?:>=|~=)\s*(?P<version>[0-9][0-9A-Za-z.+!-]*)")


def lowest_pins(dependencies: list[str]) -> list[str]:
    """`NAME==LOWEST` for each requirement; ValueError naming one without a lower bound."""
    pins = []
    for requirement in dependencies:
        match = _REQUIREMENT.match(requirement)
        lower = _LOWER.search(match["specs"]) if match else None
        if match is None or lower is None:
            raise ValueError(f"{requirement!r}: no lower bound (>= or ~=) to test")
        pins.append(f"{match['name']}=={lower['version']}")
    return pins


def main(argv: list[str]) -> int:
    path = Path(argv[1] if len(argv) > 1 else "pyproject.toml")
    project: dict[str, Any] = tomllib.loads(path.read_text(encoding="utf-8"))["project"]
    try:
        pins = lowest_pins(project.get("dependencies", []))
    except ValueError as exc:
        print(f"lowest_constraints.py: {path}: {exc}", file=sys.stderr)
        return 2
    print(f"# The lowest versions {path.name} allows (scripts/lowest_constraints.py).")
    print("\n".join(pins))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
