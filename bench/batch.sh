#!/usr/bin/env bash
# bench/batch.sh - bulk submit (POST /v1/jobs:batch, 100 jobs a request) against the single submit of the same
# daemon in the same run:
#   submit        POST /v1/jobs, one durable job a request (as in bench/http.sh)
#   batch         POST /v1/jobs:batch with BATCH_JOBS (default 100) jobs, each answered with its job
#   batch-min     the same with Prefer: return=minimal (each job answered with its id and Location only)
# Every job counted is durable: the 207 leaves after the commit that holds all of its jobs. A batch line prints
# requests/s, durable jobs/s (requests/s x BATCH_JOBS), and jobs/s as a ratio to the single submit's jobs/s
# and to issue 41's target of 100,000 jobs/s. Rounds and medians as in bench/http.sh (BENCH_ROUNDS, default 3).
#   cpu           the daemon's CPU time per job, per thread, during submit and batch (as submit-cpu in http.sh):
#                 steadier than the rates on a shared machine
# Settings: BATCH_WRK (default -t1 -c16 -d5s: 16 batches of 100 in flight hold 1,600 jobs, more than the
# writer's batch of 1,024 operations would take in one commit as single submits); BATCH_STORE, a postgresql://
# URL to measure the PostgreSQL store instead of SQLite (a database the daemon may create its tables in).
set -euo pipefail
# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

: "${BENCH_ROUNDS:=3}"
: "${BATCH_JOBS:=100}"
: "${BATCH_WRK:=-t1 -c16 -d5s}"
export BATCH_JOBS
TARGET=100000

bench_init
echo "batch: wrk $BENCH_WRK (submit), wrk $BATCH_WRK (batches of $BATCH_JOBS jobs)${BATCH_STORE:+, PostgreSQL store}"
if [ -n "${BATCH_STORE:-}" ]; then
    start_acceptd --store "$BATCH_STORE"
else
    start_acceptd
fi

# One batch by hand: every job 202 and durable, or the figures mean nothing.
body=$(BATCH_JOBS=$BATCH_JOBS awk -v n="$BATCH_JOBS" 'BEGIN { printf "{\"jobs\":["; for (i = 1; i <= n; i++)
    printf "%s{\"type\":\"bench\",\"payload\":{\"n\":%d}}", (i > 1 ? "," : ""), i; print "]}" }')
answer=$(curl -s --max-time 10 -H 'Content-Type: application/json' -d "$body" "$ACCEPTD_URL/v1/jobs:batch")
accepted=$(grep -o '"status":202,"id"' <<<"$answer" | wc -l)
[ "$accepted" = "$BATCH_JOBS" ] || {
    echo "${answer:0:600}" >&2
    bench_die "a batch of $BATCH_JOBS: $accepted jobs accepted"
}

cpu_lines=()
for round in $(seq "$BENCH_ROUNDS"); do
    thread_ticks "$ACCEPTD_PID" >"$BENCH_TMP/ticks-0"
    wrk_rate submit "$ACCEPTD_URL/v1/jobs" -s "$BENCH_DIR/submit.lua"
    round_keep submit
    thread_ticks "$ACCEPTD_PID" >"$BENCH_TMP/ticks-1"
    submit_cpu=$(cpu_per_request "$BENCH_TMP/ticks-0" "$BENCH_TMP/ticks-1" "$WRK_REQUESTS")
    BENCH_WRK=$BATCH_WRK wrk_rate batch "$ACCEPTD_URL/v1/jobs:batch" -s "$BENCH_DIR/batch.lua"
    round_keep batch
    thread_ticks "$ACCEPTD_PID" >"$BENCH_TMP/ticks-2"
    cpu_lines+=("$(printf '%-12ssubmit:%s; batch:%s per job (round %d)' cpu "$submit_cpu" \
        "$(cpu_per_request "$BENCH_TMP/ticks-1" "$BENCH_TMP/ticks-2" $((WRK_REQUESTS * BATCH_JOBS)))" "$round")")
    BENCH_WRK=$BATCH_WRK BATCH_PREFER=return=minimal wrk_rate batch-min "$ACCEPTD_URL/v1/jobs:batch" \
        -s "$BENCH_DIR/batch.lua"
    round_keep batch-min
done

report_rounds submit
for name in batch batch-min; do
    # Jobs/s: each round's requests/s times the jobs a request, against the single submit's jobs/s of the round.
    read -r median low high < <(paste -d ' ' <(round_list "$name") <(round_list submit) |
        awk -v n="$BATCH_JOBS" '$2 > 0 { print $1 * n / $2 }' | spread)
    read -r jobs _ _ < <(round_list "$name" | awk -v n="$BATCH_JOBS" '{ print $1 * n }' | spread)
    read -r rate _ _ < <(round_list "$name" | spread)
    printf '%-12s %8d req/s %9d jobs/s  %5.2fx submit (%.2f-%.2f)  %5.2fx target %d jobs/s%s\n' "$name" \
        "${rate%.*}" "${jobs%.*}" "$median" "$low" "$high" "$(awk -v j="$jobs" -v t=$TARGET 'BEGIN { print j / t }')" \
        "$TARGET" "${ROUND_ERRORS[$name]:-}"
done
printf '%s\n' "${cpu_lines[@]}"
# The writer's counters, which the daemon logs when it stops: operations (a batch is one), commits, and the
# time spent applying and committing.
kill "$ACCEPTD_PID" 2>/dev/null || true
wait "$ACCEPTD_PID" 2>/dev/null || true
stats=$(cat "$BENCH_TMP/acceptd/"*.log 2>/dev/null | grep -o 'writer: .*' | tail -1 || true)
[ -n "$stats" ] && echo "batch: $stats"
exit 0
