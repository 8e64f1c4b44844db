#!/usr/bin/env bash
# The unit tests against the lowest versions pyproject.toml allows, so that a declared lower
# bound is one that works. Arguments are passed to pytest.
#
# A second venv (.venv-lowest; VENV_LOWEST to move it) gets fleetcheck's dependencies pinned to
# their lower bounds (scripts/lowest_constraints.py makes the constraints from pyproject.toml),
# the test tools at their newest; it is made again whenever pyproject.toml changes. The tests run
# are those whose outcome a dependency can change, without the machinery the full suite sets
# up: not tests/probe (the probe is standard library only), tests/runtimes (the real-runtime
# fleet), tests/integrations (Slurm, the install), tests/bench, nor the tests marked sshd (a
# real OpenSSH fleet), slow or browser. CI runs it after scripts/test.sh (.ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3}"
VENV="${VENV_LOWEST:-.venv-lowest}"
pins="$VENV/constraints.txt"
made_from="$VENV/pyproject.toml"  # what the venv was made from: the bounds and the test extra

wanted=$(mktemp)
trap 'rm -f "$wanted"' EXIT
"$PYTHON" scripts/lowest_constraints.py pyproject.toml > "$wanted"
if [ ! -x "$VENV/bin/python" ] || ! cmp -s "$wanted" "$pins" ||
   ! cmp -s pyproject.toml "$made_from"; then
  rm -rf "$VENV"
  "$PYTHON" -m venv "$VENV" || {
    echo "test-lowest.sh: $PYTHON -m venv failed; scripts/test.sh installs what it needs" >&2
    exit 2
  }
  "$VENV/bin/python" -m pip --disable-pip-version-check -q install -c "$wanted" -e ".[test]"
  cp "$wanted" "$pins"
  cp pyproject.toml "$made_from"
fi
echo "lowest versions: $(grep -v '^#' "$pins" | tr '\n' ' ')" >&2

# With pytest-xdist (in the test extra), on workers as scripts/test.sh runs them.
workers=()
if "$VENV/bin/python" -c 'import xdist' 2>/dev/null; then
  workers=(-n "${FLEETCHECK_TEST_WORKERS:-logical}")
fi

export PATH="$PWD/$VENV/bin:$PATH"
exec "$VENV/bin/python" -m pytest "${workers[@]}" tests -m "not sshd and not slow and not browser" \
  --ignore=tests/probe --ignore=tests/runtimes --ignore=tests/integrations --ignore=tests/bench \
  "$@"
