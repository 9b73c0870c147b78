#!/usr/bin/env bash
# bench/sse.sh - Server-Sent Events fan-out: BENCH_SSE_STREAMS (10000) /v1/events streams held open on one
# acceptd, measured twice on a fresh daemon each time: over HTTP/1.1 (a connection per stream, as 10,000
# separate browsers would) and over HTTP/2 (h2c, 100 streams per connection). For each:
#   memory    daemon RSS growth per open stream                            (target <= 4 KiB)
#   fan-out   one job update -> the last of the subscribers receiving it   (target p99 <= 50 ms)
#   poll-304  GET with If-None-Match (wrk) with the streams open / none    (target >= 0.8x)
# The driver is bench/sse_fanout.mjs (one Node process); it hands the streams, over either protocol, to the C
# client bench/sse_client.c, built here with cc. Needs ~streams + 1000 file descriptors.
# Over HTTP/1.1 the fan-out is also measured against a reference, bench/sse_ref.c (built here, -luring): the
# least an SSE server can do, the same streams opened and timed by the same sse_client, one event of
# acceptd's size written to each. It is run once per way of writing in BENCH_SSE_REF (MODE:THREADS:BATCH,
# see sse_ref.c) and the fastest (lowest p99) is the reference, printed as fanout-ref with acceptd's ratio.
# Settings: BENCH_SSE_STREAMS, BENCH_SSE_UPDATES (30), BENCH_SSE_PROTOS ("h1 h2"), BENCH_SSE_REF
# ("uring:1:256 uring:2:256 uring:1:1024 send:1:1 send:2:1"; empty: no reference), and bench/lib.sh's.
set -euo pipefail
# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

: "${BENCH_SSE_STREAMS:=10000}"
: "${BENCH_SSE_UPDATES:=30}"
: "${BENCH_SSE_PROTOS:=h1 h2}"
: "${BENCH_SSE_REF=uring:1:256 uring:2:256 uring:1:1024 send:1:1 send:2:1}"

bench_init
need=$((BENCH_SSE_STREAMS + 1000))
ulimit -n "$need" 2>/dev/null || true
[ "$(ulimit -n)" -ge "$need" ] || bench_die "sse: need ulimit -n >= $need (hard limit $(ulimit -Hn))"
command -v node >/dev/null 2>&1 || bench_die "node not found (run scripts/deps.sh)"
export SSE_CLIENT="$BENCH_TMP/sse_client"
cc -O2 -Wall -Wextra -o "$SSE_CLIENT" "$BENCH_DIR/sse_client.c" || bench_die "cannot build bench/sse_client.c"
SSE_REF_SERVER="$BENCH_TMP/sse_ref"
if [ -n "$BENCH_SSE_REF" ]; then
    cc -O2 -Wall -Wextra -pthread -o "$SSE_REF_SERVER" "$BENCH_DIR/sse_ref.c" -luring ||
        bench_die "cannot build bench/sse_ref.c (needs liburing-dev)"
fi

rss_kib()
{
    awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"
}

# ref_run MODE THREADS BATCH: one run of the reference server, its streams opened and its updates timed by
# sse_client exactly as for acceptd (its heartbeat POST is the reference's update). Prints one line and sets
# REF_L50, REF_L99 (update -> last subscriber, ms) and REF_KIB (RSS growth per stream).
ref_run()
{
    local mode=$1 threads=$2 batch=$3 out rp port='' tries=50 rss0 rss1 w tag open_ms e50 e99
    out="$BENCH_TMP/sse_ref.$mode.$threads.$batch"
    "$SSE_REF_SERVER" "$mode" "$threads" "$batch" >"$out" &
    rp=$!
    BENCH_PIDS+=("$rp")
    while [ -z "$port" ] && [ "$tries" -gt 0 ]; do
        port=$(awk '$1 == "listening" { print $2 }' "$out" 2>/dev/null || true)
        [ -n "$port" ] || sleep 0.1
        tries=$((tries - 1))
    done
    [ -n "$port" ] || bench_die "sse_ref did not start"
    rss0=$(rss_kib "$rp")
    coproc REF_H1 { exec "$SSE_CLIENT" 127.0.0.1 "$port" "$BENCH_SSE_STREAMS" "$BENCH_SSE_UPDATES" ref ref; }
    w=${REF_H1[1]}
    if ! read -r -t 120 -u "${REF_H1[0]}" tag open_ms || [ "$tag" != open ]; then
        bench_die "sse_ref: the streams did not open"
    fi
    sleep 1
    rss1=$(rss_kib "$rp")
    echo go >&"$w"
    if ! read -r -t 600 -u "${REF_H1[0]}" tag REF_L50 REF_L99 || [ "$tag" != last ]; then
        bench_die "sse_ref: no fan-out figures"
    fi
    read -r -t 10 -u "${REF_H1[0]}" tag e50 e99 || true
    exec {w}>&-
    wait "$REF_H1_PID" 2>/dev/null || true
    kill "$rp" 2>/dev/null || true
    wait "$rp" 2>/dev/null || true
    unset 'BENCH_PIDS[-1]' # rp, reaped
    REF_KIB=$(awk -v a="$rss0" -v b="$rss1" -v n="$BENCH_SSE_STREAMS" 'BEGIN { printf "%.2f", (b - a) / n }')
    printf '[ref] fan-out   %s, %s thread(s), batch %s: update -> last of %s: p50 %s ms, p99 %s ms; each delivery: p50 %s ms, p99 %s ms; server sends %s; opened in %.1f s; RSS %s -> %s KiB, %s KiB per stream\n' \
        "$mode" "$threads" "$batch" "$BENCH_SSE_STREAMS" "$REF_L50" "$REF_L99" "$e50" "$e99" \
        "$(awk '$1 == "sent" { print $2 }' "$out" | spread | awk '{ printf "p50 %.1f ms, max %.1f ms", $1, $3 }')" \
        "$(awk -v m="$open_ms" 'BEGIN { print m / 1000 }')" "$rss0" "$rss1" "$REF_KIB"
}

# ref_best ACCEPTD_OUTPUT: run every BENCH_SSE_REF way, keep the lowest p99 as the reference and print
# acceptd's HTTP/1.1 fan-out (from its [h1] fan-out line) as a ratio of it.
ref_best()
{
    local way mode threads batch best='' b50 b99 bkib a50 a99
    for way in $BENCH_SSE_REF; do
        IFS=: read -r mode threads batch <<<"$way"
        ref_run "$mode" "$threads" "${batch:-256}"
        if [ -z "$best" ] || awk -v a="$REF_L99" -v b="$b99" 'BEGIN { exit !(a < b) }'; then
            best="$mode, $threads thread(s), batch ${batch:-256}"
            b50=$REF_L50 b99=$REF_L99 bkib=$REF_KIB
        fi
    done
    read -r a50 a99 < <(sed -n 's/^\[h1\] fan-out .*: p50 \([0-9.]*\) ms, p99 \([0-9.]*\) ms over.*/\1 \2/p' "$1")
    [ -n "$a99" ] || bench_die "sse: no [h1] fan-out line to compare with the reference"
    echo "[h1] fanout-ref-p50/p99 $b50 / $b99 ms (reference: $best; $bkib KiB RSS per stream)"
    awk -v a50="$a50" -v a99="$a99" -v r50="$b50" -v r99="$b99" 'BEGIN {
        printf "[h1] fan-out vs reference: p99 %s ms, reference %s ms, %.2fx; p50 %s ms, reference %s ms, %.2fx  (50 ms target = %.2fx the reference p99)\n",
            a99, r99, a99 / r99, a50, r50, a50 / r50, 50 / r99 }'
    if [ -n "${BENCH_RESULTS:-}" ]; then
        printf 'sse-h1-fanout-ref-p50-ms\t%s\nsse-h1-fanout-ref-p99-ms\t%s\nsse-h1-fanout-p99-ratio\t%s\n' "$b50" "$b99" \
            "$(awk -v a="$a99" -v b="$b99" 'BEGIN { printf "%.2f", a / b }')" >>"$BENCH_RESULTS"
    fi
}

echo "sse: $BENCH_SSE_STREAMS /v1/events streams, $BENCH_SSE_UPDATES updates; wrk $BENCH_WRK"
# Every HTTP/1.1 stream is a connection: lift the connection cap above the streams plus the poll clients.
conf="$BENCH_TMP/sse.yaml"
echo "limits: { maxConnections: $need }" > "$conf"
for proto in $BENCH_SSE_PROTOS; do
    start_acceptd --config "$conf"
    pid=${BENCH_PIDS[${#BENCH_PIDS[@]} - 1]}
    node "$BENCH_DIR/sse_fanout.mjs" "$ACCEPTD_URL" "$pid" "$BENCH_SSE_STREAMS" "$BENCH_SSE_UPDATES" "$proto" |
        tee "$BENCH_TMP/sse-$proto.out"
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    rm -rf "$BENCH_TMP/acceptd"
    # The reference right after acceptd, with acceptd stopped: the same minute of the same host.
    if [ "$proto" = h1 ] && [ -n "$BENCH_SSE_REF" ]; then
        ref_best "$BENCH_TMP/sse-h1.out"
    fi
done
