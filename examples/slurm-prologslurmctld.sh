#!/bin/sh
# fleetcheck as a Slurm PrologSlurmctld: gate a job's whole node set on the controller.
#
# slurm.conf (the controller's):
#   PrologSlurmctld=/etc/slurm/fleetcheck-prologslurmctld.sh
#   PrologEpilogTimeout=120        # above FLEETCHECK_TIMEOUT + 15; Slurm's default is no limit
#
# slurmctld runs this once per job, at allocation, with SLURM_JOB_ID and SLURM_JOB_NODELIST
# (a hostlist: gpu[01-08]). It runs `fleetcheck gate INVENTORY --nodes "$SLURM_JOB_NODELIST"`:
# every node of the job is probed at once (over the inventory's SSH), each must pass the
# playbook, and the playbook's consistency checks run across the job's nodes (pre-training:
# driver, CUDA, torch, Triton and Python must agree; FLA and GPU models warn). The node names
# of Slurm must be host names of the inventory (a node range: hosts: {"gpu[01-64]": {}}).
#
# By the gate's exit code:
#   0                 exit 0: the job starts.
#   1 (a node failed, or the nodes disagree)
#                     the gate's first line becomes the job's comment ("fleetcheck: gpu03:
#                     fail: Triton cpu-fallback: no C compiler ..."), then exit 1: slurmctld
#                     requeues a batch job held (an interactive one is cancelled), so it waits
#                     with the reason in `scontrol show job` (Comment=) until an admin fixes
#                     the node and releases it (`scontrol release JOBID`).
#   2, 3, or the gate itself timed out or is missing
#                     the gate could not verify the nodes: the job starts, and the reason is
#                     logged; FLEETCHECK_BLOCK_UNVERIFIED=1 holds it instead. An unverified
#                     gate is no evidence against the nodes, and holding on it would let one
#                     fleetcheck problem stop every job of the cluster.
#
# Without SSH: with FLEETCHECK_DOCUMENTS set, the gate probes nothing and reads the node
# documents the nodes' own timers write into a shared folder (`fleetcheck probe --playbook
# pre-training --format json -o /shared/fleetcheck/$(hostname -s).json`):
# `fleetcheck gate --documents DIR --nodes "$SLURM_JOB_NODELIST"`. A job node without a
# document, or with one older than FLEETCHECK_MAX_AGE, is unverified (exit 3, see below).
#
# Settings (environment; slurmctld's is minimal, so set them in a wrapper):
#   FLEETCHECK                  the fleetcheck command         (default: fleetcheck)
#   FLEETCHECK_INVENTORY        the inventory naming the nodes (default: /etc/fleetcheck/inventory.yaml)
#   FLEETCHECK_PLAYBOOK         playbook for the gate          (default: pre-training)
#   FLEETCHECK_TIMEOUT          seconds for the whole gate     (default: 90)
#   FLEETCHECK_DOCUMENTS        gate from the node documents in this folder (default: probe)
#   FLEETCHECK_MAX_AGE          with it: oldest document that counts, seconds (default: 1800)
#   FLEETCHECK_BLOCK_UNVERIFIED 1: hold the job when the gate could not verify it (default: 0)
#   FLEETCHECK_SYSLOG           0: log to stderr only, not also through logger(1) (default: 1)
#   SCONTROL                    the scontrol command           (default: scontrol)
set -u

FLEETCHECK="${FLEETCHECK:-fleetcheck}"
INVENTORY="${FLEETCHECK_INVENTORY:-/etc/fleetcheck/inventory.yaml}"
PLAYBOOK="${FLEETCHECK_PLAYBOOK:-pre-training}"
TIMEOUT="${FLEETCHECK_TIMEOUT:-90}"
BLOCK_UNVERIFIED="${FLEETCHECK_BLOCK_UNVERIFIED:-0}"
SYSLOG="${FLEETCHECK_SYSLOG:-1}"
SCONTROL="${SCONTROL:-scontrol}"
DOCUMENTS="${FLEETCHECK_DOCUMENTS:-}"
MAX_AGE="${FLEETCHECK_MAX_AGE:-1800}"
JOB="${SLURM_JOB_ID:-}"
NODES="${SLURM_JOB_NODELIST:-}"

case "$TIMEOUT" in
    "" | 0 | *[!0-9]*) TIMEOUT=90 ;;  # a typo here must not hold every job
esac

log() {
    printf 'fleetcheck-prologslurmctld: job %s (%s): %s\n' "${JOB:-?}" "${NODES:-?}" "$*" >&2
    if [ "$SYSLOG" = 1 ] && command -v logger >/dev/null 2>&1; then
        logger -t fleetcheck-prologslurmctld -- "job ${JOB:-?} (${NODES:-?}): $*" || :
    fi
}

# fleetcheck's own lines: a Python warning some library printed (`FILE:LINE: NAMEWarning: TEXT`
# and the source line under it) is never taken for fleetcheck's words.
own_lines() {
    awk '/^[^ ].*:[0-9]+: [A-Za-z0-9_]*Warning: / { skip = 1; next }
         skip && /^  / { skip = 0; next }
         { skip = 0; print }'
}

# The reason users read: the gate's first line of its own (not a `fleetcheck: ` notice), one
# line, printable, no quotes (scontrol takes it as one argument).
reason_of() {
    printf '%s\n' "$1" | own_lines | grep -v '^fleetcheck: ' | head -n 1 \
        | tr -c '[:print:]\n' ' ' | tr -d "\"'\\\\" | cut -c 1-240
}

hold() {
    reason="fleetcheck: $1"
    if [ -n "$JOB" ]; then
        "$SCONTROL" update "JobId=$JOB" "Comment=$reason" >/dev/null 2>&1 \
            || log "could not set the job's comment"
        # Priority 0 is Slurm's hold: the requeue that follows exit 1 keeps it, so the job waits
        # rather than coming back to this gate every requeue interval.
        "$SCONTROL" update "JobId=$JOB" Priority=0 >/dev/null 2>&1 \
            || log "could not hold the job"
    fi
    log "holding the job: $reason"
    exit 1
}

[ -n "$NODES" ] || exit 0  # nothing allocated: nothing to gate

if [ -n "$DOCUMENTS" ]; then
    set -- gate --documents "$DOCUMENTS" --max-age "$MAX_AGE" --nodes "$NODES" \
        --playbook "$PLAYBOOK"
else
    set -- gate "$INVENTORY" --nodes "$NODES" --playbook "$PLAYBOOK" --timeout "$TIMEOUT"
fi
if command -v timeout >/dev/null 2>&1; then
    # A hard bound over the gate's own deadline: slurmctld waits on this script.
    output=$(timeout -k 5 "$((TIMEOUT + 10))" "$FLEETCHECK" "$@" 2>&1 >/dev/null)
else
    output=$("$FLEETCHECK" "$@" 2>&1 >/dev/null)
fi
status=$?

case "$status" in
    0)
        exit 0
        ;;
    1)
        hold "$(reason_of "$output")"
        ;;
    *)
        detail=$(printf '%s\n' "$output" | own_lines | head -n 1 | tr -c '[:print:]\n' ' ' \
            | cut -c 1-240)
        if [ "$BLOCK_UNVERIFIED" = 1 ]; then
            hold "could not verify the nodes (gate exit $status): $detail"
        fi
        log "could not verify the nodes (gate exit $status): $detail; job allowed"
        exit 0
        ;;
esac
