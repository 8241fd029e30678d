#!/usr/bin/env bash
# commit_path.sh breaks a replicated write's commit latency down on a plain
# `cairn start` (a replicated cluster of one, synced) under pgbench: it
# loads scale 1, runs one workload (default simple-update, -N) with 4
# clients, and reads the node's /metrics before and after, printing per
# proposal the mean time of each step of the raft round
# (raftnode.RoundStats: lock wait, queue, pre-sync, sync, post-sync,
# observers) against the tablet's whole propose-to-applied time
# (cairn_raft_commit_duration_seconds), and the TPS.
#
#   BENCH_PORT_BASE=20400 bench/pgbench/commit_path.sh [-T SECONDS] [-c CLIENTS] [-- PGBENCH_ARGS]
#
# CAIRN_BIN runs a binary built beforehand instead of this tree's.
set -euo pipefail
cd "$(dirname "$0")/../.."
. test/compat/lib.sh
CAIRN_UNREPLICATED=
secs=15 clients=4 args=(-N)
while [ $# -gt 0 ]; do
  case $1 in
  -T) secs=$2; shift 2 ;;
  -c) clients=$2; shift 2 ;;
  --) shift; args=("$@"); break ;;
  *) echo "unknown flag $1" >&2; exit 2 ;;
  esac
done
work=$(mktemp -d /tmp/cairn-commitpath.XXXXXX)
base=${BENCH_PORT_BASE:-30500}
cport=$((base + 10))
trap 'cairn_stop; rm -rf "$work"' EXIT
if [ -n "${CAIRN_BIN:-}" ]; then cp "$CAIRN_BIN" "$work/cairn"; else cairn_build "$work/cairn"; fi
cairn_start "$work/cairn" "$work/node" $cport
url="postgres://postgres@127.0.0.1:$cport/postgres?sslmode=disable"
pgbench -q -i -s 1 "$url" >"$work/init.log" 2>&1 || { cat "$work/init.log" >&2; exit 1; }
scrape() { curl -s "http://127.0.0.1:$((cport + 2))/metrics" | grep -E '^cairn_raft_|^cairn_store_wal_fsync' >"$1"; }
scrape "$work/m0"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
pgbench -n -T "$secs" -c "$clients" -j "$clients" "${args[@]}" "$url" 2>&1 | grep -E '^tps|failed|latency average'
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
scrape "$work/m1"
# A WAL file Pebble recycled is overwritten in place, a new one grows (an
# fdatasync that also commits the size to the journal; bench/walsync).
echo "WAL files now (bytes): $(stat -c %s "$work"/node/store/*.log 2>/dev/null | tr '\n' ' ')"
awk '
  FNR == NR { a[$1] = $2; next }
  { d[$1] = $2 - a[$1] }
  END {
    p = d["cairn_raft_proposals_total"]; r = d["cairn_raft_rounds_total"]; s = d["cairn_raft_synced_rounds_total"]
    c = d["cairn_raft_commit_duration_seconds_count"]
    printf "proposals %d, rounds %d (synced %d): %.2f proposals per round\n", p, r, s, (r > 0 ? p / r : 0)
    printf "proposals late (a whole round more than needed): %d (%.1f%%)\n", d["cairn_raft_proposals_late_total"], 100 * d["cairn_raft_proposals_late_total"] / p
    printf "per proposal (µs):  lock wait %.0f  queue %.0f\n", 1e6 * d["cairn_raft_propose_lock_wait_seconds_total"] / p, 1e6 * d["cairn_raft_propose_queue_seconds_total"] / p
    printf "per round (µs):     pre-sync %.0f  sync %.0f  post-sync %.0f  observe %.0f\n",
      1e6 * d["cairn_raft_round_presync_seconds_total"] / r, 1e6 * d["cairn_raft_round_sync_seconds_total"] / r,
      1e6 * d["cairn_raft_round_postsync_seconds_total"] / r, 1e6 * d["cairn_raft_round_observe_seconds_total"] / r
    printf "of post-sync, per round (µs): second pass %.0f  apply (both passes) %.0f  truncation %.0f\n",
      1e6 * d["cairn_raft_round_second_pass_seconds_total"] / r, 1e6 * d["cairn_raft_round_apply_seconds_total"] / r,
      1e6 * d["cairn_raft_round_compact_seconds_total"] / r
    printf "per synced round, sync (µs): %.0f (if every sync is in a synced round)\n", 1e6 * d["cairn_raft_round_sync_seconds_total"] / (s > 0 ? s : 1)
    f = d["cairn_store_wal_fsyncs_total"]
    printf "Pebble WAL fsyncs %d, mean %.0f µs (the rest of a round'"'"'s sync is Pebble'"'"'s commit pipeline and the wake-up)\n", f, 1e6 * d["cairn_store_wal_fsync_seconds_total"] / (f > 0 ? f : 1)
    printf "tablet propose-to-applied (µs, %d commits): %.0f\n", c, 1e6 * d["cairn_raft_commit_duration_seconds_sum"] / c
  }' "$work/m0" "$work/m1"
