#!/usr/bin/env bash
# Throwaway PostgreSQL for the tests: `pg.sh start DIR` creates a fresh cluster in DIR (as the
# postgres user), starts it on a free loopback port and prints its URL; `pg.sh stop DIR` stops it
# and removes DIR. .ci/run uses it; locally: `bash .ci/pg.sh start /tmp/pg` and export
# TOOLBRIDGE_TEST_POSTGRES_URL=<the URL it prints>. fsync is off unless PG_FSYNC=on (bench).
set -euo pipefail
cmd=$1; dir=$2
bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
case "$cmd" in
start)
    mkdir -p "$dir"; chmod 700 "$dir"
    [ "$(id -u)" = 0 ] && chown postgres: "$dir"
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    as_pg "$bin/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 >"$dir/initdb.log" 2>&1 \
        || { cat "$dir/initdb.log" >&2; exit 1; }
    as_pg "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
        -o "-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories=$dir -c max_connections=200 -c fsync=${PG_FSYNC:-off}" \
        start >/dev/null || { cat "$dir/server.log" >&2; exit 1; }
    echo "postgresql://postgres@127.0.0.1:$port/postgres"
    ;;
stop)
    [ -d "$dir/data" ] && as_pg "$bin/pg_ctl" -D "$dir/data" -m immediate -w -t 30 stop >/dev/null 2>&1 || true
    rm -rf "$dir"
    ;;
esac
