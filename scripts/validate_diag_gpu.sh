#!/usr/bin/env bash
# Issue 21 on a real GPU machine, as root: each case in its own private mount namespace
# (unshare -m), the ground truth (scripts/ground_truth_gpu.py: the workload's own
# get_current_target() and kernel, FLA's import, torch.compile) beside the probe, in the same
# environment. FLA must be importable (PYTHONPATH). Results: $OUT/CASE.txt, then all of them.
# The vllm_* and fla_* cases add $VLLM (vLLM's files), $FLA6 (fla-core and
# flash-linear-attention 0.6.0 unpacked) or $FLAHALF (fla-core 0.5.2 under
# flash-linear-attention 0.6.0), $FW (xformers, Liger-Kernel, mamba-ssm, causal-conv1d, with
# empty modules for the CUDA extensions) or $FWSRC (the same without them) to PYTHONPATH.
#   OUT=/tmp/out scripts/validate_diag_gpu.sh [CASE...]
set -u
OUT=${OUT:-/tmp/fleetcheck-validate-diag}
PROBE=${PROBE:-$PWD/fleetcheck/probe/probe.py}
GT=$PWD/scripts/ground_truth_gpu.py
PY=$(command -v python3)
mkdir -p "$OUT"
if [ -z "${W:-}" ]; then W=$(mktemp -d /tmp/gtw.XXXX); chmod 755 "$W"; fi
export W

mk() { mkdir -p "$1"; mount -t tmpfs -o "size=$2${3:+,$3}" tmpfs "$1"; }
fill() {  # fill a mount, leaving $2 KiB free (0 when absent)
  dd if=/dev/zero of="$1/fill" bs=4k 2>/dev/null
  if [ -n "${2:-}" ]; then
    rm -f "$1/fill"
    dd if=/dev/zero of="$1/fill" bs=1k count=$(( $(df -k --output=avail "$1" | tail -1) - $2 )) 2>/dev/null
  fi
}
shim() {  # an extra Triton backend package (entry point "shim"), its driver always active
  mkdir -p "$1/fleetcheck_shim_backend" "$1/fleetcheck_shim_backend-1.0.dist-info"
  : > "$1/fleetcheck_shim_backend/__init__.py"
  printf '%s\n' 'from triton.backends.compiler import BaseBackend' \
    'class ShimBackend(BaseBackend):' '    supports_target = staticmethod(lambda target: False)' \
    'ShimBackend.__abstractmethods__ = frozenset()' > "$1/fleetcheck_shim_backend/compiler.py"
  printf '%s\n' 'from triton.backends.driver import DriverBase' \
    'class ShimDriver(DriverBase):' '    is_active = staticmethod(lambda: True)' \
    'ShimDriver.__abstractmethods__ = frozenset()' > "$1/fleetcheck_shim_backend/driver.py"
  printf 'Metadata-Version: 2.1\nName: fleetcheck-shim-backend\nVersion: 1.0\n\n' \
    > "$1/fleetcheck_shim_backend-1.0.dist-info/METADATA"
  printf 'fleetcheck_shim_backend/__init__.py,,\n' > "$1/fleetcheck_shim_backend-1.0.dist-info/RECORD"
  printf '[triton.backends]\nshim = fleetcheck_shim_backend\n' \
    > "$1/fleetcheck_shim_backend-1.0.dist-info/entry_points.txt"
}
one() {  # one case, inside its namespace
  local name=$1 pre modes="triton fla compile"
  case $name in
    healthy) pre=(env TRITON_CACHE_DIR=$W/c-healthy) ;;
    cache_full) mk /mnt/cf 1m; mkdir /mnt/cf/cache; fill /mnt/cf; pre=(env TRITON_CACHE_DIR=/mnt/cf/cache) ;;
    cache_16k) mk /mnt/cn 1m; mkdir /mnt/cn/cache; fill /mnt/cn 16; pre=(env TRITON_CACHE_DIR=/mnt/cn/cache) ;;
    tmp_full) mk /mnt/tf 1m; fill /mnt/tf; pre=(env TMPDIR=/mnt/tf TRITON_CACHE_DIR=$W/c-tmpfull) ;;
    interpret) pre=(env TRITON_INTERPRET=1 TRITON_CACHE_DIR=$W/c-interp) ;;
    nouser) mkdir -p $W/h4242; chown 4242:4242 $W/h4242
      pre=(setpriv --reuid=4242 --regid=4242 --clear-groups env -u USER -u LOGNAME -u LNAME
           -u USERNAME HOME=$W/h4242 TRITON_CACHE_DIR=$W/h4242/tc) ;;
    inductor_dir) pre=(env TORCHINDUCTOR_CACHE_DIR=/proc/fleetcheck-no TRITON_CACHE_DIR=$W/c-ind) ;;
    cache_noexec) mk /mnt/nx 16m noexec; pre=(env TRITON_CACHE_DIR=/mnt/nx/cache) ;;
    cc_flags) printf '#!/bin/sh\nexec /usr/bin/gcc -march=fleetcheck "$@"\n' > $W/cc-flags
      chmod 755 $W/cc-flags; pre=(env CC=$W/cc-flags TRITON_CACHE_DIR=$W/c-ccflags) ;;
    nobody_root) pre=(setpriv --reuid=65534 --regid=65534 --clear-groups env HOME=/root) ;;
    backend_extra) shim $W/xb-$name; modes=triton
      pre=(env PYTHONPATH=$W/xb-$name TRITON_CACHE_DIR=$W/c-$name) ;;
    backend_default) shim $W/xb-$name; modes=triton
      pre=(env PYTHONPATH=$W/xb-$name TRITON_DEFAULT_BACKEND=nvidia TRITON_CACHE_DIR=$W/c-$name) ;;
    vllm_ok) modes="triton vllm"; pre=(env PYTHONPATH=$VLLM TRITON_CACHE_DIR=$W/c-$name) ;;
    vllm_no_nvml) modes=vllm; : > $W/empty-$name  # NVML unloadable, in this namespace only
      for f in $(ldconfig -p | awk '/libnvidia-ml\.so\.1 /{print $NF}'); do
        mount --bind $W/empty-$name "$(readlink -f "$f")"; done
      pre=(env PYTHONPATH=$VLLM TRITON_CACHE_DIR=$W/c-$name) ;;
    fla_ok) modes="fla fla_layers"; pre=(env PYTHONPATH=$FLA6 TRITON_CACHE_DIR=$W/c-$name) ;;
    fla_half) modes="fla fla_layers"; pre=(env PYTHONPATH=$FLAHALF TRITON_CACHE_DIR=$W/c-$name) ;;
    imports) modes=imports; pre=(env PYTHONPATH=$FW TRITON_CACHE_DIR=$W/c-$name) ;;
    imports_noext) modes=imports; pre=(env PYTHONPATH=$FWSRC TRITON_CACHE_DIR=$W/c-$name) ;;
  esac
  {
    echo "### $name: ${pre[*]}"
    for m in $modes; do
      echo "gt-$m: $("${pre[@]}" "$PY" "$GT" $m 2>"$OUT/$name.gt-$m.err")"
    done
    "${pre[@]}" "$PY" - < "$PROBE" > "$OUT/$name.probe.json" 2> "$OUT/$name.probe.err"
    echo "probe rc=$?"
    "$PY" - "$OUT/$name.probe.json" <<'PYEOF'
import json, sys
doc = json.load(open(sys.argv[1]))
print("  verdict:", json.dumps(doc["triton"])[:600])
print("  status:", doc["status"], "|", doc["reason"][:300], "| %.1f s" % doc["duration_s"])
for c in doc["checks"]:
    if c["status"] not in ("pass", "skip") or c["id"] == "triton_own_path":
        print("   %s %s: %s" % (c["id"], c["status"], c["summary"][:300]))
for k, v in (doc["facts"].get("frameworks") or {}).items():
    print("   fw %s: %s | %s" % (k, v.get("outcome"), v.get("detail", "")[:200]))
PYEOF
  } > "$OUT/$name.txt" 2>&1
}
if [ "${1:-}" = --one ]; then one "$2"; exit; fi
cases=${*:-healthy cache_full cache_16k tmp_full interpret nouser inductor_dir cache_noexec cc_flags nobody_root}
for c in $cases; do
  OUT=$OUT PROBE=$PROBE unshare -m --propagation private bash "$0" --one "$c" &
done
wait
rm -rf "$W"
for c in $cases; do cat "$OUT/$c.txt"; done
