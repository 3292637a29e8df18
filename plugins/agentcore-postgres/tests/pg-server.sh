#!/usr/bin/env bash
# pg-server.sh start DIR [--no-install] | stop DIR
#
# Start a throwaway PostgreSQL server for the agentcore-postgres tests in DIR (created; it must be
# a fresh directory whose parents the server's user can traverse, e.g. under /tmp), listening on
# 127.0.0.1 at a free port and on a Unix socket in DIR, with password authentication for a
# superuser "agentcore" whose random password is in the DSN. The last line printed by "start" is
# the DSN (also written to DIR/dsn). "stop DIR" stops that server and removes DIR.
#
# The server binaries are looked up in $PG_BIN, then /usr/lib/postgresql/*/bin (newest first),
# then `pg_config --bindir`, then PATH. When none is found and we run as root with apt-get, the
# Debian "postgresql" package is installed (unless --no-install). initdb refuses to run as root,
# so as root the server runs as the "postgres" user (created by the Debian package).
# Exit status 3: no server binary (the tests skip on that); any other failure: 1.
set -euo pipefail

find_bin() {
    local dir
    for dir in ${PG_BIN:-} $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
        [ -x "$dir/initdb" ] && [ -x "$dir/pg_ctl" ] && { echo "$dir"; return 0; }
    done
    if command -v pg_config >/dev/null 2>&1; then
        dir=$(pg_config --bindir)
        [ -x "$dir/initdb" ] && { echo "$dir"; return 0; }
    fi
    if command -v initdb >/dev/null 2>&1; then
        dirname "$(command -v initdb)"
        return 0
    fi
    return 1
}

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

start() {
    local dir=$1 install=$2 bin run=() port password
    if ! bin=$(find_bin); then
        if [ "$install" = yes ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
            echo "pg-server.sh: no PostgreSQL binaries; installing the postgresql package" >&2
            (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql) >&2
        fi
        bin=$(find_bin) || { echo "pg-server.sh: no PostgreSQL server binary (initdb) found" >&2; exit 3; }
    fi
    if [ -e "$dir/data" ]; then
        echo "pg-server.sh: $dir/data exists; stop that server first or use a fresh directory" >&2
        exit 1
    fi
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    if [ "$(id -u)" = 0 ]; then
        id postgres >/dev/null 2>&1 || { echo "pg-server.sh: running as root needs a 'postgres' user" >&2; exit 1; }
        chown postgres "$dir"
        run=(runuser -u postgres --)
        if ! "${run[@]}" test -w "$dir"; then
            echo "pg-server.sh: the postgres user cannot reach $dir; make its parent directories" \
                 "traversable (chmod o+x) or use a directory under /tmp" >&2
            exit 1
        fi
    fi
    port=$(free_port)
    password=$(python3 -c 'import secrets; print(secrets.token_hex(16))')
    # The password file is read by initdb and removed at once.
    (umask 077 && echo "$password" > "$dir/pwfile")
    [ "$(id -u)" = 0 ] && chown postgres "$dir/pwfile"
    "${run[@]}" "$bin/initdb" -D "$dir/data" -U agentcore --pwfile="$dir/pwfile" --auth=scram-sha-256 \
        -E UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 || {
        cat "$dir/initdb.log" >&2; rm -f "$dir/pwfile"; exit 1; }
    rm -f "$dir/pwfile"
    "${run[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
        -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c max_connections=200" start >/dev/null || {
        cat "$dir/server.log" >&2; exit 1; }
    echo "$bin" > "$dir/bin"
    echo "postgresql://agentcore:$password@127.0.0.1:$port/postgres" | tee "$dir/dsn"
}

stop() {
    local dir=$1 bin run=()
    [ -f "$dir/bin" ] || { echo "pg-server.sh: no server started in $dir" >&2; exit 1; }
    bin=$(cat "$dir/bin")
    [ "$(id -u)" = 0 ] && run=(runuser -u postgres --)
    "${run[@]}" "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null || true
    rm -rf "$dir"
}

case "${1:-}" in
    start) [ $# -ge 2 ] || { echo "usage: $0 start DIR [--no-install]" >&2; exit 1; }
           start "$2" "$([ "${3:-}" = --no-install ] && echo no || echo yes)" ;;
    stop) [ $# -eq 2 ] || { echo "usage: $0 stop DIR" >&2; exit 1; }
          stop "$2" ;;
    *) echo "usage: $0 start DIR [--no-install] | stop DIR" >&2; exit 1 ;;
esac
