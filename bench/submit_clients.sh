#!/usr/bin/env bash
# bench/submit_clients.sh - durable submits from a real Node client, against nginx answering a 202 of the same
# size to the same client in the same round. Two clients, each measured for BENCH_CLIENT_SECONDS (default 5):
#   undici   undici Pool, 64 connections, pipelining 1 (HTTP/1.1)
#   h2       node:http2, one connection, 64 streams at once (cleartext HTTP/2, prior knowledge)
# and for each client three lines:
#   CLIENT-nginx-202   nginx `return 202` with the headers and body of acceptd's minimal answer, sized to
#                      within a few bytes of it (the reference the client's other lines are taken against)
#   CLIENT-minimal     POST /v1/jobs with `Prefer: return=minimal` (durable: 202 after the group commit)
#   CLIENT-full        POST /v1/jobs with the full representation in the answer
#   CLIENT-replay      CLIENT-minimal where each connection (stream) sends an Idempotency-Key of its own: after
#                      its first, every request is a replay. The same path as a submit (parsing, validation,
#                      the request's fingerprint, the hand-off to the writer, its batch and commit, the answer)
#                      whose writer reads the key and the job instead of writing the job: no insert, no WAL,
#                      no fdatasync. CLIENT-minimal / CLIENT-replay is what the durable write costs the client.
# Every client reads each answer's whole body. The lines are measured in BENCH_ROUNDS rounds (default 3), each
# measuring every line once; the order of the lines within a client alternates from one round to the next.
# A rate printed is the median of its rounds, a ratio the median of the ratios within each round, then their
# spread (as in bench/http.sh). Then the CPU each process spent per request, per round: the Node client (its
# own /proc/self/stat over the counted window) and the server (nginx's worker or acceptd's threads, from /proc,
# divided by every answer the client got, warm-up included): on a 2-core machine the client's CPU competes with
# the server's, so a client that works harder on one server's answers leaves that server less of the machine.
set -euo pipefail
# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

: "${BENCH_ROUNDS:=3}"
: "${BENCH_CLIENT_SECONDS:=5}"
WIDTH=64
CLIENTS=(undici h2)

command -v node >/dev/null 2>&1 || bench_die "node not found (run scripts/deps.sh)"
[ -d "$BENCH_ROOT/node_modules/undici" ] || bench_die "undici not installed (run scripts/deps.sh)"
bench_init
echo "submit-clients: node $(node --version), undici $(node -p 'require("undici/package.json").version' 2>/dev/null ||
    echo '?'), $WIDTH connections / streams, ${BENCH_CLIENT_SECONDS}s a line; $(/usr/sbin/nginx -v 2>&1 |
    sed 's/^nginx version: //') worker_processes 1"

# nginx's 202: the same 13 header fields as acceptd's minimal answer, per-request values where acceptd's vary
# ($request_id for the job id and ETag, $msec for the request id), lengths chosen so that the HTTP/1.1 header
# block and body come within a few bytes of acceptd's (both are printed below).
BENCH_NGINX_H2=1
BENCH_NGINX_SERVER=$(
    cat <<'EOF'
location = /202 {
            server_tokens off;
            add_header Location "/v1/jobs/$request_id" always;
            add_header Operation-Location "http://$host/v1/jobs/$request_id/status" always;
            add_header Link "</v1/jobs/$request_id>; rel=\"monitor\"" always;
            add_header Preference-Applied "return=minimal" always;
            add_header ETag "\"$request_id\"" always;
            add_header Cache-Control "no-cache" always;
            add_header Retry-After "3" always;
            add_header X-Request-Id "$msec" always;
            return 202 '{"id":"job_4dc0GZ0m2bVvOQkn0kC4WgAAAAAA"}';
        }
EOF
)
start_nginx
# shellcheck disable=SC2119 # no extra arguments for the daemon
start_acceptd
NGINX_WORKER=$(ps -o pid= --ppid "${BENCH_PIDS[0]}" | head -1 | tr -d ' ')
[ -n "$NGINX_WORKER" ] || bench_die "no nginx worker process"

# answer_size NAME URL [CURL_ARGS...]: print the HTTP/1.1 answer's header and body bytes.
answer_size()
{
    local name=$1 url=$2 status
    shift 2
    status=$(curl -s -D "$BENCH_TMP/size.h" -o "$BENCH_TMP/size.b" -w '%{http_code}' -X POST --max-time 10 \
        -H 'Content-Type: application/json' -d '{"type":"bench","payload":{"n":1}}' "$@" "$url")
    [ "$status" = 202 ] || bench_die "$name: want 202, got $status"
    printf '%-22s header %4d bytes (%2d fields)  body %4d bytes\n' "$name" "$(wc -c <"$BENCH_TMP/size.h")" \
        "$(($(grep -c . "$BENCH_TMP/size.h") - 2))" "$(wc -c <"$BENCH_TMP/size.b")"
}
answer_size nginx-202 "$NGINX_URL/202"
answer_size acceptd-minimal "$ACCEPTD_URL/v1/jobs" -H 'Prefer: return=minimal'
answer_size acceptd-full "$ACCEPTD_URL/v1/jobs"
keyed=(-H 'Prefer: return=minimal' -H 'Idempotency-Key: "size"')
answer_size acceptd-replay "$ACCEPTD_URL/v1/jobs" "${keyed[@]}" >/dev/null # the first submits
answer_size acceptd-replay "$ACCEPTD_URL/v1/jobs" "${keyed[@]}"            # the second replays

# measure CLIENT LINE ROUND: run the client for one line, keep its rate as the round's, and record the CPU per
# request of the client and of the server in CPU[LINE-ROUND].
declare -A CPU=()
measure()
{
    local client=$1 line=$2 round=$3 origin path prefer="" replay="" server_pid before after out hz
    case $line in
        nginx-202)
            path=/202
            server_pid=$NGINX_WORKER
            origin=$NGINX_URL
            [ "$client" = h2 ] && origin=$NGINX_H2_URL
            ;;
        minimal | full | replay)
            path=/v1/jobs
            server_pid=$ACCEPTD_PID
            origin=$ACCEPTD_URL
            [ "$line" != full ] && prefer=return=minimal
            [ "$line" = replay ] && replay=replay
            ;;
    esac
    before=$(proc_ticks "$server_pid")
    out=$(node "$BENCH_DIR/submit_clients.mjs" "$client" "$origin" "$path" "$BENCH_CLIENT_SECONDS" "$WIDTH" \
        $prefer $replay) ||
        bench_die "$client $line: the client failed"
    after=$(proc_ticks "$server_pid")
    read -r _ requests _ rps _ bad _ total _ client_cpu <<<"$out"
    [ "$requests" -gt 0 ] || bench_die "$client $line: no answers ($out)"
    bench_record "$client-$line" "$rps"
    WRK_BAD=
    WRK_SOCKERR=
    [ "$bad" != 0 ] && WRK_BAD=$bad
    round_keep "$client-$line"
    hz=$(getconf CLK_TCK)
    CPU[$client-$line-$round]=$(awk -v c="$client_cpu" -v b="$before" -v a="$after" -v n="$total" -v hz="$hz" \
        -v r="$rps" 'BEGIN { printf "client %5.1f us  server %5.1f us  at %6d req/s", c, (a - b) * 1e6 / hz / n, r }')
}

for round in $(seq "$BENCH_ROUNDS"); do
    for client in "${CLIENTS[@]}"; do
        if [ $((round % 2)) = 1 ]; then
            lines=(nginx-202 minimal full replay)
        else
            lines=(replay full minimal nginx-202)
        fi
        for line in "${lines[@]}"; do
            measure "$client" "$line" "$round"
        done
    done
done

for client in "${CLIENTS[@]}"; do
    report_rounds "$client-nginx-202"
    report_rounds "$client-minimal" "$client-nginx-202" "$client-replay"
    report_rounds "$client-full" "$client-nginx-202"
    report_rounds "$client-replay" "$client-nginx-202"
done
for client in "${CLIENTS[@]}"; do
    for line in nginx-202 minimal full replay; do
        for round in $(seq "$BENCH_ROUNDS"); do
            printf '%-20s cpu per request: %s (round %d)\n' "$client-$line" "${CPU[$client-$line-$round]}" "$round"
        done
    done
done
