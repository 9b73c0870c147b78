#!/usr/bin/env bash
# bench/workers.sh - the worker side, against one acceptd started as bench/http.sh does. The node client is
# bench/workers.mjs (undici, keep-alive connections):
#   handoff-p50/p99  a worker's parked POST /v1/leases gets a job submitted on another connection: from just
#                    before the submit is sent to the lease answer, BENCH_HANDOFF_COUNT times in a row
#                    (targets: p50 <= 1 ms, p99 <= 5 ms)
#   submit-node      durable submits alone from the same node client, 32 in flight
#   submit           durable submits alone with wrk and bench/submit.lua, as in bench/http.sh
#   e2e              BENCH_E2E_JOBS jobs submitted (32 in flight) while 8 HTTP worker loops lease (max 1,
#                    wait 5) and complete: completed jobs per second, and its ratio to both submit rates
#                    (target: >= 0.5x the faster of the two)
# Settings: BENCH_HANDOFF_COUNT (default 2000), BENCH_E2E_JOBS (default 10000), and those of bench/lib.sh.
set -euo pipefail
# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

: "${BENCH_HANDOFF_COUNT:=2000}"
: "${BENCH_E2E_JOBS:=10000}"
SUBMITTERS=32
WORKER_LOOPS=8
NODE_LIMIT=120 # seconds for one node run; bench/workers.mjs stops itself after 60

command -v node >/dev/null 2>&1 || bench_die "node not found (run scripts/deps.sh)"
[ -d "$BENCH_ROOT/node_modules/undici" ] || bench_die "undici not installed (run scripts/deps.sh)"
bench_init
echo "workers: node $(node --version) (undici keep-alive); handoff x$BENCH_HANDOFF_COUNT;" \
    "e2e $BENCH_E2E_JOBS jobs, $SUBMITTERS submitters, $WORKER_LOOPS worker loops; wrk $BENCH_WRK"

start_acceptd

# node_run MODE ARGS...: run bench/workers.mjs against the daemon; its "name value" lines go to NODE_OUT.
node_run()
{
    local out="$BENCH_TMP/node-$1.out"
    timeout -k 5 "$NODE_LIMIT" node "$BENCH_DIR/workers.mjs" "$ACCEPTD_URL" "$@" >"$out" ||
        bench_die "bench/workers.mjs $1 failed (see above)"
    NODE_OUT=$(cat "$out")
    grep '^partial ' <<<"$NODE_OUT" | sed 's/^/workers: /' >&2 || true
}

# value NAME: the value of NAME in NODE_OUT.
value()
{
    awk -v n="$1" '$1 == n { print $2; exit }' <<<"$NODE_OUT"
}

# record NAME RATE: keep a rate like wrk_rate does (BENCH_RATE, BENCH_RESULTS).
record()
{
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

node_run handoff "$BENCH_HANDOFF_COUNT"
p50=$(value handoff-p50)
p99=$(value handoff-p99)
printf '%-12s %8.2f ms     target <= 1 ms: %s\n' handoff-p50 "$p50" "$(verdict "$p50" '<=' 1)"
printf '%-12s %8.2f ms     target <= 5 ms: %s  (max %.2f ms, n %d)\n' handoff-p99 "$p99" "$(verdict "$p99" '<=' 5)" \
    "$(value handoff-max)" "$(value handoff-n)"

node_run submit "$BENCH_E2E_JOBS" "$SUBMITTERS"
record submit-node "$(value submit-node)"
printf '%-12s %8d req/s\n' submit-node "${BENCH_RATE[submit-node]}"

node_run e2e "$BENCH_E2E_JOBS" "$SUBMITTERS" "$WORKER_LOOPS"
record e2e "$(value e2e)"
e2e_n=$(value e2e-n)

# Last: it leaves many queued jobs behind.
wrk_rate submit "$ACCEPTD_URL/v1/jobs" -s "$BENCH_DIR/submit.lua"
report submit

line=$(printf '%-12s %8d jobs/s' e2e "${BENCH_RATE[e2e]}")
for ref in submit-node submit; do
    line+=$(awk -v a="${BENCH_RATE[e2e]}" -v b="${BENCH_RATE[$ref]}" -v r="$ref" 'BEGIN { printf "  %5.2fx %s", a / b, r }')
done
worst=$(awk -v a="${BENCH_RATE[e2e]}" -v b="${BENCH_RATE[submit-node]}" -v c="${BENCH_RATE[submit]}" \
    'BEGIN { m = b > c ? b : c; printf "%.3f", a / m }')
echo "$line  target >= 0.5x: $(verdict "$worst" '>=' 0.5)  ($e2e_n completed)"
