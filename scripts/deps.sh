#!/usr/bin/env bash
# deps.sh - install what building, testing and benchmarking acceptd needs, and nothing else.
#
# Debian packages come from apt (apt-get update runs only when something is missing), the black-box test
# clients from npm via the committed package-lock.json. A second run on a ready machine does no network
# I/O and returns at once. Must run as root (CI does) or with sudo available.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

PACKAGES=(
    build-essential pkg-config curl jq
    libh2o-evloop-dev libjansson-dev libsqlite3-dev libyaml-dev libssl-dev libcurl4-openssl-dev libpq-dev
    liburing-dev libgoogle-perftools-dev
    libcmocka-dev
    postgresql
    wrk nginx-light nghttp2-client libnghttp2-dev
    clang-format
    clang libclang-rt-14-dev
    chromium
    prometheus python3 python3-mypy
    tzdata
)
# The machine image may ship Node.js from elsewhere (with its own npm); Debian's nodejs/npm would clash.
if ! command -v node >/dev/null 2>&1; then
    PACKAGES+=(nodejs npm)
elif ! command -v npm >/dev/null 2>&1; then
    PACKAGES+=(npm)
fi

# One dpkg-query for all names (a call per package costs ~30 ms each); unknown names print nothing.
declare -A ok=()
while read -r name status; do
    [ "$status" = "ii" ] && ok["${name%%:*}"]=1
done < <(dpkg-query -W -f='${Package} ${db:Status-Abbrev}\n' "${PACKAGES[@]}" 2>/dev/null || true)

missing=()
for p in "${PACKAGES[@]}"; do
    [ -n "${ok[$p]:-}" ] || missing+=("$p")
done

SUDO=
if [ "$(id -u)" -ne 0 ]; then
    SUDO=sudo
fi

if [ "${#missing[@]}" -gt 0 ]; then
    echo "deps: installing ${missing[*]}" >&2
    nginx_was_running=0
    pgrep -x nginx >/dev/null 2>&1 && nginx_was_running=1
    export DEBIAN_FRONTEND=noninteractive
    log=$(mktemp)
    # Quiet on success; the whole apt log on failure.
    if ! { $SUDO apt-get update -qq && $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"; } \
        >"$log" 2>&1; then
        cat "$log" >&2
        rm -f "$log"
        echo "deps: apt-get failed" >&2
        exit 1
    fi
    rm -f "$log"
    # nginx's postinst starts the system nginx on port 80; the benchmarks run their own private nginx.
    if [ "$nginx_was_running" -eq 0 ] && pgrep -x nginx >/dev/null 2>&1; then
        $SUDO service nginx stop >/dev/null 2>&1 || true
        if pgrep -x nginx >/dev/null 2>&1 && [ -f /run/nginx.pid ]; then
            $SUDO kill "$(cat /run/nginx.pid)" 2>/dev/null || true
        fi
        if command -v systemctl >/dev/null 2>&1; then
            $SUDO systemctl disable nginx >/dev/null 2>&1 || true
        fi
    fi
    # postgresql's postinst may start the distribution's cluster; the tests start their own, so leave it.
fi

# npm ci when node_modules is missing or older than the lockfile. npm writes node_modules/.package-lock.json
# on every install, so it is the stamp.
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
    echo "deps: npm ci" >&2
    npm ci --no-audit --no-fund --loglevel=error >/dev/null
    touch node_modules/.package-lock.json
fi
