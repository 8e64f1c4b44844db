#!/usr/bin/env bash
# Install what the test suite needs on a fresh Debian machine (when missing), then run it all:
# lint (ruff), types (mypy) and pytest on parallel workers (pytest-xdist, two per CPU: `-n 0`
# runs them in this one process). Arguments are passed to pytest. As root, the tests' temporary
# files are on a tmpfs of the run's own, gone with it (FLEETCHECK_TEST_TMPFS=0: in /tmp, kept).
#
#   scripts/test.sh --quick [PYTEST ARGS]
#
# The edit loop: ruff, then the unit and in-process tests only (no sshd fleet, real runtimes,
# Slurm, Chromium, install test or CLI/probe child processes: the markers in pyproject.toml),
# with none of the set-up the others need (Debian packages, guest kernel, wheelhouse, mypy).
# Everything Python goes into the project's venv (.venv, made by scripts/install.sh), so this
# works with the "externally managed" (PEP 668) python3 of Debian, Proxmox VE and Ubuntu.
set -euo pipefail
cd "$(dirname "$0")/.."

py=.venv/bin/python
# Tests that start `python3` or `fleetcheck` by name get the project's.
export PATH="$PWD/.venv/bin:$PATH"
# Workers: two per CPU (many tests wait on a daemon, a subprocess or a timeout, and a second
# worker per core fills that wait: on 2 cores, 4 workers took 256 s where 2 took 300 s, at the
# same CPU time; docs/testing.md); FLEETCHECK_TEST_WORKERS, or `-n N` among the arguments, says
# otherwise. Tests that must share one process run on one worker (tests/conftest.py,
# `--dist loadgroup` in pyproject.toml).
cpus=$(nproc 2>/dev/null || echo 1)
workers=(-n "${FLEETCHECK_TEST_WORKERS:-$(( cpus * 2 ))}")
# pytest caches its assertion-rewritten test modules, and Python the project's bytecode, in
# __pycache__ (ignored by git) unless PYTHONDONTWRITEBYTECODE says not to; without that cache
# each worker rewrites every test module again (3.7 s of CPU each, 1.7 s from the cache).
unset PYTHONDONTWRITEBYTECODE

if [ "${1:-}" = "--quick" ]; then
  shift
  "$py" -c 'import fleetcheck, pytest, xdist' >/dev/null 2>&1 || scripts/install.sh --dev
  "$py" -m ruff check fleetcheck tests bench scripts
  # The real FLA wheels some in-process tests read (fetched once; nothing to do after that);
  # not the version matrix's Triton releases: only tests that run the probe read them.
  "$py" scripts/fetch_test_wheels.py --no-releases
  exec "$py" -m pytest "${workers[@]}" \
    -m "not (sshd or runtimes or browser or slow or own_process or subprocess)" "$@"
fi

need=()
[ -x /usr/sbin/sshd ] || need+=(openssh-server)
command -v ssh-keygen >/dev/null 2>&1 || need+=(openssh-client)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v gcc >/dev/null 2>&1 || need+=(gcc libc6-dev)
command -v timeout >/dev/null 2>&1 || need+=(coreutils)
command -v pgrep >/dev/null 2>&1 || need+=(procps)
# A real Slurm (tests/integrations/test_slurm.py) and promtool (the Prometheus rules' tests).
[ -x /usr/sbin/slurmctld ] && [ -x /usr/sbin/slurmd ] || need+=(slurm-wlm)
[ -x /usr/sbin/munged ] && command -v mungekey >/dev/null 2>&1 || need+=(munge)
command -v promtool >/dev/null 2>&1 || need+=(prometheus)
# The real-runtime fleet (tests/runtimes): LXC, dockerd, podman, a TCG VM with its guest agent.
command -v lxc-start >/dev/null 2>&1 || need+=(lxc)
command -v dockerd >/dev/null 2>&1 || need+=(docker.io)
command -v podman >/dev/null 2>&1 && command -v crun >/dev/null 2>&1 || need+=(podman crun)
command -v qemu-system-x86_64 >/dev/null 2>&1 || need+=(qemu-system-x86)
[ -x /usr/sbin/qemu-ga ] || need+=(qemu-guest-agent)
dpkg -s busybox-static >/dev/null 2>&1 || need+=(busybox-static)
# The bench's peers (tests/bench/test_nodes_fleet.py): pdsh and ClusterShell's clush.
command -v pdsh >/dev/null 2>&1 || need+=(pdsh)
command -v clush >/dev/null 2>&1 || need+=(clustershell)
# The shipped zsh completion is parsed and loaded by a real zsh (tests/test_completion.py).
command -v zsh >/dev/null 2>&1 || need+=(zsh)
# The README's install is tested with Debian's own python3 (PEP 668), which needs its venv.
if [ -x /usr/bin/python3 ] && ! /usr/bin/python3 -c 'import ensurepip' >/dev/null 2>&1; then
  need+=(python3-venv)
fi
# tests/probe/workload_state.py runs the workload as another user with Debian's python3, whose
# Triton builds include Python.h.
if [ -x /usr/bin/python3 ] && ! /usr/bin/python3 -c 'import os, sysconfig
raise SystemExit(not os.path.exists(os.path.join(sysconfig.get_paths("posix_prefix")["include"], "Python.h")))'; then
  need+=(python3-dev)
fi
if [ "${#need[@]}" -gt 0 ]; then
  echo "installing Debian packages: ${need[*]}" >&2
  sudo=()
  [ "$(id -u)" -eq 0 ] || sudo=(sudo -n)
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq "${need[@]}" >/dev/null
fi
# Debian starts munge and slurm daemons on install; the tests run their own, in a temp folder.
for unit in slurmctld slurmd; do
  if command -v systemctl >/dev/null 2>&1 && systemctl is-active -q "$unit" 2>/dev/null; then
    echo "note: $unit.service is running; the tests start their own on other ports" >&2
  fi
done

scripts/install.sh --dev
# The real-runtime fleet's guest kernel (apt-get download + dpkg-deb, into .guest-kernel/).
scripts/fetch_guest_kernel.sh
# Wheels for the offline-install test (tests/integrations/test_install.py): fetched here, in
# the set-up, so no test reaches the network.
# They are made by the interpreter the test installs with: Debian's own python3 when present.
if [ -x /usr/bin/python3 ]; then
  PYTHON=/usr/bin/python3 VENV=.wheelhouse/.venv scripts/install.sh --download .wheelhouse
else
  scripts/install.sh --download .wheelhouse
fi
# The cache of rewritten test modules (above) is filled by one collection while ruff and mypy
# run (they leave a core idle), so the workers read it instead of each rewriting the same
# modules at once. Its output and status are not needed: the run below reports any
# collection error itself.
"$py" -m pytest --collect-only -q -p no:cacheprovider >/dev/null 2>&1 &
collect=$!
"$py" -m ruff check fleetcheck tests bench scripts
"$py" -m mypy
# The real flash-linear-attention wheels the probe's tests install, and the Triton releases of
# the version matrix, into $FLEETCHECK_TEST_CACHE (default ~/.cache/fleetcheck-test: fetched
# once per machine) (scripts/fetch_test_wheels.py).
"$py" scripts/fetch_test_wheels.py
wait "$collect" || true
# The tests' temporary files (pytest's tmp_path and every mkdtemp: the fake nodes, the fleets,
# the venvs of the install test; about 1.1 GB in 230,000 files a run) go to a tmpfs of the run's
# own, mounted in a private mount namespace (nothing outside it sees the mount), named by TMPDIR
# and --basetemp: made and removed on the machine's disk (ext4), those files cost the kernel
# about 35 s of CPU a run (47 s to copy and delete such a tree there, 11 s on a tmpfs). The
# names stay short: a daemon's unix socket under tmp_path (the real fleet's containerd: at most
# 104 bytes) is 13 bytes shorter than under /tmp/pytest-of-root/pytest-N. The tmpfs goes with
# the run, failed tests' files too: FLEETCHECK_TEST_TMPFS=0 keeps them in /tmp, as does a
# machine where this cannot be (not root, no unshare, under 4 GiB of memory available).
tmpfs_dir=""
if [ "${FLEETCHECK_TEST_TMPFS:-1}" != 0 ] && [ "$(id -u)" -eq 0 ] &&
    [ "$(awk '/^MemAvailable:/ {print int($2 / 1048576)}' /proc/meminfo 2>/dev/null || echo 0)" -ge 4 ] &&
    unshare -m --propagation private true >/dev/null 2>&1; then
  tmpfs_dir=$(mktemp -d "${TMPDIR:-/tmp}/fct.XXXXXX")
fi
if [ -n "$tmpfs_dir" ]; then
  trap 'rmdir "$tmpfs_dir" 2>/dev/null || true' EXIT
  status=0
  # The namespace's sh mounts it, then execs pytest (arguments after ours: a --basetemp given
  # to this script wins).
  # shellcheck disable=SC2016
  unshare -m --propagation private sh -c '
    dir=$1 py=$2; shift 2
    if mount -t tmpfs -o mode=1777 fleetcheck-tests "$dir"; then
      export TMPDIR="$dir"; set -- --basetemp "$dir/t" "$@"
    fi
    exec "$py" -m pytest "$@"' sh "$tmpfs_dir" "$py" "${workers[@]}" "$@" || status=$?
  exit "$status"
fi
exec "$py" -m pytest "${workers[@]}" "$@"
