# Helpers shared by the compat and pgbench scripts: build cairn and start or
# stop a throwaway single node. Source it; it defines functions only.

# cairn_build builds the cairn binary into $1.
cairn_build() {
  go build -o "$1" ./cmd/cairn
}

# cairn_start BIN DIR PORT starts an insecure node with its store in DIR and
# waits for the ready line; it sets CAIRN_PID. The node is --unreplicated:
# the compat and pgbench figures measure the single node, as before a plain
# start became a replicated cluster of one (docs/architecture.md, "A plain
# cairn start is a cluster of one", for what that costs). With
# CAIRN_UNREPLICATED set and empty it is a plain start instead.
# CAIRN_START_FLAGS are added to the command line (e.g. --gc-ttl 5s).
cairn_start() {
  local bin=$1 dir=$2 port=$3
  mkdir -p "$dir"
  "$bin" start --insecure ${CAIRN_UNREPLICATED---unreplicated} ${CAIRN_START_FLAGS:-} --store "$dir/store" \
    --sql-addr "127.0.0.1:$port" --rpc-addr "127.0.0.1:$((port + 1))" \
    --http-addr "127.0.0.1:$((port + 2))" >"$dir/cairn.log" 2>&1 &
  CAIRN_PID=$!
  for _ in $(seq 1 300); do
    if grep -q "cairn node ready: sql=" "$dir/cairn.log"; then return 0; fi
    if ! kill -0 "$CAIRN_PID" 2>/dev/null; then break; fi
    sleep 0.1
  done
  echo "cairn did not start; its log:" >&2
  cat "$dir/cairn.log" >&2
  return 1
}

# cairn_stop stops the node started by cairn_start (SIGTERM, then waits).
cairn_stop() {
  if [ -n "${CAIRN_PID:-}" ] && kill -0 "$CAIRN_PID" 2>/dev/null; then
    kill -TERM "$CAIRN_PID"
    wait "$CAIRN_PID" || true
  fi
  CAIRN_PID=
}
