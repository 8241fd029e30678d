#!/usr/bin/env bash
# What the trailing closed-timestamp closer (follower reads for AS OF
# SYSTEM TIME; docs/architecture.md, "AS OF SYSTEM TIME") costs a 3-node
# cluster of processes on loopback as the tablets grow (issue 22): each
# node's CPU, the closer's round time and the side transport's messages
# and bytes, from the nodes' /metrics and /proc, over idle windows, first
# with the tablets a fresh cluster has (the baseline, same run), then after
# creating tables split into about -tablets more.
#
#   bench/closer/run.sh [-runs N] [-window SECONDS] [-tablets N]
#
# Each of the -runs windows (default 3, 20 s each) is measured on each
# state; the medians are printed, and the share of node 1's CPU profile of
# its last window spent in the closer's functions. The nodes are three initial members
# (--join naming all three: every tablet a raft group of three, leases
# balanced by count by cairn start's balancer), as in bench/pgbench/cluster.sh.
# BENCH_PORT_BASE (default 30600) and the next 8 ports are used;
# CAIRN_BIN=path runs that binary instead of building this tree.
set -euo pipefail
cd "$(dirname "$0")/../.."
. test/compat/lib.sh

runs=3 window=20 tablets=2000
while [ $# -gt 0 ]; do
  case $1 in
  -runs) runs=$2; shift 2 ;;
  -window) window=$2; shift 2 ;;
  -tablets) tablets=$2; shift 2 ;;
  *) echo "unknown flag $1" >&2; exit 2 ;;
  esac
done

work=$(mktemp -d /tmp/cairn-closer.XXXXXX)
base=${BENCH_PORT_BASE:-30600}
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
if [ -n "${CAIRN_BIN:-}" ]; then cp "$CAIRN_BIN" "$work/cairn"; else cairn_build "$work/cairn"; fi

join=127.0.0.1:$((base + 1)),127.0.0.1:$((base + 4)),127.0.0.1:$((base + 7))
for i in 0 1 2; do
  p=$((base + 3 * i))
  mkdir -p "$work/n$i"
  "$work/cairn" start --insecure --store "$work/n$i/store" --join "$join" \
    --sql-addr "127.0.0.1:$p" --rpc-addr "127.0.0.1:$((p + 1))" --http-addr "127.0.0.1:$((p + 2))" >"$work/n$i/cairn.log" 2>&1 &
  pids+=($!)
done
for i in 0 1 2; do
  for _ in $(seq 1 600); do grep -q "cairn node ready: sql=" "$work/n$i/cairn.log" && break; sleep 0.1; done
  grep -q "cairn node ready: sql=" "$work/n$i/cairn.log" || { cat "$work/n$i/cairn.log" >&2; exit 1; }
done
url="postgres://postgres@127.0.0.1:$base/postgres?sslmode=disable"

# metrics I: node I's /metrics.
metrics() { curl -sf "http://127.0.0.1:$((base + 3 * $1 + 2))/metrics"; }
# value NAME < metrics: the sum of NAME's samples.
value() { awk -v n="$1" '$1 == n || index($1, n "{") == 1 {s += $2} END {printf "%.6f\n", s}'; }
# cpu I: node I's user+system CPU seconds.
cpu() { awk '{printf "%.2f\n", ($14 + $15) / 100}' "/proc/${pids[$1]}/stat"; }

names="cairn_closer_rounds_total cairn_closer_closings_total cairn_closer_round_seconds_total cairn_closer_side_messages_sent_total cairn_closer_side_bytes_sent_total cairn_closer_side_rounds_skipped_total cairn_closer_side_messages_received_total cairn_closer_side_receive_seconds_total cairn_closer_lease_skips_total"
# snapshot FILE: every node's CPU and closer counters, one line per node.
snapshot() {
  date +%s.%N >"$1.t"
  : >"$1"
  for i in 0 1 2; do
    local m line
    m=$(metrics "$i")
    line="$(cpu "$i")"
    for n in $names; do line="$line $(echo "$m" | value "$n")"; done
    echo "$line" >>"$1"
  done
}
# state: replicas and leaders per node.
state() {
  local i out=""
  for i in 0 1 2; do
    local m
    m=$(metrics "$i")
    out="$out n$((i + 1)): $(echo "$m" | value cairn_replicas | cut -d. -f1) replicas, $(echo "$m" | value cairn_leaders | cut -d. -f1) leaders;"
  done
  echo "$out"
}
# settle: wait until every node holds the same number of replicas (all
# tablets replicated three ways) and no node leads more than 10% above
# an equal share, at most 5 minutes.
settle() {
  for _ in $(seq 1 300); do
    local r l
    r=$(for i in 0 1 2; do metrics "$i" | value cairn_replicas; done | sort -u | wc -l)
    l=$(for i in 0 1 2; do metrics "$i" | value cairn_leaders; done | awk '{a[NR]=$1; s+=$1} END {m=0; for (i in a) if (a[i] > m) m = a[i]; print (m <= s/3*1.1 + 1) ? "ok" : "no"}')
    [ "$r" = 1 ] && [ "$l" = ok ] && return 0
    sleep 1
  done
  echo "(not settled after 5 minutes: $(state))"
}

# measure LABEL: runs windows; per window, per node: CPU %, closer ms/s,
# closings/s, messages sent/s, bytes sent/s, skipped/s, received/s,
# receive ms/s. Prints each window's cluster totals, then the medians.
measure() {
  local label=$1 r
  echo "== $label: $(state) load $(cut -d' ' -f1-3 /proc/loadavg)"
  : >"$work/windows"
  for r in $(seq 1 "$runs"); do
    snapshot "$work/a"
    if [ "$r" = "$runs" ]; then
      # The last window's CPU profile of node 1: the closer's share.
      curl -sf "http://127.0.0.1:$((base + 2))/debug/pprof/profile?seconds=$window" >"$work/prof" &
      sleep "$window"
      wait $!
    else
      sleep "$window"
    fi
    snapshot "$work/b"
    # The window is from one snapshot's start to the next's.
    w=$(echo "$(cat "$work/b.t") - $(cat "$work/a.t")" | bc -l)
    paste -d' ' "$work/a" "$work/b" | awk -v w="$w" '
      { n = 10; for (k = 1; k <= n; k++) d[k] += $(k + n) - $k }
      END {
        printf "%.1f %.2f %.1f %.1f %.0f %.2f %.1f %.2f %.1f %.2f\n",
          100 * d[1] / w, 1000 * d[4] / w, d[3] / w, d[5] / w, d[6] / w, d[7] / w, d[8] / w, 1000 * d[9] / w, d[10] / w, d[2] / w
      }' >>"$work/windows"
  done
  echo "window (cluster totals per second): CPU% closer-ms closings msgs-sent bytes-sent skipped msgs-recv recv-ms lease-skips rounds"
  cat "$work/windows"
  local med="" k
  for k in 1 2 3 4 5 6 7 8 9 10; do med="$med $(cut -d' ' -f$k "$work/windows" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')"; done
  echo "median:$med"
  echo "node 1's CPU profile of the last window, the closer's share (store.RunCloser and closeTrailing, the side transport's sends, handleSideClosed):"
  go tool pprof -top -nodecount=1 -focus 'RunCloser|closeTrailing|sideTransport|handleSideClosed' "$work/cairn" "$work/prof" 2>/dev/null | grep -E "^Showing nodes|total" | head -2 || echo "(no profile)"
  echo "its top functions by cumulative time, below the goroutines' roots:"
  go tool pprof -top -cum -nodecount=14 "$work/cairn" "$work/prof" 2>/dev/null | sed -n '/flat%/,$p' || true
  echo "$med" >>"$work/medians"
}

settle
sleep 5
measure "baseline (a fresh cluster's tablets)"
# Tables of their own tablets, pre-split (colocation.md): 500 each.
n=$(( (tablets + 499) / 500 ))
for t in $(seq 1 "$n"); do
  # Under load a split may not find a new tablet's leaseholder in time
  # (the statement fails and creates nothing): try again, and say so.
  for try in 1 2 3; do
    if psql -X -q "$url" -c "CREATE TABLE closer_$t (k int PRIMARY KEY) WITH (colocated = false) SPLIT INTO 500 TABLETS" >/dev/null 2>"$work/err"; then break; fi
    echo "CREATE TABLE closer_$t, try $try: $(cat "$work/err")"
    [ "$try" = 3 ] && exit 1
    psql -X -q "$url" -c "DROP TABLE IF EXISTS closer_$t" >/dev/null 2>&1 || true
  done
done
settle
sleep 5
measure "after $n tables of 500 tablets"
echo
echo "ratio (after / baseline), per column: CPU% closer-ms closings msgs-sent bytes-sent skipped msgs-recv recv-ms lease-skips rounds"
awk 'NR == 1 {for (k = 1; k <= NF; k++) b[k] = $k} NR == 2 {l = ""; for (k = 1; k <= NF; k++) l = l sprintf(" %s", b[k] > 0 ? sprintf("%.2f", $k / b[k]) : "-"); print l}' "$work/medians"
