#!/usr/bin/env bash
# The admin UI in a real browser: starts a `cairn start` node, creates a
# table, and has headless Chromium (Debian's, installed if missing) render
# the overview page to a PNG; fails if the page lacks what it must show.
#
#   test/e2e/admin_ui.sh [OUT.png]      (make e2e)
set -euo pipefail
cd "$(dirname "$0")/../.."
. test/compat/lib.sh

out=${1:-/tmp/cairn-admin-ui.png}
if ! command -v chromium >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
if ! command -v psql >/dev/null; then
  apt-get update -qq && apt-get install -y -qq postgresql-client >/dev/null
fi

work=$(mktemp -d /tmp/cairn-e2e.XXXXXX)
port=${CAIRN_E2E_PORT:-54611}
trap 'cairn_stop' EXIT
cairn_build "$work/cairn"
cairn_start "$work/cairn" "$work/node" "$port"
url="postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
psql -X -q "$url" -c "CREATE TABLE ui_accounts (id int PRIMARY KEY, balance int)" \
  -c "INSERT INTO ui_accounts SELECT g, 100 FROM generate_series(1, 1000) g"

http="http://127.0.0.1:$((port + 2))/"
# The DOM as the browser built it, and a screenshot of it.
chromium --headless --no-sandbox --disable-gpu --dump-dom "$http" >"$work/dom.html" 2>/dev/null
chromium --headless --no-sandbox --disable-gpu --window-size=1280,900 --screenshot="$out" "$http" >/dev/null 2>&1
for want in "Cairn cluster" "public.ui_accounts" "reads/s" "live"; do
  grep -q "$want" "$work/dom.html" || { echo "admin UI: the rendered page lacks \"$want\""; exit 1; }
done
[ -s "$out" ] || { echo "admin UI: no screenshot"; exit 1; }
echo "admin UI: ok, screenshot in $out"
