#!/usr/bin/env bash
# MVCC garbage collection (issue #14): a table of 1,000 rows updated
# UPDATES times (pgbench, a custom script, 4 clients, uniformly random
# rows) while GC is held back (gc.ttlseconds = 3600), then the TTL cut to
# TTL seconds so the GC queue catches up. Prints, fresh / after the
# updates / after GC: the node's live and total MVCC bytes (GET
# /api/gc/sizes, a scan) and the p50/p99 latency of reading one random row
# (pgbench -l, 1 client, 10 s). The node runs with --gc-ttl TTL, so the
# catalog and statistics tables are collected as soon as the table is.
#   BENCH_PORT=36100 UPDATES=200000 TTL=5 bench/gc/run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
. test/compat/lib.sh
port=${BENCH_PORT:-36100}
updates=${UPDATES:-1000000}
ttl=${TTL:-5}
work=$(mktemp -d /tmp/cairn-gc.XXXXXX)
trap 'cairn_stop; rm -rf "$work"' EXIT
cairn_build "$work/cairn"
CAIRN_START_FLAGS="--gc-ttl ${ttl}s"
cairn_start "$work/cairn" "$work/node" "$port"
url="postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
http="http://127.0.0.1:$((port + 2))"
sql() { psql -qAt -v ON_ERROR_STOP=1 "$url" -c "$1"; }
sql "CREATE TABLE gcb (k int PRIMARY KEY, v int NOT NULL DEFAULT 0, pad text NOT NULL DEFAULT repeat('x', 40))"
sql "INSERT INTO gcb (k) SELECT g FROM generate_series(1, 1000) g"
sql "ALTER TABLE gcb CONFIGURE ZONE USING gc.ttlseconds = 3600"
cat >"$work/update.sql" <<'SQL'
\set k random(1, 1000)
UPDATE gcb SET v = v + 1 WHERE k = :k;
SQL
cat >"$work/read.sql" <<'SQL'
\set k random(1, 1000)
SELECT v FROM gcb WHERE k = :k;
SQL
# sizes prints live and total bytes (and their ratio) of the node.
sizes() {
  curl -s "$http/api/gc/sizes" | python3 -c 'import json,sys; d=json.load(sys.stdin); print("live=%d total=%d total/live=%.2f" % (d["live_bytes"], d["total_bytes"], d["total_bytes"]/max(d["live_bytes"],1)))'
}
# reads prints the p50 and p99 latency of 10 s of single-row reads.
reads() {
  rm -f "$work"/lat.*
  (cd "$work" && pgbench -n -T 10 -c 1 -M prepared -f read.sql -l --log-prefix=lat "$url" >/dev/null 2>&1)
  cat "$work"/lat.* | awk '{print $3}' | sort -n | awk '{a[NR]=$1} END {printf "reads=%d p50=%.0fus p99=%.0fus\n", NR, a[int(NR*0.5)], a[int(NR*0.99)]}'
}
echo "fresh:        $(sizes) $(reads)"
start=$(date +%s)
per=$((updates / 4))
out=$(pgbench -n -c 4 -j 2 -t "$per" -M prepared -f "$work/update.sql" "$url" 2>&1)
echo "updates: $((per * 4)) in $(( $(date +%s) - start )) s, tps $(echo "$out" | sed -n 's/^tps = \([0-9.]*\) .*/\1/p'), failed=$(echo "$out" | sed -n 's/^number of failed transactions: \([0-9]*\).*/\1/p')"
echo "after updates: $(sizes) $(reads)"
sql "ALTER TABLE gcb CONFIGURE ZONE USING gc.ttlseconds = $ttl"
start=$(date +%s)
# Wait for the GC queue (not VACUUM) to bring total within 2x of live.
for _ in $(seq 1 600); do
  r=$(curl -s "$http/api/gc/sizes" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["total_bytes"] <= 2*d["live_bytes"])')
  [ "$r" = True ] && break
  sleep 1
done
echo "GC caught up in $(( $(date +%s) - start )) s (TTL $ttl s)"
echo "after GC:     $(sizes) $(reads)"
curl -s "$http/metrics" | grep -E '^cairn_gc_(queue_(runs|versions_removed|bytes_removed|scans)|rows_repacked|compactions)_total'
