#!/usr/bin/env bash
# run.sh - `make run`: the daemon on 127.0.0.1:8080 and a worker for the demo type, until Ctrl-C.
#
# Builds nothing (make run builds first). Uses examples/acceptd.yaml (no keys: loopback clients only) and
# the store in ./data. Ctrl-C stops the worker first, so that a running demo job is finished or handed
# back, then the daemon.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

BIN=build/acceptd
URL=http://127.0.0.1:8080
[ -x "$BIN" ] || { echo "run.sh: $BIN not found: run make first" >&2; exit 1; }

server_pid=
worker_pid=
stop() {
    trap - INT TERM EXIT
    echo
    echo "run.sh: stopping"
    if [ -n "$worker_pid" ]; then kill -TERM "$worker_pid" 2>/dev/null || true; wait "$worker_pid" 2>/dev/null || true; fi
    if [ -n "$server_pid" ]; then kill -TERM "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
    exit 0
}
trap stop INT TERM EXIT

# Each in its own session: Ctrl-C reaches only this script, which stops the worker before the daemon (a
# daemon stopped first would leave the worker unable to report the job it is running).
setsid "$BIN" serve --listen 127.0.0.1:8080 --data ./data --config examples/acceptd.yaml &
server_pid=$!

# Wait for the daemon to answer (the worker would retry on its own; this keeps its log quiet).
for _ in $(seq 1 50); do
    if curl -fsS "$URL/healthz" >/dev/null 2>&1; then break; fi
    if ! kill -0 "$server_pid" 2>/dev/null; then echo "run.sh: the daemon did not start" >&2; server_pid=; exit 1; fi
    sleep 0.1
done

setsid "$BIN" worker --url "$URL" --type demo.sleep --concurrency 2 -- examples/demo-worker.sh &
worker_pid=$!

cat <<EOT

  acceptd   $URL   (health: $URL/healthz)
  dashboard $URL/ui/   (no API keys configured: it opens without one)
  worker    demo.sleep, 2 at a time, running examples/demo-worker.sh

  Try:
    curl -si -X POST $URL/v1/jobs -H 'Content-Type: application/json' \\
         -d '{"type": "demo.sleep", "payload": {"seconds": 3}}'
    curl -s "$URL/v1/jobs/<id from Location>?wait=10"

  Ctrl-C stops both.

EOT

# Either process ending on its own ends the demo too.
wait -n || true
