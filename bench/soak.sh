#!/usr/bin/env bash
# bench/soak.sh - a soak: one daemon under a mixed, rate-bounded load for a long while (30 minutes by default),
# its resident memory and open file descriptors sampled, and a verdict whether each levels off. It looks for
# leaks, not throughput (about 10 submits/s and some 100 requests/s in all), so it runs beside other work; it
# is not in the default list of bench/run.sh (run it by name: bench/run.sh soak) nor in make test.
# The load (bench/soak.mjs, one Node process, all on 127.0.0.1): submits (some with Idempotency-Key), polls
# with ETag, two workers leasing, heartbeating and completing (some with a 256 KiB artifact uploaded in two
# parts, then downloaded whole, by range and with its ETag; some failing and retried), SSE streams over
# HTTP/1.1 and HTTP/2 opened and closed all along, each tenth job followed on its own stream to the end, and
# webhooks to a receiver in the load's process. Finished jobs expire after a minute (retention) and are
# tombstoned for a minute, idempotency keys and finished deliveries are kept a minute, so the store reaches a
# steady size (and with it SQLite's page caches, 16 MiB a connection) and the sweepers and the artifact
# collector run.
# The job cache is held to 8 MiB (limits.cacheBytes): it keeps jobs until its budget evicts them, and at this
# rate the default 64 MiB would take about an hour to fill, growing RSS all along; at 8 MiB it is full within
# the warm-up, so what still grows after it is not the cache.
# Prints a row per sample (RSS and peak RSS in KiB, descriptors, threads, and what the load did since the
# last row), a row 5 s after the load stopped, and the verdict: the mean of the last third of the rows under
# load against the middle third's (the first third is the warm-up): RSS within 5% (at least 4 MiB) and
# descriptors within 8 count as levelled off.
# Usage: bench/soak.sh [SECONDS]   (default BENCH_SOAK_SECONDS, 1800). The sample period is SECONDS / 60,
# between 10 and 30 s (BENCH_SOAK_SAMPLE overrides it). Settings: those of bench/lib.sh.
set -euo pipefail
# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

SECONDS_RUN=${1:-${BENCH_SOAK_SECONDS:-1800}}
[[ "$SECONDS_RUN" =~ ^[1-9][0-9]*$ ]] || bench_die "soak: SECONDS must be a positive integer, not $SECONDS_RUN"
sample=$((SECONDS_RUN / 60))
[ "$sample" -ge 10 ] || sample=10
[ "$sample" -le 30 ] || sample=30
: "${BENCH_SOAK_SAMPLE:=$sample}"

command -v node >/dev/null 2>&1 || bench_die "node not found (run scripts/deps.sh)"
[ -d "$BENCH_ROOT/node_modules/undici" ] || bench_die "undici not installed (npm ci)"
bench_init

conf="$BENCH_TMP/soak.yaml"
cat >"$conf" <<'EOF'
webhooks:
  allowNetworks: ["127.0.0.0/8"]
  keepDeliveries: 1m
idempotencyTtl: 1m
retention: { succeeded: 1m, failed: 1m, cancelled: 1m, partialSuccess: 1m }
tombstone: 1m
limits: { cacheBytes: 8388608 }
EOF
start_acceptd --config "$conf"
echo "soak: ${SECONDS_RUN}s of mixed load on $ACCEPTD_URL (pid $ACCEPTD_PID), sampled every ${BENCH_SOAK_SAMPLE}s; $(node --version)"

out="$BENCH_TMP/soak.out"
node "$BENCH_DIR/soak.mjs" "$ACCEPTD_URL" "$ACCEPTD_PID" "$SECONDS_RUN" "$BENCH_SOAK_SAMPLE" | tee "$out" | grep --line-buffered -v '^result '
kill -0 "$ACCEPTD_PID" 2>/dev/null || {
    cat "$BENCH_TMP/acceptd/stderr.log" >&2
    bench_die "the daemon is gone"
}
while read -r _ name value; do
    bench_record "$name" "$value"
done < <(grep '^result ' "$out")
grep -q '^verdict: RSS and file descriptors level off' "$out"
