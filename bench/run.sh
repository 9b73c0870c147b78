#!/usr/bin/env bash
# bench/run.sh - run the benchmarks (`make bench`). Each benchmark is bench/NAME.sh, run in its own process
# with its own servers and its own nginx reference. To add one, write bench/NAME.sh on top of bench/lib.sh
# and add NAME to BENCHES (a dash in NAME is an underscore in the file's name: submit-clients is
# bench/submit_clients.sh).
# bench/soak.sh (30 minutes) is not in BENCHES: run it by name, bench/run.sh soak (BENCH_SOAK_SECONDS sets its length).
# Usage: bench/run.sh [NAME...]   (default: all of BENCHES). Settings: see bench/lib.sh.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

BENCHES=(http batch workers groups webhooks sse cluster dashboard submit-clients artifacts scale bulk tracing)
[ "$#" -gt 0 ] && BENCHES=("$@")

ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

failed=()
for name in "${BENCHES[@]}"; do
    script="bench/${name//-/_}.sh"
    [ -f "$script" ] || {
        echo "bench: no $script" >&2
        failed+=("$name")
        continue
    }
    bash "$script" || failed+=("$name")
done
if [ "${#failed[@]}" -gt 0 ]; then
    echo "bench: failed: ${failed[*]}" >&2
    exit 1
fi
