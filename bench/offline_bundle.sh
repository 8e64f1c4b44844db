#!/usr/bin/env bash
# Bundle what the bench needs on a machine without network (run here, on Debian 12):
#   bench/offline_bundle.sh DIR
# DIR/debs.tar.gz: OpenSSH's server and client, pdsh, ClusterShell and the libraries they link,
# downloaded from Debian with `apt-get download` and extracted with `dpkg -x` (no maintainer
# scripts run); DIR/wheels/: fleetcheck's and ansible-core's wheels for CPython 3.12.
# bench/offline_setup.sh DIR unpacks it there.
set -euo pipefail
dir=$(realpath "$1")
repo=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$dir/debs" "$dir/wheels"
packages=(openssh-server openssh-client openssh-sftp-server pdsh libgenders0 clustershell
          python3-clustershell
          libaudit1 libcap-ng0 libcap2 libcom-err2 libcrypt1 libgcrypt20 libgpg-error0
          libgssapi-krb5-2 libk5crypto3 libkeyutils1 libkrb5-3 libkrb5support0 liblz4-1 liblzma5
          libnsl2 libpam0g libpcre2-8-0 libreadline8 libselinux1 libssl3 libsystemd0 libtinfo6
          libtirpc3 libwrap0 libzstd1 zlib1g libedit2 libbsd0 libmd0 libfido2-1 libcbor0.8
          libudev1)
(cd "$dir/debs" && apt-get download -qq "${packages[@]}")
rm -rf "$dir/root" && mkdir -p "$dir/root"
for deb in "$dir"/debs/*.deb; do dpkg -x "$deb" "$dir/root"; done
tar -C "$dir/root" -czf "$dir/debs.tar.gz" .
rm -rf "$dir/root" "$dir/debs"
# The device's python3 is CPython 3.12: fleetcheck's dependencies it lacks, and ansible-core.
pip=("$repo/.venv/bin/python" -m pip download -q --no-deps --only-binary=:all:
     --python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64
     --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$dir/wheels")
# The versions of the venv here (bench/setup.sh), so both machines run the same releases.
pins=$("$repo/.venv/bin/python" -m pip freeze 2>/dev/null | grep -i -E \
       '^(asyncssh|cryptography|cffi|pycparser|proxmoxer|ansible-core|resolvelib|clustershell)==')
# libssh2's client (ssh.client): its wheel's version, however the venv installed it.
pins+=$'\n'"ssh2-python==$("$repo/.venv/bin/python" -c \
       'from importlib.metadata import version; print(version("ssh2-python"))')"
# ClusterShell (fleetcheck's node ranges) is pure Python, published as a source archive.
"${pip[@]}" $(grep -v -i '^clustershell' <<<"$pins")
"$repo/.venv/bin/python" -m pip wheel -q --no-deps -w "$dir/wheels" $(grep -i '^clustershell' <<<"$pins")
ls -la "$dir" "$dir/wheels"
