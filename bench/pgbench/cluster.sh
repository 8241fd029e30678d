#!/usr/bin/env bash
# pgbench against a 3-node Cairn cluster (RF 3) and against the same binary
# as a plain `cairn start` (a replicated cluster of one, RF 1), in the same
# run: prints the TPS of each workload on each and RF 3 / RF 1 (issue 22:
# tpcb-like >= 0.5x, select-only >= 0.8x).
#
#   bench/pgbench/cluster.sh [-runs N] [-T SECONDS] [-c CLIENTS] [-s SCALE]
#
# The three nodes are processes on loopback, each naming all three RPC
# addresses in --join (initial members: every tablet a raft group of all
# three from the start; cairn start's lease balancer spreads the leases).
# pgbench connects to node 1; a tablet whose lease is elsewhere serves
# node 1's requests through one more RPC until its requests draw the
# lease to node 1 (leases follow the workload: store's LeaseBalancer,
# locality), so the script prints where pgbench_accounts' leases were
# after each workload. Runs alternate between the two clusters; medians
# of N. BENCH_PORT_BASE (default 30530) and the next 12 ports are used;
# CAIRN_BIN=path runs that binary instead of building this tree.
set -euo pipefail
cd "$(dirname "$0")/../.."
. test/compat/lib.sh

runs=3 secs=10 clients=4 scale=1
while [ $# -gt 0 ]; do
  case $1 in
  -runs) runs=$2; shift 2 ;;
  -T) secs=$2; shift 2 ;;
  -c) clients=$2; shift 2 ;;
  -s) scale=$2; shift 2 ;;
  *) echo "unknown flag $1" >&2; exit 2 ;;
  esac
done

work=$(mktemp -d /tmp/cairn-pgbench-cluster.XXXXXX)
base=${BENCH_PORT_BASE:-30530}
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

# CAIRN_BIN runs a binary built beforehand (so that a run under the bench
# lock compiles nothing) instead of building this tree's.
if [ -n "${CAIRN_BIN:-}" ]; then cp "$CAIRN_BIN" "$work/cairn"; else cairn_build "$work/cairn"; fi

# start_node DIR SQL RPC HTTP [JOIN] starts one node and waits for its
# ready line.
start_node() {
  local dir=$1 sql=$2 rpc=$3 http=$4 join=${5:-}
  mkdir -p "$dir"
  "$work/cairn" start --insecure --store "$dir/store" ${join:+--join "$join"} \
    --sql-addr "127.0.0.1:$sql" --rpc-addr "127.0.0.1:$rpc" --http-addr "127.0.0.1:$http" >"$dir/cairn.log" 2>&1 &
  pids+=($!)
}

wait_ready() {
  local dir=$1
  for _ in $(seq 1 600); do
    if grep -q "cairn node ready: sql=" "$dir/cairn.log"; then return 0; fi
    sleep 0.1
  done
  echo "cairn in $dir did not start; its log:" >&2
  cat "$dir/cairn.log" >&2
  exit 1
}

# RF 1: a plain start.
start_node "$work/rf1" $base $((base + 1)) $((base + 2))
# RF 3: three initial members.
join=127.0.0.1:$((base + 4)),127.0.0.1:$((base + 7)),127.0.0.1:$((base + 10))
for i in 0 1 2; do
  p=$((base + 3 + 3 * i))
  start_node "$work/rf3-$i" $p $((p + 1)) $((p + 2)) "$join"
done
for d in rf1 rf3-0 rf3-1 rf3-2; do wait_ready "$work/$d"; done
echo "cairn: RF 1 (a plain start) and RF 3 (3 processes, pgbench through node 1); load: $(cut -d' ' -f1-3 /proc/loadavg)"

rf1_url="postgres://postgres@127.0.0.1:$base/postgres?sslmode=disable"
rf3_url="postgres://postgres@127.0.0.1:$((base + 3))/postgres?sslmode=disable"
for url in "$rf1_url" "$rf3_url"; do
  pgbench -q -i -s "$scale" "$url" >"$work/init.log" 2>&1 || {
    cat "$work/init.log" >&2
    for d in rf1 rf3-0 rf3-1 rf3-2; do echo "--- $d's log, last lines:" >&2; tail -n 20 "$work/$d/cairn.log" >&2; done
    exit 1
  }
done

# leases prints where the RF 3 cluster's leases of the tablets holding
# pgbench_accounts are, as node:count (from node 1's admin API, which
# lists every tablet with its leader), and how many tablets there are.
leases() {
  curl -sf "http://127.0.0.1:$((base + 5))/api/tablets" |
    jq -r '[.[] | select(any(.tables[]?; .name == "pgbench_accounts")) | .leader] | length as $n
      | (group_by(.) | map("node \(.[0]):\(length)") | join(" ")) + " of \($n) tablets"' 2>/dev/null ||
    echo "(admin API unavailable)"
}

# served prints the batches (read and write) each RF 3 node's replicas
# evaluated so far, "n1 n2 n3" (their /metrics): a batch of pgbench's
# that node 2 or 3 evaluated came to node 1 and was forwarded.
served() {
  local i
  for i in 0 1 2; do
    curl -sf "http://127.0.0.1:$((base + 5 + 3 * i))/metrics" |
      awk '/^cairn_tablet_(read|write)_batches_total/ {n += $2} END {printf "%d ", n}' || printf '0 '
  done
}

median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
tps() {
  local url=$1; shift
  local out
  out=$(pgbench -n -T "$secs" -c "$clients" -j "$clients" "$@" "$url" 2>&1) || { echo "$out" >&2; exit 1; }
  if echo "$out" | grep -q 'number of failed transactions: [1-9]'; then echo "$out" | grep 'failed' >&2; fi
  echo "$out" | sed -n 's/^tps = \([0-9.]*\) .*/\1/p'
}

echo "RF 3 pgbench_accounts leases after init: $(leases)"
printf '%-24s %12s %12s %8s   %s\n' workload rf3_tps rf1_tps ratio "RF 3: pgbench_accounts leases at the end; batches served per node"
for w in "select-only:-S" "select-only-prepared:-S -M prepared" "simple-update:-N" "tpcb-like:"; do
  name=${w%%:*} args=${w#*:}
  a=() b=()
  s0=$(served)
  for r in $(seq 1 "$runs"); do
    # Alternate which cluster goes first.
    if [ $((r % 2)) = 1 ]; then
      # shellcheck disable=SC2086
      a+=("$(tps "$rf3_url" $args)"); b+=("$(tps "$rf1_url" $args)")
    else
      # shellcheck disable=SC2086
      b+=("$(tps "$rf1_url" $args)"); a+=("$(tps "$rf3_url" $args)")
    fi
  done
  am=$(printf '%s\n' "${a[@]}" | median) bm=$(printf '%s\n' "${b[@]}" | median)
  awk -v n="$name" -v a="$am" -v b="$bm" -v l="$(leases)" -v s0="$s0" -v s1="$(served)" 'BEGIN {
    split(s0, x); split(s1, y); d1 = y[1] - x[1]; d23 = y[2] - x[2] + y[3] - x[3]
    printf "%-24s %12.0f %12.0f %7.2fx   %s; batches served by node 1: %d, by nodes 2-3: %d (%.0f%%)\n",
      n, a, b, (b > 0 ? a / b : 0), l, d1, d23, (d1 + d23 > 0 ? 100 * d23 / (d1 + d23) : 0) }'
done
echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
