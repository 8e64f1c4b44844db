#!/usr/bin/env bash
# The bench's set-up on Debian 12 (run as root, from the repository root): the tools it
# compares fleetcheck with, from Debian's own packages, and ansible-core into the venv.
#   OpenSSH (the fleet's sshd, and the client pdsh, clush and ansible run), pdsh 2.34,
#   ClusterShell 1.9.1 (clush), util-linux (taskset, for reading a --pin split back).
set -euo pipefail
cd "$(dirname "$0")/.."
need=(openssh-server openssh-client pdsh clustershell util-linux)
missing=()
for package in "${need[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "ok installed" || missing+=("$package")
done
if ((${#missing[@]})); then
  apt-get -o DPkg::Lock::Timeout=900 install -y -qq "${missing[@]}" \
    || { apt-get update -qq && apt-get -o DPkg::Lock::Timeout=900 install -y -qq "${missing[@]}"; }
fi
[ -x .venv/bin/python ] || scripts/install.sh --dev
.venv/bin/python -m pip install -q -e '.[bench]'
echo "bench set-up: $(ssh -V 2>&1), $(pdsh -V 2>&1 | head -1), clush $(clush --version | cut -d' ' -f2)," \
     "$(.venv/bin/ansible --version 2>/dev/null | sed -n 1p)"
