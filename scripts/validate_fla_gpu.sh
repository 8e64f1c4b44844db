#!/usr/bin/env bash
# Validate issue 10 on a real NVIDIA GPU machine: the real FLA 0.6.0 wheels with and without a
# compiler, and the catalogue rows that can be made real on one healthy GPU (a stale ld cache
# entry in a private mount namespace, the CUDA toolkit's stub libcuda first on
# LD_LIBRARY_PATH, CUDA's forward-compat libcuda). Run from the repository root as root (for
# unshare -m); WHEELS holds the flash-linear-attention and fla-core wheels; results go to $OUT.
#   WHEELS=.test-wheels OUT=/tmp/out scripts/validate_fla_gpu.sh
set -u
OUT=${OUT:-$PWD/validate-out}
PY=${PY:-$(python3 -c "import sys; print(sys.executable)")}
PYBIN=$(dirname "$PY")
PROBE=$PWD/fleetcheck/probe/probe.py
WORK=$(mktemp -d)
mkdir -p "$OUT"
exec > >(tee "$OUT/log.txt") 2>&1

echo "## machine"
nvidia-smi --query-gpu=index,name,driver_version,compute_cap --format=csv,noheader
"$PY" -c 'import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)'
echo "CC=${CC:-unset} gcc=$(command -v gcc) LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
FLA=$WORK/fla-site
"$PY" -m pip install -q --no-deps --no-index --target "$FLA" \
  "$WHEELS"/fla_core-0.6.0-py3-none-any.whl "$WHEELS"/flash_linear_attention-0.6.0-py3-none-any.whl
ls "$FLA"

# case NAME ARGS... : the probe from stdin under `env ARGS...`; NAME.json, and a digest line
case_() {
  local name=$1; shift
  env "$@" < "$PROBE" > "$OUT/$name.json" 2> "$OUT/$name.err"
  echo "== $name rc=$?"
  "$PY" - "$OUT/$name.json" <<'PYEOF'
import json, sys
doc = json.load(open(sys.argv[1]))
print("verdict:", doc["triton"], "| status:", doc["status"], "|", doc["reason"])
for c in doc["checks"]:
    if c["status"] not in ("pass", "skip") or c["id"] in ("fla_fallback_hidden",
            "ldcache_stale_libcuda_entry", "libcuda_stub_shadowing",
            "cuda_compat_on_unsupported_gpu", "fabric_manager_not_ready", "cache_on_network_fs"):
        print("  %s %s: %s" % (c["id"], c["status"], c["summary"]))
        if c["fix"]:
            print("     fix:", c["fix"])
for name, fw in (doc["facts"].get("frameworks") or {}).items():
    print("  framework %s: %s | %s" % (name, fw["outcome"], fw["detail"]))
print("  facts.fla:", doc["facts"].get("fla"))
PYEOF
}

echo "## 1: FLA 0.6.0, normal environment"
case_ fla_normal PYTHONPATH="$FLA" TRITON_CACHE_DIR="$(mktemp -d)" "$PY" -
echo "## 2: FLA 0.6.0, no compiler (CC unset, PATH = the interpreter's folder), fresh cache"
case_ fla_no_compiler -u CC PATH="$PYBIN" PYTHONPATH="$FLA" TRITON_CACHE_DIR="$(mktemp -d)" "$PY" -
echo "## 2b: FLA itself, the same environment (its own warning)"
env -u CC PATH="$PYBIN" PYTHONPATH="$FLA" TRITON_CACHE_DIR="$(mktemp -d)" "$PY" -c \
  'import fla.utils as u; print("device_platform =", u.device_platform)' 2>&1 | grep -v '^ *warnings.warn' | sort | uniq -c | tail -5

echo "## 3: stale ld cache entry (private mount namespace)"
# A linker cache that lists libcuda.so.1 only at a path this machine lacks (as in an Apptainer
# image built elsewhere), built with ldconfig -r in a scratch root, bound over /etc/ld.so.cache.
REAL=$("$PY" -c 'import ctypes;ctypes.CDLL("libcuda.so.1");print([l.split()[-1] for l in open("/proc/self/maps") if "libcuda.so" in l][0])')
echo "real libcuda: $REAL"
GONE=/usr/local/cuda/compat/lib
[ -e "$GONE" ] && GONE=/usr/local/cuda-image/compat/lib
R=$WORK/root
mkdir -p "$R$GONE" "$R/etc" "$R/lib" "$R/usr/lib"
cp "$REAL" "$R$GONE/$(basename "$REAL")"
ln -s "$(basename "$REAL")" "$R$GONE/libcuda.so.1"
echo "$GONE" > "$R/etc/ld.so.conf"
/sbin/ldconfig -r "$R"
/sbin/ldconfig -p -C "$R/etc/ld.so.cache"
if unshare -m true 2>/dev/null; then
  unshare -m sh -c "mount --bind '$R/etc/ld.so.cache' /etc/ld.so.cache && /sbin/ldconfig -p | grep libcuda; \
    TRITON_CACHE_DIR=\$(mktemp -d) '$PY' -c 'import triton; triton.runtime.driver.active.get_current_target()' 2>&1 | tail -3; \
    env TRITON_CACHE_DIR=\$(mktemp -d) '$PY' - < '$PROBE' > '$OUT/stale_ldcache.json'"
  "$PY" - "$OUT/stale_ldcache.json" <<'PYEOF'
import json, sys
doc = json.load(open(sys.argv[1]))
print("verdict:", doc["triton"])
for c in doc["checks"]:
    if c["id"] in ("libcuda_not_in_ldcache", "ldcache_stale_libcuda_entry", "triton_target"):
        print("  %s %s: %s | fix: %s" % (c["id"], c["status"], c["summary"], c["fix"]))
PYEOF
else
  echo "unshare -m not permitted here"
fi
rm -rf "$R"

echo "## 3b: torch.compile itself with no compiler (what inductor does)"
"$(command -v timeout)" 180 env -u CC PATH="$PYBIN" TRITON_CACHE_DIR="$(mktemp -d)" "$PY" -c '
import torch
f = torch.compile(lambda x: x.sin() + 1)
try:
    print(f(torch.ones(8, device="cuda")))
except Exception as e:
    print("torch.compile raised", type(e).__name__ + ":", str(e).strip().splitlines()[0][:300])
    print("  ...", [l for l in str(e).splitlines() if "C compiler" in l][:1])
' 2>&1 | tail -4

echo "## 4: the CUDA toolkit's stub libcuda first on LD_LIBRARY_PATH"
STUB=$(ls /usr/local/cuda/lib64/stubs/libcuda.so /usr/local/cuda/targets/x86_64-linux/lib/stubs/libcuda.so 2>/dev/null | head -1)
if [ -z "$STUB" ]; then STUB=$(find / -xdev -path '*stubs/libcuda.so' 2>/dev/null | head -1); fi
echo "stub: ${STUB:-none}"
if [ -n "$STUB" ]; then
  mkdir -p "$WORK/stubs"; ln -s "$STUB" "$WORK/stubs/libcuda.so.1"
  LDP="$WORK/stubs:${LD_LIBRARY_PATH:-}"
  env LD_LIBRARY_PATH="$LDP" "$PY" -c 'import torch; print("torch sees", torch.cuda.is_available())' 2>&1 | tail -2
  case_ stub_libcuda LD_LIBRARY_PATH="$LDP" TRITON_CACHE_DIR="$(mktemp -d)" "$PY" -
fi

echo "## 5: CUDA's forward-compat libcuda first on LD_LIBRARY_PATH"
COMPAT=$(ls -d /usr/local/cuda/compat /usr/local/cuda/compat/lib 2>/dev/null | while read d; do [ -e "$d/libcuda.so.1" ] && echo "$d"; done | head -1)
echo "compat: ${COMPAT:-none}"
if [ -n "$COMPAT" ]; then
  ls -l "$COMPAT" | head
  case_ compat_libcuda LD_LIBRARY_PATH="$COMPAT:${LD_LIBRARY_PATH:-}" TRITON_CACHE_DIR="$(mktemp -d)" "$PY" -
fi
echo "## 6: file-system type of the default cache dir"
"$PY" - <<'PYEOF'
import os
home = os.path.expanduser("~")
best = None
for line in open("/proc/self/mountinfo"):
    head, _, tail = line.partition(" - ")
    point = head.split()[4]
    if home == point or home.startswith(point.rstrip("/") + "/"):
        if best is None or len(point) >= len(best[0]):
            best = (point, tail.split()[0])
print("HOME", home, "on", best)
PYEOF
echo "## done"
