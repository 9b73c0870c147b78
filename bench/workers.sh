#!/usr/bin/env bash
# bench/workers.sh - the worker side, against one acceptd started as bench/http.sh does. Two clients: bench/workers.c
# (C, blocking sockets or one epoll loop, HTTP/1.1 or HTTP/2 through libnghttp2; the figures the targets are judged
# on) and bench/workers.mjs (node with undici, keep-alive HTTP/1.1; what a JavaScript worker would see):
#   handoff-p50/p99  a worker's parked POST /v1/leases gets a job submitted on another connection: from just
#                    before the submit is sent to the lease answer, BENCH_HANDOFF_COUNT times in a row
#                    (targets: p50 <= 0.5 ms, p99 <= 1.5 ms); handoff-node-p50/p99 from node
#   fsync-p50/p99    the reference: the floor of any durable handoff on this disk, one write of a commit's size
#                    and fdatasync in the daemon's data directory, timed in the same rounds as handoff-p50/p99;
#                    the handoff lines give what they take above it
#   submit           durable submits alone with wrk and bench/submit.lua, as in bench/http.sh, on a second acceptd
#                    (so its queued jobs are not in the e2e daemon's way), right after each e2e round
#   e2e              BENCH_E2E_JOBS jobs submitted by as many connections as BENCH_WRK's (-c), while 8 workers,
#                    each one HTTP/2 connection holding up to BENCH_E2E_SLOTS jobs at a time (as acceptd worker
#                    --concurrency does), lease and complete them, each complete asking for that slot's next job
#                    ("next"): completed jobs per second from the first submit to the last completion, and its
#                    ratio to the submit rate (target: >= 0.5x). Measured in BENCH_ROUNDS rounds (default 3) of
#                    e2e then submit, as bench/http.sh does: the median rates, and the median of the rounds' ratios
#                    with their range
#   e2e-cpu          the daemon's CPU time per job during e2e, per thread (as submit-cpu in http.sh), the C client's
#                    own (median of the rounds), and how busy the machine's CPUs were (and what the host took of
#                    them, "stolen"): e2e and its clients share the 2 cores, so a loaded host lowers the ratio
#   e2e-h1           e2e with the workers' slots on HTTP/1.1, a keep-alive connection each: what HTTP/2 saves
#   e2e-1slot        e2e with 8 HTTP/1.1 workers holding one job at a time (a quarter of the jobs): each job then
#                    costs its worker two commits in a row, which bounds the rate whatever the daemon's speed
#   e2e-node         e2e-1slot from node with 32 submitters, against submit-node (node's own submits alone)
#   e2e-node-lib     e2e-node with the workers of the Node library (clients/node) instead of bench/workers.mjs's
#                    own loops, against e2e-node (target: >= 0.9x, no hidden cost in the library). The two are
#                    run in BENCH_ROUNDS rounds, taking turns at going first (the one run later meets a larger
#                    database and whatever load came meanwhile): their median rates, and the median of the
#                    rounds' ratios with their range
# BENCH_MINIMAL=1 makes the C client's HTTP/2 workers (e2e) send Prefer: return=minimal on their leases and
# completes, so that each lease carries only what a worker needs rather than the whole job.
# Settings: BENCH_HANDOFF_COUNT (default 2000), BENCH_E2E_JOBS (default 60000), BENCH_E2E_SLOTS (32), BENCH_ROUNDS
# (3), and those of bench/lib.sh.
set -euo pipefail
# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

: "${BENCH_HANDOFF_COUNT:=2000}"
: "${BENCH_E2E_JOBS:=60000}"
: "${BENCH_E2E_SLOTS:=32}"
: "${BENCH_ROUNDS:=3}"
SUBMITTERS=$(sed -n 's/.*-c *\([0-9][0-9]*\).*/\1/p' <<<"$BENCH_WRK")
[ -n "$SUBMITTERS" ] || SUBMITTERS=32
NODE_SUBMITTERS=32
WORKERS=8
SLOW_JOBS=$((BENCH_E2E_JOBS / 4)) # for the clients that move a few thousand jobs a second
RUN_LIMIT=120 # seconds before one client run is killed

command -v node >/dev/null 2>&1 || bench_die "node not found (run scripts/deps.sh)"
[ -d "$BENCH_ROOT/node_modules/undici" ] || bench_die "undici not installed (run scripts/deps.sh)"
bench_init
echo "workers: bench/workers.c and node $(node --version) (undici keep-alive); handoff x$BENCH_HANDOFF_COUNT;" \
    "e2e $BENCH_E2E_JOBS jobs, $SUBMITTERS submitters, $WORKERS workers x $BENCH_E2E_SLOTS slots; wrk $BENCH_WRK"

WORKERS_C="$BENCH_TMP/workers"
cc -O2 -Wall -Wextra -Wno-unused-parameter -o "$WORKERS_C" "$BENCH_DIR/workers.c" -lnghttp2 ||
    bench_die "cannot build bench/workers.c"
BENCH_NODE=submit start_acceptd
SUBMIT_URL=$ACCEPTD_URL
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

# record NAME RATE: keep a rate (bench_record), and the jobs completed by the run just made (e2e-n in RUN_OUT,
# if any) in COMPLETED.
declare -A COMPLETED
record()
{
    COMPLETED[$1]=$(value e2e-n)
    bench_record "$1" "$2"
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

c_run handoff "$BENCH_HANDOFF_COUNT" "$BENCH_TMP/acceptd/data/fsync-reference"
p50=$(value handoff-p50)
p99=$(value handoff-p99)
f50=$(value fsync-p50)
f99=$(value fsync-p99)
printf '%-16s %8.2f ms     target <= 0.5 ms: %s  (%.2f ms above fsync-p50)\n' handoff-p50 "$p50" \
    "$(verdict "$p50" '<=' 0.5)" "$(awk -v a="$p50" -v b="$f50" 'BEGIN { print a - b }')"
printf '%-16s %8.2f ms     target <= 1.5 ms: %s  (%.2f ms above fsync-p99; max %.2f ms, n %d)\n' handoff-p99 \
    "$p99" "$(verdict "$p99" '<=' 1.5)" "$(awk -v a="$p99" -v b="$f99" 'BEGIN { print a - b }')" \
    "$(value handoff-max)" "$(value handoff-n)"
printf '%-16s %8.2f ms     (a commit-sized write and fdatasync in the data directory, same rounds)\n' fsync-p50 "$f50"
printf '%-16s %8.2f ms     (max %.2f ms)\n' fsync-p99 "$f99" "$(value fsync-max)"
node_run handoff "$BENCH_HANDOFF_COUNT"
printf '%-16s %8.2f ms\n' handoff-node-p50 "$(value handoff-p50)"
printf '%-16s %8.2f ms     (max %.2f ms, n %d)\n' handoff-node-p99 "$(value handoff-p99)" "$(value handoff-max)" \
    "$(value handoff-n)"

e2e_jobs=0 busy=0 stolen=0 total=0 client_us=
thread_ticks "$ACCEPTD_PID" >"$BENCH_TMP/ticks-before"
for round in $(seq "$BENCH_ROUNDS"); do
    read -r b0 s0 t0 < <(machine_ticks)
    c_run e2e-h2 "$BENCH_E2E_JOBS" "$SUBMITTERS" "$WORKERS" "$BENCH_E2E_SLOTS"
    read -r b1 s1 t1 < <(machine_ticks)
    busy=$((busy + b1 - b0)) stolen=$((stolen + s1 - s0)) total=$((total + t1 - t0))
    client_us+="$(value e2e-client-us) "
    thread_ticks "$ACCEPTD_PID" >"$BENCH_TMP/ticks-after"
    record e2e "$(value e2e)"
    e2e_jobs=$((e2e_jobs + COMPLETED[e2e]))
    WRK_BAD= WRK_SOCKERR= round_keep e2e
    wrk_rate submit "$SUBMIT_URL/v1/jobs" -s "$BENCH_DIR/submit.lua"
    round_keep submit
done
e2e_cpu=$(cpu_per_request "$BENCH_TMP/ticks-before" "$BENCH_TMP/ticks-after" "$e2e_jobs")
c_run e2e "$BENCH_E2E_JOBS" "$SUBMITTERS" $((WORKERS * BENCH_E2E_SLOTS)) 1 next
record e2e-h1 "$(value e2e)"
c_run e2e "$SLOW_JOBS" "$SUBMITTERS" "$WORKERS" 1 next
record e2e-1slot "$(value e2e)"
node_run submit "$SLOW_JOBS" "$NODE_SUBMITTERS"
record submit-node "$(value submit-node)"
for round in $(seq "$BENCH_ROUNDS"); do
    order="e2e e2e-lib"
    [ $((round % 2)) -eq 0 ] && order="e2e-lib e2e"
    for mode in $order; do
        node_run "$mode" "$SLOW_JOBS" "$NODE_SUBMITTERS" "$WORKERS"
        name=e2e-node
        [ "$mode" = e2e-lib ] && name=e2e-node-lib
        BENCH_RATE[$name]=$(value e2e) COMPLETED[$name]=$(value e2e-n)
        WRK_BAD= WRK_SOCKERR= round_keep "$name"
    done
done

report_rounds submit
printf '%-16s %8d req/s\n' submit-node "${BENCH_RATE[submit-node]}"
read -r e2e_median e2e_low e2e_high < <(paste -d ' ' <(round_list e2e) <(round_list submit) |
    awk '$2 > 0 { print $1 / $2 }' | spread)
BENCH_RATE[e2e]=$(round_list e2e | spread | awk '{ printf "%d", $1 }')
printf '%-16s %8d jobs/s %5.2fx submit (%.2f-%.2f)  target >= 0.5x: %s  (%d rounds of %d jobs)\n' e2e \
    "${BENCH_RATE[e2e]}" "$e2e_median" "$e2e_low" "$e2e_high" "$(verdict "$e2e_median" '>=' 0.5)" "$BENCH_ROUNDS" \
    "$BENCH_E2E_JOBS"
printf '%-16s%s per job; client %.1f us; machine %d%% busy, %d%% stolen\n' e2e-cpu "$e2e_cpu" \
    "$(tr ' ' '\n' <<<"$client_us" | grep . | spread | awk '{ print $1 }')" $((100 * busy / total)) \
    $((100 * stolen / total))
e2e_line e2e-h1 submit
e2e_line e2e-1slot submit
bench_record e2e-node "$(round_list e2e-node | spread | awk '{ printf "%d", $1 }')"
e2e_line e2e-node submit-node "median of $BENCH_ROUNDS rounds"
read -r lib_median lib_low lib_high < <(round_ratio e2e-node-lib e2e-node)
bench_record e2e-node-lib "$(round_list e2e-node-lib | spread | awk '{ printf "%d", $1 }')"
printf '%-16s %8d jobs/s %5.2fx e2e-node (%.2f-%.2f)  target >= 0.9x: %s  (%d rounds, rates: %s)\n' e2e-node-lib \
    "${BENCH_RATE[e2e-node-lib]}" "$lib_median" "$lib_low" "$lib_high" "$(verdict "$lib_median" '>=' 0.9)" \
    "$BENCH_ROUNDS" "$(paste -d / <(round_list e2e-node-lib) <(round_list e2e-node) | paste -sd ' ')"
