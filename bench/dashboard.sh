#!/usr/bin/env bash
# bench/dashboard.sh - what the dashboard at /ui/ costs a busy daemon: bench/http.sh's hot paths measured on one
# acceptd under a steady job load, with and without the dashboard open, against the same with plain SSE streams.
#   load      bench/dashboard.mjs load: BENCH_DASH_RATE (50) jobs a second submitted on a schedule, leased,
#             given progress (:heartbeat) and completed by 4 workers, from one node process (undici keep-alive),
#             for the whole run: four job changes each, which the dashboard's live views receive
#   phases    A  the load only
#             B  the load and the dashboard in headless Chromium (bench/dashboard.mjs browser): one tab on the
#                Overview (polls /v1/stats every 5 s), one on the Jobs list (follows /v1/events)
#             C  the load and as many plain /v1/events streams (curl) as the dashboard opened
# The phase's clients run at nice 19: a browser would run on another machine, and here Chromium rendering the
# live list takes most of a CPU, which would otherwise come out of wrk's and the daemon's share of the 2 cores.
# Their own CPU time is printed too.
# Each of BENCH_ROUNDS rounds (default 3) runs the three phases, in an order rotated from round to round so
# that a drift of the machine's load does not fall on one phase. In each phase, after BENCH_DASH_SETTLE
# seconds (10): the daemon's CPU time per second over BENCH_DASH_IDLE seconds (5) with no other client than the
# phase's (from /proc/PID/stat; steadier than the rates on a shared machine), and how busy the machine was;
# then nginx-304, poll-304 and get-200 as bench/http.sh measures them. Printed per phase: each line's median
# rate and its ratio to nginx-304 (median of the rounds' ratios, lowest-highest), and the CPU figures. The
# verdict "dashboard within noise" holds when B's median ratios are not below the lowest of A's rounds, or
# of C's (a few SSE streams' cost); a ratio above the spread costs nothing.
# The daemon has no keys (as in bench/http.sh): it serves loopback clients as one tenant with every role, and
# the dashboard signs in with any key, which it then sends but the daemon does not look up.
# BENCH_DASH_PIN=1 pins the daemon's threads to CPU 0 and the load, the browser and the curls to CPU 1, so that the
# daemon's CPU figure is not inflated by Chromium's rendering competing for the same core and its caches (the
# wrk lines then run with the daemon on one core: compare phases with each other, not with bench/http.sh).
# Settings: BENCH_DASH_RATE, BENCH_DASH_SETTLE, BENCH_DASH_IDLE, BENCH_DASH_PIN, BENCH_ROUNDS, and bench/lib.sh's.
set -euo pipefail
# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

: "${BENCH_ROUNDS:=3}"
: "${BENCH_DASH_RATE:=50}"
: "${BENCH_DASH_SETTLE:=10}"
: "${BENCH_DASH_IDLE:=5}"
: "${BENCH_DASH_PIN:=0}"
LOAD_WORKERS=4
PHASES=(A B C)
declare -A PHASE_NAME=([A]="load only" [B]="load + dashboard" [C]="load + SSE streams")

command -v node >/dev/null 2>&1 || bench_die "node not found (run scripts/deps.sh)"
[ -d "$BENCH_ROOT/node_modules/playwright-core" ] || bench_die "playwright-core not installed (run scripts/deps.sh)"
[ -x /usr/bin/chromium ] || bench_die "/usr/bin/chromium not found (run scripts/deps.sh)"
bench_init
echo "dashboard: load $BENCH_DASH_RATE jobs/s ($LOAD_WORKERS workers); $BENCH_ROUNDS rounds of phases" \
    "${PHASES[*]}; wrk $BENCH_WRK; pinned $BENCH_DASH_PIN"

start_nginx
start_acceptd
poll_job
CLIENTS_CPU=() # the command prefix of the phase's clients and the load
if [ "$BENCH_DASH_PIN" = 1 ]; then
    taskset -a -p -c 0 "$ACCEPTD_PID" >/dev/null
    CLIENTS_CPU=(taskset -c 1)
fi

# wait_line FILE PATTERN SECONDS: wait until FILE has a line matching PATTERN; print it.
wait_line()
{
    local tries=$(($3 * 10))
    while [ "$tries" -gt 0 ]; do
        if grep -m1 "$2" "$1" 2>/dev/null; then
            return 0
        fi
        sleep 0.1
        tries=$((tries - 1))
    done
    cat "$1" >&2 2>/dev/null || true
    bench_die "no \"$2\" in $1 within $3 s"
}

"${CLIENTS_CPU[@]}" node "$BENCH_DIR/dashboard.mjs" "$ACCEPTD_URL" load "$BENCH_DASH_RATE" "$LOAD_WORKERS" >"$BENCH_TMP/load.out" &
BENCH_PIDS+=("$!")
LOAD_PID=$!
wait_line "$BENCH_TMP/load.out" '^load ready' 10 >/dev/null

STREAMS=0 # how many event streams the dashboard opens: learnt from its first phase B
PHASE_PIDS=()

# phase_start PHASE: start the phase's clients.
phase_start()
{
    local out
    case $1 in
    B)
        out="$BENCH_TMP/browser.out"
        "${CLIENTS_CPU[@]}" nice -n 19 node "$BENCH_DIR/dashboard.mjs" "$ACCEPTD_URL" browser bench-key >"$out" 2>>"$BENCH_TMP/browser.err" &
        PHASE_PIDS+=("$!")
        BENCH_PIDS+=("$!")
        STREAMS=$(wait_line "$out" '^browser ready' 60 | awk '{ print $3 }')
        rm -f "$out"
        ;;
    C)
        [ "$STREAMS" -gt 0 ] || STREAMS=1
        for _ in $(seq "$STREAMS"); do
            "${CLIENTS_CPU[@]}" nice -n 19 curl -sN -H 'Accept: text/event-stream' -o /dev/null "$ACCEPTD_URL/v1/events" &
            PHASE_PIDS+=("$!")
            BENCH_PIDS+=("$!")
        done
        ;;
    esac
    return 0
}

# phase_stop: stop the phase's clients.
phase_stop()
{
    local pid
    for pid in "${PHASE_PIDS[@]}"; do
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    PHASE_PIDS=()
}

# clients_ticks: the CPU time so far of the phase's clients (the browser with all its processes, or the curls).
clients_ticks()
{
    local sum=0 pid
    for pid in "${PHASE_PIDS[@]}"; do
        sum=$((sum + $(tree_ticks "$pid")))
    done
    echo "$sum"
}

declare -A CPU=() CLIENTS=() BUSY=()
for round in $(seq "$BENCH_ROUNDS"); do
    for k in 0 1 2; do
        phase=${PHASES[(k + round - 1) % 3]}
        phase_start "$phase"
        sleep "$BENCH_DASH_SETTLE"
        t0=$(proc_ticks "$ACCEPTD_PID")
        c0=$(clients_ticks)
        read -r b0 _ m0 < <(machine_ticks)
        sleep "$BENCH_DASH_IDLE"
        t1=$(proc_ticks "$ACCEPTD_PID")
        c1=$(clients_ticks)
        read -r b1 _ m1 < <(machine_ticks)
        # Percent of one CPU per wall second; the machine's busy share of all its CPUs.
        CPU[$phase]+="$(awk -v t=$((t1 - t0)) -v s="$BENCH_DASH_IDLE" -v hz="$(getconf CLK_TCK)" \
            'BEGIN { printf "%.1f", 100 * t / hz / s }') "
        CLIENTS[$phase]+="$(awk -v t=$((c1 - c0)) -v s="$BENCH_DASH_IDLE" -v hz="$(getconf CLK_TCK)" \
            'BEGIN { printf "%.1f", 100 * t / hz / s }') "
        BUSY[$phase]+="$((100 * (b1 - b0) / (m1 - m0))) "
        for line in nginx-304 poll-304 get-200; do
            case $line in
            nginx-304) wrk_rate "$line/$phase" "$NGINX_URL/" ;;
            poll-304) wrk_rate "$line/$phase" "$POLL_URL" -H "If-None-Match: $POLL_ETAG" ;;
            get-200) wrk_rate "$line/$phase" "$POLL_URL" ;;
            esac
            round_keep "$line/$phase"
        done
        phase_stop
    done
done
kill -0 "$LOAD_PID" 2>/dev/null || bench_die "the load client stopped (see above)"
echo "load: $(tail -n1 "$BENCH_TMP/load.out"); dashboard event streams: $STREAMS"
grep -v '^$' "$BENCH_TMP/browser.err" 2>/dev/null | sort | uniq -c | head -5 | sed 's/^/dashboard: /' >&2 || true

declare -A LOW=() MEDIAN=()
for phase in "${PHASES[@]}"; do
    echo "phase $phase: ${PHASE_NAME[$phase]}"
    report_rounds "nginx-304/$phase"
    for line in poll-304 get-200; do
        report_rounds "$line/$phase" "nginx-304/$phase"
        read -r "MEDIAN[$line/$phase]" "LOW[$line/$phase]" _ < <(round_ratio "$line/$phase" "nginx-304/$phase")
    done
    read -r cpu cpu_low cpu_high < <(tr ' ' '\n' <<<"${CPU[$phase]}" | grep . | spread)
    read -r busy _ _ < <(tr ' ' '\n' <<<"${BUSY[$phase]}" | grep . | spread)
    read -r clients _ _ < <(tr ' ' '\n' <<<"${CLIENTS[$phase]}" | grep . | spread)
    printf '%-16s %5.1f%% of a CPU (%.1f-%.1f) over %d s without wrk; its clients %.1f%%; machine %d%% busy\n' \
        "daemon-cpu/$phase" "$cpu" "$cpu_low" "$cpu_high" "$BENCH_DASH_IDLE" "$clients" "${busy%.*}"
done

# B's median ratio must not be below the lowest ratio of A's rounds, or of C's.
within=1
for line in poll-304 get-200; do
    ok=$(awk -v b="${MEDIAN[$line/B]}" -v a="${LOW[$line/A]}" -v c="${LOW[$line/C]}" \
        'BEGIN { print (b >= a || b >= c) ? 1 : 0 }')
    [ "$ok" = 1 ] || within=0
done
if [ "$within" = 1 ]; then
    echo "verdict: dashboard within noise"
else
    echo "verdict: dashboard NOT within noise"
fi
