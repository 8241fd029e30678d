#!/usr/bin/env bash
# The compat target (`make compat`): real PostgreSQL clients against a real
# `cairn start` process — psql (meta-commands, \copy), pgbench (its own
# schema setup with COPY, then the TPC-B-like workload in the simple,
# extended and prepared protocols) and psycopg2 (types, errors, server-side
# cursors, COPY). Installs what it needs: Debian's postgresql-client and a
# Python virtualenv with psycopg2-binary.
set -euo pipefail
cd "$(dirname "$0")/../.."
. test/compat/lib.sh

if ! command -v psql >/dev/null || ! command -v pgbench >/dev/null; then
  apt-get update -qq && apt-get install -y -qq postgresql-client >/dev/null
fi
venv=${CAIRN_COMPAT_VENV:-/tmp/cairn-compat-venv}
if [ ! -x "$venv/bin/python" ]; then python3 -m venv "$venv"; fi
"$venv/bin/python" -c 'import psycopg2' 2>/dev/null || "$venv/bin/pip" install -q psycopg2-binary

work=$(mktemp -d /tmp/cairn-compat.XXXXXX)
port=${CAIRN_COMPAT_PORT:-54511}
trap 'cairn_stop' EXIT
cairn_build "$work/cairn"
cairn_start "$work/cairn" "$work/node" "$port"
url="postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"

echo "== psql"
psql -X -q "$url" -f test/compat/psql.sql >"$work/psql.out" 2>&1 || { cat "$work/psql.out"; exit 1; }
grep -q 'compat_users_pkey' "$work/psql.out" || { echo "psql: \\d did not show the primary key"; cat "$work/psql.out"; exit 1; }

echo "== pgbench"
pgbench -q -i -s 1 "$url" >"$work/pgbench-init.out" 2>&1 || { cat "$work/pgbench-init.out"; exit 1; }
for mode in simple extended prepared; do
  out=$(pgbench -n -t 100 -c 4 -j 2 -M $mode "$url" 2>&1) || { echo "$out"; exit 1; }
  echo "$out" | grep -q 'number of transactions actually processed: 400/400' || { echo "$out"; exit 1; }
  echo "pgbench -M $mode: $(echo "$out" | grep '^tps')"
done
# TPC-B keeps the sum of balances equal across the three tables.
psql -X -qtA "$url" -c "WITH h AS (SELECT sum(delta) AS d FROM pgbench_history) SELECT (SELECT sum(abalance) FROM pgbench_accounts) = h.d AND (SELECT sum(bbalance) FROM pgbench_branches) = h.d AND (SELECT sum(tbalance) FROM pgbench_tellers) = h.d FROM h" | grep -qx t ||
  { echo "pgbench: balances do not add up"; exit 1; }

echo "== psycopg2"
"$venv/bin/python" test/compat/psycopg2_check.py "$url"
echo "compat: ok"
