#!/usr/bin/env bash
# pgbench's built-in tpcb-like and simple-update scripts (explicit
# BEGIN ... END blocks, simple protocol) in a colocated database,
# cairn_buffered_writes off against auto (the default) on one plain Cairn
# node (a replicated cluster of one; BENCH_UNREPLICATED=1 for
# --unreplicated), alternating, 3 rounds of 10 s with 4 clients; prints
# TPS per run and the node's SQL commit counters by phase.
#   BENCH_PORT=27420 bench/pgbench/buffered_blocks.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
. test/compat/lib.sh
if [ "${BENCH_UNREPLICATED:-}" != 1 ]; then CAIRN_UNREPLICATED=; fi
port=${BENCH_PORT:-27420}
work=$(mktemp -d /tmp/cairn-blocks.XXXXXX)
trap 'cairn_stop; rm -rf "$work"' EXIT
cairn_build "$work/cairn"
cairn_start "$work/cairn" "$work/node" "$port"
psql -q -v ON_ERROR_STOP=1 "postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable" \
  -c "CREATE DATABASE bank WITH colocated = true"
url="postgres://postgres@127.0.0.1:$port/bank?sslmode=disable"
pgbench -q -i -s 1 "$url" >"$work/init.log" 2>&1 || { cat "$work/init.log"; exit 1; }
for i in 1 2 3; do
  for b in tpcb-like simple-update; do
    for mode in off auto; do
      out=$(PGOPTIONS="-c cairn_buffered_writes=$mode" pgbench -n -T 10 -c 4 -j 2 -b "$b" "$url" 2>&1)
      echo "$b $mode $(echo "$out" | sed -n 's/^tps = \([0-9.]*\) .*/\1/p') failed=$(echo "$out" | sed -n 's/^number of failed transactions: \([0-9]*\).*/\1/p') load=$(cut -d' ' -f1 /proc/loadavg)"
    done
  done
done
curl -s "http://127.0.0.1:$((port + 2))/metrics" | grep cairn_sql_commits_total
