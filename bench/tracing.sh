#!/usr/bin/env bash
# bench/tracing.sh - what the export of spans (docs/tracing.md) costs: three acceptd daemons in one sitting, alike
# but for their tracing section:
#   off    no tracing section (the traceparent is still kept and handed on)
#   live   tracing.otlpEndpoint on nginx (`return 200`: a collector that takes every batch at once), sampleRatio 1
#   dead   tracing.otlpEndpoint on a loopback port nobody listens on (every export a refused connect)
# and, for each:
#   submit      POST /v1/jobs with wrk and bench/submit.lua, as bench/http.sh's submit line, each with a sampled
#               traceparent (two spans exported per submit: the submit and the enqueue)
#   submit-cpu  the daemon's CPU time per submit during that run: all its threads, and of it the event loop's, the
#               writer's and the export thread's (tracer): a figure less shaken by the machine's load than the rates
#   e2e         bench/workers.c's e2e-h2 as in bench/workers.sh (BENCH_E2E_JOBS jobs submitted while 8 HTTP/2
#               workers lease and complete them; three spans per job): completed jobs per second, and e2e-cpu,
#               the daemon's CPU per job as submit-cpu
#   exporter    the daemon's acceptd_trace_* counters at the end (/metrics)
# On a shared machine the load moves from one minute to the next (rates swing by 3x), so the three are measured in
# BENCH_ROUNDS rounds (default 5), each round measuring every daemon once, in an order that rotates from one round
# to the next. A rate printed is the median of its rounds; a ratio (live/off, dead/off) the median of the ratios
# taken within each round, with the lowest and highest of them; the CPU figures the median of the rounds.
# Settings: BENCH_ROUNDS, BENCH_E2E_JOBS (default 20000), and those of bench/lib.sh.
set -euo pipefail
# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

: "${BENCH_ROUNDS:=5}"
: "${BENCH_E2E_JOBS:=20000}"
SUBMITTERS=$(sed -n 's/.*-c *\([0-9][0-9]*\).*/\1/p' <<<"$BENCH_WRK")
[ -n "$SUBMITTERS" ] || SUBMITTERS=32
WORKERS=8
SLOTS=32
RUN_LIMIT=120
CONFIGS=(off live dead)
TRACEPARENT='00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'

bench_init
echo "tracing: wrk $BENCH_WRK; e2e $BENCH_E2E_JOBS jobs, $SUBMITTERS submitters, $WORKERS workers x $SLOTS slots;" \
    "$BENCH_ROUNDS rounds of off, live and dead in turn"

WORKERS_C="$BENCH_TMP/workers"
cc -O2 -Wall -Wextra -Wno-unused-parameter -o "$WORKERS_C" "$BENCH_DIR/workers.c" -lnghttp2 ||
    bench_die "cannot build bench/workers.c"
start_nginx
dead_port=$(bench_free_port)
declare -A URL PID
for cfg in "${CONFIGS[@]}"; do
    conf="$BENCH_TMP/$cfg.yaml"
    case $cfg in
    off) : >"$conf" ;;
    live) printf 'tracing:\n  otlpEndpoint: %s/200\n  sampleRatio: 1\n' "$NGINX_URL" >"$conf" ;;
    dead) printf 'tracing:\n  otlpEndpoint: http://127.0.0.1:%s/v1/traces\n  sampleRatio: 1\n' "$dead_port" >"$conf" ;;
    esac
    BENCH_NODE=$cfg start_acceptd --config "$conf"
    URL[$cfg]=$ACCEPTD_URL PID[$cfg]=$ACCEPTD_PID
done

# exporter_line CFG: acceptd_trace_* counters of CFG's daemon, on one line.
exporter_line()
{
    curl -s --max-time 10 "${URL[$1]}/metrics" | awk '/^acceptd_trace_(spans_exported|spans_dropped|exports_failed)_total / {
        sub(/^acceptd_trace_/, "", $1); sub(/_total$/, "", $1); printf " %s %s", $1, $2 }'
}

# cpu_split BEFORE AFTER N: "all loop writer tracer" microseconds of CPU per request between two thread_ticks
# snapshots: every thread, the event loop (the thread named acceptd), the writer and the export thread.
cpu_split()
{
    awk -v n="$3" -v hz="$(getconf CLK_TCK)" 'NR == FNR { before[$1] += $2; next } { after[$1] += $2 }
        END { for (t in after) { d = (after[t] - before[t]) * 1e6 / hz / n; all += d
                  if (t == "acceptd") lp += d; if (t ~ /writer/) wr += d; if (t ~ /tracer/) tr += d }
              printf "%.2f %.2f %.2f %.2f\n", all, lp, wr, tr }' "$1" "$2"
}

# keep_cpu KEY BEFORE AFTER N: one round's cpu_split, kept under KEY (submit-CFG or e2e-CFG).
declare -A CPU
keep_cpu()
{
    local all lp wr tr
    read -r all lp wr tr < <(cpu_split "$2" "$3" "$4")
    CPU[$1 all]+="$all " CPU[$1 loop]+="$lp " CPU[$1 writer]+="$wr " CPU[$1 tracer]+="$tr "
}

for round in $(seq "$BENCH_ROUNDS"); do
    for k in 0 1 2; do
        cfg=${CONFIGS[$(((round - 1 + k) % 3))]}
        thread_ticks "${PID[$cfg]}" >"$BENCH_TMP/ticks-0"
        wrk_rate "submit-$cfg" "${URL[$cfg]}/v1/jobs" -s "$BENCH_DIR/submit.lua" -H "traceparent: $TRACEPARENT"
        thread_ticks "${PID[$cfg]}" >"$BENCH_TMP/ticks-1"
        round_keep "submit-$cfg"
        keep_cpu "submit-$cfg" "$BENCH_TMP/ticks-0" "$BENCH_TMP/ticks-1" "$WRK_REQUESTS"
        hostport=${URL[$cfg]#http://}
        out=$(timeout -k 5 "$RUN_LIMIT" "$WORKERS_C" "${hostport%:*}" "${hostport##*:}" e2e-h2 "$BENCH_E2E_JOBS" \
            "$SUBMITTERS" "$WORKERS" "$SLOTS") || bench_die "bench/workers.c e2e-h2 failed against $cfg"
        thread_ticks "${PID[$cfg]}" >"$BENCH_TMP/ticks-2"
        bench_record "e2e-$cfg" "$(awk '$1 == "e2e" { printf "%d", $2; exit }' <<<"$out")"
        WRK_BAD='' WRK_SOCKERR='' round_keep "e2e-$cfg"
        keep_cpu "e2e-$cfg" "$BENCH_TMP/ticks-1" "$BENCH_TMP/ticks-2" \
            "$(awk '$1 == "e2e-n" { print $2; exit }' <<<"$out")"
    done
done

# median KEY: the median of the rounds' figures kept under KEY.
median()
{
    tr ' ' '\n' <<<"${CPU[$1]}" | grep . | spread | awk '{ printf "%.1f", $1 }'
}

for what in submit e2e; do
    report_rounds "$what-off"
    report_rounds "$what-live" "$what-off"
    report_rounds "$what-dead" "$what-off"
done
for what in submit e2e; do
    for cfg in "${CONFIGS[@]}"; do
        printf '%-12s %-5s %6s us per %s: event loop %s, writer %s, export thread %s\n' "$what-cpu" "$cfg" \
            "$(median "$what-$cfg all")" "${what/e2e/job}" "$(median "$what-$cfg loop")" \
            "$(median "$what-$cfg writer")" "$(median "$what-$cfg tracer")"
    done
done
for cfg in "${CONFIGS[@]}"; do
    printf '%-12s %-5s%s\n' exporter "$cfg" "$(exporter_line "$cfg")"
done
