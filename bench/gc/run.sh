#!/usr/bin/env bash
# MVCC garbage collection (issue #14), RUNS times (default 3), each on a
# fresh node: a table of 1,000 rows updated UPDATES times (pgbench, a
# custom script, 4 clients, uniformly random rows) while GC is held back
# (gc.ttlseconds = 3600), then the TTL cut to TTL seconds so the GC queue
# (not VACUUM) catches up. Each run measures, fresh / after the updates /
# after GC: the node's live and total MVCC bytes (GET /api/gc/sizes, a
# scan) and the p50/p99 latency of reading one random row (pgbench -l, 1
# client, 10 s). The baseline of each run is its own fresh table. At the
# end it prints the median over the runs of each figure, and of the
# ratios against the fresh table (total/live bytes after GC; hot-row p50
# and p99 after GC / fresh). The node runs with --gc-ttl TTL, so the
# catalog and statistics tables are collected as soon as the table is.
#   BENCH_PORT=36100 RUNS=3 UPDATES=200000 TTL=5 bench/gc/run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
. test/compat/lib.sh
port=${BENCH_PORT:-36100}
runs=${RUNS:-3}
updates=${UPDATES:-1000000}
ttl=${TTL:-5}
work=$(mktemp -d /tmp/cairn-gc.XXXXXX)
trap 'cairn_stop; rm -rf "$work"' EXIT
cairn_build "$work/cairn"
CAIRN_START_FLAGS="--gc-ttl ${ttl}s"
url="postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
http="http://127.0.0.1:$((port + 2))"
sql() { psql -qAt -v ON_ERROR_STOP=1 "$url" -c "$1"; }
cat >"$work/update.sql" <<'SQL'
\set k random(1, 1000)
UPDATE gcb SET v = v + 1 WHERE k = :k;
SQL
cat >"$work/read.sql" <<'SQL'
\set k random(1, 1000)
SELECT v FROM gcb WHERE k = :k;
SQL
# sizes prints "live total" bytes of the node.
sizes() {
  curl -s "$http/api/gc/sizes" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["live_bytes"], d["total_bytes"])'
}
# reads prints "reads p50_us p99_us" of 10 s of single-row reads.
reads() {
  rm -f "$work"/lat.*
  (cd "$work" && pgbench -n -T 10 -c 1 -M prepared -f read.sql -l --log-prefix=lat "$url" >/dev/null 2>&1)
  cat "$work"/lat.* | awk '{print $3}' | sort -n | awk '{a[NR]=$1} END {printf "%d %.0f %.0f\n", NR, a[int(NR*0.5)], a[int(NR*0.99)]}'
}
# phase NAME prints and records one phase's figures: live total reads p50 p99.
phase() {
  local s r
  s=$(sizes)
  r=$(reads)
  echo "$run $1 $s $r" >>"$work/figures"
  echo "run $run $1: live,total=$s reads,p50us,p99us=$r"
}
for run in $(seq 1 "$runs"); do
  rm -rf "$work/node"
  cairn_start "$work/cairn" "$work/node" "$port"
  sql "CREATE TABLE gcb (k int PRIMARY KEY, v int NOT NULL DEFAULT 0, pad text NOT NULL DEFAULT repeat('x', 40))"
  sql "INSERT INTO gcb (k) SELECT g FROM generate_series(1, 1000) g"
  sql "ALTER TABLE gcb CONFIGURE ZONE USING gc.ttlseconds = 3600"
  phase fresh
  start=$(date +%s)
  per=$((updates / 4))
  out=$(pgbench -n -c 4 -j 2 -t "$per" -M prepared -f "$work/update.sql" "$url" 2>&1)
  echo "run $run updates: $((per * 4)) in $(( $(date +%s) - start )) s, tps $(echo "$out" | sed -n 's/^tps = \([0-9.]*\) .*/\1/p'), failed=$(echo "$out" | sed -n 's/^number of failed transactions: \([0-9]*\).*/\1/p')"
  phase updated
  sql "ALTER TABLE gcb CONFIGURE ZONE USING gc.ttlseconds = $ttl"
  start=$(date +%s)
  # Wait for the GC queue (not VACUUM) to bring total within 2x of live.
  for _ in $(seq 1 600); do
    r=$(curl -s "$http/api/gc/sizes" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["total_bytes"] <= 2*d["live_bytes"])')
    [ "$r" = True ] && break
    sleep 1
  done
  echo "run $run: GC caught up in $(( $(date +%s) - start )) s (TTL $ttl s)"
  phase gc
  curl -s "$http/metrics" | grep -E '^cairn_gc_(queue_(runs|versions_removed|bytes_removed|scans)|rows_repacked|compactions)_total' | sed "s/^/run $run: /"
  cairn_stop
done
python3 - "$work/figures" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
runs = sorted({r[0] for r in rows})
fig = {(r[0], r[1]): [float(x) for x in r[2:]] for r in rows}
med = lambda xs: statistics.median(xs)
print(f"medians of {len(runs)} runs (baseline: each run's fresh table)")
print("| phase | live bytes | total bytes | total/live | read p50 µs | read p99 µs | reads in 10 s |")
print("|---|---|---|---|---|---|---|")
for ph in ("fresh", "updated", "gc"):
    v = [fig[(r, ph)] for r in runs]
    print(f"| {ph} | {med([x[0] for x in v]):,.0f} | {med([x[1] for x in v]):,.0f} | {med([x[1]/x[0] for x in v]):.2f} "
          f"| {med([x[3] for x in v]):.0f} | {med([x[4] for x in v]):.0f} | {med([x[2] for x in v]):,.0f} |")
for ph in ("updated", "gc"):
    p50 = med([fig[(r, ph)][3] / fig[(r, 'fresh')][3] for r in runs])
    p99 = med([fig[(r, ph)][4] / fig[(r, 'fresh')][4] for r in runs])
    print(f"{ph} / fresh, median of per-run ratios: read p50 {p50:.2f}x, read p99 {p99:.2f}x")
print("goals: total/live after GC <= 2.00; read p50 after GC back to the fresh table's (ratio about 1)")
PY
