#!/usr/bin/env bash
# The gpu proof through the workload's real Triton cache, on a real GPU machine, as root.
# Each case: a workload user (uid 4243, its own home), a state of its ~/.triton/cache made for
# real, then the ground truth (scripts/ground_truth_gpu.py triton: the workload's own
# get_current_target() and one kernel) and the probe, both as that user (setpriv), in the same
# environment; a snapshot of the home and temp dir before and after the probe (listing, sizes,
# owners, modes) must be identical. Then the timings for docs/probe-performance.md: the probe on
# a cold and on a warm workload cache beside a bare `import torch; get_current_target()`,
# median of $RUNS runs each. Results: $OUT/CASE.txt, $OUT/timings.txt, then all of them.
#   OUT=/tmp/out RUNS=5 scripts/validate_state_gpu.sh [CASE...]
# Cases: root_entries (the job run once as root, sudo -E, umask 077, in the user's own cache),
# healthy_warm, corrupt_so (the driver module truncated), entry_file (a file where the entry
# dir was), entry_000 (the user's own entry, mode 000), dangling_triton (~/.triton a link to an
# unmounted scratch), timings.
set -u
OUT=${OUT:-/tmp/fleetcheck-validate-state}
PROBE=${PROBE:-$PWD/fleetcheck/probe/probe.py}
GT=$PWD/scripts/ground_truth_gpu.py
PY=$(command -v python3)
RUNS=${RUNS:-5}
U=4243
mkdir -p "$OUT"
W=$(mktemp -d /tmp/fleetcheck-state.XXXX); chmod 755 "$W"

as_user() {  # the workload user's own process: its uid, its home, no root group
  setpriv --reuid=$U --regid=$U --clear-groups env HOME="$H" USER=wl LOGNAME=wl "$@"
}
snap() {  # every path under the home and temp dir: type size uid gid mode
  find "$H" "$T" -printf '%y %s %U %G %m %p\n' 2>/dev/null | awk '$1=="d"{$2=0} {print}' | sort
}
fresh_home() {
  H=$W/home-$1; T=$W/tmp-$1
  mkdir -p "$H/.triton/cache" "$T"; chown -R $U:$U "$H" "$T"; chmod 700 "$H"
  export TMPDIR=$T
}
warm_as_user() { as_user "$PY" "$GT" triton > /dev/null 2>&1; }
entry_of() {  # the driver module's entry dir (the key Triton computes for cuda_utils)
  dirname "$(ls -d "$H"/.triton/cache/*/cuda_utils*.so 2>/dev/null | head -1)"
}
report() {  # $1: case name
  local name=$1 before after
  before=$(snap)
  as_user "$PY" - < "$PROBE" > "$OUT/$name.probe.json" 2> "$OUT/$name.probe.err"
  echo "probe rc=$?"
  after=$(snap)
  if [ "$before" = "$after" ]; then echo "snapshot: identical"; else
    echo "snapshot: CHANGED"; diff <(echo "$before") <(echo "$after") | head -20; fi
  echo "truth: $(as_user "$PY" "$GT" triton 2> "$OUT/$name.gt.err")"
  "$PY" - "$OUT/$name.probe.json" <<'PYEOF'
import json, sys
doc = json.load(open(sys.argv[1]))
print("  verdict:", json.dumps(doc["triton"])[:700])
print("  status:", doc["status"], "|", doc["reason"][:300], "| %.2f s" % doc["duration_s"])
for c in doc["checks"]:
    if c["status"] not in ("pass", "skip") or c["id"].startswith(("cache_entry", "triton_own")):
        print("   %s %s: %s" % (c["id"], c["status"], c["summary"][:300]))
        if c["status"] == "fail":
            print("     fix: %s" % c["fix"][:300])
PYEOF
}
one() {
  local name=$1
  echo "### $name"
  case $name in
    root_entries) fresh_home $name
      # The job once as root (sudo -E keeps HOME) with umask 077: root-only entry dirs.
      ( umask 077; HOME=$H "$PY" "$GT" triton > "$OUT/$name.root-run.txt" 2>&1 )
      ls -la "$H/.triton/cache" ;;
    healthy_warm) fresh_home $name; warm_as_user ;;
    corrupt_so) fresh_home $name; warm_as_user
      f=$(ls "$(entry_of)"/cuda_utils*.so); head -c 200 "$f" > "$f.part"; mv "$f.part" "$f"
      chown $U:$U "$f"; ls -la "$(entry_of)" ;;
    entry_file) fresh_home $name; warm_as_user
      e=$(entry_of); rm -rf "$e"; : > "$e"; chown $U:$U "$e" ;;
    entry_000) fresh_home $name; warm_as_user; chmod 000 "$(entry_of)" ;;
    dangling_triton) fresh_home $name; rm -rf "$H/.triton"
      ln -s "$W/scratch-not-mounted/triton" "$H/.triton"; chown -h $U:$U "$H/.triton" ;;
  esac
  report "$name"
}
since() { awk -v a="$(date +%s.%N)" -v b="$1" 'BEGIN{printf "%.3f", a - b}'; }
timings() {  # medians of $RUNS: bare target, probe on a cold cache, probe on a warm cache
  fresh_home timings
  local bare=() cold=() warm=() i t0
  export TRITON_CACHE_DIR=$H/.triton/cache
  as_user "$PY" -c "import torch, triton; triton.runtime.driver.active.get_current_target()"
  for i in $(seq "$RUNS"); do
    t0=$(date +%s.%N)
    as_user "$PY" -c "import torch, triton; triton.runtime.driver.active.get_current_target()"
    bare+=("$(since "$t0")")
    rm -rf "$H/.triton/cache"; as_user mkdir -p "$H/.triton/cache"
    t0=$(date +%s.%N); as_user "$PY" - < "$PROBE" > "$OUT/timings.cold.$i.json" 2>/dev/null
    cold+=("$(since "$t0")")
    warm_as_user
    t0=$(date +%s.%N); as_user "$PY" - < "$PROBE" > "$OUT/timings.warm.$i.json" 2>/dev/null
    warm+=("$(since "$t0")")
  done
  unset TRITON_CACHE_DIR
  med() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}'; }
  {
    echo "### timings ($RUNS runs; $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1))"
    echo "bare import torch + get_current_target (warm cache): ${bare[*]} -> median $(med "${bare[@]}")"
    echo "probe, cold workload cache: ${cold[*]} -> median $(med "${cold[@]}")"
    echo "probe, warm workload cache: ${warm[*]} -> median $(med "${warm[@]}")"
    for f in "$OUT"/timings.warm.*.json; do "$PY" -c "import json,sys; d=json.load(open(sys.argv[1])); print('  warm probe', d['triton']['verdict'], d['duration_s'])" "$f"; done
  } > "$OUT/timings.txt" 2>&1
  cat "$OUT/timings.txt"
}
cases=${*:-root_entries healthy_warm corrupt_so entry_file entry_000 dangling_triton timings}
for c in $cases; do
  if [ "$c" = timings ]; then timings; else one "$c" > "$OUT/$c.txt" 2>&1; cat "$OUT/$c.txt"; fi
done
rm -rf "$W"
