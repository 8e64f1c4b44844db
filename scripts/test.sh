#!/usr/bin/env bash
# Install what the test suite needs on a fresh Debian machine (when missing), then run it all:
# lint (ruff), types (mypy) and pytest. Arguments are passed to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
[ -x /usr/sbin/sshd ] || need+=(openssh-server)
command -v ssh-keygen >/dev/null 2>&1 || need+=(openssh-client)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v gcc >/dev/null 2>&1 || need+=(gcc libc6-dev)
command -v timeout >/dev/null 2>&1 || need+=(coreutils)
command -v pgrep >/dev/null 2>&1 || need+=(procps)
if [ "${#need[@]}" -gt 0 ]; then
  echo "installing Debian packages: ${need[*]}" >&2
  sudo=()
  [ "$(id -u)" -eq 0 ] || sudo=(sudo -n)
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq "${need[@]}" >/dev/null
fi

python3 -m pip install -q --disable-pip-version-check -e '.[dev]'
python3 -m ruff check fleetcheck tests bench scripts
python3 -m mypy
python3 scripts/fetch_test_wheels.py
exec python3 -m pytest "$@"
