#!/usr/bin/env bash
# The GPUs' state before a job, on a real GPU machine: `fleetcheck probe --deep` and the local
# gate under the pre-training and default playbooks on a healthy GPU (both pass; the probe's own
# CUDA context, its deep kernel's included, is not counted), then while another process holds
# ~90 % of GPU 0's memory (torch.empty in a background python that sleeps): pre-training fails
# (exit 1) and default warns (exit 0), naming the process or the held memory and how to free
# it; then healthy again once it is stopped. Each case prints its exit code and the head of its
# output; EXPECT lines say whether it is what the issue asks. Outputs go to $OUT.
# Usage, from the repository root: PY=/path/to/python3 OUT=/tmp/out scripts/validate_gpustate_gpu.sh
set -u
out=${OUT:-/tmp/fleetcheck-validate-gpustate}
py=${PY:-python3}
mkdir -p "$out"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
work=$(mktemp -d)
holder_pid=

finish() {
  [ -n "$holder_pid" ] && kill "$holder_pid" 2>/dev/null
  rm -rf "$work"
}
trap finish EXIT

rc=0
case_() {
  local name=$1; shift
  echo "== $name: $*"
  local t0; t0=$(date +%s%N)
  "$@" >"$out/$name.txt" 2>"$out/$name.err"
  rc=$?
  echo "exit $rc, $(( ($(date +%s%N) - t0) / 1000000 )) ms"
  head -c 1500 "$out/$name.txt"; echo
  tail -n 6 "$out/$name.err"
}

expect() {  # expect NAME WANTED-EXIT GOT-EXIT
  if [ "$2" = "$3" ]; then echo "EXPECT $1: exit $3 OK"; else echo "EXPECT $1: exit $3, wanted $2 MISMATCH"; fi
}

# What the probe says of the GPUs' state: per GPU memory and processes, and the GPU checks.
state() {
  "$py" - "$1" <<'PYEOF'
import json, sys
doc = json.load(open(sys.argv[1]))
state = doc["facts"].get("gpu_state") or {}
print("status:", doc["status"], "| reason:", doc["reason"])
print("source:", state.get("source"), "| error:", state.get("error"),
      "| listed:", state.get("listed"), "| cuda_count:", state.get("cuda_count"))
for gpu in state.get("gpus") or []:
    print("  GPU %s: held %s of %s MiB (used %s), persistence %s, compute %s, health %s" % (
        gpu.get("index"), gpu.get("held_mib"), gpu.get("total_mib"), gpu.get("used_mib"),
        gpu.get("persistence_mode"), gpu.get("compute_mode"), json.dumps(gpu.get("health"))))
    for p in gpu.get("processes") or []:
        print("    process", json.dumps(p))
print("  xid:", json.dumps(state.get("xid"))[:300])
for check in doc["checks"]:
    if check["id"].startswith("gpu_"):
        print("  %-22s %-5s %s" % (check["id"], check["status"], check["summary"][:200]))
        if check["status"] != "pass" and check["fix"]:
            print("  %-22s fix   %s" % ("", check["fix"][:300]))
PYEOF
}

cat >"$work/local.yaml" <<YAML
hosts:
  gpu:
    transport: local
    python: $py
YAML

echo "### healthy GPU"
nvidia-smi --query-gpu=index,memory.used,memory.total,persistence_mode --format=csv
nvidia-smi --query-compute-apps=pid,used_memory --format=csv
case_ healthy_probe_deep "$py" -m fleetcheck probe --deep --format json
state "$out/healthy_probe_deep.txt"
"$py" - "$out/healthy_probe_deep.txt" <<'PYEOF'
import json, sys
doc = json.load(open(sys.argv[1]))
gpus = (doc["facts"].get("gpu_state") or {}).get("gpus") or []
foreign = [p for g in gpus for p in g.get("processes") or [] if not p.get("own")]
held = max([g.get("held_share") or 0 for g in gpus] or [0])
print("EXPECT probe's own context not counted: %s (GPUs read %d, foreign processes %d, largest "
      "share held %.3f)" % ("OK" if gpus and not foreign and held <= 0.05 else "MISMATCH",
                           len(gpus), len(foreign), held))
PYEOF
case_ healthy_gate_pretraining "$py" -m fleetcheck gate "$work/local.yaml" --playbook pre-training
expect healthy_gate_pretraining 0 "$rc"
case_ healthy_gate_default "$py" -m fleetcheck gate "$work/local.yaml" --playbook default
expect healthy_gate_default 0 "$rc"

echo "### GPU 0 held by another process (~90 % of its memory)"
cat >"$work/holder.py" <<'PYEOF'
import os, sys, time
import torch
free, total = torch.cuda.mem_get_info(0)
size = min(int(total * 0.9), free - (1 << 30))
block = torch.empty(size, dtype=torch.uint8, device="cuda:0")
torch.cuda.synchronize()
print("holder pid %d holds %.1f GiB of %.1f GiB" % (os.getpid(), size / 2**30, total / 2**30),
      flush=True)
open(sys.argv[1], "w").close()
time.sleep(900)
PYEOF
"$py" "$work/holder.py" "$work/ready" >"$out/holder.txt" 2>&1 &
holder_pid=$!
for _ in $(seq 120); do [ -e "$work/ready" ] && break; sleep 1; done
cat "$out/holder.txt"
nvidia-smi --query-compute-apps=pid,used_memory --format=csv
fuser -v /dev/nvidia* 2>&1 | head -8
case_ held_probe_deep "$py" -m fleetcheck probe --deep --format json
state "$out/held_probe_deep.txt"
case_ held_gate_pretraining "$py" -m fleetcheck gate "$work/local.yaml" --playbook pre-training
expect held_gate_pretraining 1 "$rc"
grep -q -E "held|in use|process" "$out/held_gate_pretraining.err" \
  && echo "EXPECT held_gate_pretraining names the held memory or the process: OK" \
  || echo "EXPECT held_gate_pretraining names the held memory or the process: MISMATCH"
grep -q -E "nvidia-smi --query-compute-apps|fuser" "$out/held_gate_pretraining.err" \
  && echo "EXPECT held_gate_pretraining says how to free it: OK" \
  || echo "EXPECT held_gate_pretraining says how to free it: MISMATCH"
case_ held_gate_pretraining_json "$py" -m fleetcheck gate "$work/local.yaml" --playbook pre-training --json
case_ held_gate_default "$py" -m fleetcheck gate "$work/local.yaml" --playbook default
expect held_gate_default 0 "$rc"
case_ held_audit_table "$py" -m fleetcheck audit "$work/local.yaml"
case_ held_audit_prometheus "$py" -m fleetcheck audit "$work/local.yaml" --format prometheus
grep -E '^fleetcheck_gpu_' "$out/held_audit_prometheus.txt" | head -8

echo "### the holder stopped"
kill "$holder_pid"; wait "$holder_pid" 2>/dev/null; holder_pid=
sleep 2
case_ after_gate_pretraining "$py" -m fleetcheck gate "$work/local.yaml" --playbook pre-training
expect after_gate_pretraining 0 "$rc"
