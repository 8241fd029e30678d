#!/usr/bin/env bash
# What TLS costs, in the same run on the same machine:
#
# 1. SQL clients: pgbench against one secure node (a plain `cairn start
#    --certs-dir`, certificates from `cairn cert`) over TLS
#    (sslmode=require) and without it (sslmode=disable, which a secure node
#    allows from loopback), both logging in with the same SCRAM-SHA-256
#    password. select-only-prepared (-S -M prepared: long-lived
#    connections, the cost of encrypting each message) and
#    select-only-connect (-S -C: a connection per transaction, the TLS
#    handshake next to SCRAM's).
# 2. Between nodes: two clusters of three `cairn start` processes, one
#    secure (mutual TLS) and one --insecure, every lease pinned to node 2
#    (--locality, --lease-preferences), each loaded with pgbench -i
#    through its first node and waited for until every tablet has three
#    replicas and node 2 leads them all; simple-update (-N: every write replicated through raft to
#    the other two nodes) and select-only-prepared through the first node
#    of each, so every statement's KV requests cross RPC to node 2; SQL in
#    plaintext on loopback for both, so only the node-to-node traffic
#    differs.
#
#   bench/tls/run.sh [-runs N] [-T SECONDS] [-c CLIENTS] [-skip-cluster]
#
# Each workload runs N times (default 3) in each mode, alternating, and
# the median is reported. BENCH_PORT_BASE (default 30600; the next 20
# ports too) picks the ports.
set -euo pipefail
cd "$(dirname "$0")/../.."

runs=3 secs=10 clients=4 do_cluster=1
while [ $# -gt 0 ]; do
  case $1 in
  -runs) runs=$2; shift 2 ;;
  -T) secs=$2; shift 2 ;;
  -c) clients=$2; shift 2 ;;
  -skip-cluster) do_cluster=; shift ;;
  *) echo "unknown flag $1" >&2; exit 2 ;;
  esac
done

work=$(mktemp -d /tmp/cairn-tlsbench.XXXXXX)
base=${BENCH_PORT_BASE:-30600}
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
bin=$work/cairn
go build -o "$bin" ./cmd/cairn
"$bin" cert create-ca --certs-dir "$work/certs" --ca-key "$work/ca.key" >/dev/null
"$bin" cert create-node 127.0.0.1 localhost --certs-dir "$work/certs" --ca-key "$work/ca.key" >/dev/null
export CAIRN_INITIAL_PASSWORD=bench PGPASSWORD=bench CAIRN_PASSWORD=bench

# node NAME PORT SECURITY [--join ADDR] starts a node with SQL on PORT,
# RPC on PORT+1, HTTP on PORT+2, and waits until it serves.
node() {
  local name=$1 port=$2 sec=$3
  shift 3
  local flags=(--insecure)
  if [ "$sec" = secure ]; then flags=(--certs-dir "$work/certs"); fi
  "$bin" start --store "$work/$name" "${flags[@]}" --sql-addr "127.0.0.1:$port" \
    --rpc-addr "127.0.0.1:$((port + 1))" --http-addr "127.0.0.1:$((port + 2))" "$@" >"$work/$name.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 1 600); do
    if grep -qs "cairn node ready: sql=" "$work/$name.log"; then return 0; fi
    sleep 0.1
  done
  echo "node $name did not start:" >&2
  cat "$work/$name.log" >&2
  exit 1
}

median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
# tps URL ARGS... prints the TPS of one pgbench run.
tps() {
  local url=$1; shift
  local out
  out=$(pgbench -n -T "$secs" -c "$clients" -j "$clients" "$@" "$url" 2>&1) || { echo "$out" >&2; exit 1; }
  echo "$out" | sed -n 's/^tps = \([0-9.]*\) .*/\1/p'
}
# compare NAME URL_A URL_B ARGS... prints the medians of alternating runs
# and their ratio A/B.
compare() {
  local name=$1 ua=$2 ub=$3
  shift 3
  local a=() b=()
  for _ in $(seq 1 "$runs"); do
    a+=("$(tps "$ua" "$@")")
    b+=("$(tps "$ub" "$@")")
  done
  local am bm
  am=$(printf '%s\n' "${a[@]}" | median) bm=$(printf '%s\n' "${b[@]}" | median)
  awk -v n="$name" -v a="$am" -v b="$bm" 'BEGIN { printf "%-28s %12.0f %12.0f %7.2fx\n", n, a, b, (b > 0 ? a / b : 0) }'
}

# Every node listens before any client connects: the ports are in the
# ephemeral range, and thousands of pgbench -C connections could hold one.
node one $base secure
s=$((base + 3)) i=$((base + 12))
if [ -n "$do_cluster" ]; then
  # Every lease on node 2, in both clusters: the clients' node 1 sends
  # every read and write there over RPC, and the placement is the same.
  pin=(--lease-preferences region=r2)
  node s1 $s secure --locality region=r1 "${pin[@]}"
  node s2 $((s + 3)) secure --join "127.0.0.1:$((s + 1))" --locality region=r2 "${pin[@]}"
  node s3 $((s + 6)) secure --join "127.0.0.1:$((s + 1))" --locality region=r3 "${pin[@]}"
  node i1 $i insecure --locality region=r1 "${pin[@]}"
  node i2 $((i + 3)) insecure --join "127.0.0.1:$((i + 1))" --locality region=r2 "${pin[@]}"
  node i3 $((i + 6)) insecure --join "127.0.0.1:$((i + 1))" --locality region=r3 "${pin[@]}"
fi

url="postgres://postgres@127.0.0.1:$base/postgres"
pgbench -q -i -s 1 "$url?sslmode=require" >"$work/init.log" 2>&1 || { cat "$work/init.log" >&2; exit 1; }
printf '%-28s %12s %12s %8s\n' "SQL (one node)" tls_tps plain_tps ratio
compare select-only-prepared "$url?sslmode=require" "$url?sslmode=disable" -S -M prepared
compare select-only-connect "$url?sslmode=require" "$url?sslmode=disable" -S -C

if [ -n "$do_cluster" ]; then
  # waitrf3 HOST [FLAGS]: until `cairn node status` shows three live nodes
  # with the same, nonzero number of replicas, and leaders on node 2 only.
  waitrf3() {
    for _ in $(seq 1 1200); do
      if "$bin" node status --host "$@" 2>/dev/null |
        awk '$0 ~ / live / { n++; r[$(NF-1)]++; if ($(NF-1) == 0 || ($1 != 2 && $NF != 0)) z++ } END { exit !(n == 3 && length(r) == 1 && !z) }'; then
        return 0
      fi
      sleep 0.1
    done
    echo "the cluster at $1 did not reach three replicas per tablet" >&2
    exit 1
  }
  surl="postgres://postgres@127.0.0.1:$s/postgres?sslmode=disable"
  iurl="postgres://postgres@127.0.0.1:$i/postgres?sslmode=disable"
  for u in "$surl" "$iurl"; do
    pgbench -q -i -s 1 "$u" >"$work/init.log" 2>&1 || { cat "$work/init.log" >&2; exit 1; }
  done
  waitrf3 "127.0.0.1:$((s + 2))" --certs-dir "$work/certs"
  waitrf3 "127.0.0.1:$((i + 2))"
  printf '%-28s %12s %12s %8s\n' "between nodes (3 nodes)" mtls_tps plain_tps ratio
  compare simple-update "$surl" "$iurl" -N
  compare select-only-prepared "$surl" "$iurl" -S -M prepared
fi
