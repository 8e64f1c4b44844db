#!/usr/bin/env bash
# Where the probe's time and memory go on a GPU machine (docs/probe-performance.md): as the
# current user, a home of its own; the bare workload start (import torch + get_current_target)
# and the profiled probe (bench/probe_profile.py), on a warm and on a cold Triton cache,
# alternating, $RUNS each; then each helper alone, and Triton's own build of its driver module
# beside a minimal module built the same way. Output: $OUT/profile.txt and the JSON beside it.
#   OUT=/tmp/out RUNS=3 PARTS="timing memory nogpu deep settings helpers build" \
#     bench/probe_profile_gpu.sh [probe.py...]
set -u
PARTS=${PARTS:-timing memory nogpu deep settings helpers build}
part() { case " $PARTS " in *" $1 "*) return 0 ;; esac; return 1; }
OUT=${OUT:-/tmp/fleetcheck-profile}
RUNS=${RUNS:-3}
HERE=$(cd "$(dirname "$0")/.." && pwd)
PROBES=("${@:-$HERE/fleetcheck/probe/probe.py}")
PY=$(command -v python3)
mkdir -p "$OUT"
W=$(mktemp -d /tmp/fleetcheck-profile.XXXX)
export HOME=$W/home TMPDIR=$W/tmp
mkdir -p "$HOME" "$TMPDIR"
BARE='import torch, triton; triton.runtime.driver.active.get_current_target()'
tree() { "$PY" "$HERE/bench/probe_profile.py" --tree -- "$@"; }
{
echo "### $(nvidia-smi --query-gpu=name,driver_version,persistence_mode --format=csv,noheader | head -1); $("$PY" -c 'import torch, triton, sys; print(sys.version.split()[0], torch.__version__, triton.__version__)' 2>/dev/null); $(nproc) cpus"
"$PY" -c "$BARE"
part timing && for i in $(seq "$RUNS"); do
  echo "bare warm: $(tree "$PY" -c "$BARE")"
  n=0
  for p in "${PROBES[@]}"; do
    n=$((n + 1))
    "$PY" "$HERE/bench/probe_profile.py" "$p" > "$OUT/warm.$n.$i.json"
    echo "probe $n warm: $("$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["total_s"], "s", d["peak_rss_mb"], "MB rss", d["peak_pss_mb"], "MB pss", d["peak_procs"], "procs")' "$OUT/warm.$n.$i.json")"
  done
  rm -rf "$HOME/.triton"
  echo "bare cold: $(tree "$PY" -c "$BARE")"
  n=0
  for p in "${PROBES[@]}"; do
    n=$((n + 1))
    rm -rf "$HOME/.triton"
    "$PY" "$HERE/bench/probe_profile.py" "$p" > "$OUT/cold.$n.$i.json"
    echo "probe $n cold: $("$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["total_s"], "s", d["peak_rss_mb"], "MB rss", d["peak_pss_mb"], "MB pss", d["peak_procs"], "procs")' "$OUT/cold.$n.$i.json")"
  done
  "$PY" -c "$BARE"
done
if part memory; then
echo "### memory: each run in a cgroup of its own (bench/cgroup_peak.py): memory.peak (all its processes, the page cache they charged), and what made the sampled high"
cg() { "$PY" "$HERE/bench/cgroup_peak.py" "$@"; }
summary() { "$PY" -c '
import json, sys
d = json.loads(sys.stdin.read())
h = d.get("sampled_high") or {}
each = "; ".join("%s anon %s file %s" % (p["cmd"][:40], p.get("RssAnon"), p.get("RssFile"))
                 for p in h.get("processes", []))
print("peak %s MB oom_kill %s verdict %s | high %s MB at %s s: %s | %s" % (
    d["peak_mb"], d["oom_kill"], d.get("verdict"), h.get("current_mb"), h.get("at_s"),
    h.get("stat_mb"), each))'; }
# Each probe as fleetcheck launches it (`-c BOOTSTRAP`, zlib(probe) on stdin: transport/
# packing.py) and as `python3 -` with its source on stdin.
ZBOOT=$(PYTHONPATH=$HERE "$PY" -c 'from fleetcheck.transport.packing import ZLIB_BOOTSTRAP as b; print(b)')
launch() {  # launch FORM PROBE [cgroup_peak options]: the probe run in a cgroup of its own
  local form=$1 p=$2; shift 2
  if [ "$form" = bootstrap ]; then
    "$PY" -c 'import sys,zlib; sys.stdout.buffer.write(zlib.compress(open(sys.argv[1],"rb").read(), 6))' "$p" > "$W/probe.z"
    cg "$@" --stdin "$W/probe.z" -- "$PY" -c "$ZBOOT"
  else
    cg "$@" --stdin "$p" -- "$PY" -
  fi
}
peaks=()
for i in 1 2 3; do
  b=$(cg -- "$PY" -c "$BARE"); echo "bare warm: $(summary <<<"$b")"
  peaks+=("$("$PY" -c 'import json,sys; print(int(json.loads(sys.argv[1])["peak_mb"] * 2**20))' "$b")")
  for p in "${PROBES[@]}"; do
    for form in ${FORMS:-bootstrap stdin}; do
      echo "probe $(basename "$p") ($form) warm: $(launch "$form" "$p" | summary)"
    done
  done
done
med=$(printf '%s\n' "${peaks[@]}" | sort -g | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}')
if [ -n "$med" ] && [ "$med" -gt 0 ] 2>/dev/null; then
  LIMIT=$(( med * 11 / 10 ))
  echo "memory.max = 1.1 x the bare start's median peak = $LIMIT"
  for p in "${PROBES[@]}"; do
    for form in ${FORMS:-bootstrap stdin}; do
      echo "probe $(basename "$p") ($form) under it: $(launch "$form" "$p" --limit "$LIMIT" | summary)"
    done
  done
fi
echo "what glibc keeps of a bare start's freed heap (RssAnon kB before and after malloc_trim):"
"$PY" -c "$BARE"'
import ctypes
anon = lambda: [l.split()[1] for l in open("/proc/self/status") if l.startswith("RssAnon")][0]
a = anon(); ctypes.CDLL(None).malloc_trim(0); print(a, anon())'
fi
if part nogpu; then
echo "### no GPU stack (a sysroot without the GPU, the system python without torch)"
NOGPU_PY=$(PATH=/usr/local/bin:/usr/bin:/bin command -v python3)
mkdir -p "$W/empty-sysroot"
for i in 1 2 3; do echo "interpreter start, python3 -c pass: $("$PY" "$HERE/bench/probe_profile.py" --tree -- "$NOGPU_PY" -c pass)"; done
for p in "${PROBES[@]}"; do
  for i in 1 2 3 4 5; do
    echo "probe $(basename "$p") no gpu: $(PATH=/usr/local/bin:/usr/bin:/bin FLEETCHECK_SYSROOT=$W/empty-sysroot "$PY" "$HERE/bench/probe_profile.py" --tree -- "$NOGPU_PY" "$p")"
  done
done
fi
if part deep; then
echo "### --deep beside the bare kernel script (a fresh TRITON_CACHE_DIR each: both compile the kernel)"
for i in $(seq "$RUNS"); do
  c=$(mktemp -d); echo "bare kernel: $(TRITON_CACHE_DIR=$c tree "$PY" "$HERE/scripts/bare_kernel.py")"; rm -rf "$c"
  for p in "${PROBES[@]}"; do
    c=$(mktemp -d); t0=$EPOCHREALTIME
    TRITON_CACHE_DIR=$c "$PY" - --deep < "$p" > "$W/deep.json" 2>/dev/null
    echo "probe $(basename "$p") --deep: $(awk "BEGIN{print $EPOCHREALTIME - $t0}") s $("$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); k=[c for c in d["checks"] if c["id"] == "triton_kernel"]; print(d["triton"]["verdict"], [c["status"] for c in k], "" if d["triton"]["verdict"] == "gpu" else (d["reason"], [c["summary"] for c in k]))' "$W/deep.json")"
    cp "$W/deep.json" "$OUT/deep.$(basename "$p").$i.json"
    rm -rf "$c"
  done
done
fi
if part settings; then
echo "### inductor's config: read from its source (the probe) against its import"
"$PY" - "${PROBES[-1]}" <<'PYEOF'
import os, sys
ns = {"__name__": "x"}
exec(compile(open(sys.argv[1]).read(), "probe", "exec"), ns)
code = ns["STACK_SCRIPT"]
import re
start = code.index("class NotPlain(")
tail = code.index("def source_settings(")
m = re.search(r"\n(?=\S)", code[tail + 1:])
scope = {"sys": sys, "_os": os}
exec(code[start:tail + 1 + m.start() if m else len(code)], scope)
import torch
config = os.path.join(os.path.dirname(torch.__file__), "_inductor", "config.py")
for env in ({}, {"TORCHINDUCTOR_TRITON_DISABLE_DEVICE_DETECTION": "1", "CXX": "clang++"}):
    os.environ.update(env)
    found = scope["source_settings"](config, (("triton_disable_device_detection", None), ("cxx", "cpp")))
    print("source", env, found)
import torch._inductor.config as c
print("import (last env)", c.triton_disable_device_detection, c.cpp.cxx)
PYEOF
fi
if part helpers; then
echo "### helpers alone"
"$PY" - "${PROBES[0]}" "$W" <<'PYEOF'
import json, os, subprocess, sys, time
ns = {"__name__": "x"}
exec(compile(open(sys.argv[1]).read(), "probe", "exec"), ns)
w = sys.argv[2]
def timed(label, argv, **kw):
    t = time.monotonic()
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)
    print("%s: %.3f s rc=%s %s" % (label, time.monotonic() - t, p.returncode, p.stderr[-200:]))
for i in range(2):
    timed("python -I -c pass", [sys.executable, "-I", "-c", "pass"])
    timed("gpustate", [sys.executable, "-I", "-c", ns["GPUSTATE_SCRIPT"]])
    timed("cuda", [sys.executable, "-I", "-c", ns["CUDA_SCRIPT"]])
    timed("nvidia-smi", ["nvidia-smi", "--query-gpu=index,name,uuid,memory.total,compute_cap,driver_version", "--format=csv,noheader,nounits"])
    timed("ldconfig -p", ["/sbin/ldconfig", "-p"])
    timed("import torch", [sys.executable, "-c", "import torch"])
    timed("import torch; cuda.is_available", [sys.executable, "-c", "import torch; torch.cuda.is_available()"])
    timed("import torch + inductor config", [sys.executable, "-c", "import torch; import torch._inductor.config"])
    timed("import triton", [sys.executable, "-c", "import triton"])
    for mode in ("meta", "full"):
        fresh = os.path.join(w, "fresh%d%s" % (i, mode))
        os.mkdir(fresh)
        own = json.dumps({"name": ".fleetcheck-probe-x", "deep": False, "env": {}})
        timed("stack " + mode, [sys.executable, "-c", ns["STACK_SCRIPT"], fresh, "null", mode, own],
              env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"))
PYEOF
fi
if part build; then
echo "### Triton's build of its driver module, and a minimal module the same way"
"$PY" - <<'PYEOF'
import os, tempfile, time
import triton
from triton.runtime import build
from triton.backends.nvidia import driver as d
src = open(os.path.join(os.path.dirname(d.__file__), "driver.c")).read()
tiny = ('#include "cuda.h"\n#include <Python.h>\nstatic struct PyModuleDef m = '
        '{PyModuleDef_HEAD_INIT, "cuda_utils", NULL, -1, NULL};\n'
        'PyMODINIT_FUNC PyInit_cuda_utils(void) { return PyModule_Create(&m); }\n')
for label, text in (("driver.c", src), ("minimal", tiny), ("driver.c", src), ("minimal", tiny)):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "cuda_utils.c")
        open(path, "w").write(text)
        t = time.monotonic()
        so = build._build("cuda_utils", path, tmp, d.library_dirs(), d.include_dirs, d.libraries, [])
        print("%s: %.3f s, %d bytes" % (label, time.monotonic() - t, os.path.getsize(so)))
t = time.monotonic(); d.library_dirs(); print("library_dirs(): %.3f s" % (time.monotonic() - t))
PYEOF
fi
} 2>&1 | tee "$OUT/profile.txt"
rm -rf "$W"
