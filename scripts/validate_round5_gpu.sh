#!/usr/bin/env bash
# Issue 41 on a real GPU machine, as root: the probe's own errors and artefacts never the
# workload's, limits named as limits, fixes that fix. Each case runs the ground truth
# (scripts/ground_truth_gpu.py triton: the workload's own get_current_target() and one kernel)
# beside the probe, as the workload user (uid 4243, its own home and temp dir, setpriv), under
# the same limits, mounts and environment; where a case has a fix, the fix is applied and both
# run again. Mounts are made in a private mount namespace (unshare -m); nothing outside a case
# is changed. Results: $OUT/CASE.txt, then all of them.
#   OUT=/tmp/out scripts/validate_round5_gpu.sh [CASE...]
# Cases:
#   healthy_cold, healthy_warm   gpu, the proof through the workload's own cache
#   cache_fork     Triton's runtime/cache.py as a fork has it (keyword-only flags and an
#                  argument of its own, its path helper renamed) in a shadow tree of the real
#                  Triton on PYTHONPATH: the probe's manager cannot wrap it: gpu, never
#                  cpu-fallback
#   faults         the shipped probe with one of its own functions raising (each
#                  instrumentation point in turn): never cpu-fallback
#   noexec_deep    TMPDIR on a noexec tmpfs, --deep: the workload loads from its own cache:
#                  gpu (the probe's kernel and fresh cache live beside the workload's)
#   nofile         `ulimit -n 16`: open_files_limit with its value, never libcuda_not_in_ldcache
#   nproc          `ulimit -u` a little above the user's processes: process_limit
#   memory         a cgroup v2 memory.max the workload runs within (where cgroups can be made)
#   checkout       a Triton source checkout without its build (the installed .py files) first
#                  on PYTHONPATH: the fix names the entry and PYTHONPATH; applied: gpu
set -u
OUT=${OUT:-/tmp/fleetcheck-validate-round5}
PROBE=${PROBE:-$PWD/fleetcheck/probe/probe.py}
GT=$PWD/scripts/ground_truth_gpu.py
PY=${PY:-$(command -v python3)}
U=4243
mkdir -p "$OUT"
W=$(mktemp -d /tmp/fleetcheck-r5.XXXX); chmod 755 "$W"
TRITON=$("$PY" -c 'import os, triton; print(os.path.dirname(triton.__file__))')

as_user() {  # the workload user's own process: its uid, its home, no root group
  setpriv --reuid=$U --regid=$U --clear-groups env HOME="$H" USER=wl LOGNAME=wl "$@"
}
fresh_home() {
  H=$W/home-$1; T=$W/tmp-$1
  mkdir -p "$H/.triton/cache" "$T"; chown -R $U:$U "$H" "$T"; chmod 700 "$H"
  export TMPDIR=$T
}
summary() {  # $1: the probe's JSON document
  "$PY" - "$1" <<'PYEOF'
import json, sys
try:
    doc = json.load(open(sys.argv[1]))
except Exception as e:
    print("  no document:", e); raise SystemExit
print("  verdict:", json.dumps(doc["triton"])[:700])
print("  status:", doc["status"], "|", doc["reason"][:300], "| %.2f s" % doc["duration_s"])
for c in doc["checks"]:
    if c["status"] not in ("pass", "skip"):
        print("   %s %s: %s" % (c["id"], c["status"], c["summary"][:300]))
        if c["status"] == "fail":
            print("     fix: %s" % c["fix"][:300])
PYEOF
}
run_case() {  # $1: name; then the prefix both the truth and the probe run under
  local name=$1; shift
  echo "truth: $("$@" "$PY" "$GT" triton 2> "$OUT/$name.gt.err" | head -c 600)"
  "$@" "$PY" - $PROBE_ARGS < "$PROBE" > "$OUT/$name.probe.json" 2> "$OUT/$name.probe.err"
  echo "probe rc=$?"
  summary "$OUT/$name.probe.json"
}
PROBE_ARGS=""
one() {
  local name=$1
  echo "### $name"
  PROBE_ARGS=""
  case $name in
    healthy_cold) fresh_home $name; run_case $name as_user ;;
    healthy_warm) fresh_home $name; as_user "$PY" "$GT" triton > /dev/null 2>&1
      run_case $name as_user ;;
    cache_fork) fresh_home $name
      S=$W/fork-site; mkdir -p "$S"; cp -rs "$TRITON" "$S/triton"
      rm "$S/triton/runtime/cache.py"
      sed -E 's/def __init__\(self, key(: str)?, override(: bool)? ?= ?False, dump(: bool)? ?= ?False\)/def __init__(self, key, *, override=False, dump=False, site=None)/; s/_make_path/_path_for/g' \
        "$TRITON/runtime/cache.py" > "$S/triton/runtime/cache.py"
      grep -c "site=None\|_path_for" "$S/triton/runtime/cache.py"
      chmod -R a+rX "$S"
      run_case $name as_user env PYTHONPATH="$S" ;;
    faults) fresh_home $name; as_user "$PY" "$GT" triton > /dev/null 2>&1
      "$PY" - "$PROBE" "$W/faults" <<'PYEOF'
import os, re, sys
source = open(sys.argv[1]).read()
os.makedirs(sys.argv[2], exist_ok=True)
points = ["def __init__(self, *args, **kwargs):", "def put(self, data, filename, binary=True):",
          "def has_file(self, filename):", "def swap_manager(cache_module, old, new):",
          "def check_call(*popenargs, **kwargs):", "def current_target(triton):",
          "def reset_driver(triton):", "def backend_report(triton):", "def selection(found):",
          "def knob_report(triton, env):", "def mirror_cache(cache):",
          'def audit_entries(cache, rebuilds, skip=".fleetcheck-probe", budget=3.0):',
          "def skeleton_proof(triton, where):", "def source_settings(path, wanted):",
          "def read_driver():"]
for n, point in enumerate(points):
    lines = source.splitlines(keepends=True)
    (at,) = [i for i, line in enumerate(lines) if line.strip() == point]
    indent = re.match(r"\s*", lines[at]).group(0)
    lines.insert(at + 1, indent + "    raise RuntimeError('injected fault')\n")
    open(os.path.join(sys.argv[2], "%02d.py" % n), "w").write("".join(lines))
    print(n, point)
PYEOF
      chmod -R a+rX "$W/faults"
      for f in "$W"/faults/*.py; do
        as_user "$PY" - < "$f" > "$OUT/$name.$(basename "$f" .py).json" 2>/dev/null
        echo "fault $(basename "$f" .py): $("$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["triton"]["verdict"], d["triton"]["cause"], "|", d["reason"][:160])' "$OUT/$name.$(basename "$f" .py).json")"
      done ;;
    noexec_deep) fresh_home $name; as_user "$PY" "$GT" triton > /dev/null 2>&1
      PROBE_ARGS="--deep"
      run_case $name unshare -m sh -c 'mount -t tmpfs -o noexec,mode=1777 tmpfs "$0" && exec "$@"' "$T" \
        setpriv --reuid=$U --regid=$U --clear-groups env HOME="$H" USER=wl LOGNAME=wl ;;
    nofile) fresh_home $name; as_user "$PY" "$GT" triton > /dev/null 2>&1
      run_case $name prlimit --nofile=16:16 setpriv --reuid=$U --regid=$U --clear-groups \
        env HOME="$H" USER=wl LOGNAME=wl ;;
    nproc) fresh_home $name; as_user "$PY" "$GT" triton > /dev/null 2>&1
      run_case $name prlimit --nproc=12:12 setpriv --reuid=$U --regid=$U --clear-groups \
        env HOME="$H" USER=wl LOGNAME=wl ;;
    memory) fresh_home $name; as_user "$PY" "$GT" triton > /dev/null 2>&1
      CG=/sys/fs/cgroup/fleetcheck-r5
      if mkdir "$CG" 2>/dev/null && [ -f "$CG/memory.max" ]; then
        peak=$( /usr/bin/time -f %M setpriv --reuid=$U --regid=$U --clear-groups env HOME="$H" "$PY" "$GT" triton 2>&1 >/dev/null | tail -1)
        echo "truth's peak RSS: ${peak} KiB"
        echo $(( peak * 1024 * 13 / 10 )) > "$CG/memory.max"; echo "memory.max: $(cat "$CG/memory.max")"
        run_case $name sh -c 'echo $$ > "$0/cgroup.procs" && exec "$@"' "$CG" \
          setpriv --reuid=$U --regid=$U --clear-groups env HOME="$H" USER=wl LOGNAME=wl
        cat "$CG/memory.events" 2>/dev/null; rmdir "$CG" 2>/dev/null
      else echo "no cgroup v2 memory controller to make here: not run"; fi ;;
    checkout) fresh_home $name
      C=$W/triton-src/python; mkdir -p "$C"
      # The installed .py files only (no cpio on every machine): what a checkout holds.
      (cd "$TRITON/.." && find triton -name '*.py' -exec cp --parents {} "$C" \;)
      [ -f "$C/triton/__init__.py" ] || echo "checkout not made: $C/triton/__init__.py missing"
      chmod -R a+rX "$W/triton-src"
      run_case $name as_user env PYTHONPATH="$C"
      echo "-- the fix applied (PYTHONPATH without the checkout):"
      run_case "$name.fixed" as_user ;;
  esac
}
cases=${*:-healthy_cold healthy_warm cache_fork faults noexec_deep nofile nproc memory checkout}
for c in $cases; do one "$c" > "$OUT/$c.txt" 2>&1; cat "$OUT/$c.txt"; done
rm -rf "$W"
