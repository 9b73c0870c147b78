#!/usr/bin/env bash
# bench/http.sh - the HTTP hot paths against nginx answering the same kind of request in the same run:
#   nginx-304   nginx `return 304`                    (the reference every ratio is taken against)
#   nginx-200   nginx `return 200` with a ~700-byte JSON body
#   poll-304    GET /v1/jobs/{id} with If-None-Match of the current ETag (the poll path: memory only)
#   get-200     GET /v1/jobs/{id} (full representation)
#   submit      POST /v1/jobs (durable: 202 after the group commit)
#   submit-cpu  the daemon's CPU time per submit during that run, per thread (event loop, writer): a figure
#               less shaken by other load on the machine than the rates
# The lines are measured in BENCH_ROUNDS rounds (default 5), each measuring every line once, in the order
# above. A rate printed is the median of its rounds, and a ratio the median of the ratios within each round:
# on a shared machine the load moves from one minute to the next, and a ratio holds best between two runs
# seconds apart. The spread of the ratio over the rounds follows it.
# Usage: bench/http.sh [--reference-only]   (--reference-only: nginx lines only, no acceptd needed)
set -euo pipefail
# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

: "${BENCH_ROUNDS:=5}"
reference_only=0
[ "${1:-}" = --reference-only ] && reference_only=1

bench_init
echo "http: wrk $BENCH_WRK; $(/usr/sbin/nginx -v 2>&1 | sed 's/^nginx version: //') worker_processes 1"

start_nginx
if [ "$reference_only" = 0 ]; then
    start_acceptd
    poll_job
fi

submit_requests=()
for round in $(seq "$BENCH_ROUNDS"); do
    wrk_rate nginx-304 "$NGINX_URL/"
    round_keep nginx-304
    wrk_rate nginx-200 "$NGINX_URL/200"
    round_keep nginx-200
    [ "$reference_only" = 1 ] && continue
    wrk_rate poll-304 "$POLL_URL" -H "If-None-Match: $POLL_ETAG"
    round_keep poll-304
    wrk_rate get-200 "$POLL_URL"
    round_keep get-200
    thread_ticks "$ACCEPTD_PID" >"$BENCH_TMP/ticks-before-$round"
    wrk_rate submit "$ACCEPTD_URL/v1/jobs" -s "$BENCH_DIR/submit.lua"
    round_keep submit
    thread_ticks "$ACCEPTD_PID" >"$BENCH_TMP/ticks-after-$round"
    submit_requests[round]=$WRK_REQUESTS
done

report_rounds nginx-304
report_rounds nginx-200 nginx-304
[ "$reference_only" = 1 ] && exit 0
report_rounds poll-304 nginx-304
report_rounds get-200 nginx-304 nginx-200
report_rounds submit nginx-304
for round in $(seq "$BENCH_ROUNDS"); do
    printf '%-12s%s per submit (round %d)\n' submit-cpu \
        "$(cpu_per_request "$BENCH_TMP/ticks-before-$round" "$BENCH_TMP/ticks-after-$round" "${submit_requests[round]}")" \
        "$round"
done
