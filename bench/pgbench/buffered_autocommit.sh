#!/usr/bin/env bash
# pgbench's simple-update statements as autocommit statements
# (no BEGIN/END), simple protocol, cairn_buffered_writes off against auto
# (the default) on one Cairn node, alternating, 3 rounds of 10 s with 4
# clients; prints TPS per run and the SQL commit counters by phase.
#   BENCH_PORT=27410 bench/pgbench/buffered_autocommit.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
. test/compat/lib.sh
work=$(mktemp -d /tmp/cairn-autocommit.XXXXXX)
trap 'cairn_stop; rm -rf "$work"' EXIT
cairn_build "$work/cairn"
cairn_start "$work/cairn" "$work/node" ${BENCH_PORT:-27410}
url="postgres://postgres@127.0.0.1:${BENCH_PORT:-27410}/postgres?sslmode=disable"
pgbench -q -i -s 1 "$url" >"$work/init.log" 2>&1 || { cat "$work/init.log"; exit 1; }
cat >"$work/auto.sql" <<'SQL'
\set aid random(1, 100000 * :scale)
\set bid random(1, 1 * :scale)
\set tid random(1, 10 * :scale)
\set delta random(-5000, 5000)
UPDATE pgbench_accounts SET abalance = abalance + :delta WHERE aid = :aid;
SELECT abalance FROM pgbench_accounts WHERE aid = :aid;
INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (:tid, :bid, :aid, :delta, CURRENT_TIMESTAMP);
SQL
for i in 1 2 3; do
  for mode in off auto; do
    out=$(PGOPTIONS="-c cairn_buffered_writes=$mode" pgbench -n -T 10 -c 4 -j 4 -f "$work/auto.sql" "$url" 2>&1)
    echo "$mode $(echo "$out" | sed -n 's/^tps = \([0-9.]*\) .*/\1/p') failed=$(echo "$out" | sed -n 's/^number of failed transactions: \([0-9]*\).*/\1/p') load=$(cut -d' ' -f1 /proc/loadavg)"
  done
done
curl -s "http://127.0.0.1:$((${BENCH_PORT:-27410} + 2))/metrics" | grep cairn_sql_commits_total
