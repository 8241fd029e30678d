#!/usr/bin/env bash
# What TLS costs SQL clients: pgbench against one secure Cairn node (a
# plain `cairn start --certs-dir`, certificates from `cairn cert`), over
# TLS (sslmode=require) and without it (sslmode=disable, which a secure
# node allows from loopback), in the same run; prints the TPS of each and
# their ratio. Both log in with the same SCRAM-SHA-256 password.
#
#   bench/tls/run.sh [-runs N] [-T SECONDS] [-c CLIENTS]
#
# Workloads: select-only-prepared (pgbench -S -M prepared: long-lived
# connections, so the cost of encrypting each message) and
# select-only-connect (-S -C: a new connection per transaction, so the
# cost of the TLS handshake next to SCRAM's). Each runs N times (default
# 3) in each mode, alternating, and the median is reported.
# BENCH_PORT_BASE (default 54431; +1, +2 too) picks the node's ports.
set -euo pipefail
cd "$(dirname "$0")/../.."
. test/compat/lib.sh

runs=3 secs=10 clients=4
while [ $# -gt 0 ]; do
  case $1 in
  -runs) runs=$2; shift 2 ;;
  -T) secs=$2; shift 2 ;;
  -c) clients=$2; shift 2 ;;
  *) echo "unknown flag $1" >&2; exit 2 ;;
  esac
done

work=$(mktemp -d /tmp/cairn-tlsbench.XXXXXX)
port=${BENCH_PORT_BASE:-54431}
trap 'cairn_stop; rm -rf "$work"' EXIT
cairn_build "$work/cairn"
"$work/cairn" cert create-ca --certs-dir "$work/certs" --ca-key "$work/ca.key" >/dev/null
"$work/cairn" cert create-node 127.0.0.1 localhost --certs-dir "$work/certs" --ca-key "$work/ca.key" >/dev/null
CAIRN_INITIAL_PASSWORD=bench "$work/cairn" start --store "$work/store" --certs-dir "$work/certs" \
  --sql-addr "127.0.0.1:$port" --rpc-addr "127.0.0.1:$((port + 1))" \
  --http-addr "127.0.0.1:$((port + 2))" >"$work/cairn.log" 2>&1 &
CAIRN_PID=$!
for _ in $(seq 1 300); do
  if grep -q "cairn node ready: sql=" "$work/cairn.log"; then break; fi
  sleep 0.1
done
export PGPASSWORD=bench
url="postgres://postgres@127.0.0.1:$port/postgres"
pgbench -q -i -s 1 "$url?sslmode=require" >"$work/init.log" 2>&1 || { cat "$work/init.log" "$work/cairn.log" >&2; exit 1; }

median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
# tps SSLMODE ARGS... prints the TPS of one pgbench run.
tps() {
  local mode=$1; shift
  local out
  out=$(pgbench -n -T "$secs" -c "$clients" -j "$clients" "$@" "$url?sslmode=$mode" 2>&1) || { echo "$out" >&2; exit 1; }
  echo "$out" | sed -n 's/^tps = \([0-9.]*\) .*/\1/p'
}

printf '%-24s %12s %12s %8s\n' workload tls_tps plain_tps ratio
for w in "select-only-prepared:-S -M prepared" "select-only-connect:-S -C"; do
  name=${w%%:*} args=${w#*:}
  s=() p=()
  for _ in $(seq 1 "$runs"); do
    # shellcheck disable=SC2086
    s+=("$(tps require $args)")
    # shellcheck disable=SC2086
    p+=("$(tps disable $args)")
  done
  sm=$(printf '%s\n' "${s[@]}" | median) pm=$(printf '%s\n' "${p[@]}" | median)
  awk -v n="$name" -v s="$sm" -v p="$pm" 'BEGIN { printf "%-24s %12.0f %12.0f %7.2fx\n", n, s, p, (p > 0 ? s / p : 0) }'
done
