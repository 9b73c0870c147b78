#!/usr/bin/env bash
# bench/webhooks.sh - webhook delivery throughput: signed deliveries per second from acceptd to a local receiver
# (bench/webhooks.mjs, node:http on 127.0.0.1) with BENCH_WEBHOOK_EVENTS events queued at once, against the
# receiver's own request rate as the reference:
#   receiver-ref   wrk POSTing a delivery-sized JSON body to the receiver (what the receiver can take)
#   receiver-headers  the same with a delivery's headers (its signatures are 300 bytes the receiver parses)
#   webhooks       deliveries/s: acceptd restarts with every delivery due, from its first request at the
#                  receiver to the last, each one signed both ways (1 in 100 verified with the npm packages)
# Then the CPU each side used per request: on a 2-core machine the receiver, wrk or acceptd share the cores, so
# the ratio is about what acceptd spends per delivery against what wrk spends per request.
# How the events are queued "at once": the retry schedule holds each first attempt back 10 s; acceptd takes
# the jobs (one job.queued delivery each) and is stopped, the receiver starts and is measured, and acceptd starts
# again on the same data once every delivery is due.
# Settings: BENCH_WEBHOOK_EVENTS (default 10000), and those of bench/lib.sh.
set -euo pipefail
# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

: "${BENCH_WEBHOOK_EVENTS:=10000}"
SUBMITTERS=32
LIMIT=120 # seconds to wait for every delivery

command -v node >/dev/null 2>&1 || bench_die "node not found (run scripts/deps.sh)"
for m in undici stripe standardwebhooks; do
    [ -d "$BENCH_ROOT/node_modules/$m" ] || bench_die "$m not installed (run scripts/deps.sh)"
done
bench_init
echo "webhooks: $BENCH_WEBHOOK_EVENTS events queued at once; node $(node --version) receiver; wrk $BENCH_WRK"

rx_port=$(bench_free_port)
rx_url="http://127.0.0.1:$rx_port"
cat >"$BENCH_TMP/acceptd.yaml" <<EOF
webhooks:
  allowNetworks: ["127.0.0.0/8"]
  retrySchedule: [10, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]
EOF

# cpu_ms PID: CPU time (user + system) the process has used so far, in ms.
cpu_ms()
{
    awk -v hz="$(getconf CLK_TCK)" '{ print int(($14 + $15) * 1000 / hz) }' "/proc/$1/stat"
}

# stats: the receiver's counters as "count distinct first last verified bad connections".
stats()
{
    curl -s --max-time 5 "$rx_url/stats" |
        node -e 'let s="";process.stdin.on("data",c=>s+=c).on("end",()=>{const j=JSON.parse(s);
            console.log([j.count,j.distinct,j.first,j.last,j.verified,j.bad,j.connections].join(" "))})'
}

# 1. Queue every event (nothing listens on the receiver's port yet; should the queueing take longer than 10 s,
#    early attempts are refused and retried a second later).
start_acceptd --config "$BENCH_TMP/acceptd.yaml"
timeout -k 5 "$LIMIT" node "$BENCH_DIR/webhooks.mjs" queue "$ACCEPTD_URL" "$rx_url/hook" "$BENCH_WEBHOOK_EVENTS" \
    "$SUBMITTERS" "$BENCH_TMP/secret" >"$BENCH_TMP/queue.out" || bench_die "queueing the events failed"
grep -q "^queued $BENCH_WEBHOOK_EVENTS\$" "$BENCH_TMP/queue.out" || bench_die "not every job was accepted"
first_pid=${BENCH_PIDS[-1]}
kill "$first_pid"
wait "$first_pid" 2>/dev/null || true
due_at=$(($(date +%s%3N) + 10500))

# 2. The receiver, and its own rate as the reference.
node "$BENCH_DIR/webhooks.mjs" receiver "$rx_port" >"$BENCH_TMP/receiver.log" 2>&1 &
BENCH_PIDS+=($!)
rx_pid=$!
bench_wait_http "$rx_url/stats" 200 10 || bench_die "the receiver did not start"
body='{"id":"evt_4dc0GZ0m2bVvOQkn0kC4Wg","type":"job.queued","createdAt":"2026-11-30T18:00:00.000Z","data":{"job":"http://127.0.0.1:8080/v1/jobs/job_4dc0GZ0m2bVvOQkn0kC4Wg"}}'
cat >"$BENCH_TMP/post.lua" <<EOF
wrk.method = "POST"
wrk.body = '$body'
wrk.headers["Content-Type"] = "application/json"
EOF
rx_cpu0=$(cpu_ms "$rx_pid")
wrk_rate receiver-ref "$rx_url/hook" -s "$BENCH_TMP/post.lua"
rx_ref_us=$(($(cpu_ms "$rx_pid") - rx_cpu0))
rx_ref_us=$((rx_ref_us * 1000 / (WRK_REQUESTS > 0 ? WRK_REQUESTS : 1)))
report receiver-ref
# The same with the headers a delivery carries (signatures of the same length, not valid: the receiver checks
# none until it has the secret): what the receiver can take of requests like acceptd's.
cat >>"$BENCH_TMP/post.lua" <<EOF
wrk.headers["User-Agent"] = "acceptd-webhooks"
wrk.headers["Accept"] = "*/*"
wrk.headers["X-Webhook-Signature"] = "t=1764525600,v1=$(printf '%064d' 0)"
wrk.headers["webhook-signature"] = "v1,$(printf '%043d' 0)="
wrk.headers["webhook-id"] = "evt_4dc0GZ0m2bVvOQkn0kC4Wg"
wrk.headers["webhook-timestamp"] = "1764525600"
wrk.headers["Idempotency-Key"] = "evt_4dc0GZ0m2bVvOQkn0kC4Wg"
wrk.headers["Webhook-Version"] = "2026-12-05"
EOF
rx_cpu0=$(cpu_ms "$rx_pid")
wrk_rate receiver-headers "$rx_url/hook" -s "$BENCH_TMP/post.lua"
rx_hdr_us=$(($(cpu_ms "$rx_pid") - rx_cpu0))
rx_hdr_us=$((rx_hdr_us * 1000 / (WRK_REQUESTS > 0 ? WRK_REQUESTS : 1)))
report receiver-headers
curl -s -o /dev/null -X POST "$rx_url/reset"
curl -s -o /dev/null -X POST -H 'Content-Type: text/plain' --data-binary "@$BENCH_TMP/secret" "$rx_url/secret"

# 3. Once every delivery is due, start acceptd again.
while [ "$(date +%s%3N)" -lt "$due_at" ]; do sleep 0.1; done
t0=$(date +%s%3N)
rx_cpu0=$(cpu_ms "$rx_pid")
start_acceptd --config "$BENCH_TMP/acceptd.yaml"
deadline=$((SECONDS + LIMIT))
while :; do
    read -r count distinct first last verified bad conns <<<"$(stats)"
    [ "$distinct" -ge "$BENCH_WEBHOOK_EVENTS" ] && break
    [ "$SECONDS" -lt "$deadline" ] || bench_die "only $distinct of $BENCH_WEBHOOK_EVENTS deliveries arrived in ${LIMIT}s"
    sleep 0.2
done
rx_cpu=$(($(cpu_ms "$rx_pid") - rx_cpu0))
ad_cpu=$(cpu_ms "$ACCEPTD_PID")
[ "$bad" -eq 0 ] || bench_die "$bad sampled deliveries did not verify"
[ "$verified" -gt 0 ] || bench_die "no delivery was verified"
span=$((last - first))
[ "$span" -gt 0 ] || span=1
rate=$((BENCH_WEBHOOK_EVENTS * 1000 / span))
BENCH_RATE[webhooks]=$rate
[ -n "${BENCH_RESULTS:-}" ] && printf 'webhooks\t%s\n' "$rate" >>"$BENCH_RESULTS"
line=$(printf '%-12s %8d deliveries/s' webhooks "$rate")
line+=$(awk -v a="$rate" -v b="${BENCH_RATE[receiver-ref]}" -v c="${BENCH_RATE[receiver-headers]}" \
    'BEGIN { printf "  %5.2fx receiver-ref  %5.2fx receiver-headers", a / b, a / c }')
echo "$line  ($distinct events, $count requests, $verified sampled signatures verified, $conns connections; $((last - t0)) ms from the restart)"
# Where the CPU went: a ratio below 1 on a machine with no idle core is the CPU the receiver could not have.
echo "             CPU per request: receiver $rx_ref_us us under wrk ($rx_hdr_us with the headers), $((rx_cpu * 1000 / count)) us under acceptd; acceptd $((ad_cpu * 1000 / count)) us per delivery (from its start)"
