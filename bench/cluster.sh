#!/usr/bin/env bash
# bench/cluster.sh - the PostgreSQL store and cluster mode, against a throwaway PostgreSQL server started
# here (scripts/pg.sh, unix socket only, fsync on) and the SQLite single node as the reference:
#   submit-sqlite   durable submits (wrk + bench/submit.lua) on one node with the embedded SQLite store
#   submit-pg1      the same on one node with the PostgreSQL store
#   submit-pg3      the same spread over three nodes sharing one database: three wrk runs at once, one per
#                   node, each with a third of the connections; the rates are added
#   handoff         a worker parked on node B gets a job submitted on node A (bench/workers.mjs handoff with
#                   BENCH_SUBMIT_URL): p50 and p99 over BENCH_HANDOFF_COUNT jobs (target: p99 <= 10 ms);
#                   measured first, while the server is not busy with the checkpoints the submit runs cause
#   pickup-pg1      the same on one node with the PostgreSQL store (bench/workers.c handoff, as bench/workers.sh
#                   does on SQLite): p50 and p99 (target: p99 <= 5 ms)
#   e2e-sqlite      end to end as bench/workers.sh's e2e (bench/workers.c e2e-h2: BENCH_E2E_JOBS jobs, the
#                   submitters of BENCH_WRK, 8 HTTP/2 workers of 32 slots completing with "next") on a fresh SQLite
#                   node, then e2e-pg1 the same on a fresh PostgreSQL node, in BENCH_ROUNDS rounds (default 2)
#                   alternating: the median jobs/s of each and the median of the rounds' ratios pg1/sqlite
#                   (target: >= 0.5x)
# Settings: BENCH_HANDOFF_COUNT (default 2000), BENCH_PG_PORT (default 55491), BENCH_E2E_JOBS (default 30000),
# BENCH_ROUNDS (default 2) and those of bench/lib.sh.
set -euo pipefail
# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

: "${BENCH_HANDOFF_COUNT:=2000}"
: "${BENCH_PG_PORT:=55491}"
: "${BENCH_E2E_JOBS:=30000}"
: "${BENCH_ROUNDS:=2}"
NODE_LIMIT=120

command -v node >/dev/null 2>&1 || bench_die "node not found (run scripts/deps.sh)"
bench_init
PG_DIR=$(mktemp -d /tmp/acceptd-bench-pg.XXXXXX)
pg_stop()
{
    bash "$BENCH_ROOT/scripts/pg.sh" stop "$PG_DIR" >/dev/null 2>&1 || true
    bench_cleanup
}
trap pg_stop EXIT
bash "$BENCH_ROOT/scripts/pg.sh" start "$PG_DIR" "$BENCH_PG_PORT" >/dev/null || bench_die "PostgreSQL did not start"
KEYS=(--config "$BENCH_TMP/cluster.yaml")
cat >"$BENCH_TMP/cluster.yaml" <<YAML
signingKey: "$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')"
webhooks: { secretKey: "$(head -c 32 /dev/urandom | base64)" }
YAML
echo "cluster: PostgreSQL on a unix socket (fsync on); wrk $BENCH_WRK; handoff x$BENCH_HANDOFF_COUNT"

# fresh_db NAME: create database NAME and print its URL.
fresh_db()
{
    bash "$BENCH_ROOT/scripts/pg.sh" createdb "$PG_DIR" "$BENCH_PG_PORT" "$1"
}

# wrk_split NAME THREADS URL...: one wrk per URL at once, the connections of BENCH_WRK divided among them;
# the sum of their rates is recorded as NAME (bench_record).
wrk_split()
{
    local name=$1 conns n=$(($# - 1)) url pids=() i=0 total=0 rate
    shift
    conns=$(sed -n 's/.*-c *\([0-9]*\).*/\1/p' <<<"$BENCH_WRK")
    conns=$(((${conns:-32} + n - 1) / n))
    local opts
    opts=$(sed "s/-c *[0-9]*/-c$conns/" <<<"$BENCH_WRK")
    for url in "$@"; do
        # shellcheck disable=SC2086
        wrk $opts -s "$BENCH_DIR/submit.lua" "$url/v1/jobs" >"$BENCH_TMP/wrk-$name-$i.out" 2>&1 &
        pids+=($!)
        i=$((i + 1))
    done
    for i in "${!pids[@]}"; do
        wait "${pids[$i]}" || bench_die "wrk failed for $name"
        rate=$(awk '/^Requests\/sec:/ { printf "%d", $2 }' "$BENCH_TMP/wrk-$name-$i.out")
        [ -n "$rate" ] || bench_die "no Requests/sec in wrk output for $name"
        total=$((total + rate))
    done
    bench_record "$name" "$total"
    WRK_BAD=$(cat "$BENCH_TMP"/wrk-"$name"-*.out | awk -F: '/Non-2xx or 3xx responses/ { gsub(/ /, "", $2); s += $2 } END { if (s) print s }')
    WRK_SOCKERR=
}

# The handoff first: the submit runs leave the server checkpointing and vacuuming for a while after.
DBH=$(fresh_db handoff)
BENCH_NODE=ha start_acceptd --store "$DBH" "${KEYS[@]}"
url_a=$ACCEPTD_URL
BENCH_NODE=hb start_acceptd --store "$DBH" "${KEYS[@]}"
out=$(BENCH_SUBMIT_URL=$url_a timeout -k 5 "$NODE_LIMIT" node "$BENCH_DIR/workers.mjs" "$ACCEPTD_URL" handoff \
    "$BENCH_HANDOFF_COUNT") || bench_die "bench/workers.mjs handoff failed"
value() { awk -v n="$1" '$1 == n { print $2; exit }' <<<"$out"; }
p99=$(value handoff-p99)
printf '%-12s %8.2f ms     (submit on node A, worker parked on node B)\n' handoff-p50 "$(value handoff-p50)"
printf '%-12s %8.2f ms     target <= 10 ms: %s  (max %.2f ms, n %d)\n' handoff-p99 "$p99" \
    "$(awk -v v="$p99" 'BEGIN { print v <= 10 ? "met" : "MISSED" }')" "$(value handoff-max)" "$(value handoff-n)"

BENCH_NODE=sqlite start_acceptd
wrk_rate submit-sqlite "$ACCEPTD_URL/v1/jobs" -s "$BENCH_DIR/submit.lua"
report submit-sqlite

BENCH_NODE=pg1 start_acceptd --store "$(fresh_db bench1)" "${KEYS[@]}"
wrk_rate submit-pg1 "$ACCEPTD_URL/v1/jobs" -s "$BENCH_DIR/submit.lua"
report submit-pg1 submit-sqlite

DB3=$(fresh_db bench3)
urls=()
for n in a b c; do
    BENCH_NODE=pg3$n start_acceptd --store "$DB3" "${KEYS[@]}"
    urls+=("$ACCEPTD_URL")
done
wrk_split submit-pg3 "${urls[@]}"
report submit-pg3 submit-sqlite

# Pickup and end to end on PostgreSQL against SQLite, with the C client of bench/workers.sh.
WORKERS_C="$BENCH_TMP/workers"
cc -O2 -Wall -Wextra -Wno-unused-parameter -o "$WORKERS_C" "$BENCH_DIR/workers.c" -lnghttp2 ||
    bench_die "cannot build bench/workers.c"
SUBMITTERS=$(sed -n 's/.*-c *\([0-9][0-9]*\).*/\1/p' <<<"$BENCH_WRK")
# c_run MODE ARGS...: bench/workers.c against ACCEPTD_URL; its "name value" lines in out.
c_run()
{
    local hostport=${ACCEPTD_URL#http://}
    out=$(timeout -k 5 "$NODE_LIMIT" "$WORKERS_C" "${hostport%:*}" "${hostport##*:}" "$@") ||
        bench_die "bench/workers.c $1 failed"
}
BENCH_NODE=pickup start_acceptd --store "$(fresh_db pickup)" "${KEYS[@]}"
c_run handoff "$BENCH_HANDOFF_COUNT"
p99=$(value handoff-p99)
printf '%-12s %8.2f ms\n' pickup-pg1-p50 "$(value handoff-p50)"
printf '%-12s %8.2f ms     target <= 5 ms: %s  (max %.2f ms, n %d)\n' pickup-pg1-p99 "$p99" \
    "$(awk -v v="$p99" 'BEGIN { print v <= 5 ? "met" : "MISSED" }')" "$(value handoff-max)" "$(value handoff-n)"
e2e_sqlite=() e2e_pg=() ratios=()
for round in $(seq "$BENCH_ROUNDS"); do
    BENCH_NODE=e2e-sqlite-$round start_acceptd
    c_run e2e-h2 "$BENCH_E2E_JOBS" "${SUBMITTERS:-32}" 8 32
    e2e_sqlite+=("$(value e2e)")
    BENCH_NODE=e2e-pg-$round start_acceptd --store "$(fresh_db "e2e$round")" "${KEYS[@]}"
    c_run e2e-h2 "$BENCH_E2E_JOBS" "${SUBMITTERS:-32}" 8 32
    e2e_pg+=("$(value e2e)")
    ratios+=("$(awk -v a="${e2e_pg[-1]}" -v b="${e2e_sqlite[-1]}" 'BEGIN { printf "%.3f", a / b }')")
done
median() { tr ' ' '\n' <<<"$*" | sort -n | awk '{ v[NR] = $1 } END { print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
r=$(median "${ratios[@]}")
printf '%-12s %8.0f jobs/s     (rounds: %s)\n' e2e-sqlite "$(median "${e2e_sqlite[@]}")" "${e2e_sqlite[*]}"
printf '%-12s %8.0f jobs/s %5.2fx e2e-sqlite  target >= 0.5x: %s  (rounds: %s)\n' e2e-pg1 "$(median "${e2e_pg[@]}")" "$r" \
    "$(awk -v v="$r" 'BEGIN { print (v >= 0.5 ? "met" : "MISSED") }')" "${ratios[*]}"
