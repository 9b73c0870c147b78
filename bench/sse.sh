#!/usr/bin/env bash
# bench/sse.sh - Server-Sent Events fan-out: BENCH_SSE_STREAMS (10000) /v1/events streams held open on one
# acceptd, measured twice on a fresh daemon each time: over HTTP/1.1 (a connection per stream, as 10,000
# separate browsers would) and over HTTP/2 (h2c, 100 streams per connection). For each:
#   memory    daemon RSS growth per open stream                            (target <= 4 KiB)
#   fan-out   one job update -> the last of the subscribers receiving it   (target p99 <= 50 ms)
#   poll-304  GET with If-None-Match (wrk) with the streams open / none    (target >= 0.8x)
# The client is bench/sse_fanout.mjs (one Node process); over HTTP/1.1 it hands the streams to bench/sse_h1.c,
# built here with cc. Needs ~streams + 1000 file descriptors.
# Settings: BENCH_SSE_STREAMS, BENCH_SSE_UPDATES (30), BENCH_SSE_PROTOS ("h1 h2"), and bench/lib.sh's.
set -euo pipefail
# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

: "${BENCH_SSE_STREAMS:=10000}"
: "${BENCH_SSE_UPDATES:=30}"
: "${BENCH_SSE_PROTOS:=h1 h2}"

bench_init
need=$((BENCH_SSE_STREAMS + 1000))
ulimit -n "$need" 2>/dev/null || true
[ "$(ulimit -n)" -ge "$need" ] || bench_die "sse: need ulimit -n >= $need (hard limit $(ulimit -Hn))"
command -v node >/dev/null 2>&1 || bench_die "node not found (run scripts/deps.sh)"
export SSE_H1_CLIENT="$BENCH_TMP/sse_h1"
cc -O2 -Wall -Wextra -o "$SSE_H1_CLIENT" "$BENCH_DIR/sse_h1.c" || bench_die "cannot build bench/sse_h1.c"

echo "sse: $BENCH_SSE_STREAMS /v1/events streams, $BENCH_SSE_UPDATES updates; wrk $BENCH_WRK"
# Every HTTP/1.1 stream is a connection: lift the connection cap above the streams plus the poll clients.
conf="$BENCH_TMP/sse.yaml"
echo "limits: { maxConnections: $need }" > "$conf"
for proto in $BENCH_SSE_PROTOS; do
    start_acceptd --config "$conf"
    pid=${BENCH_PIDS[${#BENCH_PIDS[@]} - 1]}
    node "$BENCH_DIR/sse_fanout.mjs" "$ACCEPTD_URL" "$pid" "$BENCH_SSE_STREAMS" "$BENCH_SSE_UPDATES" "$proto"
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    rm -rf "$BENCH_TMP/acceptd"
done
