#!/usr/bin/env bash
# pgbench against Cairn and against PostgreSQL 15 on the same machine, in
# the same run: prints TPS for each workload and Cairn's ratio to Postgres,
# then the time of bulk operations on a generated table and Cairn's ratio.
#
#   bench/pgbench/run.sh [-runs N] [-T SECONDS] [-c CLIENTS] [-s SCALE]
#                        [-rows ROWS] [-skip-tps] [-skip-bulk]
#                        [-only WORKLOAD] [-cairn-options OPTS]
#
# -only runs just the named TPS workload (select-only, simple-update, ...);
# -cairn-options passes OPTS as PGOPTIONS to Cairn's pgbench runs only
# (e.g. '-c cairn_buffered_writes=on'), to compare a session setting.
# CAIRN_BIN=path runs that cairn binary instead of building this tree.
#
# Each workload runs N times (default 3) on each system, alternating, and the
# median is reported, with the median of the server's CPU per transaction
# (microseconds of user and system time of the server's processes over the
# run, from /proc, divided by the transactions). Both run on loopback with synced commits (Postgres
# with fsync=on, synchronous_commit=on; Cairn always syncs).
#
# The bulk section loads the same generated CSV file of ROWS rows (default
# 1,000,000) into (id int8 primary key, a int8, b text, c float8) on both
# systems with psql's \copy (COPY FROM STDIN), then times CREATE INDEX on a
# and SELECT count(*). Each run uses a fresh table. It also times the same
# load into a table created in the loading transaction (BEGIN; CREATE
# TABLE; \copy; COMMIT), which Cairn bulk-loads. Times are wall-clock
# seconds of the psql command, client included.
# A second table gives each server's CPU seconds for the COPY into the
# existing table and for CREATE INDEX (from /proc, as for the TPS runs):
# on a loaded machine the wall seconds are mostly the share of the cores
# each server gets, and the CPU seconds move far less.
set -euo pipefail
cd "$(dirname "$0")/../.."
. test/compat/lib.sh
# Cairn runs as a plain `cairn start` (a replicated cluster of one), what
# users run (issue 22). CAIRN_UNREPLICATED=--unreplicated measures the
# single unreplicated node that the figures before 2026-11-29 used.
CAIRN_UNREPLICATED=${CAIRN_UNREPLICATED-}

runs=3 secs=15 clients=4 scale=1 rows=1000000 do_tps=1 do_bulk=1 only= cairn_opts=
while [ $# -gt 0 ]; do
  case $1 in
  -runs) runs=$2; shift 2 ;;
  -T) secs=$2; shift 2 ;;
  -c) clients=$2; shift 2 ;;
  -s) scale=$2; shift 2 ;;
  -rows) rows=$2; shift 2 ;;
  -skip-tps) do_tps=; shift ;;
  -skip-bulk) do_bulk=; shift ;;
  -only) only=$2; shift 2 ;;
  -cairn-options) cairn_opts=$2; shift 2 ;;
  *) echo "unknown flag $1" >&2; exit 2 ;;
  esac
done

work=$(mktemp -d /tmp/cairn-pgbench.XXXXXX)
chmod 755 "$work"
# BENCH_PORT_BASE lets two runs share the machine (PostgreSQL on BASE,
# Cairn on BASE+10..12).
base=${BENCH_PORT_BASE:-30500}
pgport=$base cport=$((base + 10))
trap 'cairn_stop; ./scripts/pg15.sh stop "$work/pg" $pgport >/dev/null 2>&1 || true; rm -rf "$work"' EXIT

# CAIRN_BIN runs a binary built beforehand (another commit's, to compare
# in one session) instead of building this tree's.
if [ -n "${CAIRN_BIN:-}" ]; then cp "$CAIRN_BIN" "$work/cairn"; else cairn_build "$work/cairn"; fi
./scripts/pg15.sh start "$work/pg" $pgport >/dev/null
# pg15.sh starts with fsync=off for logic tests; the benchmark compares
# durable commits, so restart Postgres with fsync on.
./scripts/pg15.sh stop "$work/pg" $pgport
bindir=$(dirname "$(command -v postgres || echo /usr/lib/postgresql/15/bin/postgres)")
runuser -u postgres -- "$bindir/pg_ctl" -D "$work/pg/data" -l "$work/pg/server.log" -w \
  -o "-c listen_addresses=127.0.0.1 -p $pgport -k $work/pg -c fsync=on -c synchronous_commit=on" start >/dev/null
cairn_start "$work/cairn" "$work/cairn-node" $cport
echo "cairn: start ${CAIRN_UNREPLICATED:-(plain: a replicated cluster of one)}; load: $(cut -d' ' -f1-3 /proc/loadavg)"

pg_url="postgres://postgres@127.0.0.1:$pgport/postgres?sslmode=disable"
cairn_url="postgres://postgres@127.0.0.1:$cport/postgres?sslmode=disable"

median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# server_ticks URL prints the CPU time (clock ticks, user + system) the
# server behind URL has used so far: Cairn's node process; PostgreSQL's
# postmaster and its live children, plus what the postmaster has reaped
# from exited ones (each pgbench run's backends exit when it ends).
server_ticks() {
  local pids t=0 p
  if [ "$1" = "$cairn_url" ]; then
    pids=$CAIRN_PID
  else
    local pm
    pm=$(head -1 "$work/pg/data/postmaster.pid")
    pids="$pm $(pgrep -P "$pm" | tr '\n' ' ')"
    t=$(awk '{print $16 + $17}' "/proc/$pm/stat")
  fi
  for p in $pids; do
    if [ -r "/proc/$p/stat" ]; then t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0))); fi
  done
  echo "$t"
}
hz=$(getconf CLK_TCK)

if [ -n "$do_tps" ]; then
  for url in "$pg_url" "$cairn_url"; do
    pgbench -q -i -s "$scale" "$url" >"$work/init.log" 2>&1 || { cat "$work/init.log" >&2; exit 1; }
  done


  # tps URL ARGS... prints the TPS of one pgbench run and the server's CPU
  # per transaction in microseconds (its background work included).
  tps() {
    local url=$1; shift
    local out t0 t1 rate
    local opts=
    if [ "$url" = "$cairn_url" ]; then opts=$cairn_opts; fi
    t0=$(server_ticks "$url")
    out=$(PGOPTIONS=$opts pgbench -n -T "$secs" -c "$clients" -j "$clients" "$@" "$url" 2>&1) || { echo "$out" >&2; exit 1; }
    sleep 0.3 # PostgreSQL's backends exit and are reaped
    t1=$(server_ticks "$url")
    if echo "$out" | grep -q 'number of failed transactions: [1-9]'; then echo "$out" >&2; fi
    rate=$(echo "$out" | sed -n 's/^tps = \([0-9.]*\) .*/\1/p')
    awk -v r="$rate" -v d=$((t1 - t0)) -v hz="$hz" -v s="$secs" 'BEGIN { printf "%s %.1f\n", r, (r > 0 ? d / hz * 1e6 / (r * s) : 0) }'
  }

  # cpu_us: the server's CPU per transaction (median of the runs), which
  # moves less with the machine's load than TPS does.
  printf '%-24s %12s %12s %8s %12s %12s\n' workload cairn_tps pg15_tps ratio cairn_cpu_us pg15_cpu_us
  for w in "select-only:-S" "select-only-prepared:-S -M prepared" "simple-update:-N" "tpcb-like:"; do
    name=${w%%:*} args=${w#*:}
    if [ -n "$only" ] && [ "$name" != "$only" ]; then continue; fi
    c=() p=() cu=() pu=()
    for _ in $(seq 1 "$runs"); do
      # shellcheck disable=SC2086
      read -r t u <<<"$(tps "$cairn_url" $args)"
      c+=("$t") cu+=("$u")
      # shellcheck disable=SC2086
      read -r t u <<<"$(tps "$pg_url" $args)"
      p+=("$t") pu+=("$u")
    done
    cm=$(printf '%s\n' "${c[@]}" | median) pm=$(printf '%s\n' "${p[@]}" | median)
    cum=$(printf '%s\n' "${cu[@]}" | median) pum=$(printf '%s\n' "${pu[@]}" | median)
    awk -v n="$name" -v c="$cm" -v p="$pm" -v cu="$cum" -v pu="$pum" \
      'BEGIN { printf "%-24s %12.0f %12.0f %7.2fx %12.1f %12.1f\n", n, c, p, (p > 0 ? c / p : 0), cu, pu }'
  done
fi

# timed URL SQL prints the wall-clock seconds psql takes to run SQL (one
# statement or psql meta-command) and fails the script if it fails.
timed() {
  local url=$1 sql=$2 t0 t1 out
  t0=$(date +%s%N)
  out=$(psql -X -q -v ON_ERROR_STOP=1 -c "$sql" "$url" 2>&1) || { echo "$sql: $out" >&2; exit 1; }
  t1=$(date +%s%N)
  awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f\n", (b - a) / 1e9 }'
}

# timed_script URL SCRIPT is timed for a psql script of several lines (one
# transaction, say), read from standard input.
timed_script() {
  local url=$1 sql=$2 t0 t1 out
  t0=$(date +%s%N)
  out=$(printf '%s\n' "$sql" | psql -X -q -v ON_ERROR_STOP=1 "$url" 2>&1) || { echo "$sql: $out" >&2; exit 1; }
  t1=$(date +%s%N)
  awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f\n", (b - a) / 1e9 }'
}

if [ -n "$do_bulk" ]; then
  # The same deterministic rows for both systems; b is a 24-byte string and
  # a is scattered so that the index on it is not built in key order.
  csv=$work/rows.csv
  awk -v n="$rows" 'BEGIN {
    for (i = 1; i <= n; i++)
      printf "%d,%d,row-%019d,%.4f\n", i, (i * 7919) % 1000003, (i * 104729) % 1000000007, i * 0.37
  }' >"$csv"
  chmod 644 "$csv"
  declare -A bt bc
  for r in $(seq 1 "$runs"); do
    # Alternate which system goes first, so neither always meets the
    # other's leftover background work (compactions, checkpoints).
    order="cairn pg15"
    if [ $((r % 2)) = 0 ]; then order="pg15 cairn"; fi
    for sys in $order; do
      if [ $sys = cairn ]; then url=$cairn_url; else url=$pg_url; fi
      tbl=bulk_$r
      psql -X -q -v ON_ERROR_STOP=1 -c "CREATE TABLE $tbl (id int8 PRIMARY KEY, a int8, b text, c float8)" "$url" >/dev/null
      c0=$(server_ticks "$url")
      bt[$sys,copy]+="$(timed "$url" "\\copy $tbl FROM '$csv' WITH (FORMAT csv)") "
      sleep 0.3 # PostgreSQL's backend (psql's session) exits and is reaped
      c1=$(server_ticks "$url")
      bt[$sys,index]+="$(timed "$url" "CREATE INDEX ${tbl}_a ON $tbl (a)") "
      sleep 0.3 # PostgreSQL's backend (psql's session) exits and is reaped
      c2=$(server_ticks "$url")
      bc[$sys,copy]+="$(awk -v d=$((c1 - c0)) -v hz="$hz" 'BEGIN { printf "%.2f", d / hz }') "
      bc[$sys,index]+="$(awk -v d=$((c2 - c1)) -v hz="$hz" 'BEGIN { printf "%.2f", d / hz }') "
      bt[$sys,count]+="$(timed "$url" "SELECT count(*) FROM $tbl") "
      # The same load into a table created in the loading transaction
      # (as pg_restore --single-transaction does): Cairn's bulk path.
      bt[$sys,copynew]+="$(timed_script "$url" "BEGIN;
CREATE TABLE ${tbl}_new (id int8 PRIMARY KEY, a int8, b text, c float8);
\\copy ${tbl}_new FROM '$csv' WITH (FORMAT csv)
COMMIT;") "
      # Check the loads, so that a short COPY cannot pass for a fast one.
      want="$rows|$(awk -v n="$rows" 'BEGIN { s = 0; for (i = 1; i <= n; i++) s += (i * 7919) % 1000003; printf "%.0f", s }')"
      for t in $tbl ${tbl}_new; do
        got=$(psql -X -qtA -c "SELECT count(*), sum(a) FROM $t" "$url")
        [ "$got" = "$want" ] || { echo "$sys: $t holds $got, want $want" >&2; exit 1; }
      done
    done
  done
  echo
  printf '%-24s %12s %12s %8s\n' "bulk ($rows rows)" cairn_s pg15_s ratio
  for op in copy copynew index count; do
    cm=$(printf '%s\n' ${bt[cairn,$op]} | median) pm=$(printf '%s\n' ${bt[pg15,$op]} | median)
    case $op in
    copy) name="COPY FROM STDIN" ;;
    copynew) name="CREATE TABLE+COPY (1 tx)" ;;
    index) name="CREATE INDEX (a)" ;;
    count) name="SELECT count(*)" ;;
    esac
    awk -v n="$name" -v c="$cm" -v p="$pm" 'BEGIN { printf "%-24s %12.2f %12.2f %7.2fx\n", n, c, p, (p > 0 ? c / p : 0) }'
  done
  # The servers' CPU seconds for the same steps (medians), which move far
  # less with the machine's load than the wall seconds above: the COPY's
  # includes the sleep's share of background work, PostgreSQL's the
  # backends and parallel workers that ran it.
  printf '%-24s %12s %12s %8s\n' "bulk server CPU" cairn_cpu_s pg15_cpu_s ratio
  for op in copy index; do
    cm=$(printf '%s\n' ${bc[cairn,$op]} | median) pm=$(printf '%s\n' ${bc[pg15,$op]} | median)
    case $op in
    copy) name="COPY FROM STDIN" ;;
    index) name="CREATE INDEX (a)" ;;
    esac
    awk -v n="$name" -v c="$cm" -v p="$pm" 'BEGIN { printf "%-24s %12.2f %12.2f %7.2fx\n", n, c, p, (p > 0 ? c / p : 0) }'
  done
fi
echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
