#!/usr/bin/env bash
# bench/artifacts.sh - result artifacts (issue 42): moving a big file through acceptd against the tools that
# move the same bytes on the same disk in the same run. Lines (MiB/s; each the median of BENCH_ROUNDS rounds,
# default 3, a ratio the median of the ratios within each round, then their spread, as in bench/http.sh):
#   dd-fsync        dd if=SRC of=FILE bs=4M conv=fsync          (the upload's reference)
#   upload          PUT /v1/jobs/{id}/result in 4 MiB parts, one curl on one connection (--next), the parts split
#                   beforehand into files (each part appended and, the last one, fsync'd; the time includes the
#                   hashing the daemon does)
#   client-sink     the same curl PUTting the same parts to nginx, which drops them: the client's own ceiling
#   nginx-get       curl -o /dev/null from nginx (sendfile on) serving the artifact's own file
#   download        curl -o /dev/null of GET /v1/jobs/{id}/result
#   nginx-get-x4 / download-x4   the same with 4 curls at once (aggregate rate)
# Targets (issue 42): download >= 0.8x nginx-get, upload >= 0.5x dd-fsync.
#   BENCH_ARTIFACT_MB   artifact size (default 1024)
set -euo pipefail
# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

: "${BENCH_ROUNDS:=3}"
: "${BENCH_ARTIFACT_MB:=1024}"
PART=$((4 * 1024 * 1024))
BYTES=$((BENCH_ARTIFACT_MB * 1024 * 1024))

bench_init
echo "artifacts: $BENCH_ARTIFACT_MB MiB, parts of 4 MiB; $(/usr/sbin/nginx -v 2>&1 | sed 's/^nginx version: //') worker_processes 1, sendfile on"

SRC="$BENCH_TMP/src.bin"
head -c "$BYTES" /dev/urandom >"$SRC"
mkdir "$BENCH_TMP/parts"
split -b "$PART" -d -a 5 "$SRC" "$BENCH_TMP/parts/p."
# shellcheck disable=SC2119 # no extra arguments: no keys (loopback), no types, default limits
start_acceptd
DATA="$BENCH_TMP/acceptd/data"

now() { date +%s.%N; }
# rate NAME BYTES SECONDS: record BYTES/SECONDS in MiB/s as one round of NAME.
declare -A ROUNDS=()
rate()
{
    local r
    r=$(awk -v b="$2" -v s="$3" 'BEGIN { printf "%.1f", b / s / 1048576 }')
    ROUNDS[$1]+="$r "
    bench_record "artifacts-$1" "$r"
}
list() { tr ' ' '\n' <<<"${ROUNDS[$1]}" | grep .; }
line()
{
    local name=$1 median low high
    shift
    read -r median low high < <(list "$name" | spread)
    printf '%-14s %8.0f MiB/s' "$name" "$median"
    for ref in "$@"; do
        read -r median low high < <(paste -d ' ' <(list "$name") <(list "$ref") | awk '$2 > 0 { print $1 / $2 }' | spread)
        printf '  %5.2fx %s (%.2f-%.2f)' "$median" "$ref" "$low" "$high"
    done
    echo
}

# lease_job: submit a job and lease it; sets JOB and LEASE.
lease_job()
{
    local out
    out=$(curl -sf "$ACCEPTD_URL/v1/jobs" -H 'Content-Type: application/json' -d '{"type":"bench.artifact","payload":{}}') ||
        bench_die "submit failed"
    JOB=$(node -p 'JSON.parse(process.argv[1]).id' "$out")
    out=$(curl -sf "$ACCEPTD_URL/v1/leases" -H 'Content-Type: application/json' \
        -d '{"types":["bench.artifact"],"max":1,"wait":2,"leaseSeconds":3600}') || bench_die "lease failed"
    LEASE=$(node -p 'JSON.parse(process.argv[1]).leases[0].leaseId' "$out")
}

# upload [SINK_URL]: PUT the parts of SRC (split beforehand) under JOB/LEASE with one curl on one connection
# (--next), then complete with artifact: true; with SINK_URL, PUT the same parts there instead (any 2xx). Prints
# the seconds the parts took.
upload()
{
    local sink=${1:-} url="$ACCEPTD_URL/v1/jobs/$JOB/result" args=() off=0 i=0 n t0 t1 codes
    [ -n "$sink" ] && url=$sink
    n=$(find "$BENCH_TMP/parts" -type f | wc -l)
    for f in "$BENCH_TMP"/parts/p.*; do
        i=$((i + 1))
        [ "$i" -gt 1 ] && args+=(--next)
        args+=(-s -o /dev/null -w '%{http_code}\n' -X PUT -T "$f" -H 'Content-Type: application/octet-stream'
            -H "Lease-Id: $LEASE" -H "Upload-Complete: $([ "$i" = "$n" ] && echo '?1' || echo '?0')")
        [ "$off" -gt 0 ] && args+=(-H "Upload-Offset: $off")
        args+=("$url")
        off=$((off + $(stat -c %s "$f")))
    done
    t0=$(now)
    codes=$(curl "${args[@]}")
    t1=$(now)
    if [ -n "$sink" ]; then
        [ "$(grep -c '^2' <<<"$codes")" = "$n" ] || bench_die "PUT to the sink: $(sort <<<"$codes" | uniq -c | tr -s ' \n' ' ')"
    else
        if [ "$(grep -c '^204$' <<<"$codes")" != $((n - 1)) ] || [ "$(tail -1 <<<"$codes")" != 200 ]; then
            bench_die "PUT parts: $(sort <<<"$codes" | uniq -c | tr -s ' \n' ' ')"
        fi
        curl -sf -o /dev/null "$ACCEPTD_URL/v1/jobs/$JOB:complete" -H 'Content-Type: application/json' \
            -d "{\"leaseId\": \"$LEASE\", \"artifact\": true}" || bench_die "complete with artifact failed"
    fi
    awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }'
}

# get N URL: N curls of URL at once into /dev/null; prints the wall seconds. Every one must get all BYTES.
get()
{
    local n=$1 url=$2 t0 t1 i
    t0=$(now)
    for i in $(seq "$n"); do
        curl -sf -o /dev/null -w '%{size_download}\n' "$url" >"$BENCH_TMP/get.$i" &
    done
    wait # this runs in a command substitution: its own curls are the only children it has
    t1=$(now)
    for i in $(seq "$n"); do
        [ "$(cat "$BENCH_TMP/get.$i")" = "$BYTES" ] || bench_die "GET $url: $(cat "$BENCH_TMP/get.$i") bytes, want $BYTES"
    done
    awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }'
}

for round in $(seq "$BENCH_ROUNDS"); do
    t0=$(now)
    dd if="$SRC" of="$BENCH_TMP/dd.out" bs=4M conv=fsync status=none
    t1=$(now)
    rm -f "$BENCH_TMP/dd.out"
    rate dd-fsync "$BYTES" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')"
    lease_job
    rate upload "$BYTES" "$(upload)"
    # The artifact's sha-256 must be the source's: what is measured is a correct transfer.
    if [ "$round" = 1 ]; then
        want=$(sha256sum "$SRC" | cut -d' ' -f1)
        got=$(curl -sf "$ACCEPTD_URL/v1/jobs/$JOB/result" | sha256sum | cut -d' ' -f1)
        [ "$want" = "$got" ] || bench_die "downloaded sha-256 $got, want $want"
    fi
    # nginx serves this round's artifact file itself, from the daemon's data dir.
    file=$(find "$DATA/artifacts/$JOB" -maxdepth 1 -type f ! -name '*.*' -printf '%f\n' | head -1)
    [ -n "$file" ] || bench_die "no artifact file under $DATA/artifacts/$JOB"
    if [ "$round" = 1 ]; then
        BENCH_NGINX_SERVER="location /files/ { alias $DATA/artifacts/; sendfile on; tcp_nopush on; default_type application/octet-stream; }
        location = /sink { client_max_body_size 16m; return 204; }"
        start_nginx
    fi
    rate client-sink "$BYTES" "$(upload "$NGINX_URL/sink")"
    rate nginx-get "$BYTES" "$(get 1 "$NGINX_URL/files/$JOB/$file")"
    rate download "$BYTES" "$(get 1 "$ACCEPTD_URL/v1/jobs/$JOB/result")"
    rate nginx-get-x4 $((4 * BYTES)) "$(get 4 "$NGINX_URL/files/$JOB/$file")"
    rate download-x4 $((4 * BYTES)) "$(get 4 "$ACCEPTD_URL/v1/jobs/$JOB/result")"
done

line dd-fsync
line upload dd-fsync client-sink
line client-sink
line nginx-get
line download nginx-get
line nginx-get-x4
line download-x4 nginx-get-x4
