#!/bin/sh
# fleetcheck as Slurm's HealthCheckProgram: read the node's cached verdict, drain or resume.
#
# slurm.conf:
#   HealthCheckProgram=/etc/slurm/fleetcheck-healthcheck.sh
#   HealthCheckInterval=300
#   HealthCheckNodeState=ANY
#
# slurmd kills a HealthCheckProgram after 60 s, so this one never probes: as LBNL NHC does,
# it reads the latest verdict, written by the timer (examples/fleetcheck-node.timer runs
# `fleetcheck probe --cache`) or the prolog (FLEETCHECK_CACHE), and ends in well under a second.
#   fail                 drain the node, reason "fleetcheck: <cause>: <reason>", unless someone
#                        else already drained it (their reason is kept), or the drain would
#                        take more than FLEETCHECK_MAX_OUT of one of its partitions out of
#                        service at once (a fleet-wide failure): then it is left as it is.
#   ok                   resume the node, only if its drain reason starts with "fleetcheck:".
#   stale or missing     nothing changes (FLEETCHECK_DRAIN_UNVERIFIED=1: drain instead).
#
# Settings (environment):
#   FLEETCHECK                  the fleetcheck command          (default: fleetcheck)
#   FLEETCHECK_CACHE            the cached verdict              (default: /var/lib/fleetcheck/node.json)
#   FLEETCHECK_MAX_AGE          seconds a verdict stays current (default: 1800)
#   FLEETCHECK_DRAIN_UNVERIFIED 1: drain when the verdict is stale or missing (default: 0)
#   FLEETCHECK_MAX_OUT          most of a partition out at once: 10% or a count (default: 10%)
set -u

FLEETCHECK="${FLEETCHECK:-fleetcheck}"
CACHE="${FLEETCHECK_CACHE:-/var/lib/fleetcheck/node.json}"
MAX_AGE="${FLEETCHECK_MAX_AGE:-1800}"

set -- health --slurm --cache "$CACHE" --max-age "$MAX_AGE"
[ "${FLEETCHECK_DRAIN_UNVERIFIED:-0}" = 1 ] && set -- "$@" --drain-unverified
[ -n "${FLEETCHECK_MAX_OUT:-}" ] && set -- "$@" --max-out "$FLEETCHECK_MAX_OUT"

# Slurm ignores the exit code of a HealthCheckProgram; what counts is the drain it makes.
"$FLEETCHECK" "$@"
exit 0
