#!/usr/bin/env bash
# bench/workers.sh - the worker side, against one acceptd started as bench/http.sh does. Two clients run the
# same rounds: bench/workers.c (C, blocking sockets or one epoll loop; the figures the targets are judged on)
# and bench/workers.mjs (node with undici, keep-alive connections; what a JavaScript worker would see):
#   handoff-p50/p99  a worker's parked POST /v1/leases gets a job submitted on another connection: from just
#                    before the submit is sent to the lease answer, BENCH_HANDOFF_COUNT times in a row
#                    (targets: p50 <= 1 ms, p99 <= 5 ms); handoff-node-p50/p99 from node
#   submit-node      durable submits alone from the node client, 32 in flight
#   submit           durable submits alone with wrk and bench/submit.lua, as in bench/http.sh
#   e2e              BENCH_E2E_JOBS jobs submitted (32 in flight) while 8 HTTP worker connections lease (max 1,
#                    wait 5) and complete, each complete asking for the worker's next job in the same call
#                    ("next"): completed jobs per second, and its ratio to the wrk submit rate (target:
#                    >= 0.5x); e2e-node the same from node, against submit-node
#   e2e-lease        e2e with a separate POST /v1/leases for every job (no "next"): two commits per job for
#                    a worker instead of one
#   e2e-max8         e2e again with each worker leasing up to 8 jobs at a time (max 8) and completing them in
#                    turn, the last complete asking for the next 8: what batching leases buys a worker
#   e2e-w32          e2e with 32 worker connections, as many as there are submitters: each commit round then
#                    moves as many jobs through the workers as it takes in, so this is what the daemon
#                    sustains when the number of workers does not bound it
#   e2e-cpu          the daemon's CPU time per job during the e2e round, per thread (as submit-cpu in http.sh)
# Settings: BENCH_HANDOFF_COUNT (default 2000), BENCH_E2E_JOBS (default 10000), and those of bench/lib.sh.
set -euo pipefail
# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

: "${BENCH_HANDOFF_COUNT:=2000}"
: "${BENCH_E2E_JOBS:=10000}"
SUBMITTERS=32
WORKER_LOOPS=8
RUN_LIMIT=120 # seconds before one client run is killed

command -v node >/dev/null 2>&1 || bench_die "node not found (run scripts/deps.sh)"
[ -d "$BENCH_ROOT/node_modules/undici" ] || bench_die "undici not installed (run scripts/deps.sh)"
bench_init
echo "workers: bench/workers.c and node $(node --version) (undici keep-alive); handoff x$BENCH_HANDOFF_COUNT;" \
    "e2e $BENCH_E2E_JOBS jobs, $SUBMITTERS submitters, $WORKER_LOOPS worker loops; wrk $BENCH_WRK"

WORKERS_C="$BENCH_TMP/workers"
cc -O2 -Wall -Wextra -o "$WORKERS_C" "$BENCH_DIR/workers.c" || bench_die "cannot build bench/workers.c"
start_acceptd

# node_run MODE ARGS...: run bench/workers.mjs against the daemon; its "name value" lines go to RUN_OUT.
node_run()
{
    local out="$BENCH_TMP/node-$1.out"
    timeout -k 5 "$RUN_LIMIT" node "$BENCH_DIR/workers.mjs" "$ACCEPTD_URL" "$@" >"$out" ||
        bench_die "bench/workers.mjs $1 failed (see above)"
    RUN_OUT=$(cat "$out")
    grep '^partial ' <<<"$RUN_OUT" | sed 's/^/workers: /' >&2 || true
}

# c_run MODE ARGS...: the same with bench/workers.c; its lines go to RUN_OUT too.
c_run()
{
    local hostport=${ACCEPTD_URL#http://}
    RUN_OUT=$(timeout -k 5 "$RUN_LIMIT" "$WORKERS_C" "${hostport%:*}" "${hostport##*:}" "$@") ||
        bench_die "bench/workers.c $1 failed (see above)"
}

# value NAME: the value of NAME in RUN_OUT.
value()
{
    awk -v n="$1" '$1 == n { print $2; exit }' <<<"$RUN_OUT"
}

# record NAME RATE: keep a rate like wrk_rate does (BENCH_RATE, BENCH_RESULTS), and the jobs completed by
# the run just made (e2e-n in RUN_OUT, if any) in COMPLETED.
declare -A COMPLETED
record()
{
    COMPLETED[$1]=$(value e2e-n)
    BENCH_RATE[$1]=$2
    if [ -n "${BENCH_RESULTS:-}" ]; then
        printf '%s\t%s\n' "$1" "$2" >>"$BENCH_RESULTS"
    fi
}

# verdict VALUE OP TARGET: "met" or "MISSED" (OP is <= or >=).
verdict()
{
    awk -v v="$1" -v op="$2" -v t="$3" 'BEGIN { ok = op == "<=" ? v <= t : v >= t; print ok ? "met" : "MISSED" }'
}

# ratio NAME REF: BENCH_RATE[NAME] / BENCH_RATE[REF].
ratio()
{
    awk -v a="${BENCH_RATE[$1]}" -v b="${BENCH_RATE[$2]}" 'BEGIN { printf "%.3f", a / b }'
}

# e2e_line NAME REF [NOTE]: the jobs/s of the e2e run NAME, as a ratio to the submit rate REF.
e2e_line()
{
    printf '%-16s %8d jobs/s %5.2fx %-12s %s(%d completed)\n' "$1" "${BENCH_RATE[$1]}" "$(ratio "$1" "$2")" "$2" \
        "${3:+$3  }" "${COMPLETED[$1]}"
}

c_run handoff "$BENCH_HANDOFF_COUNT"
p50=$(value handoff-p50)
p99=$(value handoff-p99)
printf '%-16s %8.2f ms     target <= 1 ms: %s\n' handoff-p50 "$p50" "$(verdict "$p50" '<=' 1)"
printf '%-16s %8.2f ms     target <= 5 ms: %s  (max %.2f ms, n %d)\n' handoff-p99 "$p99" "$(verdict "$p99" '<=' 5)" \
    "$(value handoff-max)" "$(value handoff-n)"
node_run handoff "$BENCH_HANDOFF_COUNT"
printf '%-16s %8.2f ms\n' handoff-node-p50 "$(value handoff-p50)"
printf '%-16s %8.2f ms     (max %.2f ms, n %d)\n' handoff-node-p99 "$(value handoff-p99)" "$(value handoff-max)" \
    "$(value handoff-n)"

node_run submit "$BENCH_E2E_JOBS" "$SUBMITTERS"
record submit-node "$(value submit-node)"
printf '%-16s %8d req/s\n' submit-node "${BENCH_RATE[submit-node]}"

thread_ticks "$ACCEPTD_PID" >"$BENCH_TMP/ticks-before"
c_run e2e "$BENCH_E2E_JOBS" "$SUBMITTERS" "$WORKER_LOOPS" 1 next
thread_ticks "$ACCEPTD_PID" >"$BENCH_TMP/ticks-after"
record e2e "$(value e2e)"
e2e_cpu=$(cpu_per_request "$BENCH_TMP/ticks-before" "$BENCH_TMP/ticks-after" "${COMPLETED[e2e]}")
c_run e2e "$BENCH_E2E_JOBS" "$SUBMITTERS" "$WORKER_LOOPS" 1
record e2e-lease "$(value e2e)"
c_run e2e "$BENCH_E2E_JOBS" "$SUBMITTERS" "$WORKER_LOOPS" 8 next
record e2e-max8 "$(value e2e)"
c_run e2e "$BENCH_E2E_JOBS" "$SUBMITTERS" "$SUBMITTERS" 1 next
record e2e-w32 "$(value e2e)"
node_run e2e "$BENCH_E2E_JOBS" "$SUBMITTERS" "$WORKER_LOOPS"
record e2e-node "$(value e2e)"

# Last: it leaves many queued jobs behind.
wrk_rate submit "$ACCEPTD_URL/v1/jobs" -s "$BENCH_DIR/submit.lua"
report submit

e2e_line e2e submit 'target >= 0.5x: '"$(verdict "$(ratio e2e submit)" '>=' 0.5)"
printf '%-16s%s per job\n' e2e-cpu "$e2e_cpu"
e2e_line e2e-lease submit
e2e_line e2e-max8 submit
e2e_line e2e-w32 submit
e2e_line e2e-node submit-node
