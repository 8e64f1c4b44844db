#!/usr/bin/env bash
# Issue 34 (items 2-4) on a real GPU machine, as root: failures read for their errno and object,
# the limits that explain them, packages with parts gone. Each case in its own private mount
# namespace (unshare -m), the ground truth (scripts/ground_truth_gpu.py triton: the workload's
# own get_current_target() and one kernel) beside the probe, under the same user, limits and
# environment. Nothing outside a case's namespace is changed (binds and tmpfs only).
#   OUT=/tmp/out scripts/validate_round4_gpu.sh [CASE...]
# Cases and what the probe should name:
#   healthy        nothing (gpu)
#   ulimit_v       `ulimit -v 16G`: address_space_limit, the limit and its value, never
#                  cache_dir_noexec (the cache's mount allows exec)
#   prlimit_as     the same through `prlimit --as`
#   dangling_home  ~/.triton a link to an unmounted scratch dir: path_dangling_link, link+target
#   inodes         the cache on a tmpfs with bytes free and no inode: fs_out_of_inodes
#   root_entries   the user's cache after one root run with umask 077, then the user
#                  (setpriv): path_foreign_owner naming the entry and root
#   no_backend     triton/backends/nvidia hidden (an empty dir bound over it):
#                  triton_install_broken naming the missing files, never ptxas_missing
#   no_ptxas       triton/backends/nvidia/bin emptied the same way: triton_install_broken
#   no_cc1         gcc's cc1 hidden: compiler_incomplete with a reinstall
#   no_ldcache     /etc/ld.so.cache an empty file: not ldconfig_binary_missing
set -u
OUT=${OUT:-/tmp/fleetcheck-validate-round4}
PROBE=${PROBE:-$PWD/fleetcheck/probe/probe.py}
GT=$PWD/scripts/ground_truth_gpu.py
PY=$(command -v python3)
mkdir -p "$OUT"
if [ -z "${W:-}" ]; then W=$(mktemp -d /tmp/gtw4.XXXX); chmod 755 "$W"; fi
export W
TRITON=$("$PY" -c 'import os, triton; print(os.path.dirname(triton.__file__))')
G16=$((16 * 1024 * 1024))  # KiB, as ulimit -v counts

one() {  # one case, inside its namespace
  local name=$1 pre
  case $name in
    healthy) pre=(env TRITON_CACHE_DIR=$W/c-healthy) ;;
    ulimit_v) pre=(bash -c "ulimit -v $G16; exec \"\$@\"" - env TRITON_CACHE_DIR=$W/c-$name) ;;
    prlimit_as) pre=(prlimit --as=$((G16 * 1024)) env TRITON_CACHE_DIR=$W/c-$name) ;;
    dangling_home) mkdir -p $W/h-$name; ln -s /scratch/fleetcheck-not-mounted/.triton $W/h-$name/.triton
      pre=(env -u TRITON_CACHE_DIR -u TRITON_HOME HOME=$W/h-$name) ;;
    inodes) mkdir -p /mnt/ino; mount -t tmpfs -o size=64m,nr_inodes=256 tmpfs /mnt/ino
      mkdir /mnt/ino/cache; i=0; while touch /mnt/ino/f$i 2>/dev/null; do i=$((i+1)); done
      pre=(env TRITON_CACHE_DIR=/mnt/ino/cache) ;;
    root_entries) mkdir -p $W/h-$name; chown 4242:4242 $W/h-$name
      (umask 077; HOME=$W/h-$name TRITON_CACHE_DIR=$W/h-$name/.triton/cache "$PY" "$GT" triton >/dev/null 2>&1)
      chown 4242:4242 $W/h-$name/.triton $W/h-$name/.triton/cache
      pre=(setpriv --reuid=4242 --regid=4242 --clear-groups env HOME=$W/h-$name
           TRITON_CACHE_DIR=$W/h-$name/.triton/cache) ;;
    no_backend) mkdir -p $W/empty-$name; mount --bind $W/empty-$name "$TRITON/backends/nvidia"
      pre=(env TRITON_CACHE_DIR=$W/c-$name) ;;
    no_ptxas) mkdir -p $W/empty-$name; mount --bind $W/empty-$name "$TRITON/backends/nvidia/bin"
      pre=(env TRITON_CACHE_DIR=$W/c-$name) ;;
    no_cc1) mkdir -p $W/empty-$name; cc1=$(gcc -print-prog-name=cc1)
      mount --bind $W/empty-$name "$(dirname "$cc1")"; pre=(env TRITON_CACHE_DIR=$W/c-$name) ;;
    no_ldcache) : > $W/ldcache-$name; mount --bind $W/ldcache-$name /etc/ld.so.cache
      pre=(env TRITON_CACHE_DIR=$W/c-$name) ;;
  esac
  {
    echo "### $name: ${pre[*]}"
    echo "gt-triton: $("${pre[@]}" "$PY" "$GT" triton 2>"$OUT/$name.gt-triton.err")"
    "${pre[@]}" "$PY" - < "$PROBE" > "$OUT/$name.probe.json" 2> "$OUT/$name.probe.err"
    echo "probe rc=$?"
    "$PY" - "$OUT/$name.probe.json" <<'PYEOF'
import json, sys
doc = json.load(open(sys.argv[1]))
print("  verdict:", json.dumps(doc["triton"])[:700])
print("  status:", doc["status"], "|", doc["reason"][:300], "| %.1f s" % doc["duration_s"])
limits = doc["facts"].get("limits") or {}
print("  limits:", json.dumps({k: v.get("soft") for k, v in limits.items()}))
for c in doc["checks"]:
    if c["status"] not in ("pass", "skip") or c["id"] in ("triton_own_path",
                                                          "cache_dir_noexec"):
        print("   %s %s: %s" % (c["id"], c["status"], c["summary"][:300]))
        if c["status"] == "fail":
            print("     fix: %s | matches: %s" % (c["fix"][:300],
                                                (c["evidence"] or {}).get("matches")))
PYEOF
  } > "$OUT/$name.txt" 2>&1
}
if [ "${1:-}" = --one ]; then one "$2"; exit; fi
cases=${*:-healthy ulimit_v prlimit_as dangling_home inodes root_entries no_backend no_ptxas no_cc1 no_ldcache}
for c in $cases; do
  OUT=$OUT PROBE=$PROBE unshare -m --propagation private bash "$0" --one "$c" &
done
wait
rm -rf "$W"
for c in $cases; do cat "$OUT/$c.txt"; done
