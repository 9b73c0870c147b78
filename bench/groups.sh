#!/usr/bin/env bash
# bench/groups.sh - what fairness among groups costs end to end: bench/workers.c's e2e-h2 (as in bench/workers.sh:
# BENCH_E2E_JOBS jobs from as many submitters as BENCH_WRK's -c, 8 HTTP/2 workers of BENCH_E2E_SLOTS slots) with
# every job in one group (none named), and with each job naming one of BENCH_GROUPS groups of mixed sizes (a
# hundredth of the jobs in the largest, a handful in the smallest: bench/workers.c, submit_next), on one acceptd,
# alternated in BENCH_ROUNDS rounds so that both see the same machine and the same growing store:
#   e2e-1group     completed jobs per second, no group named
#   e2e-groups     the same with BENCH_GROUPS groups, and its ratio to e2e-1group (target: >= 0.8x): the median of
#                  the rounds' ratios, with their range
# Settings: BENCH_GROUPS (default 10000), BENCH_E2E_JOBS (60000), BENCH_E2E_SLOTS (32), BENCH_ROUNDS (3), and those
# of bench/lib.sh.
set -euo pipefail
# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

: "${BENCH_GROUPS:=10000}"
: "${BENCH_E2E_JOBS:=60000}"
: "${BENCH_E2E_SLOTS:=32}"
: "${BENCH_ROUNDS:=3}"
SUBMITTERS=$(sed -n 's/.*-c *\([0-9][0-9]*\).*/\1/p' <<<"$BENCH_WRK")
[ -n "$SUBMITTERS" ] || SUBMITTERS=32
WORKERS=8
RUN_LIMIT=120 # seconds before one client run is killed

bench_init
echo "groups: bench/workers.c e2e-h2, $BENCH_E2E_JOBS jobs, $SUBMITTERS submitters, $WORKERS workers x" \
    "$BENCH_E2E_SLOTS slots; one group, then $BENCH_GROUPS groups of mixed sizes, $BENCH_ROUNDS rounds"

WORKERS_C="$BENCH_TMP/workers"
cc -O2 -Wall -Wextra -Wno-unused-parameter -o "$WORKERS_C" "$BENCH_DIR/workers.c" -lnghttp2 ||
    bench_die "cannot build bench/workers.c"
start_acceptd

# e2e GROUPS: one e2e-h2 run (GROUPS 0: no group named); its jobs per second on stdout.
e2e()
{
    local hostport=${ACCEPTD_URL#http://} out
    out=$(BENCH_GROUPS=$1 timeout -k 5 "$RUN_LIMIT" "$WORKERS_C" "${hostport%:*}" "${hostport##*:}" e2e-h2 \
        "$BENCH_E2E_JOBS" "$SUBMITTERS" "$WORKERS" "$BENCH_E2E_SLOTS") || bench_die "bench/workers.c e2e-h2 failed"
    awk '$1 == "e2e" { print $2 }' <<<"$out"
}

WRK_BAD= WRK_SOCKERR=
for round in $(seq "$BENCH_ROUNDS"); do
    bench_record e2e-1group "$(e2e 0)"
    round_keep e2e-1group
    bench_record e2e-groups "$(e2e "$BENCH_GROUPS")"
    round_keep e2e-groups
done
read -r one _ _ < <(round_list e2e-1group | spread)
read -r many _ _ < <(round_list e2e-groups | spread)
read -r ratio low high < <(paste -d ' ' <(round_list e2e-groups) <(round_list e2e-1group) |
    awk '$2 > 0 { print $1 / $2 }' | spread)
printf '%-16s %8d jobs/s\n' e2e-1group "${one%.*}"
printf '%-16s %8d jobs/s %5.2fx e2e-1group (%.2f-%.2f)  target >= 0.8x: %s  (%d groups, %d rounds)\n' e2e-groups \
    "${many%.*}" "$ratio" "$low" "$high" \
    "$(awk -v v="$ratio" 'BEGIN { print (v >= 0.8 ? "met" : "MISSED") }')" "$BENCH_GROUPS" "$BENCH_ROUNDS"
