#!/usr/bin/env bash
# The compat target (`make compat`): real PostgreSQL clients against a real
# `cairn start` process. Every step runs even when an earlier one failed; the
# run fails if any did, and the summary at the end names them.
#
#   psql      test/compat/psql.sql (meta-commands \d \d+ \dt \dt+ \di \di+
#             \dv \dv+ \ds \ds+ \dx \dn \dn+ \du \dg \l \df \dp \z \db
#             \dL \dE \dm \dD \dP \dc \dO \dX \dy \des \dew \det \dRp
#             \dRs \drds \dl \dconfig \sf lower(text) \dT \dT+ (enum types) \dD \dD+
#             (domains), \df \df+ \sf \sf+ (SQL functions), \copy (into
#             domains too), transactions, errors,
#             pg_dump's index query) must print
#             exactly what PostgreSQL 15 prints (psql.expected), after
#             normalize.sed hides OIDs, page counts, sizes and padding
#   pgbench   -i -s 10, then -T 30 -c 8 -j 2 in the simple and prepared
#             protocols: transactions processed, 0 failed, balances add up
#   sysbench  oltp_read_write (Debian's sysbench), 4 tables of 10000 rows,
#             8 threads for 30 s: no error sysbench does not retry (it
#             retries deadlocks, serialization failures and unique
#             violations, which PostgreSQL 15 has under this load too),
#             every table keeps its row count
#   python    psycopg2_check.py (LISTEN/NOTIFY, enums and domains too);
#             psycopg3_check.py (named server-side
#             cursors, COPY, pipeline, prepared statements, regclass
#             parameters); sqlalchemy_check.py on psycopg2 and on psycopg 3
#             (Core, ORM, reflection, Alembic autogenerate); asyncpg_check.py
#             (asyncpg: errors while preparing, prepared statements,
#             executemany, COPY, cursors, a pool, SQLAlchemy 2's async
#             engine reflecting a table and its ORM on an AsyncSession); django_check.py (Django 5 on
#             psycopg 3: migrate, ORM, QuerySet.iterator(), transactions,
#             inspectdb)
#   jdbc      test/compat/jdbc/JdbcCheck.java with pgjdbc (mvn fetches it):
#             queries, errors, prepared batches, arrays, and what
#             DatabaseMetaData's getTables, getColumns, getSchemas,
#             getPrimaryKeys, getIndexInfo, getImportedKeys,
#             getExportedKeys, getSQLKeywords and getTypeInfo return, and
#             what catalog queries of DBeaver's kind find;
#             test/compat/hibernate/HibernateCheck.java with Hibernate ORM
#             (Maven resolves it): schema creation, validation, CRUD, HQL
#   go        test/compat/gocheck (its own Go module): pgx (binary
#             parameters and results, batches, CopyFrom, transactions,
#             errors, a pool) and GORM (AutoMigrate, CRUD, soft delete,
#             Preload, transactions)
#   node      node_pg_check.js with node-postgres and pg-cursor (npm):
#             parameters and types, prepared statements, transactions,
#             errors, a cursor, a pool
#   pg_dump   a full dump of dump_schema.sql's database (two schemas,
#             tables of most types, serial, identity and stored generated
#             columns, sequences, indexes (partial, expression, INCLUDE),
#             constraints (ON DELETE CASCADE, named CHECK), views,
#             enum types (labels added later, enum arrays, a type in the
#             second schema), domains (NOT NULL, DEFAULT, CHECKs), SQL
#             functions (string, RETURN and BEGIN ATOMIC bodies, overloads,
#             RETURNS TABLE), comments, an extension (pgcrypto, with a
#             comment, and a gen_random_uuid default), GIN indexes, GRANTs
#             to PUBLIC, views WITH LOCAL and CASCADED CHECK OPTION,
#             rows) restores with
#             psql -v ON_ERROR_STOP=1 into a fresh Cairn database and into
#             PostgreSQL 15 (scripts/pg15.sh), and fingerprint.sql reads the
#             same definitions, rows and sequence positions from all three;
#             and the same database made in PostgreSQL 15, dumped there and
#             restored into Cairn, reads the same as its source
#   ui        test/e2e/admin_ui.sh on a node of its own (port + 100): headless
#             Chromium (Debian's chromium, installed if missing) renders the
#             admin UI's overview, a colocated database's page and the
#             tablets page; their DOMs must show the node row, the tables and
#             the shared tablet, and each screenshot must be a real PNG of a
#             rendered page (kept in CAIRN_COMPAT_UI_OUT, default
#             /tmp/cairn-compat-ui)
#   audit     every test audit.txt names for an item of issue 20's list
#             (go tests of sql/session, pgwire and sql/pgcatalog, logic
#             test files, and the client checks above): one checklist row
#             per item, pass only if all its tests passed
#   (a full run, without CAIRN_COMPAT_ONLY, writes docs/compatibility.md:
#   one row per client and version, what was checked, pass or FAIL, then
#   the audit's checklist)
#
# `test/compat/run.sh --regen` rewrites psql.expected from a throwaway
# PostgreSQL 15 (scripts/pg15.sh) instead. Installs what it needs, so that
# a fresh Debian machine with Go runs it: Debian's postgresql-client,
# postgresql-15 (scripts/pg15.sh), sysbench, python3-venv, a JDK and
# Maven, nodejs and npm, and chromium (test/e2e/admin_ui.sh) when their
# commands are missing (as root; otherwise it names the package to
# install); a Python virtualenv with psycopg2-binary, psycopg 3, asyncpg,
# SQLAlchemy 2.x (with its asyncio extra), Alembic and Django 5 from PyPI;
# pgjdbc and Hibernate through mvn from Maven Central; pgx and GORM
# through the Go module proxy; node-postgres through npm.
#
# CAIRN_COMPAT_PORT (default 30700; +1 and +2 are taken too),
# CAIRN_COMPAT_PG_PORT (default 30720: --regen and pg_dump), CAIRN_COMPAT_VENV,
# CAIRN_COMPAT_PGBENCH_SECONDS (default 30) and CAIRN_COMPAT_ONLY (a space
# separated subset of "psql pgbench sysbench python jdbc go node pg_dump
# ui audit"),
# CAIRN_COMPAT_SYSBENCH_SECONDS (default 30),
# CAIRN_COMPAT_PGJDBC (the pgjdbc versions, default "42.7.4 42.5.6") and
# CAIRN_COMPAT_M2 (the Maven local repository, default ~/.m2/repository)
# adjust a run.
set -uo pipefail
cd "$(dirname "$0")/../.."
. test/compat/lib.sh

# need CMD PKG... makes sure CMD is on the PATH: when it is missing and we
# run as root (a fresh machine, CI), Debian's PKGs are installed; otherwise
# it says what to install. It fails if CMD is still missing.
apt_updated=
need() {
  local cmd=$1
  shift
  command -v "$cmd" >/dev/null && return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "compat: installing $* (for $cmd)"
    if [ -z "$apt_updated" ]; then apt-get update -qq >/dev/null && apt_updated=1; fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
  fi
  command -v "$cmd" >/dev/null && return 0
  echo "compat: $cmd is required: apt-get install $*" >&2
  return 1
}

need psql postgresql-client && need pgbench postgresql-client && need pg_dump postgresql-client || exit 1

work=$(mktemp -d /tmp/cairn-compat.XXXXXX)

# psql_script URL runs psql.sql the way both the check and --regen do. The
# script creates and drops everything it uses, in the database it is given.
psql_script() {
  (cd test/compat && psql -X -q "$1" -f psql.sql 2>&1)
}

if [ "${1:-}" = --regen ]; then
  pgport=${CAIRN_COMPAT_PG_PORT:-30720}
  pgdir=$work/pg15
  chmod 755 "$work" # as root, the server runs as the postgres user
  pgurl=$(scripts/pg15.sh start "$pgdir" "$pgport") || exit 1
  trap 'scripts/pg15.sh stop "$pgdir" "$pgport"; rm -rf "$work"' EXIT
  # Cairn has no procedural languages: without plpgsql, \dx lists the same
  # (no) extensions on both.
  psql -X -q "$pgurl" -c 'DROP EXTENSION plpgsql' || exit 1
  psql_script "$pgurl" >test/compat/psql.expected
  echo "wrote test/compat/psql.expected from $(psql -X -qtA "$pgurl" -c 'SELECT version()')"
  exit 0
fi

only=${CAIRN_COMPAT_ONLY:-psql pgbench sysbench python jdbc go node pg_dump ui audit}
want() { [[ " $only " == *" $1 "* ]]; }
failed=()
fail() {
  echo "FAIL: $*"
  failed+=("$1")
}
# row KEY CLIENT VERSION CHECKED records a row of docs/compatibility.md:
# it passed unless fail was called with KEY.
rows=()
checklist=() # the audit's rows: ITEM|TESTS|RESULT
row() { rows+=("$1|$2|$3|$4"); }

port=${CAIRN_COMPAT_PORT:-30700}
trap 'cairn_stop' EXIT
cairn_build "$work/cairn" || exit 1
cairn_start "$work/cairn" "$work/node" "$port" || exit 1
url="postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
echo "compat: work directory $work"

if want psql; then
  echo "== psql"
  psql_script "$url" >"$work/psql.out"
  if diff -u <(sed -f test/compat/normalize.sed test/compat/psql.expected) \
    <(sed -f test/compat/normalize.sed "$work/psql.out") >"$work/psql.diff"; then
    echo "psql: output matches PostgreSQL 15's ($(wc -l <test/compat/psql.expected) lines)"
  else
    cat "$work/psql.diff"
    fail psql "output differs from PostgreSQL 15's (- expected, + Cairn)"
  fi
  row psql psql "$(psql --version | awk '{print $3}')" "psql.sql: the \\d family (+ forms), \\df, \\df+ and \\sf of SQL functions, \\copy, transactions, errors; output equal to PostgreSQL 15's"
fi

if want pgbench; then
  echo "== pgbench"
  secs=${CAIRN_COMPAT_PGBENCH_SECONDS:-30}
  if ! pgbench -q -i -s 10 "$url" >"$work/pgbench-init.out" 2>&1; then
    cat "$work/pgbench-init.out"
    fail pgbench "pgbench -i -s 10 failed"
  else
    echo "pgbench -i -s 10: $(grep '^done in' "$work/pgbench-init.out")"
    for mode in simple prepared; do
      out=$(pgbench -n -T "$secs" -c 8 -j 2 -M "$mode" "$url" 2>&1)
      rc=$?
      echo "$out" >"$work/pgbench-$mode.out"
      processed=$(echo "$out" | sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p')
      if [ $rc -ne 0 ] || ! echo "$out" | grep -qx 'number of failed transactions: 0 (0.000%)' ||
        [ "${processed:-0}" -eq 0 ]; then
        echo "$out" | grep -v '^pgbench: error: client .* script .* aborted in command' | tail -25
        fail pgbench "-M $mode: exit $rc, $(echo "$out" | grep -E '^number of (failed )?transactions' | tr '\n' ' ')"
      else
        echo "pgbench -M $mode: $processed transactions, 0 failed, $(echo "$out" | grep '^tps')"
      fi
    done
    # TPC-B keeps the sum of balances equal across the three tables and
    # the history, however many transactions failed.
    bal=$(psql -X -qtA "$url" -c "WITH h AS (SELECT coalesce(sum(delta), 0) AS d FROM pgbench_history)
      SELECT (SELECT sum(abalance) FROM pgbench_accounts) = h.d
         AND (SELECT sum(bbalance) FROM pgbench_branches) = h.d
         AND (SELECT sum(tbalance) FROM pgbench_tellers) = h.d FROM h" 2>&1)
    if [ "$bal" = t ]; then
      echo "pgbench: balances add up"
    else
      fail pgbench "balances do not add up: $bal"
    fi
  fi
  row pgbench pgbench "$(pgbench --version | awk '{print $3}')" "-i -s 10, then -T $secs -c 8 in the simple and prepared protocols: 0 failed, balances add up"
fi

if want sysbench; then
  echo "== sysbench"
  # oltp_read_write (point and range selects, sums, ORDER BY, DISTINCT,
  # index and non-index UPDATEs, DELETE then INSERT of the same id, in
  # BEGIN/COMMIT) with prepared statements. Any error sysbench does not
  # retry ends the run with a non-zero exit. It retries deadlocks (40P01),
  # serialization failures (40001) and unique violations (23505, two
  # transactions re-inserting the same deleted id) and counts them as
  # ignored errors; PostgreSQL 15 has them too under this load (31 in
  # 20885 transactions in one run here), so they are reported, not
  # failed. Each table must keep its row count (every transaction deletes
  # one row and inserts it back).
  need sysbench sysbench || fail sysbench "sysbench is missing"
  secs=${CAIRN_COMPAT_SYSBENCH_SECONDS:-30}
  sb=(--db-driver=pgsql --pgsql-host=127.0.0.1 --pgsql-port="$port" --pgsql-user=postgres --pgsql-password=
    --pgsql-db=postgres --tables=4 --table-size=10000)
  if ! sysbench oltp_read_write "${sb[@]}" prepare >"$work/sysbench-prepare.out" 2>&1; then
    tail -20 "$work/sysbench-prepare.out"
    fail sysbench "sysbench oltp_read_write prepare failed"
  else
    out=$(sysbench oltp_read_write "${sb[@]}" --threads=8 --time="$secs" run 2>&1)
    rc=$?
    echo "$out" >"$work/sysbench-run.out"
    txns=$(echo "$out" | sed -n 's/^ *transactions: *\([0-9]*\).*/\1/p')
    ignored=$(echo "$out" | sed -n 's/^ *ignored errors: *\([0-9]*\).*/\1/p')
    counts=$(psql -X -qtA "$url" -c 'SELECT (SELECT count(*) FROM sbtest1), (SELECT count(*) FROM sbtest2),
      (SELECT count(*) FROM sbtest3), (SELECT count(*) FROM sbtest4)' 2>&1)
    if [ $rc -ne 0 ] || [ "${txns:-0}" -eq 0 ] || [ "$counts" != "10000|10000|10000|10000" ]; then
      echo "$out" | tail -30
      fail sysbench "oltp_read_write: exit $rc, ${txns:-no} transactions, ${ignored:-unknown} ignored errors, row counts $counts"
    else
      echo "sysbench oltp_read_write: $txns transactions, no error, $ignored retried (deadlock, serialization or unique violation), $(echo "$out" | sed -n 's/^ *queries: *[0-9]* *(\(.*\)).*/\1/p'), row counts kept"
    fi
    sysbench oltp_read_write "${sb[@]}" cleanup >/dev/null 2>&1
  fi
  row sysbench sysbench "$(sysbench --version | awk '{print $2}')" "oltp_read_write, 4 tables of 10000 rows, 8 threads for ${secs} s: no error (sysbench retries deadlocks, serialization failures, unique violations, as with PostgreSQL), row counts kept"
fi

if want python; then
  echo "== python"
  venv=${CAIRN_COMPAT_VENV:-/tmp/cairn-compat-venv}
  need python3 python3 python3-venv
  # Debian's python3 makes a virtualenv only with python3-venv (ensurepip).
  if ! python3 -c 'import ensurepip' 2>/dev/null && [ "$(id -u)" = 0 ]; then
    echo "compat: installing python3-venv"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
  fi
  if [ ! -x "$venv/bin/python" ]; then rm -rf "$venv" && python3 -m venv "$venv"; fi
  "$venv/bin/python" -c 'import psycopg2, psycopg, asyncpg, greenlet, alembic, sqlalchemy, django; assert sqlalchemy.__version__ >= "2"; assert django.VERSION[0] == 5' 2>/dev/null ||
    "$venv/bin/pip" install -q psycopg2-binary 'psycopg[binary]>=3' asyncpg 'SQLAlchemy[asyncio]>=2,<3' alembic 'Django>=5,<6'
  pyver() { "$venv/bin/python" -c 'import importlib.metadata, sys; print(importlib.metadata.version(sys.argv[1]))' "$1"; }
  "$venv/bin/python" test/compat/psycopg2_check.py "$url" || fail psycopg2 "psycopg2_check.py"
  row psycopg2 psycopg2 "$(pyver psycopg2-binary)" "psycopg2_check.py: types, errors, COPY, named cursors, transactions, LISTEN/NOTIFY (select and poll), enum and domain columns"
  "$venv/bin/python" test/compat/psycopg3_check.py "$url" || fail psycopg3 "psycopg3_check.py"
  row psycopg3 "psycopg 3" "$(pyver psycopg)" "psycopg3_check.py: named server-side cursors, COPY both ways, pipeline, prepared statements, regclass parameters"
  for driver in psycopg2 psycopg; do
    "$venv/bin/python" test/compat/sqlalchemy_check.py "$url" $driver || fail "sqlalchemy-$driver" "sqlalchemy_check.py $driver"
    row "sqlalchemy-$driver" "SQLAlchemy on $driver, Alembic $(pyver alembic)" "$(pyver SQLAlchemy)" \
      "sqlalchemy_check.py: Core, ORM, inspect() and MetaData.reflect, Alembic autogenerate"
  done
  "$venv/bin/python" test/compat/django_check.py "$url" || fail django "django_check.py"
  row django "Django on psycopg $(pyver psycopg)" "$(pyver Django)" \
    "django_check.py: makemigrations, migrate, ORM CRUD, QuerySet.iterator() (WITH HOLD cursors), atomic and savepoints, select_for_update, inspectdb, migrate to zero"
  "$venv/bin/python" test/compat/asyncpg_check.py "$url" || fail asyncpg "asyncpg_check.py"
  row asyncpg "asyncpg (and SQLAlchemy's async engine)" "$(pyver asyncpg)" \
    "asyncpg_check.py: errors while preparing, prepared statements, executemany, COPY, cursors, pool, async reflection and ORM (AsyncSession)"
fi

if want jdbc; then
  echo "== jdbc"
  # java runs the checks from source, which takes a JDK (javac's
  # compiler), not just a JRE; Hibernate 7 needs 17 or later.
  need javac default-jdk-headless && need mvn maven || fail jdbc "a JDK and Maven are missing"
  # pgjdbc from Maven Central into the local repository, in each version
  # of CAIRN_COMPAT_PGJDBC: the current one, and 42.5, the one issue 20
  # found DatabaseMetaData failing with.
  for jdbcver in ${CAIRN_COMPAT_PGJDBC:-42.7.4 42.5.6}; do
    jar=${CAIRN_COMPAT_M2:-$HOME/.m2/repository}/org/postgresql/postgresql/$jdbcver/postgresql-$jdbcver.jar
    if [ ! -f "$jar" ] && ! mvn -q dependency:get -Dartifact="org.postgresql:postgresql:$jdbcver" >"$work/mvn.out" 2>&1; then
      cat "$work/mvn.out"
      fail "jdbc-$jdbcver" "fetching pgjdbc $jdbcver with mvn failed"
    else
      echo "jdbc: pgjdbc $jdbcver"
      java -cp "$jar" test/compat/jdbc/JdbcCheck.java "jdbc:postgresql://127.0.0.1:$port/postgres?sslmode=disable" ||
        fail "jdbc-$jdbcver" "JdbcCheck.java (pgjdbc $jdbcver)"
    fi
    row "jdbc-$jdbcver" pgjdbc "$jdbcver" "JdbcCheck.java: queries, errors, batches, arrays; DatabaseMetaData getTables, getColumns, getSchemas, getPrimaryKeys, getIndexInfo, getImported/ExportedKeys, getSQLKeywords, getTypeInfo with their content; DBeaver-style catalog queries"
  done
  # Hibernate ORM (and its pgjdbc) from Maven Central: pom.xml only
  # resolves the classpath; java runs HibernateCheck.java from source.
  hib=test/compat/hibernate
  if mvn -q -f "$hib/pom.xml" dependency:build-classpath -Dmdep.outputFile="$work/hibernate.cp" >"$work/mvn-hibernate.out" 2>&1; then
    java -cp "$(cat "$work/hibernate.cp")" "$hib/HibernateCheck.java" "jdbc:postgresql://127.0.0.1:$port/postgres?sslmode=disable" \
      >"$work/hibernate.out" 2>&1
    rc=$?
    grep '^hibernate:' "$work/hibernate.out"
    if [ $rc -ne 0 ]; then
      tail -40 "$work/hibernate.out"
      fail hibernate "HibernateCheck.java"
    fi
  else
    cat "$work/mvn-hibernate.out"
    fail hibernate "resolving Hibernate with mvn failed"
  fi
  row hibernate "Hibernate ORM (pgjdbc)" "$(sed -n 's:.*<hibernate.version>\(.*\)</hibernate.version>.*:\1:p' "$hib/pom.xml")" \
    "HibernateCheck.java: hbm2ddl create, hbm2ddl validate (and its failure on a missing column), CRUD, HQL, constraint errors"
fi

if want go; then
  echo "== go"
  # pgx and GORM from the Go module proxy, in a module of their own
  # (test/compat/gocheck), so GORM stays out of Cairn's go.mod.
  if (cd test/compat/gocheck && go build -o "$work/gocheck" .) >"$work/gocheck-build.out" 2>&1; then
    gomod() { (cd test/compat/gocheck && go list -m -f '{{.Version}}' "$1"); }
    "$work/gocheck" pgx "$url" || fail pgx "gocheck pgx"
    row pgx pgx "$(gomod github.com/jackc/pgx/v5)" "gocheck pgx: binary parameters and results (numeric, timestamptz, arrays, jsonb, uuid), batch, CopyFrom, transactions, errors, pool"
    "$work/gocheck" gorm "$url" || fail gorm "gocheck gorm"
    row gorm "GORM (driver/postgres $(gomod gorm.io/driver/postgres))" "$(gomod gorm.io/gorm)" \
      "gocheck gorm: AutoMigrate (tables, indexes, foreign key, an added column), CRUD, soft delete, Preload, transactions"
  else
    cat "$work/gocheck-build.out"
    fail pgx "building test/compat/gocheck failed"
    fail gorm "building test/compat/gocheck failed"
    row pgx pgx "" "gocheck pgx"
    row gorm GORM "" "gocheck gorm"
  fi
fi

if want node; then
  echo "== node"
  # node-postgres (pg, with pg-cursor) from npm into the work directory.
  need node nodejs && need npm npm || fail node-postgres "node and npm are missing"
  if (cd "$work" && npm init -y >/dev/null && npm install --no-audit --no-fund -s pg pg-cursor) >"$work/npm.out" 2>&1; then
    NODE_PATH="$work/node_modules" node test/compat/node_pg_check.js "$url" || fail node-postgres "node_pg_check.js"
    nodever=$(node -p "require('$work/node_modules/pg/package.json').version")
  else
    cat "$work/npm.out"
    fail node-postgres "npm install pg pg-cursor failed"
    nodever=
  fi
  row node-postgres "node-postgres (node $(node --version))" "$nodever" \
    "node_pg_check.js: parameters and types, prepared statements, transactions, errors, pg-cursor, pool"
fi

if want pg_dump; then
  echo "== pg_dump"
  # dump_schema.sql in its own database, dumped whole (schema and data) and
  # restored into a fresh Cairn database and into PostgreSQL 15;
  # fingerprint.sql must then read the same from all three.
  base="postgres://postgres@127.0.0.1:$port"
  src="$base/dumpsrc?sslmode=disable"
  psql -X -q "$url" -c 'CREATE DATABASE dumpsrc' -c 'CREATE DATABASE dumpcairn' >"$work/dump-schema.out" 2>&1 &&
    psql -X -q "$src" -v ON_ERROR_STOP=1 -f test/compat/dump_schema.sql >>"$work/dump-schema.out" 2>&1 ||
    { cat "$work/dump-schema.out"; fail pg_dump "creating the database to dump failed"; }
  if pg_dump "$src" >"$work/dump.sql" 2>"$work/dump.err"; then
    for obj in 'CREATE TABLE public.dump_parent' 'CREATE TABLE public.dump_child' 'CREATE TABLE dump_extra.audit' \
      'CREATE INDEX dump_child_note_idx' 'ADD CONSTRAINT dump_child_parent_id_fkey' 'CREATE VIEW public.dump_view' \
      'COPY public.dump_child (id, parent_id, qty, note) FROM stdin;' "SELECT pg_catalog.setval('public.dump_ticket', 1250, true);" \
      'CREATE EXTENSION IF NOT EXISTS pgcrypto WITH SCHEMA public;' "COMMENT ON EXTENSION pgcrypto IS 'digests and random uuids';" \
      'CREATE INDEX docs_body_idx ON public.docs USING gin (body);' 'GRANT SELECT ON TABLE public.docs TO PUBLIC;'; do
      grep -qF "$obj" "$work/dump.sql" || fail pg_dump "the dump has no \"$obj\""
    done
    echo "pg_dump: $(grep -c '^CREATE' "$work/dump.sql") CREATE statements, $(grep -c '^COPY' "$work/dump.sql") COPYs"
    fingerprint() { psql -X -qAt -v ON_ERROR_STOP=1 "$1" -f test/compat/fingerprint.sql >"$2" 2>&1; }
    fingerprint "$src" "$work/fp-source" || { cat "$work/fp-source"; fail pg_dump "fingerprint.sql failed on the source"; }
    # Into Cairn.
    dst="$base/dumpcairn?sslmode=disable"
    if psql -X -q -v ON_ERROR_STOP=1 "$dst" -f "$work/dump.sql" >"$work/restore-cairn.out" 2>&1; then
      fingerprint "$dst" "$work/fp-cairn"
      if diff -u "$work/fp-source" "$work/fp-cairn" >"$work/fp-cairn.diff"; then
        echo "pg_dump: restored into Cairn, $(wc -l <"$work/fp-source") fingerprint lines match"
      else
        cat "$work/fp-cairn.diff"
        fail pg_dump "the copy restored into Cairn differs (- source, + copy)"
      fi
    else
      tail -20 "$work/restore-cairn.out"
      fail pg_dump "restoring the dump into Cairn failed"
    fi
    # Into PostgreSQL 15.
    pgport=${CAIRN_COMPAT_PG_PORT:-30720}
    chmod 755 "$work" # as root, the server runs as the postgres user
    if pgurl=$(scripts/pg15.sh start "$work/pg15" "$pgport"); then
      pgdst="postgres://postgres@127.0.0.1:$pgport/dumppg?sslmode=disable"
      if psql -X -q "$pgurl" -c 'CREATE DATABASE dumppg' >"$work/restore-pg.out" 2>&1 &&
        psql -X -q -v ON_ERROR_STOP=1 "$pgdst" -f "$work/dump.sql" >>"$work/restore-pg.out" 2>&1; then
        fingerprint "$pgdst" "$work/fp-pg"
        if diff -u "$work/fp-source" "$work/fp-pg" >"$work/fp-pg.diff"; then
          echo "pg_dump: restored into $(psql -X -qtA "$pgurl" -c 'SHOW server_version'), fingerprints match"
        else
          cat "$work/fp-pg.diff"
          fail pg_dump "the copy restored into PostgreSQL 15 differs (- source, + copy)"
        fi
      else
        tail -20 "$work/restore-pg.out"
        fail pg_dump "restoring the dump into PostgreSQL 15 failed"
      fi
      # The other way: dump_schema.sql made in PostgreSQL 15, dumped by
      # pg_dump there and restored into Cairn, reads the same as the source.
      pgsrc="postgres://postgres@127.0.0.1:$pgport/pgsrc?sslmode=disable"
      cairnfrompg="$base/dumpfrompg?sslmode=disable"
      if psql -X -q "$pgurl" -c 'CREATE DATABASE pgsrc' >"$work/pg-src.out" 2>&1 &&
        psql -X -q "$pgsrc" -v ON_ERROR_STOP=1 -f test/compat/dump_schema.sql >>"$work/pg-src.out" 2>&1 &&
        pg_dump "$pgsrc" >"$work/dump-pg.sql" 2>>"$work/pg-src.out" &&
        fingerprint "$pgsrc" "$work/fp-pgsrc" &&
        psql -X -q "$url" -c 'CREATE DATABASE dumpfrompg' >>"$work/pg-src.out" 2>&1 &&
        psql -X -q -v ON_ERROR_STOP=1 "$cairnfrompg" -f "$work/dump-pg.sql" >>"$work/pg-src.out" 2>&1; then
        fingerprint "$cairnfrompg" "$work/fp-cairnfrompg"
        if diff -u "$work/fp-pgsrc" "$work/fp-cairnfrompg" >"$work/fp-frompg.diff"; then
          echo "pg_dump: PostgreSQL 15's dump of the same database restored into Cairn, fingerprints match"
        else
          cat "$work/fp-frompg.diff"
          fail pg_dump "PostgreSQL 15's dump restored into Cairn differs (- PostgreSQL, + Cairn)"
        fi
      else
        tail -20 "$work/pg-src.out"
        fail pg_dump "restoring PostgreSQL 15's dump into Cairn failed"
      fi
      scripts/pg15.sh stop "$work/pg15" "$pgport"
    else
      fail pg_dump "could not start PostgreSQL 15 to restore into"
    fi
  else
    cat "$work/dump.err"
    fail pg_dump "pg_dump failed"
  fi
fi

if want pg_dump; then
  row pg_dump pg_dump "$(pg_dump --version | awk '{print $3}')" "dump_schema.sql (two schemas, most column types, identity and generated columns, sequences, indexes (partial, expression, INCLUDE, GIN), constraints, views with check options, enums, domains, SQL functions, an extension, comments, grants) dumped from Cairn restored into Cairn and PostgreSQL 15, and PostgreSQL 15's dump restored into Cairn: same definitions, SQL functions (and their results), rows, sequences"
fi

if want ui; then
  echo "== ui"
  CAIRN_E2E_PORT=$((port + 100)) test/e2e/admin_ui.sh "${CAIRN_COMPAT_UI_OUT:-/tmp/cairn-compat-ui}" ||
    fail ui "the admin UI did not render in Chromium as it must (test/e2e/admin_ui.sh)"
  row ui "Chromium (admin UI)" "$(chromium --version 2>/dev/null | awk '{print $2}')" "test/e2e/admin_ui.sh: the admin UI's pages render"
fi

if want audit; then
  echo "== audit"
  # audit.txt: ITEM | TEST; TEST; ... Each go package's tests run in one
  # go test, the logic files in one TestLogic; a compat KEY is the result
  # of that client's check above (not run when CAIRN_COMPAT_ONLY left it
  # out). Each item's result is pass only if every one of its tests passed.
  declare -A gotests=() logicfiles=()
  while IFS= read -r line; do
    [[ -z "$line" || "$line" == \#* ]] && continue
    IFS=';' read -ra tests <<<"${line#*|}"
    for t in "${tests[@]}"; do
      read -r kind a b <<<"$t"
      case $kind in
      go) gotests[$a]+="${b%%/*}|" ;;
      logic) logicfiles[$a]=1 ;;
      compat) ;;
      *) fail audit "audit.txt: unknown test kind in \"$t\"" ;;
      esac
    done
  done <test/compat/audit.txt
  # result KIND A B prints pass, FAIL or "not run" for one test.
  result() {
    case $1 in
    go) grep -qE -- "--- PASS: $3 \(" "$work/audit-${2//\//_}.out" && echo pass || echo FAIL ;;
    logic) grep -qE -- "--- PASS: TestLogic/$2 \(" "$work/audit-logic.out" && echo pass || echo FAIL ;;
    compat)
      # KEY stands for KEY-anything too (jdbc: each pgjdbc version's row).
      if ! printf '%s\n' "${rows[@]}" | grep -qE -- "^$2(-[^|]*)?\|"; then
        echo "not run"
      elif printf '%s\n' "${failed[@]}" | grep -qxE -- "$2(-.*)?"; then
        echo FAIL
      else
        echo pass
      fi
      ;;
    esac
  }
  for pkg in "${!gotests[@]}"; do
    go test -count=1 -v "./$pkg" -run "^($(echo "${gotests[$pkg]%|}" | tr '|' '\n' | sort -u | paste -sd'|'))\$" \
      >"$work/audit-${pkg//\//_}.out" 2>&1
  done
  files=$(printf '%s\n' "${!logicfiles[@]}" | sort | paste -sd'|')
  go test -count=1 -v ./test/logic -run '^TestLogic$' -file "^($files)\$" >"$work/audit-logic.out" 2>&1
  checklist=()
  while IFS= read -r line; do
    [[ -z "$line" || "$line" == \#* ]] && continue
    item=${line%% | *}
    shown=()
    verdict=pass
    IFS=';' read -ra tests <<<"${line#*|}"
    for t in "${tests[@]}"; do
      read -r kind a b <<<"$t"
      r=$(result "$kind" "$a" "$b")
      case $r in
      FAIL)
        verdict=FAIL
        fail audit "$item: $kind $a $b"
        ;;
      "not run") [ "$verdict" = pass ] && verdict="not run" ;;
      esac
      if [ "$r" = pass ]; then r=; fi
      shown+=("\`$kind $a${b:+ $b}\`${r:+ ($r)}")
    done
    checklist+=("$item|$(printf '%s; ' "${shown[@]}" | sed 's/; $//')|$verdict")
    echo "audit: $verdict: $item"
  done <test/compat/audit.txt
fi

# A full run (no CAIRN_COMPAT_ONLY) writes docs/compatibility.md.
if [ -z "${CAIRN_COMPAT_ONLY:-}" ]; then
  {
    echo "# Compatibility"
    echo
    echo "Written by \`make compat\` (test/compat/run.sh): each client, installed from its"
    echo "package registry, against a single Cairn node. docs/sql.md says what each check"
    echo "covers and what is known not to work."
    echo
    echo "| client | version | checked | result |"
    echo "|---|---|---|---|"
    for r in "${rows[@]}"; do
      key=${r%%|*} result=pass
      for f in "${failed[@]}"; do if [ "$f" = "$key" ]; then result=FAIL; fi; done
      rest=${r#*|}
      echo "| ${rest//|/ | } | $result |"
    done
    echo
    echo "## Issue 20, item by item"
    echo
    echo "Each item of issue 20's list of what broke, with the tests that show it"
    echo "works (test/compat/audit.txt), as this run found them: \`go PKG TEST\` is a"
    echo "Go test, \`logic FILE\` a file of test/logic/testdata run against Cairn"
    echo "(and checked against PostgreSQL 15 by \`make logic-pg\`), \`compat KEY\` the"
    echo "client check of the table above."
    echo
    echo "| item | shown by | result |"
    echo "|---|---|---|"
    for c in "${checklist[@]}"; do
      echo "| ${c//|/ | } |"
    done
  } >docs/compatibility.md
  echo "compat: wrote docs/compatibility.md"
fi

if [ ${#failed[@]} -gt 0 ]; then
  echo "compat: FAILED: ${failed[*]} (logs in $work)"
  exit 1
fi
echo "compat: ok"
rm -rf "$work"
