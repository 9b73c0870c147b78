#!/usr/bin/env bash
# layers.sh - the layout is the architecture: check that every include points down and that every source
# file sits in a folder the README's "Layout" section names, and that tests/unit/ mirrors src/ folder for folder.
# `make test` runs it (`make layers`).
#
# Each folder of src/ is a layer with a rank; a file may include headers of its own folder and of folders of
# a lower rank, never of a higher one or of another folder of the same rank (hub, webhook and http stand side
# by side and do not know each other). src/worker/ is a client of the daemon's HTTP API and may use common/
# only; src/cli/, the other client, may use common/ and worker/ (whose client.h both clients share). server.c wires the layers together and main.c is the command line; nothing includes either but main.c.
# Includes name their folder ("core/job.h"), so a reader sees the direction at the top of every file. A header
# named *_int.h is its folder's own (api/api_int.h): only files of that folder include it.
# libh2o stays behind one wall: only src/http/ and src/api/ (which speaks in requests) include its headers
# (<h2o.h>, <h2o/...>); the layers below get the event loop through core/loop.h, which src/http/loop.c defines.
# Usage: scripts/layers.sh   Prints file:line: message per violation; exits 1 if there was any.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

declare -A RANK=([common]=0 [job]=1 [store]=2 [core]=3 [hub]=4 [webhook]=4 [http]=4 [api]=5)
bad=0
say() {
    echo "$*" >&2
    bad=1
}

# may_include FROM TO: whether a file of folder FROM may include a header of folder TO.
may_include() {
    local from=$1 to=$2
    [ "$from" = "$to" ] && return 0
    case "$from" in
    worker) [ "$to" = common ] ;;
    cli) [ "$to" = common ] || [ "$to" = worker ] ;;
    server) [ -n "${RANK[$to]:-}" ] ;;
    main) [ -n "${RANK[$to]:-}" ] || [ "$to" = worker ] || [ "$to" = cli ] || [ "$to" = server ] ;;
    *) [ -n "${RANK[$to]:-}" ] && [ -n "${RANK[$from]:-}" ] && [ "${RANK[$to]}" -lt "${RANK[$from]}" ] ;;
    esac
}

folder_of() {
    case "$1" in
    src/server.[ch]) echo server ;;
    src/main.c) echo main ;;
    src/*/*) local d=${1#src/}; echo "${d%%/*}" ;;
    *) echo "" ;;
    esac
}

# The folders the README's Layout section names (lines mentioning `src/NAME/`).
documented=$(awk '/^## /{ on = ($0 ~ /^## Layout/) } on' README.md | grep -o 'src/[a-z_]*/' | sort -u || true)

declare -A told=()
while IFS= read -r f; do
    from=$(folder_of "$f")
    if [ -z "$from" ]; then
        say "$f: not in a layer's folder (src/LAYER/, or src/server.c and src/main.c)"
        continue
    fi
    if [ "$from" != server ] && [ "$from" != main ] && [ -z "${told[$from]:-}" ]; then
        told[$from]=1
        if [ -z "${RANK[$from]:-}" ] && [ "$from" != worker ] && [ "$from" != cli ]; then
            say "$f: src/$from/ is not a known layer (add it to scripts/layers.sh and the README's Layout section)"
        fi
        grep -qx "src/$from/" <<<"$documented" || say "$f: src/$from/ is not named in README.md's Layout section"
    fi
    case "$from" in
    http | api) ;;
    *)
        while IFS=: read -r line inc; do
            say "$f:$line: $inc: only src/http/ and src/api/ include libh2o's headers (use core/loop.h, common/list.h)"
        done < <(grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*<h2o[./]' "$f" | sed 's/[[:space:]]*$//' || true)
        ;;
    esac
    while IFS=: read -r line inc; do
        inc=${inc#*\"}
        inc=${inc%%\"*}
        case "$inc" in
        server.h) to=server ;;
        */*) to=${inc%%/*} ;;
        *)
            say "$f:$line: #include \"$inc\" does not name its folder (write \"LAYER/$inc\")"
            continue
            ;;
        esac
        if [ "$to" = .. ] || [ ! -e "src/$inc" ]; then
            say "$f:$line: #include \"$inc\" is not a header under src/"
        elif [[ "$inc" == *_int.h ]] && [ "$from" != "$to" ]; then
            say "$f:$line: $inc is internal to src/$to/ (an _int.h header); include $to/'s public header"
        elif ! may_include "$from" "$to"; then
            say "$f:$line: src/$from/ may not include $to/ ($inc): dependencies point down only (scripts/layers.sh)"
        fi
    done < <(grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f" | sed 's/^\([0-9]*\):/\1:/' || true)
done < <(find src -name '*.[ch]' | sort)

# tests/unit mirrors src/: each test folder is a layer's, and each layer's folder has its test folder.
for d in tests/unit/*/; do
    name=$(basename "$d")
    [ -d "src/$name" ] || say "$d: no src/$name/ to mirror"
done
for d in src/*/; do
    name=$(basename "$d")
    [ -d "tests/unit/$name" ] || say "$d: no tests/unit/$name/ with its unit tests (tests/unit mirrors src/)"
done

[ "$bad" -eq 0 ] && echo "layers: every include points down; libh2o only in http/ and api/; every source file is in a documented folder, and every folder has its unit tests"
exit "$bad"
