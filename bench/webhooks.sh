#!/usr/bin/env bash
# bench/webhooks.sh - webhook delivery throughput: signed deliveries per second from acceptd to a local receiver
# (bench/webhooks.mjs on 127.0.0.1) with BENCH_WEBHOOK_EVENTS events queued at once, against the receiver's own
# request rate as the reference. Three times: h1, plain HTTP/1.1 to node:http; tls, https to node:http2 offering
# h2 and http/1.1 by ALPN (acceptd sends HTTP/1.1, its default); h2, the same receiver with webhooks.http2 on:
#   receiver-ref      wrk POSTing a delivery-sized JSON body to the receiver (what the receiver can take);
#                     receiver-tls-ref over https, receiver-h2-ref with h2load (128 streams in flight)
#   receiver-headers  the same with a delivery's headers (its signatures are 300 bytes the receiver parses)
#   webhooks          deliveries/s: acceptd restarts with every delivery due, from its first request at the
#                     receiver to the last, each one signed both ways (1 in 100 verified with the npm packages);
#                     webhooks-tls, webhooks-h2
# Then the CPU each side used per request: on a 2-core machine the receiver, wrk or acceptd share the cores, so
# the ratio is about what acceptd spends per delivery against what wrk spends per request.
# How the events are queued "at once": the retry schedule holds each first attempt back 10 s; acceptd takes
# the jobs (one job.queued delivery each) and is stopped, the receiver starts and is measured, and acceptd starts
# again on the same data once every delivery is due.
# Settings: BENCH_WEBHOOK_EVENTS (default 10000), BENCH_WEBHOOK_PROTOS (default "h1 tls h2"), and those of
# bench/lib.sh.
set -euo pipefail
# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

: "${BENCH_WEBHOOK_EVENTS:=10000}"
: "${BENCH_WEBHOOK_PROTOS:=h1 tls h2}"
SUBMITTERS=32
LIMIT=120             # seconds to wait for every delivery
H2LOAD="-c4 -m32 -D5" # 128 requests in flight, as wrk's 128 connections

command -v node >/dev/null 2>&1 || bench_die "node not found (run scripts/deps.sh)"
command -v h2load >/dev/null 2>&1 || bench_die "h2load not found (run scripts/deps.sh)"
for m in undici stripe standardwebhooks; do
    [ -d "$BENCH_ROOT/node_modules/$m" ] || bench_die "$m not installed (run scripts/deps.sh)"
done
bench_init
echo "webhooks: $BENCH_WEBHOOK_EVENTS events queued at once; node $(node --version) receiver; wrk $BENCH_WRK; h2load $H2LOAD"

# cpu_ms PID: CPU time (user + system) the process has used so far, in ms.
cpu_ms()
{
    awk -v hz="$(getconf CLK_TCK)" '{ print int(($14 + $15) * 1000 / hz) }' "/proc/$1/stat"
}

# h2load_rate NAME URL [H2LOAD_ARGS...]: wrk_rate's counterpart with h2load (HTTP/2 over https).
h2load_rate()
{
    local name=$1 url=$2 rps
    shift 2
    # shellcheck disable=SC2086 # H2LOAD is a list of options
    bench_load "$name" h2load $H2LOAD "$@" "$url"
    rps=$(awk '/^finished in/ { printf "%d", $4 }' <<<"$BENCH_OUT")
    WRK_REQUESTS=$(awk '/^requests:/ { print $8 }' <<<"$BENCH_OUT")
    WRK_BAD=$(awk '/^status codes:/ { n = $5 + $7 + $9; if (n > 0) print n }' <<<"$BENCH_OUT")
    WRK_SOCKERR=
    [ -n "$rps" ] && [ -n "$WRK_REQUESTS" ] || bench_die_with_output "no req/s in h2load output for $name"
    bench_record "$name" "$rps"
}

body='{"id":"evt_4dc0GZ0m2bVvOQkn0kC4Wg","type":"job.queued","createdAt":"2026-11-30T18:00:00.000Z","data":{"job":"http://127.0.0.1:8080/v1/jobs/job_4dc0GZ0m2bVvOQkn0kC4Wg"}}'
printf '%s' "$body" >"$BENCH_TMP/body.json"
# A delivery's headers, as "name: value" lines: signatures of the same length, not valid (the receiver checks
# none until it has the secret).
delivery_headers="User-Agent: acceptd-webhooks
Accept: */*
X-Webhook-Signature: t=1764525600,v1=$(printf '%064d' 0)
webhook-signature: v1,$(printf '%043d' 0)=
webhook-id: evt_4dc0GZ0m2bVvOQkn0kC4Wg
webhook-timestamp: 1764525600
Idempotency-Key: evt_4dc0GZ0m2bVvOQkn0kC4Wg
Webhook-Version: 2026-12-05"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 -keyout "$BENCH_TMP/key.pem" \
    -out "$BENCH_TMP/cert.pem" -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 >/dev/null 2>&1 ||
    bench_die "openssl could not make the receiver's certificate"

# receiver_rate NAME URL PROTO RX_PID [HEADER_LINES]: the receiver's own rate, with wrk (h1, tls) or h2load (h2),
# reported; sets RX_US to the receiver's CPU per request meanwhile.
receiver_rate()
{
    local name=$1 url=$2 proto=$3 rx_pid=$4 headers=${5:-} line cpu0
    local -a args=()
    cpu0=$(cpu_ms "$rx_pid")
    if [ "$proto" != h2 ]; then
        printf 'wrk.method = "POST"\nwrk.body = [[%s]]\nwrk.headers["Content-Type"] = "application/json"\n' \
            "$body" >"$BENCH_TMP/post.lua"
        while IFS= read -r line; do
            [ -n "$line" ] && printf 'wrk.headers["%s"] = "%s"\n' "${line%%: *}" "${line#*: }" >>"$BENCH_TMP/post.lua"
        done <<<"$headers"
        wrk_rate "$name" "$url" -s "$BENCH_TMP/post.lua"
    else
        while IFS= read -r line; do
            [ -n "$line" ] && args+=(-H "$line")
        done <<<"$headers"
        h2load_rate "$name" "$url" -d "$BENCH_TMP/body.json" -H 'content-type: application/json' "${args[@]}"
    fi
    RX_US=$((($(cpu_ms "$rx_pid") - cpu0) * 1000 / (WRK_REQUESTS > 0 ? WRK_REQUESTS : 1)))
    report "$name"
}

# deliver PROTO: queue the events, measure the receiver, then the deliveries; h1 is http:// to node:http, tls
# and h2 https:// to node:http2 (h2 with webhooks.http2 on).
deliver()
{
    local proto=$1 sfx="" rx_url rx_pid rx_cpu0 rx_ref_us rx_hdr_us due_at t0 deadline rate span
    local count distinct first last verified bad conns rx_cpu ad_cpu line ref=receiver-ref hdr=receiver-headers
    local conf="$BENCH_TMP/acceptd-$proto.yaml" tool=wrk
    local -a tls=() curl_tls=()
    BENCH_NODE=acceptd-$proto
    rx_url="http://127.0.0.1:$(bench_free_port)"
    printf 'webhooks:\n  allowNetworks: ["127.0.0.0/8"]\n  retrySchedule: [10%s]\n' "$(printf ', 1%.0s' {1..19})" >"$conf"
    if [ "$proto" != h1 ]; then
        sfx=-$proto ref=receiver-$proto-ref hdr=receiver-$proto-headers
        rx_url="https${rx_url#http}"
        tls=("$BENCH_TMP/key.pem" "$BENCH_TMP/cert.pem")
        curl_tls=(--cacert "$BENCH_TMP/cert.pem")
        printf '  caFile: %s\n' "$BENCH_TMP/cert.pem" >>"$conf"
    fi
    if [ "$proto" = h2 ]; then
        tool=h2load
        printf '  http2: true\n' >>"$conf"
    fi

    # 1. Queue every event (nothing listens on the receiver's port yet; should the queueing take longer than
    #    10 s, early attempts are refused and retried a second later).
    start_acceptd --config "$conf"
    timeout -k 5 "$LIMIT" node "$BENCH_DIR/webhooks.mjs" queue "$ACCEPTD_URL" "$rx_url/hook" "$BENCH_WEBHOOK_EVENTS" \
        "$SUBMITTERS" "$BENCH_TMP/secret" >"$BENCH_TMP/queue.out" || bench_die "queueing the events failed"
    grep -q "^queued $BENCH_WEBHOOK_EVENTS\$" "$BENCH_TMP/queue.out" || bench_die "not every job was accepted"
    kill "$ACCEPTD_PID"
    wait "$ACCEPTD_PID" 2>/dev/null || true
    due_at=$(($(date +%s%3N) + 10500))

    # 2. The receiver, and its own rate as the reference.
    node "$BENCH_DIR/webhooks.mjs" receiver "${rx_url##*:}" "${tls[@]}" >"$BENCH_TMP/receiver-$proto.log" 2>&1 &
    BENCH_PIDS+=($!)
    rx_pid=$!
    bench_wait_http "$rx_url/stats" 200 10 "${curl_tls[@]}" || {
        cat "$BENCH_TMP/receiver-$proto.log" >&2
        bench_die "the receiver did not start"
    }
    receiver_rate "$ref" "$rx_url/hook" "$proto" "$rx_pid"
    rx_ref_us=$RX_US
    # The same with the headers a delivery carries: what the receiver can take of requests like acceptd's.
    receiver_rate "$hdr" "$rx_url/hook" "$proto" "$rx_pid" "$delivery_headers"
    rx_hdr_us=$RX_US
    curl -s -o /dev/null "${curl_tls[@]}" -X POST "$rx_url/reset"
    curl -s -o /dev/null "${curl_tls[@]}" -X POST -H 'Content-Type: text/plain' --data-binary "@$BENCH_TMP/secret" \
        "$rx_url/secret"

    # 3. Once every delivery is due, start acceptd again.
    while [ "$(date +%s%3N)" -lt "$due_at" ]; do sleep 0.1; done
    t0=$(date +%s%3N)
    rx_cpu0=$(cpu_ms "$rx_pid")
    start_acceptd --config "$conf"
    deadline=$((SECONDS + LIMIT))
    while :; do
        # The receiver's counters: count distinct first last verified bad connections.
        read -r count distinct first last verified bad conns <<<"$(curl -s --max-time 5 "${curl_tls[@]}" "$rx_url/stats" |
            node -e 'let s="";process.stdin.on("data",c=>s+=c).on("end",()=>{const j=JSON.parse(s);
                console.log([j.count,j.distinct,j.first,j.last,j.verified,j.bad,j.connections].join(" "))})')"
        [ "$distinct" -ge "$BENCH_WEBHOOK_EVENTS" ] && break
        [ "$SECONDS" -lt "$deadline" ] ||
            bench_die "only $distinct of $BENCH_WEBHOOK_EVENTS deliveries arrived in ${LIMIT}s ($proto)"
        sleep 0.2
    done
    rx_cpu=$(($(cpu_ms "$rx_pid") - rx_cpu0))
    ad_cpu=$(cpu_ms "$ACCEPTD_PID")
    [ "$bad" -eq 0 ] || bench_die "$bad sampled deliveries did not verify"
    [ "$verified" -gt 0 ] || bench_die "no delivery was verified"
    span=$((last - first))
    [ "$span" -gt 0 ] || span=1
    rate=$((BENCH_WEBHOOK_EVENTS * 1000 / span))
    bench_record "webhooks$sfx" "$rate"
    line=$(printf '%-12s %8d deliveries/s' "webhooks$sfx" "$rate")
    line+=$(awk -v a="$rate" -v b="${BENCH_RATE[$ref]}" -v c="${BENCH_RATE[$hdr]}" -v r="$ref" -v h="$hdr" \
        'BEGIN { printf "  %5.2fx %s  %5.2fx %s", a / b, r, a / c, h }')
    echo "$line  ($distinct events, $count requests, $verified sampled signatures verified, $conns connections; $((last - t0)) ms from the restart)"
    # Where the CPU went: a ratio below 1 on a machine with no idle core is the CPU the receiver could not have.
    echo "             CPU per request: receiver $rx_ref_us us under $tool ($rx_hdr_us with the headers), $((rx_cpu * 1000 / count)) us under acceptd; acceptd $((ad_cpu * 1000 / count)) us per delivery (from its start)"
    kill "$rx_pid" "$ACCEPTD_PID" 2>/dev/null || true
    wait "$rx_pid" "$ACCEPTD_PID" 2>/dev/null || true
}

for proto in $BENCH_WEBHOOK_PROTOS; do
    case $proto in
    h1 | tls | h2) deliver "$proto" ;;
    *) bench_die "BENCH_WEBHOOK_PROTOS: h1, tls or h2, not $proto" ;;
    esac
done
