#!/usr/bin/env bash
# bench/bulk.sh - a bulk cancel of BULK_JOBS (default 100,000) queued jobs (POST /v1/jobs:cancel), and what it does
# to the submits beside it, on one daemon in one run (bench/bulk.mjs):
#   cancel        the time from the request to its 200 (every page committed), and the jobs cancelled a second
#   submit-alone  BULK_CONNS (default 8) loops of POST /v1/jobs for BULK_SECONDS (default 5), with the jobs queued
#                 and no bulk cancel running: p50, p99, max latency and the rate
#   submit-during the same loops while the cancel runs (the submits sent between its request and its answer)
#   ratio         submit-during p99 / submit-alone p99: how long a bulk cancel holds other writes back
# The cancel must answer matched = changed = BULK_JOBS, and every submit 202, or the figures mean nothing.
# Settings: BULK_JOBS, BULK_CONNS, BULK_SECONDS; BULK_STORE, a postgresql:// URL to measure the PostgreSQL store
# instead of SQLite (a database the daemon may create its tables in).
set -euo pipefail
# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

: "${BULK_JOBS:=100000}"
: "${BULK_CONNS:=8}"
: "${BULK_SECONDS:=5}"

command -v node >/dev/null 2>&1 || bench_die "node not found (run scripts/deps.sh)"
[ -d "$BENCH_ROOT/node_modules/undici" ] || bench_die "undici not installed (run scripts/deps.sh)"
bench_init
echo "bulk: $BULK_JOBS queued jobs, $BULK_CONNS submit loops, ${BULK_SECONDS}s alone${BULK_STORE:+, PostgreSQL store}"
if [ -n "${BULK_STORE:-}" ]; then
    start_acceptd --store "$BULK_STORE"
else
    # shellcheck disable=SC2119 # no extra arguments for the daemon
    start_acceptd
fi
out=$(node "$BENCH_DIR/bulk.mjs" "$ACCEPTD_URL" "$BULK_JOBS" "$BULK_CONNS" "$BULK_SECONDS") ||
    bench_die "bench/bulk.mjs failed"
v() { awk -v k="$1" '$1 == k { print $2 }' <<<"$out"; }
[ "$(v matched)" = "$BULK_JOBS" ] && [ "$(v changed)" = "$BULK_JOBS" ] ||
    bench_die "the cancel matched $(v matched) and changed $(v changed) of $BULK_JOBS"
[ "$(v bad)" = 0 ] || bench_die "$(v bad) submits were not answered 202"
printf '%-14s %8.2f s  %7d jobs/s  (fill: %s s)\n' cancel "$(v cancel_s)" "$(v cancel_jobs_per_s)" "$(v fill_s)"
for k in alone during; do
    printf '%-14s p50 %7.2f ms  p99 %7.2f ms  max %7.2f ms  %6d submits/s (%d)\n' "submit-$k" "$(v ${k}_p50_ms)" \
        "$(v ${k}_p99_ms)" "$(v ${k}_max_ms)" "$(v ${k}_submits_per_s)" "$(v ${k}_submits)"
done
printf '%-14s %8.2fx  p99 of the submits during the cancel / alone\n' ratio "$(v p99_ratio)"
bench_record bulk-cancel-jobs "$(v cancel_jobs_per_s)"
exit 0
