#!/usr/bin/env bash
# The second round's CLI on a real GPU machine: the framework outcomes in the probe's JSON,
# the gate under the pre-training playbook on a local inventory (healthy, then with the C
# compiler hidden), the node-problem-detector and Slurm health modes with their wall time,
# the Prometheus textfile, the fix plan for the no-compiler node, and the probe's hash.
# Usage, from the repository root: PY=/path/to/python3 OUT=/tmp/out scripts/validate_round2_gpu.sh
set -u
out=${OUT:-/tmp/fleetcheck-validate-round2}
py=${PY:-python3}
mkdir -p "$out"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
pybin=$(dirname "$(command -v "$py")")
work=$(mktemp -d)

case_() {
  local name=$1; shift
  echo "== $name: $*"
  local t0; t0=$(date +%s%N)
  "$@" >"$out/$name.txt" 2>"$out/$name.err"
  local rc=$?
  echo "exit $rc, $(( ($(date +%s%N) - t0) / 1000000 )) ms"
  head -c 1800 "$out/$name.txt"; echo
  tail -n 4 "$out/$name.err"
}

cat >"$work/local.yaml" <<YAML
hosts:
  gpu:
    transport: local
    python: $py
YAML
# The same machine as a node whose workload cannot reach a compiler (as in a slim container).
cat >"$work/nocc.yaml" <<YAML
hosts:
  gpu:
    transport: local
    python: $py
    env: {PATH: $pybin, HOME: $work/home, TRITON_CACHE_DIR: $work/fresh-cache}
YAML
mkdir -p "$work/home"

case_ probe_json "$py" -m fleetcheck probe --format json
"$py" - "$out/probe_json.txt" <<'PYEOF'
import json, sys
doc = json.load(open(sys.argv[1]))
print("verdict:", doc["triton"]["verdict"], "| status:", doc["status"])
for name, fw in (doc["facts"].get("frameworks") or {}).items():
    print("  framework %s: %s | %s" % (name, fw["outcome"], fw["detail"]))
PYEOF
case_ gate_pretraining "$py" -m fleetcheck gate "$work/local.yaml" --playbook pre-training
case_ gate_pretraining_json "$py" -m fleetcheck gate "$work/local.yaml" --playbook pre-training --json
case_ gate_no_compiler "$py" -m fleetcheck gate "$work/nocc.yaml"
case_ audit_no_compiler_json "$py" -m fleetcheck audit "$work/nocc.yaml" --format json -o "$out/nocc.json"
case_ fix_plan "$py" -m fleetcheck fix "$out/nocc.json"
case_ probe_prometheus "$py" -m fleetcheck probe -o "$work/fleetcheck.prom" --cache "$work/verdict.json"
grep -E '^fleetcheck_(triton_fallback|node_status|framework)' "$work/fleetcheck.prom" | head -8
case_ health_cached_npd "$py" -m fleetcheck health --npd --cache "$work/verdict.json"
case_ health_live_npd "$py" -m fleetcheck health --npd
case_ probe_sha256 "$py" -m fleetcheck probe --script --sha256
rm -rf "$work"
