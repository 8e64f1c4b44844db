#!/usr/bin/env bash
# The fleetcheck CLI end to end on a GPU machine: `fleetcheck probe` (table, JSON, --deep),
# the same with the C compiler hidden (fresh HOME, so no warm Triton cache can mask it), and
# `fleetcheck audit` of this machine as HTML and Prometheus. Outputs go to $OUT (default
# /tmp/fleetcheck-validate-cli); each case prints its exit code and the head of its output.
# Usage, from the repository root: PY=/path/to/python3 scripts/validate_cli_gpu.sh
set -u
out=${OUT:-/tmp/fleetcheck-validate-cli}
py=${PY:-python3}
mkdir -p "$out"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

case_() {
  local name=$1; shift
  echo "== $name: $*"
  "$@" >"$out/$name.txt" 2>"$out/$name.err"
  echo "exit $?"
  head -c 2500 "$out/$name.txt"; echo
  tail -n 3 "$out/$name.err"
}

case_ probe_table "$py" -m fleetcheck probe
case_ probe_deep_json "$py" -m fleetcheck probe --deep --format json
pybin=$(dirname "$(command -v "$py")")
home=$(mktemp -d)
case_ probe_no_compiler env -u CC HOME="$home" PATH="$pybin" "$py" -m fleetcheck probe
rm -rf "$home"
case_ audit_html "$py" -m fleetcheck audit --format html -o "$out/report.html"
case_ audit_prometheus "$py" -m fleetcheck audit --format prometheus
grep -E '^fleetcheck_(triton_fallback|node_status|node_gpus)' "$out/audit_prometheus.txt" | head -8
