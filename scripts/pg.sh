#!/usr/bin/env bash
# pg.sh - a throwaway PostgreSQL cluster for the tests (`make blackbox-pg`), private to one directory.
#
#   scripts/pg.sh start DIR PORT          initdb in DIR/data and start the server; prints the URL of its
#                                         postgres database. Stops and removes a cluster an aborted run left
#                                         in DIR first.
#   scripts/pg.sh stop DIR                stop the server (fast shutdown) and remove DIR; with
#                                         ACCEPTD_KEEP_TMP=1 the directory (and DIR/log) is kept.
#   scripts/pg.sh restart DIR             restart the server (fast shutdown: clients lose their connections).
#   scripts/pg.sh url DIR PORT [DB]       print the URL of database DB (default postgres).
#   scripts/pg.sh createdb DIR PORT DB    create database DB and print its URL.
#
# The server listens on a unix socket in DIR only (no TCP), so PORT only names the socket file
# (DIR/.s.PGSQL.PORT); keep DIR short, a socket path has at most 107 bytes. Authentication is `trust` for
# the superuser postgres. fsync stays on: the durability tests count on a commit being a commit.
#
# initdb and postgres refuse to run as root: as root the server runs as the `postgres` system user (made by
# Debian's postgresql package) and DIR is handed to it; otherwise it runs as the caller. The binaries come
# from PG_BIN if set, else the newest /usr/lib/postgresql/*/bin, else PATH.
set -euo pipefail

die() {
    echo "pg.sh: $*" >&2
    exit 1
}

usage() {
    sed -n '4,11p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

find_bin() {
    if [ -n "${PG_BIN:-}" ]; then
        echo "$PG_BIN"
        return
    fi
    local v
    v=$(ls /usr/lib/postgresql 2>/dev/null | sort -V | tail -n 1)
    if [ -n "$v" ] && [ -x "/usr/lib/postgresql/$v/bin/initdb" ]; then
        echo "/usr/lib/postgresql/$v/bin"
        return
    fi
    local p
    p=$(command -v initdb 2>/dev/null) || die "no PostgreSQL server binaries (initdb): install postgresql (scripts/deps.sh) or set PG_BIN"
    dirname "$p"
}

# Run a server-side command as the cluster's owner, from a directory that owner can read.
as_owner() {
    if [ "$(id -u)" -eq 0 ]; then
        (cd / && runuser -u postgres -- "$@")
    else
        (cd / && "$@")
    fi
}

url() {
    echo "postgresql://postgres@/${3:-postgres}?host=$1&port=$2"
}

# Stop whatever runs on DIR/data (a leftover from an aborted run included) and remove DIR.
stop() {
    local dir=$1 bin
    bin=$(find_bin)
    if [ -f "$dir/data/postmaster.pid" ]; then
        as_owner "$bin/pg_ctl" -D "$dir/data" -m fast -w -t 30 stop >/dev/null 2>&1 ||
            as_owner "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
        # pg_ctl gives up on a postmaster.pid whose process is gone or not a postmaster; kill a live one.
        local pid
        pid=$(head -n 1 "$dir/data/postmaster.pid" 2>/dev/null || true)
        if [ -n "$pid" ] && [ -f "$dir/data/postmaster.pid" ] && kill -0 "$pid" 2>/dev/null; then
            kill -KILL "$pid" 2>/dev/null || true
        fi
    fi
    rm -rf "$dir"
}

start() {
    local dir=$1 port=$2 bin
    [ "${#dir}" -le 80 ] || die "$dir: too long for a socket directory (keep it under 80 bytes)"
    case "$dir" in /*) ;; *) die "$dir: give an absolute directory" ;; esac
    case "$port" in '' | *[!0-9]*) die "$port: not a port number" ;; esac
    bin=$(find_bin)
    stop "$dir"
    mkdir -p "$dir"
    chmod 700 "$dir"
    if [ "$(id -u)" -eq 0 ]; then
        id postgres >/dev/null 2>&1 || die "running as root needs the postgres system user (Debian package postgresql)"
        chown postgres: "$dir"
    fi
    # -N: initdb's own files need not reach the disk for a throwaway cluster; the server still fsyncs.
    if ! as_owner "$bin/initdb" -D "$dir/data" -A trust -U postgres -E UTF8 --locale=C -N >"$dir/initdb.log" 2>&1; then
        cat "$dir/initdb.log" >&2
        die "initdb failed"
    fi
    # Appended, so these win over initdb's defaults. 300 connections: every daemon holds a few, and the
    # black-box files run two at a time with several daemons each.
    as_owner tee -a "$dir/data/postgresql.conf" >/dev/null <<EOF

# scripts/pg.sh: a private test cluster
listen_addresses = ''
unix_socket_directories = '$dir'
port = $port
max_connections = 300
fsync = on
synchronous_commit = on
shared_buffers = 64MB
log_min_messages = warning
log_line_prefix = '%m [%p] %d '
EOF
    if ! as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/log" -w -t 60 start >/dev/null 2>&1; then
        cat "$dir/log" >&2 2>/dev/null || true
        die "the server did not start (log above)"
    fi
    url "$dir" "$port"
}

restart() {
    local dir=$1 bin
    bin=$(find_bin)
    [ -f "$dir/data/postmaster.pid" ] || die "no server running in $dir"
    # -l again: without it the new server would write to (and hold open) this script's stdout.
    if ! as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/log" -m fast -w -t 60 restart >/dev/null 2>&1; then
        cat "$dir/log" >&2 2>/dev/null || true
        die "the server did not restart (log above)"
    fi
}

createdb() {
    local dir=$1 port=$2 db=$3 bin
    bin=$(find_bin)
    "$bin/psql" -X -q -v ON_ERROR_STOP=1 -d "$(url "$dir" "$port")" -c "CREATE DATABASE \"$db\"" >/dev/null
    url "$dir" "$port" "$db"
}

cmd=${1:-}
[ "$#" -gt 0 ] && shift
case "$cmd" in
    start) [ "$#" -eq 2 ] || usage; start "$1" "$2" ;;
    stop)
        [ "$#" -eq 1 ] || usage
        if [ -n "${ACCEPTD_KEEP_TMP:-}" ]; then
            bin=$(find_bin)
            as_owner "$bin/pg_ctl" -D "$1/data" -m fast -w stop >/dev/null 2>&1 || true
            echo "pg.sh: kept $1" >&2
        else
            stop "$1"
        fi
        ;;
    restart) [ "$#" -eq 1 ] || usage; restart "$1" ;;
    restart)
        [ "$#" -eq 1 ] || usage
        bin=$(find_bin)
        as_owner "$bin/pg_ctl" -D "$1/data" -l "$1/log" -m fast -w -t 60 restart >/dev/null
        ;;
    url) [ "$#" -ge 2 ] && [ "$#" -le 3 ] || usage; url "$@" ;;
    createdb) [ "$#" -eq 3 ] || usage; createdb "$1" "$2" "$3" ;;
    *) usage ;;
esac
