#!/usr/bin/env bash
# bench/schedules.sh - SCHED_TOTAL (default 100,000) schedules, each every minute, on one daemon (bench/schedules.mjs):
#   create     how fast POST /v1/schedules stores them
#   idle       the daemon's CPU while every schedule is stored and none is due: the engine keeps one timer
#   burst      SCHED_BURST (default 10,000) of them fire in the same second: the delay from the fire time to the
#              job stored (its createdAt), p50, p99 and max
#   gap        the daemon's CPU in the quiet seconds after the burst, before the others' fire times
#   restart    the daemon stopped and started again on its data: the time from the fork to the first /readyz 200
#              with every schedule stored (start-up reads only the earliest fire time)
# The others fire in the second half of each minute, one thirtieth of them a second. Settings: SCHED_TOTAL,
# SCHED_BURST; SCHED_STORE, a postgresql:// URL to measure the PostgreSQL store instead of SQLite.
set -euo pipefail
# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

: "${SCHED_TOTAL:=100000}"
: "${SCHED_BURST:=10000}"

command -v node >/dev/null 2>&1 || bench_die "node not found (run scripts/deps.sh)"
[ -d "$BENCH_ROOT/node_modules/undici" ] || bench_die "undici not installed (run scripts/deps.sh)"
bench_init
echo "schedules: $SCHED_TOTAL every minute, $SCHED_BURST of them in one second${SCHED_STORE:+, PostgreSQL store}"
if [ -n "${SCHED_STORE:-}" ]; then
    start_acceptd --store "$SCHED_STORE"
else
    # shellcheck disable=SC2119 # no extra arguments for the daemon
    start_acceptd
fi
out=$(node "$BENCH_DIR/schedules.mjs" "$ACCEPTD_URL" "$ACCEPTD_PID" "$SCHED_TOTAL" "$SCHED_BURST") ||
    bench_die "bench/schedules.mjs failed"
v() { awk -v k="$1" '$1 == k { print $2 }' <<<"$out"; }
[ "$(v bad)" = 0 ] || bench_die "$(v bad) creates were not answered 201"
[ "$(v late)" = 0 ] || bench_die "the creates took $(v create_s) s: past the first fire time"
printf '%-8s %8.2f s  %7d schedules/s\n' create "$(v create_s)" "$(v create_per_s)"
printf '%-8s %8.2f %% CPU over %s s, %d schedules stored, none due\n' idle "$(v idle_cpu_pct)" "$(v idle_s)" "$SCHED_TOTAL"
[ "$(v burst_jobs)" = "$SCHED_BURST" ] || bench_die "the burst stored $(v burst_jobs) of $SCHED_BURST jobs"
printf '%-8s p50 %7d ms  p99 %7d ms  max %7d ms  from fire time to job stored (%d jobs)\n' burst \
    "$(v burst_p50_ms)" "$(v burst_p99_ms)" "$(v burst_max_ms)" "$(v burst_jobs)"
printf '%-8s %8.2f %% CPU over %s s after the burst\n' gap "$(v gap_cpu_pct)" "$(v gap_s)"
now_ms() { date +%s%3N; }
kill "$ACCEPTD_PID" 2>/dev/null || true
while kill -0 "$ACCEPTD_PID" 2>/dev/null; do sleep 0.05; done
t0=$(now_ms)
if [ -n "${SCHED_STORE:-}" ]; then
    start_acceptd --store "$SCHED_STORE"
else
    # shellcheck disable=SC2119 # no extra arguments for the daemon
    start_acceptd
fi
tries=6000
while [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 1 "$ACCEPTD_URL/readyz" 2>/dev/null)" != 200 ]; do
    tries=$((tries - 1))
    [ "$tries" -gt 0 ] || bench_die "no /readyz 200 in 60 s after the restart"
    sleep 0.01
done
printf '%-8s %8d ms  from the start to ready, %d schedules stored\n' restart "$(($(now_ms) - t0))" "$SCHED_TOTAL"
bench_record schedules-create "$(v create_per_s)"
exit 0
