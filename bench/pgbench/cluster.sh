#!/usr/bin/env bash
# pgbench against a 3-node Cairn cluster (RF 3) and against the same binary
# as a plain `cairn start` (a replicated cluster of one, RF 1), in the same
# run: prints the TPS of each workload on each and RF 3 / RF 1 (issue 22:
# tpcb-like >= 0.5x, select-only >= 0.8x), each node's CPU per transaction
# (from /proc, over the timed runs) and, for the workloads that write, the
# raft rounds each node ran per transaction and the leaseholder's commit
# time (cairn_raft_commit_duration_seconds, proposal to applied).
#
#   bench/pgbench/cluster.sh [-runs N] [-T SECONDS] [-c CLIENTS] [-s SCALE]
#                            [-only WORKLOAD[,WORKLOAD]] [-profile DIR]
#
# -only runs the named workloads (select-only, select-only-prepared,
# simple-update, tpcb-like). -profile DIR writes a CPU profile of every
# node (DIR/WORKLOAD-rf3-nI.pprof, DIR/WORKLOAD-rf1.pprof) taken over the
# first timed run of each workload on each cluster, T-2 seconds long.
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

runs=3 secs=10 clients=4 scale=1 only= profile=
while [ $# -gt 0 ]; do
  case $1 in
  -runs) runs=$2; shift 2 ;;
  -only) only=$2; shift 2 ;;
  -profile) profile=$2; shift 2 ;;
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

# cpu CLUSTER prints the CPU clock ticks (user + system, /proc/PID/stat)
# each of the cluster's processes used so far: one figure for rf1, three
# for rf3 (nodes 1-3).
cpu() {
  local i idx
  if [ "$1" = rf1 ]; then idx=0; else idx="1 2 3"; fi
  for i in $idx; do awk '{printf "%d ", $14 + $15}' "/proc/${pids[$i]}/stat"; done
}

# httpport CLUSTER N prints the HTTP port of node N (1-3; rf1 has node 1).
httpport() { if [ "$1" = rf1 ]; then echo $((base + 2)); else echo $((base + 2 + 3 * $2)); fi; }

# raftstats CLUSTER prints, per node, the raft counters the breakdown
# needs: rounds, synced rounds, seconds of round sync, commits and their
# seconds (cairn_raft_commit_duration_seconds), proposals, as one line of
# numbers.
raftstats() {
  local n=1 i
  [ "$1" = rf3 ] && n=3
  for i in $(seq 1 $n); do
    curl -sf "http://127.0.0.1:$(httpport "$1" "$i")/metrics" | awk '
      /^cairn_raft_rounds_total / {r = $2} /^cairn_raft_synced_rounds_total / {s = $2}
      /^cairn_raft_round_sync_seconds_total / {y = $2}
      /^cairn_raft_commit_duration_seconds_count / {c = $2} /^cairn_raft_commit_duration_seconds_sum / {cs = $2}
      /^cairn_raft_proposals_total / {p = $2}
      END {printf "%d %d %.9f %d %.9f %d ", r, s, y, c, cs, p}' || printf '0 0 0 0 0 0 '
  done
}

# run CLUSTER URL NAME FIRST ARGS... runs one timed pgbench on a cluster
# and appends "NAME CLUSTER TPS TRANSACTIONS CPU-TICKS-PER-NODE..." to
# $work/runs. With -profile, FIRST=1 also takes each node's CPU profile.
run() {
  local cluster=$1 url=$2 name=$3 first=$4; shift 4
  local out c0 c1 i n=1 profs=()
  [ "$cluster" = rf3 ] && n=3
  if [ -n "$profile" ] && [ "$first" = 1 ]; then
    for i in $(seq 1 $n); do
      local f="$profile/$name-$cluster.pprof"
      [ "$cluster" = rf3 ] && f="$profile/$name-rf3-n$i.pprof"
      curl -sf -o "$f" "http://127.0.0.1:$(httpport "$cluster" "$i")/debug/pprof/profile?seconds=$((secs - 2))" &
      profs+=($!)
    done
  fi
  c0=$(cpu "$cluster")
  out=$(pgbench -n -T "$secs" -c "$clients" -j "$clients" "$@" "$url" 2>&1) || { echo "$out" >&2; exit 1; }
  c1=$(cpu "$cluster")
  for i in "${profs[@]}"; do wait "$i" || echo "a CPU profile of $cluster failed" >&2; done
  if echo "$out" | grep -q 'number of failed transactions: [1-9]'; then echo "$out" | grep 'failed' >&2; fi
  echo "$name $cluster $(echo "$out" | sed -n 's/^tps = \([0-9.]*\) .*/\1/p') $(echo "$out" | sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p') $(awk -v a="$c0" -v b="$c1" 'BEGIN {n = split(a, x); split(b, y); for (i = 1; i <= n; i++) printf "%d ", y[i] - x[i]}')" >>"$work/runs"
}

echo "RF 3 pgbench_accounts leases after init: $(leases)"
[ -n "$profile" ] && mkdir -p "$profile"
tick_us=$((1000000 / $(getconf CLK_TCK)))
: >"$work/runs"
printf '%-24s %12s %12s %8s   %s\n' workload rf3_tps rf1_tps ratio "RF 3: pgbench_accounts leases at the end; batches served per node"
for w in "select-only:-S" "select-only-prepared:-S -M prepared" "simple-update:-N" "tpcb-like:"; do
  name=${w%%:*} args=${w#*:}
  if [ -n "$only" ] && [[ ",$only," != *",$name,"* ]]; then continue; fi
  s0=$(served) r30=$(raftstats rf3) r10=$(raftstats rf1)
  for r in $(seq 1 "$runs"); do
    # Alternate which cluster goes first.
    if [ $((r % 2)) = 1 ]; then
      # shellcheck disable=SC2086
      run rf3 "$rf3_url" "$name" "$r" $args; run rf1 "$rf1_url" "$name" "$r" $args
    else
      # shellcheck disable=SC2086
      run rf1 "$rf1_url" "$name" "$r" $args; run rf3 "$rf3_url" "$name" "$r" $args
    fi
  done
  r31=$(raftstats rf3) r11=$(raftstats rf1)
  am=$(awk -v n="$name" '$1 == n && $2 == "rf3" {print $3}' "$work/runs" | median)
  bm=$(awk -v n="$name" '$1 == n && $2 == "rf1" {print $3}' "$work/runs" | median)
  awk -v n="$name" -v a="$am" -v b="$bm" -v l="$(leases)" -v s0="$s0" -v s1="$(served)" 'BEGIN {
    split(s0, x); split(s1, y); d1 = y[1] - x[1]; d23 = y[2] - x[2] + y[3] - x[3]
    printf "%-24s %12.0f %12.0f %7.2fx   %s; batches served by node 1: %d, by nodes 2-3: %d (%.0f%%)\n",
      n, a, b, (b > 0 ? a / b : 0), l, d1, d23, (d1 + d23 > 0 ? 100 * d23 / (d1 + d23) : 0) }'
  # CPU per transaction over all the workload's timed runs, per node.
  awk -v n="$name" -v us="$tick_us" '$1 == n {
      t[$2] += $4; for (i = 5; i <= NF; i++) c[$2, i - 4] += $i }
    END {
      printf "  CPU per transaction (µs): RF 3 nodes 1/2/3 %.0f / %.0f / %.0f (sum %.0f), RF 1 %.0f\n",
        us * c["rf3", 1] / t["rf3"], us * c["rf3", 2] / t["rf3"], us * c["rf3", 3] / t["rf3"],
        us * (c["rf3", 1] + c["rf3", 2] + c["rf3", 3]) / t["rf3"], us * c["rf1", 1] / t["rf1"] }' "$work/runs"
  # The raft rounds, for workloads that write: per transaction, each
  # node's rounds (synced ones in brackets), its mean sync, and the
  # leaseholder's propose-to-applied time (node 1 holds the leases once
  # its requests drew them; see the leases above).
  if [ "$name" = simple-update ] || [ "$name" = tpcb-like ]; then
    awk -v n="$name" '$1 == n {t[$2] += $4} END {print t["rf3"], t["rf1"]}' "$work/runs" >"$work/txns"
    awk -v a0="$r30" -v a1="$r31" -v b0="$r10" -v b1="$r11" -v tx="$(cat "$work/txns")" 'BEGIN {
      split(tx, t); split(a0, x); split(a1, y); split(b0, u); split(b1, v)
      line = "  raft per transaction:"
      for (i = 0; i < 3; i++) {
        r = y[6*i+1] - x[6*i+1]; s = y[6*i+2] - x[6*i+2]; sy = y[6*i+3] - x[6*i+3]
        c = y[6*i+4] - x[6*i+4]; cs = y[6*i+5] - x[6*i+5]; p = y[6*i+6] - x[6*i+6]
        line = line sprintf(" RF 3 node %d %.2f rounds (%.2f synced, sync %.0f µs)%s;", i + 1, r / t[1], s / t[1],
          (s > 0 ? 1e6 * sy / s : 0), (p > 0 ? sprintf(", %.2f proposals, commit %.0f µs", p / t[1], (c > 0 ? 1e6 * cs / c : 0)) : ""))
      }
      r = v[1] - u[1]; s = v[2] - u[2]; sy = v[3] - u[3]; c = v[4] - u[4]; cs = v[5] - u[5]; p = v[6] - u[6]
      line = line sprintf(" RF 1 %.2f rounds (%.2f synced, sync %.0f µs), %.2f proposals, commit %.0f µs", r / t[2], s / t[2],
        (s > 0 ? 1e6 * sy / s : 0), p / t[2], (c > 0 ? 1e6 * cs / c : 0))
      print line }'
  fi
done
echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
