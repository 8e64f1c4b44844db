#!/usr/bin/env bash
# Install fleetcheck from this checkout into its own virtual environment, .venv/, so that it
# works with any Python >= 3.10, including the "externally managed" (PEP 668) python3 of
# Debian 12, Proxmox VE 8 and Ubuntu 24.04, without --break-system-packages.
#
#   scripts/install.sh                      install; then run .venv/bin/fleetcheck
#   scripts/install.sh --dev                also the test and lint tools (scripts/test.sh uses it)
#   scripts/install.sh --download DIR       on a connected machine: put fleetcheck and every
#                                           wheel it needs into DIR (a wheelhouse)
#   scripts/install.sh --wheelhouse DIR     air-gapped: install from DIR only, never the network
#
# Environment: PYTHON (default python3) is the interpreter the venv is made from; VENV
# (default .venv in the checkout) is where it goes. On Debian and Ubuntu, `python3 -m venv`
# needs the python3-venv package: it is installed with apt-get when missing (as root, or
# through `sudo -n`), else the script says which command to run.
#
# Shell completion (bash, zsh) and the man page then go where the system looks for them, when
# that folder is writable (as root): scripts/install-completion.sh says where, or how to
# install them for one user.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3}"
VENV="${VENV:-.venv}"
mode=install
extra=""
wheelhouse=""

die() { echo "install.sh: error: $*" >&2; exit 2; }
usage() { sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

while [ "$#" -gt 0 ]; do
  case "$1" in
    --dev) extra="[dev]" ;;
    --download) mode=download; [ "$#" -ge 2 ] || usage; wheelhouse="$2"; shift ;;
    --wheelhouse) [ "$#" -ge 2 ] || usage; wheelhouse="$2"; shift ;;
    -h | --help) usage ;;
    *) echo "install.sh: unknown argument: $1" >&2; usage ;;
  esac
  shift
done

command -v "$PYTHON" >/dev/null 2>&1 || die "$PYTHON not found; install Python >= 3.10 (apt-get install python3)"
"$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 10))' ||
  die "$PYTHON is Python $("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])'); fleetcheck needs >= 3.10"

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; elif command -v sudo >/dev/null 2>&1; then sudo -n "$@"; else return 1; fi
}

# Debian strips ensurepip out of python3 into python3-venv (and python3.X-venv).
make_venv() {
  local err
  if err=$("$PYTHON" -m venv "$VENV" 2>&1); then return 0; fi
  rm -rf "$VENV"
  if printf '%s' "$err" | grep -q -e ensurepip -e python3-venv && command -v apt-get >/dev/null 2>&1; then
    local version pkgs
    version=$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
    pkgs=(python3-venv "python$version-venv")
    echo "install.sh: $PYTHON -m venv needs ${pkgs[*]}; installing with apt-get" >&2
    if [ -n "$wheelhouse" ] && [ "$mode" = install ]; then
      as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${pkgs[@]}" >/dev/null ||
        die "cannot install ${pkgs[*]} offline; as root: apt-get install ${pkgs[*]}"
    else
      { as_root apt-get update -qq &&
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${pkgs[@]}" >/dev/null; } ||
        die "$PYTHON cannot make a venv and apt-get did not work here (not root, no sudo -n); as root: apt-get install ${pkgs[*]}"
    fi
    "$PYTHON" -m venv "$VENV" || die "$PYTHON -m venv $VENV failed"
    return 0
  fi
  printf '%s\n' "$err" >&2
  die "$PYTHON -m venv $VENV failed"
}

if [ "$mode" = install ] && [ -n "$wheelhouse" ] && [ ! -d "$wheelhouse" ]; then
  die "--wheelhouse $wheelhouse: no such folder"
fi
if [ ! -x "$VENV/bin/python" ]; then
  make_venv
fi
pip=("$VENV/bin/python" -m pip --disable-pip-version-check -q)

if [ "$mode" = download ]; then
  mkdir -p "$wheelhouse"
  # Wheels for fleetcheck, every dependency, and the build backend that a source install of
  # the checkout needs (pip builds it in isolation, from the wheelhouse too).
  "${pip[@]}" download -d "$wheelhouse" "setuptools>=64" wheel
  "${pip[@]}" wheel -w "$wheelhouse" ".$extra"
  echo "wheelhouse ready: $wheelhouse (copy it with this checkout, then: scripts/install.sh --wheelhouse $wheelhouse)" >&2
  exit 0
fi

if [ -n "$wheelhouse" ]; then
  "${pip[@]}" install --no-index --find-links "$wheelhouse" ".$extra"
elif [ -n "$extra" ]; then
  # Editable for development, as a plain path in a .pth file ("compat"): setuptools' default
  # editable finder imports pathlib and importlib.util into every interpreter the venv starts,
  # 15 ms of each start, and the test suite starts thousands (the probe's fake nodes run this
  # venv's python: docs/testing.md).
  "${pip[@]}" install -e ".$extra" --config-settings editable_mode=compat
else
  "${pip[@]}" install .
fi
echo "fleetcheck installed: $VENV/bin/fleetcheck ($("$VENV/bin/fleetcheck" --version))" >&2

# Shell completion and the man page, where the system looks for them (when writable).
FLEETCHECK="$VENV/bin/fleetcheck" scripts/install-completion.sh
