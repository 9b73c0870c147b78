#!/bin/sh
# demo-worker.sh - the example command for jobs of type demo.sleep, run by `acceptd worker`.
#
#   acceptd worker --url http://127.0.0.1:8080 --type demo.sleep -- examples/demo-worker.sh
#
# The payload arrives on stdin as one line of JSON, e.g. {"seconds": 3}; the job is described by
# ACCEPTD_JOB_ID, ACCEPTD_JOB_TYPE and ACCEPTD_JOB_ATTEMPT. Lines "::progress <0-100> [message]" report
# progress; everything else this script prints on stdout is the result and must be one JSON document.
# Anything on stderr is logged, and its last 2 KiB end up in the job's error when the script fails.
set -eu

trap 'echo "demo-worker: stopped by SIGTERM" >&2; exit 143' TERM

payload=$(cat)
seconds=$(printf '%s' "$payload" | sed -n 's/.*"seconds"[[:space:]]*:[[:space:]]*\([0-9][0-9]*\).*/\1/p')
seconds=${seconds:-3}
[ "$seconds" -le 60 ] || seconds=60

echo "demo-worker: job $ACCEPTD_JOB_ID attempt $ACCEPTD_JOB_ATTEMPT, sleeping $seconds s" >&2
# The job's trace (docs/tracing.md): a traced tool started here continues it from TRACEPARENT and TRACESTATE.
[ -z "${TRACEPARENT:-}" ] || echo "demo-worker: in trace $TRACEPARENT" >&2
i=0
while [ "$i" -lt "$seconds" ]; do
    echo "::progress $((i * 100 / seconds)) $((seconds - i)) s to go"
    sleep 1
    i=$((i + 1))
done
echo "::progress 100 done"

printf '{"slept": %s, "job": "%s", "attempt": %s, "payload": %s}\n' \
    "$seconds" "$ACCEPTD_JOB_ID" "$ACCEPTD_JOB_ATTEMPT" "$payload"
