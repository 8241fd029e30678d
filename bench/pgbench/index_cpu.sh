#!/usr/bin/env bash
# CREATE INDEX's wall and CPU seconds on a plain `cairn start` (issue 18):
# pgbench's bulk table, (id int8 primary key, a int8, b text, c float8),
# loaded with psql's \copy of ROWS generated rows (the same as run.sh's) into
# an existing table, then RUNS builds of an index on the scattered column a
# (new names, no DROP INDEX between them), each timed and charged the
# node's CPU (utime + stime from /proc). CPU seconds move far less than
# wall seconds on a loaded machine. Automatic statistics are off for the
# loading session, so no collection runs beside the builds.
#
#   bench/pgbench/index_cpu.sh [-rows ROWS] [-runs N] [-profile DIR]
#                              [-trace DIR] [-stats] [-unique]
#
# The node's log lines "index build done ... steps=" say where a build of
# a second or more spent its time (each step, the backfill's read, sort,
# cut and ingestion tail); they are printed at the end.
#
# -profile DIR writes a CPU profile of the COPY (DIR/cpu-copy.pprof) and
# of each build (DIR/cpu-N.pprof), each taken over -profile-seconds,
# default 6, from the statement's start, and the
# node's live heap after each build (DIR/heap-N.pprof, after a GC), whose
# in-use bytes are printed with the node's goroutines and RSS: a heap or a
# goroutine count that grows build after build is what a build left
# behind (RSS also holds what the runtime has not returned yet).
#
# -trace DIR writes a runtime trace of each build (DIR/trace-N.out, over
# -profile-seconds from the build's start; `go tool trace` reads it): where
# the build's goroutines wait when its wall time is more than its CPU.
#
# -stats leaves automatic statistics on for the load, as run.sh does.
#
# -unique builds UNIQUE indexes (a's values are distinct): the build then
# validates the index after its backfill (ddl's validate).
#
# CAIRN_BIN=path runs that binary instead of building this tree's;
# BENCH_PORT_BASE (default 30600) is the SQL port, +1 RPC, +2 HTTP.
set -euo pipefail
cd "$(dirname "$0")/../.."
. test/compat/lib.sh
rows=1000000 runs=3 prof= profsec=6 trace= autostats=off unique=
while [ $# -gt 0 ]; do
  case $1 in
  -rows) rows=$2; shift 2 ;;
  -runs) runs=$2; shift 2 ;;
  -profile) prof=$2; shift 2 ;;
  -profile-seconds) profsec=$2; shift 2 ;;
  -trace) trace=$2; shift 2 ;;
  -stats) autostats=on; shift ;;
  -unique) unique=UNIQUE; shift ;;
  *) echo "unknown flag $1" >&2; exit 2 ;;
  esac
done
port=${BENCH_PORT_BASE:-30600}
work=$(mktemp -d /tmp/cairn-indexcpu.XXXXXX)
CAIRN_UNREPLICATED=${CAIRN_UNREPLICATED-}
trap 'cairn_stop; rm -rf "$work"' EXIT
if [ -n "${CAIRN_BIN:-}" ]; then cp "$CAIRN_BIN" "$work/cairn"; else cairn_build "$work/cairn"; fi
awk -v n="$rows" 'BEGIN { for (i = 1; i <= n; i++)
  printf "%d,%d,row-%019d,%.4f\n", i, (i * 7919) % 1000003, (i * 104729) % 1000000007, i * 0.37 }' >"$work/rows.csv"
cairn_start "$work/cairn" "$work/node" "$port"
url="postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
psql -X -q -v ON_ERROR_STOP=1 -c "CREATE TABLE b (id int8 PRIMARY KEY, a int8, b text, c float8)" "$url"
cpu() { awk '{print $14 + $15}' "/proc/$CAIRN_PID/stat"; }
tck=$(getconf CLK_TCK)
admin="http://127.0.0.1:$((port + 2))/debug/pprof"
[ -z "$prof" ] || mkdir -p "$prof"
[ -z "$trace" ] || mkdir -p "$trace"
cpid=
if [ -n "$prof" ]; then
  curl -s -o "$prof/cpu-copy.pprof" "$admin/profile?seconds=$profsec" &
  cpid=$!
fi
c0=$(cpu) t0=$(date +%s%N)
PGOPTIONS="-c sql.stats.automatic_collection.enabled=$autostats" \
  psql -X -q -v ON_ERROR_STOP=1 -c "\\copy b FROM '$work/rows.csv' WITH (FORMAT csv)" "$url"
t1=$(date +%s%N) c1=$(cpu)
awk -v a="$t0" -v b="$t1" -v c="$((c1 - c0))" -v t="$tck" -v l="$(cut -d' ' -f1 /proc/loadavg)" \
  'BEGIN { printf "copy: wall %.2f s, cpu %.2f s, load %s\n", (b - a) / 1e9, c / t, l }'
[ -z "$cpid" ] || wait "$cpid"
for r in $(seq 1 "$runs"); do
  ppid=
  if [ -n "$prof" ]; then
    curl -s -o "$prof/cpu-$r.pprof" "$admin/profile?seconds=$profsec" &
    ppid=$!
  fi
  tpid=
  if [ -n "$trace" ]; then
    curl -s -o "$trace/trace-$r.out" "$admin/trace?seconds=$profsec" &
    tpid=$!
  fi
  c0=$(cpu) t0=$(date +%s%N)
  psql -X -q -v ON_ERROR_STOP=1 -c "CREATE $unique INDEX b_a$r ON b (a)" "$url"
  t1=$(date +%s%N) c1=$(cpu)
  awk -v r="$r" -v a="$t0" -v b="$t1" -v c="$((c1 - c0))" -v t="$tck" -v l="$(cut -d' ' -f1 /proc/loadavg)" \
    'BEGIN { printf "run %d: wall %.2f s, cpu %.2f s, load %s\n", r, (b - a) / 1e9, c / t, l }'
  [ -z "$tpid" ] || wait "$tpid"
  if [ -n "$prof" ]; then
    wait "$ppid"
    curl -s -o "$prof/heap-$r.pprof" "$admin/heap?gc=1"
    heap=$(go tool pprof -sample_index=inuse_space -top "$prof/heap-$r.pprof" 2>/dev/null |
      awk '/^Showing nodes/ { print $(NF-1) }')
    gor=$(curl -s "$admin/goroutine?debug=1" | awk 'NR == 1 { print $NF }')
    rss=$(awk '/^VmRSS/ { printf "%.0f MB", $2 / 1024 }' "/proc/$CAIRN_PID/status")
    echo "run $r: after the build, live heap $heap, $gor goroutines, RSS $rss"
  fi
done
got=$(psql -X -qtA -c "SELECT count(*) FROM b WHERE a = 7919" "$url")
[ "$got" = 1 ] || { echo "the index answers $got rows for a = 7919, want 1" >&2; exit 1; }
# Where each build's time went: the node logs the steps of a build that
# took a second or more (ddl's stepTimer; shorter ones at debug level).
grep "index build done" "$work/node/cairn.log" | sed 's/.*took=/took=/' || true
