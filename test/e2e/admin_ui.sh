#!/usr/bin/env bash
# The admin UI in a real browser: starts a `cairn start` node, creates a
# colocated database (two tables sharing its tablet, one opted out into
# tablets of its own) and a table of the default database, then has
# headless Chromium (Debian's, installed if missing) build each page's DOM
# and screenshot it. Fails if a page lacks what it must show (a node row,
# the tables, the shared tablet, the system catalog's group) or if a
# screenshot is missing or too small to be a rendered page.
#
#   test/e2e/admin_ui.sh [OUTDIR]      (make e2e; the "ui" step of make compat)
#
# The node is --insecure (as every compat step's), so the pages need no
# login and must say that they are open; the login form is rendered too.
# Then a second, secure node (certificates from `cairn cert`, --certs-dir,
# a superuser password) must serve HTTPS, send the browser from its
# overview to that form, answer its API 401 without a password and 200
# with one (HTTP Basic, as curl sends it, verifying the node's certificate
# against the cluster CA), and keep /metrics open.
#
# Screenshots: OUTDIR/overview.png, OUTDIR/database.png, OUTDIR/tablets.png,
# OUTDIR/statements.png, OUTDIR/jobs.png, OUTDIR/sessions.png, OUTDIR/login.png
# (OUTDIR defaults to /tmp/cairn-admin-ui), OUTDIR/secure.png.
# CAIRN_E2E_PORT (default 30800; +1 to +5 are taken too) picks the nodes'
# ports.
set -euo pipefail
cd "$(dirname "$0")/../.."
. test/compat/lib.sh

out=${1:-/tmp/cairn-admin-ui}
mkdir -p "$out"
if ! command -v chromium >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
if ! command -v psql >/dev/null; then
  apt-get update -qq && apt-get install -y -qq postgresql-client >/dev/null
fi

work=$(mktemp -d /tmp/cairn-e2e.XXXXXX)
port=${CAIRN_E2E_PORT:-30800}
secure_pid=
stop_secure() {
  if [ -n "$secure_pid" ] && kill -0 "$secure_pid" 2>/dev/null; then
    kill -TERM "$secure_pid"
    wait "$secure_pid" || true
  fi
}
trap 'cairn_stop; stop_secure; rm -rf "$work"' EXIT
cairn_build "$work/cairn"
cairn_start "$work/cairn" "$work/node" "$port"
base="postgres://postgres@127.0.0.1:$port"
psql -X -q -v ON_ERROR_STOP=1 "$base/postgres?sslmode=disable" \
  -c "CREATE TABLE ui_accounts (id int PRIMARY KEY, balance int)" \
  -c "INSERT INTO ui_accounts SELECT g, 100 FROM generate_series(1, 1000) g" \
  -c "CREATE DATABASE ui_shop WITH colocated = true"
psql -X -q -v ON_ERROR_STOP=1 "$base/ui_shop?sslmode=disable" \
  -c "CREATE TABLE products (id int PRIMARY KEY, category text)" \
  -c "CREATE INDEX products_category_idx ON products (category)" \
  -c "CREATE TABLE orders (id int PRIMARY KEY, product int)" \
  -c "CREATE TABLE events (id int PRIMARY KEY) WITH (colocated = false) SPLIT INTO 3 TABLETS" \
  -c "INSERT INTO products SELECT g, 'c' || g % 5 FROM generate_series(1, 500) g" \
  -c "INSERT INTO events SELECT g FROM generate_series(1, 500) g" \
  -c "SELECT count(*) FROM products JOIN orders ON orders.product = products.id" >/dev/null

http="http://127.0.0.1:$((port + 2))"
failed=0
# page NAME PATH WANT... renders PATH, screenshots it to OUTDIR/NAME.png and
# checks the DOM Chromium built holds every WANT (a fixed string).
page() {
  local name=$1 path=$2
  shift 2
  # The secure node's certificate is signed by the test's own CA, which
  # Chromium does not know; curl checks it against that CA below.
  local flags=(--headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1400,1000 --ignore-certificate-errors)
  chromium "${flags[@]}" --dump-dom "$http$path" >"$work/$name.html" 2>"$work/$name.err" || true
  rm -f "$out/$name.png"
  chromium "${flags[@]}" --screenshot="$out/$name.png" "$http$path" >/dev/null 2>&1 || true
  for want in "$@"; do
    if ! grep -qF -- "$want" "$work/$name.html"; then
      echo "admin UI: $path as Chromium rendered it lacks \"$want\""
      failed=1
    fi
  done
  # A PNG of a rendered page: the signature, and more bytes than a blank
  # or error page compresses to.
  local size
  size=$(stat -c %s "$out/$name.png" 2>/dev/null || echo 0)
  if [ "$size" -lt "${min_png:-20000}" ] || [ "$(head -c 8 "$out/$name.png" | od -An -tx1 | tr -d ' \n')" != 89504e470d0a1a0a ]; then
    echo "admin UI: no screenshot of $path ($out/$name.png: $size bytes)"
    failed=1
  else
    echo "admin UI: $path rendered, screenshot $out/$name.png ($size bytes)"
  fi
}

page overview / '<tr class="node-row" data-node-id="1">' '>live<' 'system catalog' '>ui_shop</a>' 'Colocated groups' \
  'id="insecure-banner"' 'id="cluster-version"' 'cluster version</div>' 'class="binary-version"'
page database /databases/ui_shop 'Database ui_shop' 'public.products' 'public.orders' 'public.events' \
  'products_category_idx' '2 tables share this tablet' 'class="badge coloc"'
page tablets /tablets 'class="tablet-row' 'ui_shop.public.events' 'postgres.public.ui_accounts' 'system.descriptors' 'reads/s'
# The activity pages: the statements run above, the index build's job
# (done), and a session caught running a statement.
page statements /statements 'class="statement-row"' 'CREATE INDEX products_category_idx ON products (category)' 'INSERT INTO products SELECT g'
page jobs /jobs 'class="job-row"' 'products_category_idx' 'value="1"></progress> 100%' 'succeeded'
psql -X -q "$base/ui_shop?sslmode=disable" -c "SELECT pg_sleep(20)" >/dev/null 2>&1 &
sleeper=$!
until [ "$(psql -X -qAt "$base/postgres?sslmode=disable" -c "SELECT count(*) FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(20)'")" = 1 ]; do sleep 0.2; done
page sessions /sessions 'class="session-row"' 'SELECT pg_sleep(20)' '>active<' '>ui_shop<'
kill "$sleeper" 2>/dev/null || true
page login '/login?next=%2Ftablets' 'id="login-form"' 'name="password"' 'value="/tablets"' 'runs with <code>--insecure</code>'

# A secure node: the browser lands on the login form.
mkdir -p "$work/secure"
certs="$work/secure/certs"
"$work/cairn" cert create-ca --certs-dir "$certs" --ca-key "$work/secure/ca.key" >/dev/null
"$work/cairn" cert create-node 127.0.0.1 localhost --certs-dir "$certs" --ca-key "$work/secure/ca.key" >/dev/null
CAIRN_INITIAL_PASSWORD=e2e-pw "$work/cairn" start --store "$work/secure/store" --certs-dir "$certs" \
  --sql-addr "127.0.0.1:$((port + 3))" --rpc-addr "127.0.0.1:$((port + 4))" \
  --http-addr "127.0.0.1:$((port + 5))" >"$work/secure/cairn.log" 2>&1 &
secure_pid=$!
for _ in $(seq 1 300); do
  if grep -q "cairn node ready: sql=" "$work/secure/cairn.log"; then break; fi
  sleep 0.1
done
http="https://127.0.0.1:$((port + 5))"
# The bare login form compresses to ~16 KB.
min_png=10000 page secure / 'id="login-form"' 'name="password"' 'value="/"'
status() { curl -s --cacert "$certs/ca.crt" -o /dev/null -w '%{http_code}' "$@"; }
for check in "401 $http/api/nodes" "200 -u postgres:e2e-pw $http/api/nodes" "401 -u postgres:wrong $http/api/nodes" \
  "200 $http/metrics" "401 -X POST $http/api/nodes/1/decommission"; do
  set -- $check
  want=$1
  shift
  if [ "$(status "$@")" != "$want" ]; then
    echo "admin UI: secure node: curl $* answered $(status "$@"), want $want"
    failed=1
  fi
done
stop_secure

if [ "$failed" -ne 0 ]; then
  echo "admin UI: FAILED (node logs: $work/node/cairn.log, $work/secure/cairn.log)"
  trap 'cairn_stop; stop_secure' EXIT # keep $work for the logs
  exit 1
fi
echo "admin UI: ok"
