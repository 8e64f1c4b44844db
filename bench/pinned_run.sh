#!/usr/bin/env bash
# The whole comparison on a machine with cores to spare, the auditor on some, the fleet on
# the others (issue #26):  bench/pinned_run.sh OUTDIR
#   PIN (default 0-1:2-15), RUNS (3), SIZES (100 500), SCALE (20,500,1000,2000) in the
#   environment. Writes OUTDIR/nodes-N.{json,md}, gate.json, scale.{json,svg} and log.txt
#   (every step's progress); prints the tables last. Each step is bounded: LIMIT_N seconds for
#   N nodes (default 300), GATE_LIMIT (60), SCALE_LIMIT (90); a step cut short keeps the
#   probes it finished (bench/run.py writes its results after each probe).
set -uo pipefail
out=$(realpath "$1")
cd "$(dirname "$0")/.."
pin=${PIN:-0-1:2-15}
runs=${RUNS:-3}
py=${PYTHON:-python3}
export PYTHONUNBUFFERED=1
# Every start of every tool compiled its modules again without their bytecode: compile once.
unset PYTHONDONTWRITEBYTECODE
"$py" -m compileall -q -j 0 fleetcheck bench tests >/dev/null
all=floor,floor-wide,fleetcheck,fleetcheck-sshcfg,pdsh,pdsh-64,pdsh-64-matched,clush,clush-matched
real=floor,fleetcheck,pdsh,clush
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2), load $(cut -d' ' -f1-3 /proc/loadavg)"
for size in ${SIZES:-100 500}; do
  contenders=$all
  # ansible-core at 100 nodes only: at 500 one run takes minutes of the auditor's 2 cores.
  [ "$size" -le 100 ] && contenders=$all,ansible
  limit_var=LIMIT_$size
  timeout -s INT -k 20 "${!limit_var:-300}" "$py" bench/run.py --shape nodes --pin "$pin" --sizes "$size" --runs "$runs" \
    --probes trivial,real --contenders "$contenders" --real-contenders "$real" \
    --results "$out/nodes-$size.md" >>"$out/log.txt" 2>&1
  echo "nodes $size: exit $? ($(tail -1 "$out/log.txt"))"
done
timeout -s INT -k 20 "${GATE_LIMIT:-60}" "$py" bench/gate_latency.py --pin "$pin" --servers inprocess --shapes 5 \
  --runs 5 --out "$out/gate.json" >>"$out/log.txt" 2>&1
echo "gate: exit $?"
timeout -s INT -k 20 "${SCALE_LIMIT:-90}" "$py" bench/scale.py --pin "$pin" --sizes "${SCALE:-20,500,1000,2000}" \
  --runs "$runs" --out "$out" >>"$out/log.txt" 2>&1
echo "scale: exit $?"
for size in ${SIZES:-100 500}; do sed -n '/^| nodes/,/^$/p' "$out/nodes-$size.md"; done
grep '^|' "$out/log.txt"
