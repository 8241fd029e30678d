#!/usr/bin/env bash
# Point SELECT latency by psql's clock in `cairn demo --nodes 3 --global`,
# from the us-west shell's node, after a minute of load (issue #22):
#
#   bench/colocation/demo_point_select.sh [load seconds, default 60] [samples, default 20]
#
# Starts the demo (no manual placement: default lease preferences), runs
# point SELECTs on customers through the us-west node with pgbench for the
# load period, then runs `samples` plain and `samples` prepared point
# SELECTs in one psql session with \timing on and prints the median and
# maximum of psql's "Time:" lines. Ports come from CAIRN_TEST_PORTS (default
# 28000-28999); CAIRN_BIN names a prebuilt cairn binary (default: built).
# START_IN=eu (or us-east) first puts customers' lease there, the issue's
# case, with a zone's lease preference that is then discarded, so the load
# itself runs with no placement (the zone leaves customers a tablet of its
# own, where the demo otherwise keeps it in the system catalog's).
# RATE=N limits the load to N SELECTs a second (pgbench -R), as a shell
# sends them, rather than as fast as one connection can.
set -euo pipefail
load=${1:-60}
samples=${2:-20}
cd "$(dirname "$0")/../.."
work=$(mktemp -d)
trap 'kill "$demo" 2>/dev/null || true; wait "$demo" 2>/dev/null || true; rm -rf "$work"' EXIT
bin=${CAIRN_BIN:-}
if [ -z "$bin" ]; then
	bin=$work/cairn
	go build -o "$bin" ./cmd/cairn
fi
CAIRN_TEST_PORTS=${CAIRN_TEST_PORTS:-28000-28999} "$bin" demo --nodes 3 --global --no-shell >"$work/out" 2>"$work/err" &
demo=$!
for _ in $(seq 600); do
	grep -q "the shell's:" "$work/out" 2>/dev/null && break
	kill -0 "$demo" 2>/dev/null || { cat "$work/err"; exit 1; }
	sleep 0.2
done
url=$(sed -n "s/^node 1 (us-west), the shell's: //p" "$work/out")
[ -n "$url" ] || { echo "no us-west URL"; cat "$work/out" "$work/err"; exit 1; }
echo "us-west node: $url"
leaders() {
	psql -X -q -A -t "$url" -c "SELECT DISTINCT coalesce(table_name, 'system') || ':' || leader FROM cairn_catalog.tablets WHERE table_name IS NULL OR table_name IN ('customers','products','orders') ORDER BY 1" | tr '\n' ' '
	echo
}
stats() { sort -g "$1" | awk '{a[NR]=$1} END {printf "n=%d median %.3f ms, min %.3f, max %.3f\n", NR, (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2), a[1], a[NR]}'; }
# measure LABEL: samples plain and prepared point SELECTs in one psql
# session each, by psql's clock.
measure() {
	{
		echo '\timing on'
		for i in $(seq "$samples"); do echo "SELECT name, city FROM customers WHERE id = $((i % 3 + 1));"; done
	} | psql -X -q "$url" 2>&1 | sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p' >"$work/plain"
	{
		echo 'PREPARE p (int) AS SELECT name, city FROM customers WHERE id = $1;'
		echo '\timing on'
		for i in $(seq "$samples"); do echo "EXECUTE p($((i % 3 + 1)));"; done
	} | psql -X -q "$url" 2>&1 | sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p' >"$work/prepared"
	echo "$1: plain point SELECT by psql's clock: $(stats "$work/plain")"
	echo "$1: prepared point SELECT (EXECUTE) by psql's clock: $(stats "$work/prepared")"
}
if [ -n "${START_IN:-}" ]; then
	node=$(sed -n "s/^node \([0-9]*\) ($START_IN).*/\1/p" "$work/out")
	[ -n "$node" ] || { echo "no node in region $START_IN"; exit 1; }
	psql -X -q "$url" -c "ALTER TABLE customers CONFIGURE ZONE USING lease_preferences = '[[+region=$START_IN]]'"
	for _ in $(seq 120); do
		[ "$(psql -X -q -A -t "$url" -c "SELECT DISTINCT leader FROM cairn_catalog.tablets WHERE table_name = 'customers'")" = "$node" ] && break
		sleep 0.5
	done
	psql -X -q "$url" -c "ALTER TABLE customers CONFIGURE ZONE DISCARD"
fi
echo "leaders before the load (node 1 us-west, 2 us-east, 3 eu): $(leaders)"
measure "before the load"
printf '\\set id random(1, 3)\nSELECT name, city FROM customers WHERE id = :id;\n' >"$work/point.sql"
pgbench -n -c 1 -T "$load" ${RATE:+-R "$RATE"} -f "$work/point.sql" "$url" 2>&1 | grep -E "number of transactions actually processed|latency average|tps" || true
echo "leaders after ${load}s of load: $(leaders)"
measure "after ${load}s of load"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
