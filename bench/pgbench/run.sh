#!/usr/bin/env bash
# pgbench against Cairn and against PostgreSQL 15 on the same machine, in
# the same run: prints TPS for each workload and Cairn's ratio to Postgres.
#
#   bench/pgbench/run.sh [-runs N] [-T SECONDS] [-c CLIENTS] [-s SCALE]
#
# Each workload runs N times (default 3) on each system, alternating, and the
# median TPS is reported. Both run on loopback with synced commits (Postgres
# with fsync=on, synchronous_commit=on; Cairn always syncs).
set -euo pipefail
cd "$(dirname "$0")/../.."
. test/compat/lib.sh

runs=3 secs=15 clients=4 scale=1
while [ $# -gt 0 ]; do
  case $1 in
  -runs) runs=$2; shift 2 ;;
  -T) secs=$2; shift 2 ;;
  -c) clients=$2; shift 2 ;;
  -s) scale=$2; shift 2 ;;
  *) echo "unknown flag $1" >&2; exit 2 ;;
  esac
done

work=$(mktemp -d /tmp/cairn-pgbench.XXXXXX)
chmod 755 "$work"
pgport=54411 cport=54421
trap 'cairn_stop; ./scripts/pg15.sh stop "$work/pg" $pgport >/dev/null 2>&1 || true' EXIT

cairn_build "$work/cairn"
./scripts/pg15.sh start "$work/pg" $pgport >/dev/null
# pg15.sh starts with fsync=off for logic tests; the benchmark compares
# durable commits, so restart Postgres with fsync on.
./scripts/pg15.sh stop "$work/pg" $pgport
bindir=$(dirname "$(command -v postgres || echo /usr/lib/postgresql/15/bin/postgres)")
runuser -u postgres -- "$bindir/pg_ctl" -D "$work/pg/data" -l "$work/pg/server.log" -w \
  -o "-c listen_addresses=127.0.0.1 -p $pgport -k $work/pg -c fsync=on -c synchronous_commit=on" start >/dev/null
cairn_start "$work/cairn" "$work/cairn-node" $cport

pg_url="postgres://postgres@127.0.0.1:$pgport/postgres?sslmode=disable"
cairn_url="postgres://postgres@127.0.0.1:$cport/postgres?sslmode=disable"

for url in "$pg_url" "$cairn_url"; do
  pgbench -q -i -s "$scale" "$url" >"$work/init.log" 2>&1 || { cat "$work/init.log" >&2; exit 1; }
done

# tps URL ARGS... prints the TPS of one pgbench run.
tps() {
  local url=$1; shift
  local out
  out=$(pgbench -n -T "$secs" -c "$clients" -j "$clients" "$@" "$url" 2>&1) || { echo "$out" >&2; exit 1; }
  if echo "$out" | grep -q 'number of failed transactions: [1-9]'; then echo "$out" >&2; fi
  echo "$out" | sed -n 's/^tps = \([0-9.]*\) .*/\1/p'
}

median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

printf '%-24s %12s %12s %8s\n' workload cairn_tps pg15_tps ratio
for w in "select-only:-S" "select-only-prepared:-S -M prepared" "simple-update:-N" "tpcb-like:"; do
  name=${w%%:*} args=${w#*:}
  c=() p=()
  for _ in $(seq 1 "$runs"); do
    # shellcheck disable=SC2086
    c+=("$(tps "$cairn_url" $args)")
    # shellcheck disable=SC2086
    p+=("$(tps "$pg_url" $args)")
  done
  cm=$(printf '%s\n' "${c[@]}" | median) pm=$(printf '%s\n' "${p[@]}" | median)
  awk -v n="$name" -v c="$cm" -v p="$pm" 'BEGIN { printf "%-24s %12.0f %12.0f %7.2fx\n", n, c, p, (p > 0 ? c / p : 0) }'
done
