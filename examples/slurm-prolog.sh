#!/bin/sh
# fleetcheck as a Slurm Prolog: probe this node before the job; exit non-zero to block it.
#
# slurm.conf:
#   Prolog=/etc/slurm/fleetcheck-prolog.sh
#
# As Slurm documents for a Prolog, this script calls no Slurm command (no sinfo, no scontrol):
# it only probes. On a non-zero exit slurmd itself drains the node (reason "Prolog error") and
# requeues the job held, so it never runs on a node where Triton would fall back to CPU. The
# cause is logged through logger(1) (tag fleetcheck-prolog) and kept in FLEETCHECK_CACHE.
# Draining with fleetcheck's own reason, and resuming, is the health check's job
# (examples/slurm-healthcheck.sh, HealthCheckProgram); see docs/integrations.md.
#
# By the exit code of `fleetcheck probe`:
#   0 (ok or warn)          exit 0: the job runs.
#   1 (fail)                exit 1: Slurm drains the node and requeues the job held.
#   3 or anything else      the probe could not verify the node (timeout, crash, fleetcheck
#                           missing): exit 0, the job runs. An unverified probe is no evidence
#                           against the node; FLEETCHECK_BLOCK_UNVERIFIED=1 blocks instead.
#
# Settings (environment; Slurm's prolog environment is minimal, so set them in a wrapper):
#   FLEETCHECK                  the fleetcheck command         (default: fleetcheck)
#   FLEETCHECK_PLAYBOOK         playbook for the probe         (default: quick)
#   FLEETCHECK_TIMEOUT          seconds for the probe          (default: 30)
#   FLEETCHECK_CACHE            also save the verdict here, for the health check (default: none)
#   FLEETCHECK_BLOCK_UNVERIFIED 1: block the job on an unverified probe too (default: 0)
#   FLEETCHECK_SYSLOG           0: log to stderr only, not also through logger(1) (default: 1)
set -u

FLEETCHECK="${FLEETCHECK:-fleetcheck}"
PLAYBOOK="${FLEETCHECK_PLAYBOOK:-quick}"
TIMEOUT="${FLEETCHECK_TIMEOUT:-30}"
CACHE="${FLEETCHECK_CACHE:-}"
BLOCK_UNVERIFIED="${FLEETCHECK_BLOCK_UNVERIFIED:-0}"
SYSLOG="${FLEETCHECK_SYSLOG:-1}"
NODE="${SLURMD_NODENAME:-$(hostname -s)}"

case "$TIMEOUT" in
    "" | 0 | *[!0-9]*) TIMEOUT=30 ;;  # a typo here must not fail every job on the node
esac

log() {
    printf 'fleetcheck-prolog: %s: job %s: %s\n' "$NODE" "${SLURM_JOB_ID:-?}" "$*" >&2
    if [ "$SYSLOG" = 1 ] && command -v logger >/dev/null 2>&1; then
        logger -t fleetcheck-prolog -- "$NODE: job ${SLURM_JOB_ID:-?}: $*" || :
    fi
}

# fleetcheck's own lines: a Python warning some library printed (`FILE:LINE: NAMEWarning: TEXT`
# and the source line under it) is never taken for fleetcheck's words.
own_lines() {
    awk '/^[^ ].*:[0-9]+: [A-Za-z0-9_]*Warning: / { skip = 1; next }
         skip && /^  / { skip = 0; next }
         { skip = 0; print }'
}

set -- probe --playbook "$PLAYBOOK" --timeout "$TIMEOUT"
[ -n "$CACHE" ] && set -- "$@" --cache "$CACHE"

if command -v timeout >/dev/null 2>&1; then
    # A hard bound over the probe's own deadline: a hung prolog holds the job.
    output=$(timeout -k 5 "$((TIMEOUT + 10))" "$FLEETCHECK" "$@" 2>&1)
else
    output=$("$FLEETCHECK" "$@" 2>&1)
fi
status=$?

case "$status" in
    0)
        exit 0
        ;;
    1)
        # The table's "Causes and fixes" lines name the cause; keep them for the log.
        log "probe failed; blocking the job: $(printf '%s\n' "$output" | own_lines | grep -m 3 -E 'cpu-fallback|FAIL|fix:' | tr '\n' ' ')"
        exit 1
        ;;
    *)
        if [ "$BLOCK_UNVERIFIED" = 1 ]; then
            log "could not verify the node (probe exit $status); blocking the job"
            exit 1
        fi
        log "could not verify the node (probe exit $status); job allowed"
        exit 0
        ;;
esac
