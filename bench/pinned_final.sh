#!/usr/bin/env bash
# The final comparison of issues #26 and #28 on a machine with cores to spare, in two parts
# that each fit one device command (bench/pinned_run.sh is the whole first run in one):
#   bench/pinned_final.sh a OUTDIR   trivial probe at 100 and 500 bare-metal nodes: floor,
#                                    fleetcheck, fleetcheck-sshcfg, pdsh, clush, clush-matched
#                                    (ansible and pdsh-64-matched at 100)
#   bench/pinned_final.sh b OUTDIR   fleetcheck, fleetcheck-sshcfg and clush-matched at 1,000
#                                    nodes (trivial); the real probe at 100 (floor, fleetcheck,
#                                    fleetcheck-sshcfg, pdsh, clush, clush-matched) and 500
#                                    (floor, fleetcheck); the gate on 100 nodes; memory and CPU
#                                    per node to 2,000 (bench/scale.py); the start-up's imports
# PIN (default 0-1:2-15) and RUNS (3) in the environment. Every step is bounded (STEP_LIMIT
# seconds, default 300) and writes OUTDIR/STEP.{md,json}; OUTDIR/log.txt has every run's line.
set -uo pipefail
part=$1
out=$(realpath "$2")
cd "$(dirname "$0")/.."
pin=${PIN:-0-1:2-15}
runs=${RUNS:-3}
py=${PYTHON:-python3}
limit=${STEP_LIMIT:-300}
export PYTHONUNBUFFERED=1
unset PYTHONDONTWRITEBYTECODE
"$py" -m compileall -q -j 0 fleetcheck bench tests >/dev/null
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)," \
     "load $(cut -d' ' -f1-3 /proc/loadavg), split $pin" | tee -a "$out/log.txt"

step() {  # step NAME SIZE PROBE CONTENDERS
  timeout -s INT -k 20 "$limit" "$py" bench/run.py --shape nodes --pin "$pin" --sizes "$2" \
    --runs "$runs" --probes "$3" --contenders "$4" --results "$out/$1.md" >>"$out/log.txt" 2>&1
  echo "$1: exit $? at $(date -u +%H:%M:%S), load $(cut -d' ' -f1-3 /proc/loadavg)"
}

case $part in
  a)
    step trivial-100 100 trivial \
      floor,fleetcheck,fleetcheck-sshcfg,pdsh,pdsh-64-matched,clush,clush-matched,ansible
    step trivial-500 500 trivial floor,fleetcheck,fleetcheck-sshcfg,pdsh,clush,clush-matched
    ;;
  b)
    step trivial-1000 1000 trivial fleetcheck,fleetcheck-sshcfg,clush-matched
    step real-100 100 real floor,fleetcheck,fleetcheck-sshcfg,pdsh,clush,clush-matched
    step real-500 500 real floor,fleetcheck
    timeout -s INT -k 20 120 "$py" bench/gate_latency.py --pin "$pin" --servers inprocess \
      --shapes 5 --runs 5 --out "$out/gate.json" >>"$out/log.txt" 2>&1
    echo "gate: exit $?"
    timeout -s INT -k 20 150 "$py" bench/scale.py --pin "$pin" --sizes 20,500,1000,2000 \
      --runs "${SCALE_RUNS:-2}" --out "$out" >>"$out/log.txt" 2>&1
    echo "scale: exit $?"
    # What the gate imports before its first probe, on the auditor's cores (the fixed start).
    for _ in 1 2 3; do
      taskset -c "${pin%%:*}" "$py" -X importtime -c \
        "import fleetcheck.cli, fleetcheck.commands, fleetcheck.audit, fleetcheck.judgement.gate" \
        2>>"$out/importtime.txt"
    done
    echo "importtime: exit $?"
    ;;
  *) echo "part a or b" >&2; exit 2 ;;
esac
for table in "$out"/*.md; do sed -n '/^| nodes/,/^$/p' "$table"; done
grep '^|' "$out/log.txt"
