#!/usr/bin/env bash
# Starts or stops a throwaway PostgreSQL 15 for validating the SQL logic tests
# (test/logic/) against the real thing.
#
#   scripts/pg15.sh start DIR PORT   initdb DIR (trust auth) if it is empty and
#                                    start a server on 127.0.0.1:PORT
#   scripts/pg15.sh stop  DIR PORT   stop it (DIR is kept; delete it yourself)
#
# The server's superuser is `postgres`; connect with
#   postgres://postgres@127.0.0.1:PORT/postgres?sslmode=disable
#
# Binaries are looked for in `pg_config --bindir`, /usr/lib/postgresql/15/bin
# and PATH, in that order; a directory counts only if its postgres reports
# version 15. If none is found and we run as root (as CI does), Debian's
# postgresql-15 is installed. initdb refuses to run as root, so as root the
# cluster is owned by, and the server runs as, the `postgres` OS user (created
# if missing); DIR must then be reachable by that user (e.g. under /tmp).
set -euo pipefail

usage() { echo "usage: $0 start|stop DIR PORT" >&2; exit 2; }
[ $# -eq 3 ] || usage
cmd=$1 dir=$2 port=$3

is_pg15() { [ -x "$1/postgres" ] && "$1/postgres" --version 2>/dev/null | grep -q ' 15\.'; }

find_bindir() {
  local d
  if command -v pg_config >/dev/null 2>&1; then
    d=$(pg_config --bindir 2>/dev/null || true)
    if [ -n "$d" ] && is_pg15 "$d" && [ -x "$d/initdb" ]; then echo "$d"; return; fi
  fi
  d=/usr/lib/postgresql/15/bin
  if is_pg15 "$d"; then echo "$d"; return; fi
  if command -v postgres >/dev/null 2>&1 && command -v initdb >/dev/null 2>&1; then
    d=$(dirname "$(command -v postgres)")
    if is_pg15 "$d"; then echo "$d"; return; fi
  fi
}

bindir=$(find_bindir)
if [ -z "$bindir" ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "pg15: no PostgreSQL 15 found and not root; install postgresql-15" >&2
    exit 1
  fi
  apt-get update -qq && apt-get install -y -qq postgresql-15 >/dev/null
  bindir=/usr/lib/postgresql/15/bin
fi

# as_owner runs a command as the user that owns the cluster.
as_owner() {
  if [ "$(id -u)" = 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

if [ "$(id -u)" = 0 ] && ! id postgres >/dev/null 2>&1; then
  useradd --system --no-create-home --shell /bin/sh postgres
fi

# An absolute path: the server changes directory, and runuser keeps ours.
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
data=$dir/data

case $cmd in
start)
  if [ "$(id -u)" = 0 ]; then chown postgres "$dir"; fi
  if [ ! -f "$data/PG_VERSION" ]; then
    # C locale and UTF8: collation order then matches byte order, which is
    # what Cairn implements and what the expected results in the files assume.
    as_owner "$bindir/initdb" -D "$data" -U postgres --auth=trust \
      --encoding=UTF8 --locale=C --no-sync >"$dir/initdb.log" 2>&1 ||
      { cat "$dir/initdb.log" >&2; exit 1; }
  fi
  # The socket lives in DIR so that no system directory needs to be writable;
  # fsync is off because the data is thrown away.
  as_owner "$bindir/pg_ctl" -D "$data" -l "$dir/server.log" -w -t 60 \
    -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c fsync=off -c TimeZone=UTC -c max_connections=50" \
    start >/dev/null || { cat "$dir/server.log" >&2; exit 1; }
  echo "postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
  ;;
stop)
  if [ -f "$data/postmaster.pid" ]; then
    as_owner "$bindir/pg_ctl" -D "$data" -m fast -w stop >/dev/null
  fi
  ;;
*)
  usage
  ;;
esac
