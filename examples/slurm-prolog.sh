#!/bin/sh
# fleetcheck as a Slurm Prolog (and HealthCheckProgram): probe this node, drain it on failure.
#
# slurm.conf:
#   Prolog=/etc/slurm/fleetcheck-prolog.sh        # before each job on the node
#   HealthCheckProgram=/etc/slurm/fleetcheck-prolog.sh
#   HealthCheckInterval=600                       # also re-checks drained nodes, so it resumes them
#
# What it does, by the exit code of `fleetcheck probe --format json`:
#   0 (ok or warn)   job runs (exit 0); if the node is drained by fleetcheck (its reason starts
#                    with "fleetcheck:"), it is resumed. Drains by anyone else are left alone.
#   1 (fail)         the node is drained with reason "fleetcheck: <cause>: <reason>", unless
#                    someone else already drained it (their reason is kept, as LBNL NHC does);
#                    exit 1, so Slurm requeues the job elsewhere (a node already drained keeps
#                    its reason: Slurm only writes "Prolog error" on an undrained node).
#   3 or anything else (the probe could not verify the node: timeout, crash, fleetcheck missing)
#                    nothing is drained and the job runs (exit 0): an unverified probe is not
#                    evidence against the node, and draining on it would take a whole partition
#                    down over a fleetcheck problem. FLEETCHECK_DRAIN_UNVERIFIED=1 drains instead.
#
# Settings (environment; Slurm's prolog environment is minimal, so set them here or in a wrapper):
#   FLEETCHECK                  the fleetcheck command         (default: fleetcheck)
#   FLEETCHECK_PLAYBOOK         playbook for the probe         (default: quick)
#   FLEETCHECK_TIMEOUT          seconds for the probe          (default: 120)
#   FLEETCHECK_PYTHON           python3 used to read the JSON  (default: python3)
#   FLEETCHECK_DRAIN_UNVERIFIED 1: drain on an unverified probe too (default: 0)
#   FLEETCHECK_SYSLOG           0: log to stderr only, not also through logger(1) (default: 1)
set -u

TAG="fleetcheck:"
FLEETCHECK="${FLEETCHECK:-fleetcheck}"
PLAYBOOK="${FLEETCHECK_PLAYBOOK:-quick}"
TIMEOUT="${FLEETCHECK_TIMEOUT:-120}"
PYTHON="${FLEETCHECK_PYTHON:-python3}"
DRAIN_UNVERIFIED="${FLEETCHECK_DRAIN_UNVERIFIED:-0}"
SYSLOG="${FLEETCHECK_SYSLOG:-1}"
NODE="${SLURMD_NODENAME:-$(hostname -s)}"

case "$TIMEOUT" in
    "" | *[!0-9]*) TIMEOUT=120 ;;  # a typo here must not fail every job on the node
esac

log() {
    printf 'fleetcheck-prolog: %s: %s\n' "$NODE" "$*" >&2
    if [ "$SYSLOG" = 1 ] && command -v logger >/dev/null 2>&1; then
        logger -t fleetcheck-prolog -- "$NODE: $*" || :
    fi
}

# The node's current drain reason ("none" or empty when there is none); first line only,
# since sinfo -N prints the node once per partition.
current_reason() {
    sinfo -h -N -n "$NODE" -o %E 2>/dev/null | head -n 1
}

# One line for the drain reason from the probe's node JSON on stdin: "<cause>: <reason>",
# printable ASCII only, no quotes, at most 200 characters.
cause_of() {
    "$PYTHON" -c '
import json, sys
try:
    node = json.load(sys.stdin)
except ValueError:
    sys.exit(1)
if not isinstance(node, dict):
    sys.exit(1)
triton = node.get("triton") if isinstance(node.get("triton"), dict) else {}
cause = triton.get("cause") if isinstance(triton.get("cause"), str) else ""
if not cause:
    checks = node.get("checks") if isinstance(node.get("checks"), list) else []
    failed = [c.get("id") for c in checks if isinstance(c, dict) and c.get("status") == "fail"]
    cause = next((c for c in failed if isinstance(c, str)), "")
reason = node.get("reason") if isinstance(node.get("reason"), str) else ""
text = ": ".join(part for part in (cause, reason) if part) or "probe failed"
quotes = {34, 39, 92}  # double quote, single quote, backslash
text = "".join(ch if " " <= ch <= "~" and ord(ch) not in quotes else " " for ch in text)
print(" ".join(text.split())[:200])
' 2>/dev/null
}

drain() {
    reason=$(current_reason)
    case "$reason" in
        "" | none | "(null)" | "$TAG"*) ;;
        *)
            log "probe failed ($1); already drained by someone else, reason kept: $reason"
            return 0
            ;;
    esac
    log "draining: $1"
    scontrol update "nodename=$NODE" state=drain "reason=$TAG $1" ||
        log "scontrol could not drain the node"
}

resume_if_ours() {
    reason=$(current_reason)
    case "$reason" in
        "$TAG"*)
            log "probe passed; resuming (was drained with: $reason)"
            scontrol update "nodename=$NODE" state=resume ||
                log "scontrol could not resume the node"
            ;;
    esac
}

if command -v timeout >/dev/null 2>&1; then
    # A hard bound over the probe's own timeout: a hung prolog holds the job forever.
    output=$(timeout -k 10 "$((TIMEOUT + 30))" \
        "$FLEETCHECK" probe --format json --playbook "$PLAYBOOK" --timeout "$TIMEOUT" 2>/dev/null)
else
    output=$("$FLEETCHECK" probe --format json --playbook "$PLAYBOOK" --timeout "$TIMEOUT" \
        2>/dev/null)
fi
status=$?

case "$status" in
    0)
        resume_if_ours
        exit 0
        ;;
    1)
        cause=$(printf '%s\n' "$output" | cause_of) || cause=""
        [ -n "$cause" ] || cause="probe failed"
        drain "$cause"
        exit 1
        ;;
    *)
        if [ "$DRAIN_UNVERIFIED" = 1 ]; then
            drain "could not verify the node (probe exit $status)"
            exit 1
        fi
        log "could not verify the node (probe exit $status); not draining, job allowed"
        exit 0
        ;;
esac
