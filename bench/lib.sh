# bench/lib.sh - helpers shared by the benchmark scripts; source it, do not run it.
#
# A benchmark script calls bench_init, starts what it measures (start_nginx, start_acceptd), measures with
# wrk_rate and prints with report. Every process started here is stopped and the temp dir removed on exit.
# Only loopback addresses are used. Settings (environment):
#   ACCEPTD_BIN     binary under test (default: build/acceptd)
#   BENCH_WRK       wrk options shared by every measurement (default: -t1 -c128 -d5s)
#   BENCH_ROUNDS    rounds of bench/http.sh (default 5; bench/workers.sh 3): its figures are medians over the rounds
#   BENCH_RESULTS   if set, a file to which "name<TAB>value" lines are appended: rates (bench_record), and
#                   bench/sse.sh's latencies and ratios, whose names end in -ms and -ratio
#   BENCH_KEEP=1    keep the temp dir (logs, nginx config, acceptd data) after the run

BENCH_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BENCH_DIR="$BENCH_ROOT/bench"
: "${ACCEPTD_BIN:=$BENCH_ROOT/build/acceptd}"
: "${BENCH_WRK:=-t1 -c128 -d5s}"

BENCH_PIDS=()
declare -A BENCH_RATE=()

bench_die()
{
    echo "bench: $*" >&2
    exit 1
}

bench_cleanup()
{
    local pid
    for pid in "${BENCH_PIDS[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
    for pid in "${BENCH_PIDS[@]}"; do
        wait "$pid" 2>/dev/null || true
    done
    BENCH_PIDS=()
    if [ -n "${BENCH_TMP:-}" ] && [ -d "$BENCH_TMP" ]; then
        if [ "${BENCH_KEEP:-0}" = 1 ]; then
            echo "bench: kept $BENCH_TMP" >&2
        else
            rm -rf "$BENCH_TMP"
        fi
    fi
}

# bench_init: temp dir, cleanup trap, more file descriptors, and the tools checked.
bench_init()
{
    local t
    for t in wrk curl /usr/sbin/nginx stdbuf; do
        command -v "$t" >/dev/null 2>&1 || bench_die "$t not found (run scripts/deps.sh)"
    done
    ulimit -n "$(ulimit -Hn)" 2>/dev/null || ulimit -n 65536 2>/dev/null || true
    BENCH_TMP=$(mktemp -d /tmp/acceptd-bench.XXXXXX)
    trap bench_cleanup EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
}

# bench_port_free PORT: true if nothing accepts on 127.0.0.1:PORT.
bench_port_free()
{
    ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# bench_free_port: print a port that is free now, from below the kernel's ephemeral range: a port in that range
# can be taken by any outgoing connection (a client's, a delivery's) before the server binds it, and a listener
# cannot bind a port an open connection uses. Only another listener can take one of these meanwhile
# (start_nginx retries then).
bench_free_port()
{
    local p low span
    read -r low _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || low=32768
    span=$((low - 10000))
    [ "$span" -ge 1000 ] || span=20000
    while :; do
        p=$((10000 + RANDOM % span))
        if bench_port_free "$p"; then
            echo "$p"
            return
        fi
    done
}

# bench_wait_http URL STATUS [SECONDS [CURL_ARGS...]]: wait until URL answers STATUS.
bench_wait_http()
{
    local url=$1 want=$2 tries=$((${3:-10} * 10)) got
    shift $(($# < 3 ? $# : 3))
    while [ "$tries" -gt 0 ]; do
        got=$(curl -s -o /dev/null -w '%{http_code}' --max-time 1 "$@" "$url" 2>/dev/null || true)
        [ "$got" = "$want" ] && return 0
        sleep 0.1
        tries=$((tries - 1))
    done
    return 1
}

# A body shaped like a job representation, about 700 bytes, for nginx's 200 reference.
BENCH_JSON_BODY='{"id":"job_4dc0GZ0m2bVvOQkn0kC4Wg","type":"video.transcode","status":"running","progress":42,"priority":"normal","payload":{"sourceUrl":"https://media.example.com/uploads/2026/11/30/raw-footage-0001.mov","preset":"1080p"},"attempt":1,"maxAttempts":3,"cancelRequested":false,"createdAt":"2026-11-30T18:00:00.000Z","startedAt":"2026-11-30T18:00:01.250Z","lastUpdatedAt":"2026-11-30T18:00:09.875Z","finishedAt":null,"expiresAt":null,"runAt":null,"retryOf":null,"message":"encoding pass 1 of 2","links":{"self":"/v1/jobs/job_4dc0GZ0m2bVvOQkn0kC4Wg","cancel":"/v1/jobs/job_4dc0GZ0m2bVvOQkn0kC4Wg:cancel","retry":"/v1/jobs/job_4dc0GZ0m2bVvOQkn0kC4Wg:retry","events":"/v1/jobs/job_4dc0GZ0m2bVvOQkn0kC4Wg/events","result":"/v1/jobs/job_4dc0GZ0m2bVvOQkn0kC4Wg/result"}}'

# start_nginx: Debian's nginx with a private config (one worker, no access log), in the foreground of a
# background job. Sets NGINX_URL. Locations: / answers 304, /200 answers 200 with BENCH_JSON_BODY. A script
# may add directives to the server block in BENCH_NGINX_SERVER (more locations), and with BENCH_NGINX_H2=1
# the same server also listens for cleartext HTTP/2 (prior knowledge) on a second port, NGINX_H2_URL.
start_nginx()
{
    local dir="$BENCH_TMP/nginx" port port2 attempt pid user_line='' h2_line=''
    mkdir -p "$dir/logs" "$dir/tmp"
    [ "$(id -u)" -eq 0 ] && user_line='user root;'
    for attempt in 1 2 3 4 5; do
        port=$(bench_free_port)
        port2=$(bench_free_port)
        [ "${BENCH_NGINX_H2:-0}" = 1 ] && h2_line="listen 127.0.0.1:$port2 http2;"
        cat >"$dir/nginx.conf" <<EOF
$user_line
daemon off;
master_process on;
worker_processes 1;
pid $dir/nginx.pid;
error_log $dir/logs/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    default_type application/json;
    keepalive_requests 1000000;
    keepalive_timeout 60s;
    client_body_temp_path $dir/tmp/body;
    proxy_temp_path $dir/tmp/proxy;
    fastcgi_temp_path $dir/tmp/fastcgi;
    uwsgi_temp_path $dir/tmp/uwsgi;
    scgi_temp_path $dir/tmp/scgi;
    server {
        listen 127.0.0.1:$port;
        $h2_line
        location / { return 304; }
        location /200 { return 200 '$BENCH_JSON_BODY'; }
        ${BENCH_NGINX_SERVER:-}
    }
}
EOF
        /usr/sbin/nginx -p "$dir" -e "$dir/logs/error.log" -c "$dir/nginx.conf" &
        pid=$!
        if bench_wait_http "http://127.0.0.1:$port/" 304 5; then
            BENCH_PIDS+=("$pid")
            NGINX_URL="http://127.0.0.1:$port"
            NGINX_H2_URL="http://127.0.0.1:$port2"
            return 0
        fi
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    cat "$dir/logs/error.log" >&2 2>/dev/null || true
    bench_die "nginx did not start"
}

# start_acceptd [ARGS...]: `acceptd serve` on an ephemeral loopback port with a fresh data dir, extra ARGS
# appended. Sets ACCEPTD_URL from the line "acceptd: listening on http://HOST:PORT" on its stdout, and
# ACCEPTD_PID. Set BENCH_NODE to give each of several daemons a directory of its own (default: acceptd), and
# BENCH_ACCEPTD_ARGS to add arguments to every daemon a benchmark starts (e.g. "--config al.yaml" to measure
# with the access log on).
start_acceptd()
{
    local dir="$BENCH_TMP/${BENCH_NODE:-acceptd}" pid tries=100 line
    [ -x "$ACCEPTD_BIN" ] || bench_die "$ACCEPTD_BIN not built (make all)"
    mkdir -p "$dir"
    # stdbuf: the listening line must reach the file even if stdout is block-buffered.
    # shellcheck disable=SC2086 # BENCH_ACCEPTD_ARGS is a list of words
    stdbuf -oL "$ACCEPTD_BIN" serve --listen 127.0.0.1:0 --data "$dir/data" "$@" ${BENCH_ACCEPTD_ARGS:-} \
        >"$dir/stdout.log" 2>"$dir/stderr.log" &
    pid=$!
    BENCH_PIDS+=("$pid")
    ACCEPTD_PID=$pid
    while [ "$tries" -gt 0 ]; do
        line=$(grep -m1 -o 'listening on http://[^[:space:]]*' "$dir/stdout.log" 2>/dev/null || true)
        if [ -n "$line" ]; then
            ACCEPTD_URL=${line#listening on }
            ACCEPTD_URL=${ACCEPTD_URL%/}
            return 0
        fi
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
        tries=$((tries - 1))
    done
    cat "$dir/stdout.log" "$dir/stderr.log" >&2 2>/dev/null || true
    bench_die "acceptd did not print its listening line"
}

# wrk_rate NAME URL [WRK_ARGS...]: run wrk with BENCH_WRK; record requests/s in BENCH_RATE[NAME] and
# set WRK_RPS, WRK_REQUESTS (requests completed), WRK_BAD (non-2xx/3xx responses) and WRK_SOCKERR (socket
# errors line, or empty).
wrk_rate()
{
    local name=$1 url=$2
    shift 2
    # shellcheck disable=SC2086 # BENCH_WRK is a list of options
    bench_load "$name" wrk $BENCH_WRK "$@" "$url"
    WRK_RPS=$(awk '/^Requests\/sec:/ { printf "%d", $2 }' <<<"$BENCH_OUT")
    WRK_REQUESTS=$(awk '/ requests in / { print $1 }' <<<"$BENCH_OUT")
    WRK_BAD=$(awk -F: '/Non-2xx or 3xx responses/ { gsub(/ /, "", $2); print $2 }' <<<"$BENCH_OUT")
    WRK_SOCKERR=$(grep -m1 'Socket errors' <<<"$BENCH_OUT" | sed 's/^ *//' || true)
    [ -n "$WRK_RPS" ] || bench_die_with_output "no Requests/sec in wrk output for $name"
    bench_record "$name" "$WRK_RPS"
}

# bench_load NAME TOOL [ARGS...]: run a load generator for NAME; its output (with its errors) in BENCH_OUT. If it
# fails, the output is shown and the benchmark stops.
bench_load()
{
    local name=$1
    shift
    BENCH_OUT=$("$@" 2>&1) || bench_die_with_output "$1 failed for $name"
}

# bench_die_with_output MESSAGE: show the last load generator's output (BENCH_OUT), then bench_die.
bench_die_with_output()
{
    echo "$BENCH_OUT" >&2
    bench_die "$1"
}

# bench_record NAME RATE: keep NAME's rate (requests, jobs or MiB per second) for report, in BENCH_RATE[NAME]
# and as a line of BENCH_RESULTS.
bench_record()
{
    BENCH_RATE[$1]=$2
    if [ -n "${BENCH_RESULTS:-}" ]; then
        printf '%s\t%s\n' "$1" "$2" >>"$BENCH_RESULTS"
    fi
}

# report NAME [REF...]: print NAME's rate, its ratio to each measured REF, and the errors of its last run
# (call right after wrk_rate NAME).
report()
{
    local name=$1 ref line
    shift
    line=$(printf '%-12s %8d req/s' "$name" "${BENCH_RATE[$name]}")
    for ref in "$@"; do
        if [ -n "${BENCH_RATE[$ref]:-}" ] && [ "${BENCH_RATE[$ref]}" -gt 0 ]; then
            line+=$(awk -v a="${BENCH_RATE[$name]}" -v b="${BENCH_RATE[$ref]}" -v r="$ref" \
                'BEGIN { printf "  %5.2fx %s", a / b, r }')
        fi
    done
    [ -n "$WRK_BAD" ] && line+="  non-2xx/3xx: $WRK_BAD"
    [ -n "$WRK_SOCKERR" ] && line+="  ($WRK_SOCKERR)"
    echo "$line"
}

# Rounds (bench/http.sh): round_keep NAME, right after wrk_rate NAME, keeps that run's rate (and any errors)
# as one round's; report_rounds NAME [REF...] prints NAME's median rate over its rounds and, for each REF, the
# median of the ratio NAME/REF taken within each round, with the lowest and highest of those ratios. It sets
# BENCH_RATE[NAME] to the median.
declare -A ROUND_RATES=() ROUND_ERRORS=()
round_keep()
{
    ROUND_RATES[$1]+="${BENCH_RATE[$1]} "
    [ -n "$WRK_BAD" ] && ROUND_ERRORS[$1]+=" non-2xx/3xx: $WRK_BAD"
    [ -n "$WRK_SOCKERR" ] && ROUND_ERRORS[$1]+=" ($WRK_SOCKERR)"
    return 0
}

report_rounds()
{
    local name=$1 ref line median low high
    shift
    read -r median low high < <(round_list "$name" | spread)
    BENCH_RATE[$name]=${median%.*}
    line=$(printf '%-12s %8d req/s' "$name" "${BENCH_RATE[$name]}")
    for ref in "$@"; do
        read -r median low high < <(round_ratio "$name" "$ref")
        line+=$(printf '  %5.2fx %s (%.2f-%.2f)' "$median" "$ref" "$low" "$high")
    done
    echo "$line${ROUND_ERRORS[$name]:-}"
}

# round_ratio NAME REF: "median lowest highest" of the ratios NAME/REF taken within each round.
round_ratio()
{
    paste -d ' ' <(round_list "$1") <(round_list "$2") | awk '$2 > 0 { print $1 / $2 }' | spread
}

# round_list NAME: NAME's kept rates, one per line, in round order.
round_list()
{
    tr ' ' '\n' <<<"${ROUND_RATES[$1]}" | grep .
}

# spread: "median lowest highest" of the numbers on stdin, one per line.
spread()
{
    sort -g | awk '{ v[NR] = $1 }
        END { printf "%.4f %.4f %.4f\n", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2, v[1], v[NR] }'
}

# thread_ticks PID: one "name ticks" line per thread of PID, ticks being its user + system CPU time in
# clock ticks (/proc/PID/task/*/stat fields 14 and 15). The daemon names its threads (acceptd-writer, ...).
thread_ticks()
{
    local t
    for t in /proc/"$1"/task/*; do
        printf '%s %s\n' "$(cat "$t/comm")" "$(awk '{ print $14 + $15 }' "$t/stat")"
    done
}

# proc_ticks PID: the user + system CPU time of process PID so far, all its threads, in clock ticks (fields 14
# and 15 of /proc/PID/stat, counted after the command name, which may hold spaces).
proc_ticks()
{
    sed 's/^.*) //' "/proc/$1/stat" | awk '{ print $12 + $13 }'
}

# tree_ticks PID: proc_ticks of PID and every process under it (a browser and its renderers), added up.
tree_ticks()
{
    local sum=0 pid
    for pid in "$1" $(ps -o pid= --ppid "$1" 2>/dev/null); do
        if [ "$pid" = "$1" ]; then
            sum=$((sum + $(proc_ticks "$pid" 2>/dev/null || echo 0)))
        else
            sum=$((sum + $(tree_ticks "$pid")))
        fi
    done
    echo "$sum"
}

# machine_ticks: "busy stolen total" clock ticks of all CPUs so far (/proc/stat: busy is user, nice, system, irq
# and softirq).
machine_ticks()
{
    awk '$1 == "cpu" { print $2 + $3 + $4 + $7 + $8, $9, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9; exit }' /proc/stat
}

# cpu_per_request BEFORE AFTER REQUESTS: from two thread_ticks snapshots, the CPU time per request of each
# thread that used any, busiest first, on one line: "  acceptd 29.2 us  acceptd-writer 22.1 us".
cpu_per_request()
{
    awk -v n="$3" -v hz="$(getconf CLK_TCK)" 'NR == FNR { before[$1] += $2; next } { after[$1] += $2 }
        END { for (t in after) if (after[t] > before[t]) printf "%s %.1f\n", t, (after[t] - before[t]) * 1e6 / hz / n }' \
        "$1" "$2" | sort -k2 -rn | awk '{ printf "  %s %s us", $1, $2 } END { print "" }'
}

# http_head METHOD URL [CURL_ARGS...]: print the status line and headers of one request, with CRs
# removed and header names lowercased.
http_head()
{
    local method=$1 url=$2
    shift 2
    curl -s -D - -o /dev/null -X "$method" --max-time 10 "$@" "$url" |
        tr -d '\r' | awk 'NR == 1 { print; next } { i = index($0, ":"); if (i) print tolower(substr($0, 1, i)) substr($0, i + 1) }'
}

# header NAME: the value of header NAME (lowercase) in the http_head output on stdin.
header()
{
    awk -v n="$1:" '$1 == n { sub(/^[^:]*:[ \t]*/, ""); print; exit }'
}

# poll_job: submit one job to ACCEPTD_URL to be polled, and check that a GET with its ETag answers 304. Sets
# POLL_URL and POLL_ETAG. Its type (bench) has no worker, so it stays queued and its ETag does not move.
poll_job()
{
    local head status location etag
    head=$(http_head POST "$ACCEPTD_URL/v1/jobs" -H 'Content-Type: application/json' \
        -d '{"type":"bench","payload":{"n":1}}')
    status=$(awk 'NR == 1 { print $2 }' <<<"$head")
    location=$(header location <<<"$head")
    etag=$(header etag <<<"$head")
    [ "$status" = 202 ] && [ -n "$location" ] && [ -n "$etag" ] || {
        echo "$head" >&2
        bench_die "submit: want 202 with Location and ETag"
    }
    POLL_URL="$ACCEPTD_URL$location"
    # Poll with the ETag the job's own GET answers, so the 304 path is what is measured.
    head=$(http_head GET "$POLL_URL")
    [ "$(awk 'NR == 1 { print $2 }' <<<"$head")" = 200 ] || {
        echo "$head" >&2
        bench_die "GET $location: want 200"
    }
    POLL_ETAG=$(header etag <<<"$head")
    head=$(http_head GET "$POLL_URL" -H "If-None-Match: $POLL_ETAG")
    [ "$(awk 'NR == 1 { print $2 }' <<<"$head")" = 304 ] || {
        echo "$head" >&2
        bench_die "GET $location with If-None-Match: $POLL_ETAG: want 304"
    }
}
