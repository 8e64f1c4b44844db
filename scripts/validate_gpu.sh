#!/usr/bin/env bash
# Validate the probe on a real NVIDIA GPU machine (torch + Triton installed): five cases and
# timings. Run from the repository root; results go to $OUT (default ./validate-out):
# results.json (every probe document), summary.txt, timings.txt, log.txt. With FLA_SITE set (a
# folder holding flash-linear-attention), two more cases check FLA's device_platform.
#   PY=/opt/torch/.venv/bin/python3 OUT=/tmp/out scripts/validate_gpu.sh
set -u
OUT=${OUT:-$PWD/validate-out}
PY=${PY:-$(python3 -c "import sys; print(sys.executable)")}
PYBIN=$(dirname "$PY")
PROBE=fleetcheck/probe/probe.py
WORK=$(mktemp -d)
mkdir -p "$OUT" "$WORK/json"
exec > >(tee "$OUT/log.txt") 2>&1
REAL_CC=${CC:-$(command -v gcc)}

echo "## machine"
nvidia-smi --query-gpu=index,name,driver_version,compute_cap,memory.total --format=csv,noheader
"$PY" -c 'import sys, torch, triton; print(sys.version.split()[0], torch.__version__, torch.version.cuda, triton.__version__)'
echo "python=$PY CC=${CC:-unset} gcc=$(command -v gcc) real_cc=$REAL_CC file=$(command -v file)"
ls "$PYBIN" | grep -E '^(gcc|clang|cc|file|ld|as)$' || echo "(no compiler, ld, as or file in $PYBIN)"

# run_case NAME ARGS... : the probe from stdin under `env ARGS...`, JSON saved as NAME.json
run_case() {
  local name=$1; shift
  local t0 t1
  t0=$EPOCHREALTIME
  env "$@" < "$PROBE" > "$WORK/json/$name.json" 2> "$WORK/json/$name.err"
  echo "rc=$?" > "$WORK/json/$name.rc"
  t1=$EPOCHREALTIME
  echo "$name wall_s=$(awk "BEGIN{print $t1 - $t0}")" >> "$WORK/walls.txt"
  echo "== $name: $(cat "$WORK/json/$name.rc") $(head -c 300 "$WORK/json/$name.err")"
}

EMPTY1=$(mktemp -d); EMPTY2=$(mktemp -d)
echo "## case 1: normal"
run_case normal "$PY" -
echo "## case 2: no compiler on PATH, fresh cache"
run_case no_compiler -u CC PATH="$PYBIN" TRITON_CACHE_DIR="$EMPTY1" "$PY" -
echo "## case 3: CC=/nonexistent/gcc"
run_case cc_invalid CC=/nonexistent/gcc TRITON_CACHE_DIR="$EMPTY2" "$PY" -
echo "## case 4: no compiler, warm cache"
# Fill the cache with the same PATH as the check plus only as/ld (no `file`): PATH changes the
# stub's cache key through platform.architecture(), which runs `file`.
WARM=$(mktemp -d); TOOLS=$(mktemp -d)
ln -s "$(command -v as)" "$(command -v ld)" "$TOOLS/"
env PATH="$PYBIN:$TOOLS" CC="$REAL_CC" TRITON_CACHE_DIR="$WARM" "$PY" -c \
  'import triton; print("fill:", triton.runtime.driver.active.get_current_target())'
echo "warm cache: $(find "$WARM" -type f | wc -l) files"
run_case warm_no_compiler -u CC PATH="$PYBIN" TRITON_CACHE_DIR="$WARM" "$PY" -
echo "warm cache after the probe: $(find "$WARM" -type f | wc -l) files"
echo "## case 5: --deep"
run_case deep "$PY" - --deep

if [ -n "${FLA_SITE:-}" ]; then
  # flash-linear-attention installed with `pip install --target "$FLA_SITE"` (no network there).
  EMPTY3=$(mktemp -d)
  echo "## case 6: flash-linear-attention"
  run_case fla PYTHONPATH="$FLA_SITE" "$PY" -
  echo "## case 7: flash-linear-attention, no compiler on PATH"
  run_case fla_no_compiler -u CC PATH="$PYBIN" PYTHONPATH="$FLA_SITE" TRITON_CACHE_DIR="$EMPTY3" \
    "$PY" -
fi

echo "## timings"
KERNEL=$(cd "$(dirname "$0")" && pwd)/bare_kernel.py  # the bare kernel script
timeit() {  # timeit LABEL CMD... : wall seconds of one run, fresh TRITON_CACHE_DIR each time
  local label=$1; shift
  local c t0 t1
  c=$(mktemp -d)
  t0=$EPOCHREALTIME
  TRITON_CACHE_DIR=$c "$@" > /dev/null 2>&1 < "$PROBE"
  t1=$EPOCHREALTIME
  echo "$label $(awk "BEGIN{print $t1 - $t0}")" >> "$OUT/timings.txt"
  rm -rf "$c"
}
: > "$OUT/timings.txt"
for i in 1 2 3; do
  timeit bare_target "$PY" -c 'import triton; triton.runtime.driver.active.get_current_target()'
  timeit probe_default "$PY" -
done
for i in 1 2 3; do
  timeit bare_kernel "$PY" "$KERNEL"
  timeit probe_deep "$PY" - --deep
done
cat "$OUT/timings.txt"
"$PY" scripts/validate_summary.py "$WORK/json" "$WORK/walls.txt" "$OUT"
rm -rf "$WORK" "$EMPTY1" "$EMPTY2" "$WARM" "$TOOLS"
