#!/usr/bin/env bash
# bench/scale.sh - how cost grows with the store (issue 41, target 7): the SQLite node on a store of N jobs
# against the empty store in the same run, for each N of BENCH_SCALE_SIZES (default "1000000 10000000"):
#   fill        how the store of N was made and how long it took
#   ready       time from the process's start to the first /readyz 200 (timers rebuilt from the store)
#   poll-304    GET /v1/jobs/{id} with If-None-Match (wrk, BENCH_WRK), store-of-N / empty, median of the
#               within-round ratios over BENCH_ROUNDS (default 3) rounds, lowest-highest after it
#   submit      POST /v1/jobs (durable, as in bench/http.sh), the same way
#   list-*, changes-*   p99 latency in ms of one request at a time (wrk -t1 -c1 -d3s --latency): GET /v1/jobs?limit=50
#               unfiltered, by status, by type, by both, by updatedAfter; GET /v1/jobs/changes from the start,
#               from the middle of the store and from its head
#   poll-cpu, submit-cpu   each daemon's CPU time per request, by thread, per round (as submit-cpu in http.sh)
#   disk        bytes of the data directory per job, after the fill and after the run
#   rss         the daemon's resident memory after ready and after the measurements
# Start-up reads every running lease's job to re-arm its timer (hub.c recover_timers), so ready grows with the
# running jobs (6 in 1,000 here: 60,000 at 10 million), not with the store.
# The store is made without the API: the daemon itself writes a template of BENCH_SCALE_TEMPLATE (default 5000)
# jobs through the API (bench/scale_template.mjs: mostly succeeded, some failed, cancelled, queued, scheduled, a
# few running), then the sqlite3 CLI copies its rows (jobs and attempts) N / template times with fresh ids,
# cseqs and seqs; the indexes are the daemon's own, dropped for the copy and made again from their saved SQL.
# Filling 10 million jobs through the API would take about half an hour (submit, lease and complete are one
# commit each per job even with `next`); the copy takes a minute or two. Retention runs during the measurement:
# 2% of the finished jobs (BENCH_SCALE_EXPIRE_PCT) expire spread over the next BENCH_SCALE_EXPIRE_WINDOW seconds
# (default 600), so the sweeper tombstones and deletes while the figures are taken; the rest keep the 30 days the
# daemon gave them.
set -euo pipefail
# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

: "${BENCH_ROUNDS:=3}"
: "${BENCH_SCALE_SIZES:=1000000 10000000}"
: "${BENCH_SCALE_TEMPLATE:=5000}"
: "${BENCH_SCALE_EXPIRE_PCT:=2}"
: "${BENCH_SCALE_EXPIRE_WINDOW:=600}"
: "${BENCH_SCALE_LAT_WRK:=-t1 -c1 -d3s}"
command -v sqlite3 >/dev/null || bench_die "sqlite3 not found"
command -v node >/dev/null || bench_die "node not found"

now_ms() { date +%s%3N; }

# scale_start NAME: start_acceptd on the data dir of BENCH_NODE=NAME (made or left empty before), and time the
# start from the fork to the first /readyz 200. Sets READY_MS, and the daemon's URL and pid as start_acceptd does.
scale_start()
{
    local t0 tries=6000
    t0=$(now_ms)
    # shellcheck disable=SC2119 # start_acceptd takes no arguments here
    BENCH_NODE=$1 start_acceptd
    while [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 1 "$ACCEPTD_URL/readyz" 2>/dev/null)" != 200 ]; do
        tries=$((tries - 1))
        [ "$tries" -gt 0 ] || bench_die "$1: no /readyz 200 in 60 s"
        sleep 0.01
    done
    READY_MS=$(($(now_ms) - t0))
}

# scale_stop PID: stop a daemon and wait for it (its WAL is checkpointed on the way out).
scale_stop()
{
    kill "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
}

# scale_alive PID NODE: die with the tail of the daemon's log if it is gone (a figure of a dead daemon is none).
scale_alive()
{
    kill -0 "$1" 2>/dev/null && return 0
    tail -n 20 "$BENCH_TMP/$2/stderr.log" >&2 2>/dev/null || true
    wait "$1" 2>/dev/null
    bench_die "$2: the daemon is gone (exit status $?)"
}

rss_mib() { awk '/^VmRSS:/ { printf "%.1f", $2 / 1024 }' "/proc/$1/status"; }

# scale_fill TEMPLATE_DB DB N: DB becomes the template's store with its jobs copied to N jobs in all.
scale_fill()
{
    local tmpl=$1 db=$2 n=$3 cols exprs now
    cp "$tmpl" "$db"
    now=$(now_ms)
    cols=$(sqlite3 "$db" "SELECT group_concat(name, ', ') FROM (SELECT name FROM pragma_table_info('jobs') ORDER BY cid)")
    # The copy g of template row t is job number k = g * T + t.r (the template itself is g = 0): cseq and every seq
    # are moved up by g times the template's highest, so the copies follow each other in cseq and seq order as
    # later submits would; the id is new (k in its random part; the 'zz' sorts the copies after the daemon's ids).
    exprs=$(tr ',' '\n' <<<"$cols" | sed 's/^ *//' | while read -r c; do
        case $c in
        cseq) echo "t.cseq + g.g * @C@" ;;
        id) echo "'job_zz' || printf('%026d', g.g * @T@ + t.r)" ;;
        seq | created_seq | started_seq) echo "t.$c + g.g * @S@" ;;
        expires_at) printf '%s' "CASE WHEN t.expires_at IS NOT NULL AND (g.g * @T@ + t.r) % 100 < $BENCH_SCALE_EXPIRE_PCT" \
            " THEN $now + 5000 + ((g.g * @T@ + t.r) * 7919) % ($BENCH_SCALE_EXPIRE_WINDOW * 1000) ELSE t.expires_at END"
            echo ;;
        *) echo "t.$c" ;;
        esac
    done | paste -sd ',')
    exprs=${exprs//@C@/(SELECT c FROM span)}
    exprs=${exprs//@S@/(SELECT s FROM span)}
    exprs=${exprs//@T@/(SELECT n FROM span)}
    {
        echo "PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF; PRAGMA cache_size = -1000000; PRAGMA temp_store = MEMORY;"
        sqlite3 "$db" "SELECT 'DROP INDEX ' || name || ';' FROM sqlite_master WHERE type = 'index'
            AND tbl_name IN ('jobs', 'attempts') AND sql IS NOT NULL"
        cat <<EOF
CREATE TEMP TABLE span AS SELECT max(cseq) AS c, (SELECT value FROM meta WHERE key = 'seq_hw') AS s, count(*) AS n FROM jobs;
CREATE TEMP TABLE t AS SELECT row_number() OVER (ORDER BY cseq) - 1 AS r, * FROM jobs;
CREATE TEMP TABLE ta AS SELECT a.*, t.r FROM attempts a JOIN t ON a.job_id = t.id;
CREATE TEMP TABLE g AS SELECT value AS g FROM generate_series(1, ($n - 1) / (SELECT n FROM span));
BEGIN;
INSERT INTO jobs ($cols) SELECT $exprs FROM g, t WHERE g.g * (SELECT n FROM span) + t.r < $n ORDER BY g.g, t.r;
INSERT INTO attempts (job_id, attempt, worker, started_at, ended_at, outcome)
    SELECT 'job_zz' || printf('%026d', g.g * (SELECT n FROM span) + ta.r), ta.attempt, ta.worker, ta.started_at,
    ta.ended_at, ta.outcome FROM g, ta WHERE g.g * (SELECT n FROM span) + ta.r < $n;
UPDATE meta SET value = (SELECT max(seq) FROM jobs) WHERE key = 'seq_hw';
COMMIT;
EOF
        sqlite3 "$db" "SELECT sql || ';' FROM sqlite_master WHERE type = 'index' AND tbl_name IN ('jobs', 'attempts')
            AND sql IS NOT NULL"
        echo "PRAGMA journal_mode = WAL;"
    } >"$BENCH_TMP/fill.sql"
    sqlite3 "$db" <"$BENCH_TMP/fill.sql" >/dev/null
}

# lat_p99 NAME URL: p99 latency in ms of URL, one request at a time, in P99.
lat_p99()
{
    local name=$1 url=$2 out
    # shellcheck disable=SC2086 # BENCH_SCALE_LAT_WRK is a list of options
    out=$(wrk $BENCH_SCALE_LAT_WRK --timeout 30s --latency "$url" 2>&1) || bench_die "wrk failed for $name: $out"
    # A request slower than the run is never counted by wrk: say so rather than print a p99 of nothing.
    if [ "$(awk '/ requests in / { print $1 }' <<<"$out")" = 0 ]; then
        P99="none in the run (> ${BENCH_SCALE_LAT_WRK##*-d})"
        return 0
    fi
    P99=$(awk '$1 == "99%" { v = $2; if (v ~ /us$/) v = v / 1000; else if (v ~ /ms$/) v = v + 0;
        else if (v ~ /s$/) v = v * 1000; printf "%.2f", v }' <<<"$out")
    grep -q 'Non-2xx' <<<"$out" && P99="$P99 (non-2xx: $(awk -F: '/Non-2xx/ { gsub(/ /, "", $2); print $2 }' <<<"$out"))"
    return 0
}

bench_init
echo "scale: sizes $BENCH_SCALE_SIZES; wrk $BENCH_WRK (rates), $BENCH_SCALE_LAT_WRK --latency (p99); $BENCH_ROUNDS rounds"

# The template, written by the daemon through its API.
scale_start template
node "$BENCH_DIR/scale_template.mjs" "$ACCEPTD_URL" "$BENCH_SCALE_TEMPLATE" | sed 's/^/scale: template: /'
scale_stop "$ACCEPTD_PID"
template_db=$BENCH_TMP/template.db
cp "$BENCH_TMP/template/data/acceptd.db" "$template_db"

# The empty store, up for the whole run: every ratio is taken against it within the same round.
scale_start empty
empty_url=$ACCEPTD_URL empty_pid=$ACCEPTD_PID empty_ready=$READY_MS
poll_job
empty_poll=$POLL_URL empty_etag=$POLL_ETAG
printf '%-12s %8s ms  rss %s MiB\n' "ready@0" "$empty_ready" "$(rss_mib "$empty_pid")"

for size in $BENCH_SCALE_SIZES; do
    node=scale-$size cpu_lines=()
    mkdir -p "$BENCH_TMP/$node/data"
    t0=$(now_ms)
    scale_fill "$template_db" "$BENCH_TMP/$node/data/acceptd.db" "$size"
    jobs=$(sqlite3 "$BENCH_TMP/$node/data/acceptd.db" "SELECT count(*) FROM jobs")
    states=$(sqlite3 "$BENCH_TMP/$node/data/acceptd.db" "SELECT group_concat(s || ' ' || c, ', ') FROM (SELECT
        CASE status WHEN 0 THEN 'queued' WHEN 1 THEN 'running' WHEN 2 THEN 'succeeded' WHEN 3 THEN 'failed'
        WHEN 4 THEN 'cancelled' ELSE 'status ' || status END AS s, count(*) AS c FROM jobs GROUP BY status)")
    bytes=$(du -sb "$BENCH_TMP/$node/data" | awk '{ print $1 }')
    printf '%-12s %d jobs (%s) in %.1f s, sqlite3 copy of the template; %d bytes on disk/job\n' "fill@$size" \
        "$jobs" "$states" "$(awk -v ms=$(($(now_ms) - t0)) 'BEGIN { print ms / 1000 }')" $((bytes / jobs))
    # Cold start: the file's pages out of the page cache as far as this user can make them (not at all without
    # root), so the figure is the one after a reboot at worst.
    sync
    [ -w /proc/sys/vm/drop_caches ] && echo 1 >/proc/sys/vm/drop_caches
    scale_start "$node"
    big_url=$ACCEPTD_URL big_pid=$ACCEPTD_PID
    printf '%-12s %8s ms  rss %s MiB  (empty store: %s ms)\n' "ready@$size" "$READY_MS" "$(rss_mib "$big_pid")" \
        "$empty_ready"
    poll_job
    big_poll=$POLL_URL big_etag=$POLL_ETAG

    ROUND_RATES=() ROUND_ERRORS=()
    # Each round measures both stores back to back, the empty one first in odd rounds and last in even ones, so
    # a drift of the machine's load does not always fall on the same side. The CPU time each daemon spends per
    # request, by thread, is steadier than the rates on a shared machine, and says what else runs meanwhile (the
    # retention sweep is the writer's).
    for round in $(seq "$BENCH_ROUNDS"); do
        order="0 $size"
        [ $((round % 2)) = 0 ] && order="$size 0"
        for what in poll submit; do
            for s in $order; do
                if [ "$s" = 0 ]; then
                    url=$empty_url poll=$empty_poll etag=$empty_etag pid=$empty_pid
                else
                    url=$big_url poll=$big_poll etag=$big_etag pid=$big_pid
                fi
                scale_alive "$big_pid" "$node"
                thread_ticks "$pid" >"$BENCH_TMP/ticks-0"
                if [ "$what" = poll ]; then
                    wrk_rate "poll@$s" "$poll" -H "If-None-Match: $etag"
                else
                    wrk_rate "submit@$s" "$url/v1/jobs" -s "$BENCH_DIR/submit.lua"
                fi
                round_keep "$what@$s"
                thread_ticks "$pid" >"$BENCH_TMP/ticks-1"
                cpu_lines+=("$(printf '%-18s%s per request (round %d)' "$what-cpu@$s" \
                    "$(cpu_per_request "$BENCH_TMP/ticks-0" "$BENCH_TMP/ticks-1" "$WRK_REQUESTS")" "$round")")
            done
        done
    done
    report_rounds "poll@$size" poll@0
    report_rounds "submit@$size" submit@0
    printf '%s\n' "${cpu_lines[@]}" | sort -s -k1,1

    since_mid=$(($(sqlite3 "$BENCH_TMP/$node/data/acceptd.db" "SELECT value FROM meta WHERE key = 'seq_hw'") / 2))
    head_cursor=$(curl -s "$big_url/v1/jobs/changes?since=$((since_mid * 2 - 100))&limit=1000" |
        grep -o '"cursor":"[0-9]*"' | grep -o '[0-9]\+')
    after=$(date -u -d '-10 seconds' +%Y-%m-%dT%H:%M:%SZ)
    line=''
    # The updatedAfter lists come last: one that matches few jobs walks every job of the tenant on the event loop
    # (no index has updated_at), and what wrk leaves running of it holds up the daemon for the next figure.
    for q in "changes-start|/v1/jobs/changes?since=0&limit=100" "changes-mid|/v1/jobs/changes?since=$since_mid&limit=100" \
        "changes-head|/v1/jobs/changes?since=$head_cursor&limit=100" "list|/v1/jobs?limit=50" \
        "list-status|/v1/jobs?status=succeeded&limit=50" "list-status-rare|/v1/jobs?status=running&limit=50" \
        "list-type|/v1/jobs?type=video.transcode&limit=50" "list-both|/v1/jobs?status=failed&type=email.send&limit=50" \
        "list-updated|/v1/jobs?updatedAfter=$after&limit=50" \
        "list-updated-none|/v1/jobs?updatedAfter=2100-01-01T00:00:00Z&limit=50"; do
        name=${q%%|*}
        lat_p99 "$name" "$empty_url${q#*|}"
        p0=$P99
        lat_p99 "$name" "$big_url${q#*|}"
        printf '%-18s p99 %8s ms  (empty store: %s ms)  %s\n' "$name@$size" "$P99" "$p0" "${q#*|}"
    done
    printf '%-12s %s MiB after the measurements  (empty store: %s MiB)\n' "rss@$size" "$(rss_mib "$big_pid")" \
        "$(rss_mib "$empty_pid")"
    scale_stop "$big_pid"
    bytes=$(du -sb "$BENCH_TMP/$node/data" | awk '{ print $1 }')
    jobs=$(sqlite3 "$BENCH_TMP/$node/data/acceptd.db" "SELECT count(*) FROM jobs")
    printf '%-12s %d bytes/job (%d jobs, %d bytes, after the run: retention swept, submits added)\n' "disk@$size" \
        $((bytes / jobs)) "$jobs" "$bytes"
    [ "${BENCH_KEEP:-0}" = 1 ] || rm -rf "${BENCH_TMP:?}/$node"
done
exit 0
