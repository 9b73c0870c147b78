#!/usr/bin/env bash
# bench/batches.sh - batches (CONTRACT §13) against what they stand beside, on one daemon (bench/batches.mjs):
#   create  a batch of 1,000 jobs (POST /v1/batches) against 1,000 jobs in one POST /v1/jobs:batch: jobs/s each
#           and the ratio (issue 60 asks >= 0.8)
#   poll    a 304 poll of a running 1,000-job batch against a 304 poll of a job, by wrk (BENCH_WRK): requests/s each
#           and the ratio (issue 60 asks >= 0.9)
#   webhook from sending the last :complete of a 4-job batch to the arrival of its batch.succeeded delivery at a
#           receiver (node:http on 127.0.0.1, webhooks.allowNetworks opening loopback only), against a job's
#           :complete sent to the arrival of its own job.succeeded: p50 and p99 of each in ms and the ratio of the
#           p50s, over BATCHES_WEBHOOKS of each, one at a time (both through the callbackUrl); timed from the
#           :complete's answer it would be negative as often as webhook-before-answer says (the delivery leaves
#           once the commit is durable, as the answer does)
# Settings: BATCHES_ROUNDS (default 20); BATCHES_WEBHOOKS (default 200); BATCHES_STORE, a postgresql:// URL to
# measure the PostgreSQL store instead of SQLite (cluster mode: a batch's answer is cached as on SQLite, kept
# fresh as its jobs' are).
set -euo pipefail
# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

: "${BATCHES_ROUNDS:=20}"
: "${BATCHES_WEBHOOKS:=200}"

command -v node >/dev/null 2>&1 || bench_die "node not found (run scripts/deps.sh)"
[ -d "$BENCH_ROOT/node_modules/undici" ] || bench_die "undici not installed (run scripts/deps.sh)"
bench_init
echo "batches: $BATCHES_ROUNDS rounds, $BATCHES_WEBHOOKS webhooks${BATCHES_STORE:+, PostgreSQL store}"
# Deliveries to the bench's own receiver on loopback; the first attempt at once (the default schedule's).
printf 'webhooks:\n  allowNetworks: ["127.0.0.0/8"]\n' >"$BENCH_TMP/acceptd.yaml"
if [ -n "${BATCHES_STORE:-}" ]; then
    start_acceptd --config "$BENCH_TMP/acceptd.yaml" --store "$BATCHES_STORE"
else
    start_acceptd --config "$BENCH_TMP/acceptd.yaml"
fi
node "$BENCH_DIR/batches.mjs" "$ACCEPTD_URL" create "$BATCHES_ROUNDS"
read -r batch_path batch_etag job_path job_etag < <(node "$BENCH_DIR/batches.mjs" "$ACCEPTD_URL" poll)
wrk_rate poll-batch-304 "$ACCEPTD_URL$batch_path" -H "If-None-Match: $batch_etag"
batch_rps=$WRK_RPS
wrk_rate poll-job-304 "$ACCEPTD_URL$job_path" -H "If-None-Match: $job_etag"
echo "poll-batch-req/s $batch_rps"
echo "poll-job-req/s $WRK_RPS"
echo "poll-ratio $(awk -v a="$batch_rps" -v b="$WRK_RPS" 'BEGIN { printf "%.2f", a / b }')"
node "$BENCH_DIR/batches.mjs" "$ACCEPTD_URL" webhooks "$BATCHES_WEBHOOKS"
