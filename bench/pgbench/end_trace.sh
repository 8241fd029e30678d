#!/usr/bin/env bash
# end_trace.sh breaks simple-update's END down from the node's Go trace:
# a plain `cairn start` (a replicated cluster of one), pgbench -i -s 1,
# then pgbench -N -r (4 clients, -j 1) for 12 s with a 3 s runtime trace
# taken 5 s in, then end_trace.py on the parsed trace: per END, the mean
# time of each step of the connection goroutine from its block on the read
# before the END to its block on the read after it (runnable waits, runs,
# the waits for the round), and the goroutine wake-ups per END by waker.
#
#   BENCH_PORT_BASE=20000 bench/pgbench/end_trace.sh [OUTPREFIX]
#
# CAIRN_BIN runs a binary built beforehand instead of this tree's. Run it
# under `flock /work/bench.lock` on a shared machine.
set -euo pipefail
cd "$(dirname "$0")/../.."
. test/compat/lib.sh
CAIRN_UNREPLICATED=
out=${1:-/tmp/end_trace}
work=$(mktemp -d /tmp/cairn-endtrace.XXXXXX)
port=$((${BENCH_PORT_BASE:-30500} + 10))
trap 'cairn_stop; rm -rf "$work"' EXIT
if [ -n "${CAIRN_BIN:-}" ]; then cp "$CAIRN_BIN" "$work/cairn"; else cairn_build "$work/cairn"; fi
cairn_start "$work/cairn" "$work/node" $port
url="postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
pgbench -q -i -s 1 "$url" >"$work/init.log" 2>&1 || { cat "$work/init.log" >&2; exit 1; }
(sleep 5; curl -s -o "$out.trace" "http://127.0.0.1:$((port + 2))/debug/pprof/trace?seconds=3") &
tp=$!
pgbench -n -r -T 12 -c 4 -j 1 -N "$url" >"$out.pgbench" 2>&1
wait $tp
grep -E '^tps|END;' "$out.pgbench"
go tool trace -d=parsed "$out.trace" >"$out.parsed"
python3 bench/pgbench/end_trace.py "$out.parsed"
