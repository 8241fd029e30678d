"""A psycopg2 client against Cairn: the calls an application makes first.

Run by test/compat/run.sh with the connection URL as its argument. Each
check runs on its own; every failure is printed and the script exits 1 if
any failed. The same script passes against PostgreSQL 15.
"""
import datetime
import decimal
import io
import select
import sys
import time
import traceback
import uuid

import psycopg2
import psycopg2.errors
import psycopg2.extensions
import psycopg2.extras

url = sys.argv[1]
psycopg2.extras.register_uuid()
failures = []


def check(fn):
    """Runs one check on a fresh connection; records its failure."""
    conn = psycopg2.connect(url)
    try:
        fn(conn)
        print("psycopg2: %s ok" % fn.__name__)
    except Exception:
        failures.append(fn.__name__)
        print("psycopg2: %s FAILED" % fn.__name__)
        traceback.print_exc()
    finally:
        conn.close()


def setup():
    conn = psycopg2.connect(url)
    conn.autocommit = True
    cur = conn.cursor()
    cur.execute("DROP TABLE IF EXISTS py_items, py_copy, py_types")
    cur.execute("""CREATE TABLE py_items (
        id bigserial PRIMARY KEY,
        sku uuid NOT NULL UNIQUE,
        price numeric(10,2) NOT NULL CHECK (price >= 0),
        tags text[],
        seen date,
        attrs jsonb)""")
    conn.close()


setup()


@check
def server_version(conn):
    cur = conn.cursor()
    cur.execute("SELECT version()")
    assert "PostgreSQL 15" in cur.fetchone()[0]
    assert conn.server_version >= 150000, conn.server_version
    assert conn.encoding == "UTF8", conn.encoding


@check
def types_round_trip(conn):
    cur = conn.cursor()
    cur.execute("""CREATE TABLE py_types (
        i2 smallint, i4 int, i8 bigint, f8 double precision, n numeric, n2 numeric(12,4),
        b boolean, t text, vc varchar(20), by bytea, d date, ts timestamp, tstz timestamptz,
        iv interval, u uuid, j jsonb, ia int[], ta text[], na numeric[], tm time)""")
    tz = datetime.timezone(datetime.timedelta(hours=5, minutes=30))
    vals = (
        -32768, 2147483647, -9223372036854775808, 1.5e-300,
        decimal.Decimal("-12345678901234567890.123456789"), decimal.Decimal("3.1416"),
        True, "héllo 'quoted' \\ ünïcode ✓", "short", b"\x00\xffbin",
        datetime.date(1999, 12, 31), datetime.datetime(2026, 2, 3, 4, 5, 6, 789000),
        datetime.datetime(2026, 2, 3, 4, 5, 6, 123456, tzinfo=tz),
        datetime.timedelta(days=3, hours=4, seconds=5), uuid.UUID("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"),
        psycopg2.extras.Json({"a": [1, 2.5, None, True], "b": {"c": "d"}}),
        [1, None, 3], ["x", "y z", "", None], [decimal.Decimal("1.10"), decimal.Decimal("-2")],
        datetime.time(23, 59, 58, 1000),
    )
    cur.execute("INSERT INTO py_types VALUES (%s)" % ", ".join(["%s"] * len(vals)), vals)
    cur.execute("SELECT * FROM py_types")
    got = cur.fetchone()
    want = list(vals)
    want[9] = b"\x00\xffbin"
    want[15] = {"a": [1, 2.5, None, True], "b": {"c": "d"}}
    for i, (g, w) in enumerate(zip(got, want)):
        if isinstance(g, memoryview):
            g = g.tobytes()
        assert g == w, "column %s: got %r want %r" % (cur.description[i].name, g, w)
    # timestamptz comes back in the session's time zone, the same instant.
    cur.execute("SET TIME ZONE 'America/New_York'")
    cur.execute("SELECT tstz, tstz::text FROM py_types")
    inst, text = cur.fetchone()
    assert inst == vals[12], inst
    assert text == "2026-02-02 17:35:06.123456-05", text
    # NULLs of every type, and type OIDs in the description.
    cur.execute("SELECT NULL::int, NULL::jsonb, NULL::uuid, NULL::numeric, NULL::int[]")
    assert cur.fetchone() == (None,) * 5
    assert [c.type_code for c in cur.description] == [23, 3802, 2950, 1700, 1007], cur.description
    conn.rollback()


@check
def executemany_and_constraints(conn):
    cur = conn.cursor()
    rows = [(uuid.uuid4(), decimal.Decimal("9.99"), ["a", "b"], datetime.date(2026, 1, 2),
             psycopg2.extras.Json({"k": 1})),
            (uuid.uuid4(), decimal.Decimal("0.50"), [], None, None)]
    cur.executemany("INSERT INTO py_items (sku, price, tags, seen, attrs) VALUES (%s, %s, %s, %s, %s)", rows)
    assert cur.rowcount == 2, cur.rowcount  # the sum over the statements
    conn.commit()
    cur.execute("SELECT sku, price, tags, seen, attrs FROM py_items ORDER BY id")
    got = cur.fetchall()
    assert got[0] == (rows[0][0], decimal.Decimal("9.99"), ["a", "b"], datetime.date(2026, 1, 2), {"k": 1}), got
    assert got[1] == (rows[1][0], decimal.Decimal("0.50"), [], None, None), got
    psycopg2.extras.execute_values(cur, "INSERT INTO py_items (sku, price) VALUES %s RETURNING id",
                                   [(uuid.uuid4(), i) for i in range(3)])
    assert len(cur.fetchall()) == 3
    conn.rollback()

    # Errors arrive with their SQLSTATE, message and detail.
    try:
        cur.execute("INSERT INTO py_items (sku, price) VALUES (%s, %s)", (rows[0][0], 1))
        raise AssertionError("duplicate accepted")
    except psycopg2.errors.UniqueViolation as e:
        assert e.pgcode == "23505", e.pgcode
        assert e.diag.message_primary == 'duplicate key value violates unique constraint "py_items_sku_key"', e.diag.message_primary
        assert e.diag.message_detail == "Key (sku)=(%s) already exists." % rows[0][0], e.diag.message_detail
        d = e.diag
        assert (d.schema_name, d.table_name, d.constraint_name) == ("public", "py_items", "py_items_sku_key"), \
            (d.schema_name, d.table_name, d.constraint_name)
        conn.rollback()
    try:
        cur.execute("INSERT INTO py_items (sku, price) VALUES (%s, %s)", (uuid.uuid4(), -1))
        raise AssertionError("check violation accepted")
    except psycopg2.errors.CheckViolation as e:
        assert e.pgcode == "23514"
        assert e.diag.constraint_name == "py_items_price_check", e.diag.constraint_name
        conn.rollback()
    try:
        cur.execute("SELECT nosuch FROM py_items")
        raise AssertionError("unknown column accepted")
    except psycopg2.errors.UndefinedColumn as e:
        assert e.diag.statement_position == "8", e.diag.statement_position
        conn.rollback()
    # An error aborts the transaction until ROLLBACK.
    try:
        cur.execute("SELECT 1/0")
    except psycopg2.errors.DivisionByZero:
        pass
    try:
        cur.execute("SELECT 1")
        raise AssertionError("statement ran in an aborted transaction")
    except psycopg2.errors.InFailedSqlTransaction:
        conn.rollback()
    cur.execute("SELECT count(*) FROM py_items")
    assert cur.fetchone()[0] == 2


@check
def named_cursor(conn):
    cur = conn.cursor()
    cur.execute("INSERT INTO py_items (sku, price) SELECT gen_random_uuid(), g FROM generate_series(1, 500) g")
    conn.commit()
    named = conn.cursor(name="big")
    named.itersize = 50
    named.execute("SELECT id, price FROM py_items ORDER BY id")
    first = named.fetchone()
    many = named.fetchmany(10)
    rest = named.fetchall()
    named.close()
    assert 1 + len(many) + len(rest) == 502, (len(many), len(rest))
    ids = [first[0]] + [r[0] for r in many + rest]
    assert ids == sorted(ids)
    # Two named cursors open at once in one transaction.
    a, b = conn.cursor(name="a"), conn.cursor(name="b")
    a.execute("SELECT id FROM py_items ORDER BY id")
    b.execute("SELECT id FROM py_items ORDER BY id DESC")
    assert a.fetchone()[0] == ids[0] and b.fetchone()[0] == ids[-1]
    assert a.fetchone()[0] == ids[1] and b.fetchone()[0] == ids[-2]
    a.close()
    b.close()
    conn.commit()


@check
def copy_expert(conn):
    cur = conn.cursor()
    buf = io.StringIO()
    cur.copy_expert("COPY (SELECT id, price FROM py_items WHERE id <= 2 ORDER BY id) TO STDOUT WITH CSV HEADER", buf)
    lines = buf.getvalue().splitlines()
    assert lines == ["id,price", "1,9.99", "2,0.50"], lines
    cur.execute("CREATE TABLE py_copy (a int, b text, c jsonb)")
    cur.copy_expert("COPY py_copy FROM STDIN WITH CSV", io.StringIO('1,x,"{""k"": 1}"\n2,"y,z",\n'))
    assert cur.rowcount == 2, cur.rowcount
    cur.copy_from(io.StringIO("3\tw\t[]\n4\t\\N\t\\N\n"), "py_copy", columns=("a", "b", "c"))
    out = io.StringIO()
    cur.copy_to(out, "py_copy")
    assert out.getvalue() == '1\tx\t{"k": 1}\n2\ty,z\t\\N\n3\tw\t[]\n4\t\\N\t\\N\n', out.getvalue()
    conn.commit()
    # A bad row fails the whole COPY with its line number.
    try:
        cur.copy_expert("COPY py_copy (a) FROM STDIN", io.StringIO("5\nnope\n"))
        raise AssertionError("bad COPY row accepted")
    except psycopg2.errors.InvalidTextRepresentation as e:
        assert "line 2" in (e.diag.context or ""), e.diag.context
        conn.rollback()
    cur.execute("SELECT count(*) FROM py_copy")
    assert cur.fetchone()[0] == 4


@check
def autocommit_and_transactions(conn):
    cur = conn.cursor()
    # psycopg2 opens a transaction implicitly; rollback undoes it.
    cur.execute("INSERT INTO py_copy VALUES (10, 'rolled back')")
    assert conn.get_transaction_status() == psycopg2.extensions.TRANSACTION_STATUS_INTRANS
    conn.rollback()
    cur.execute("SELECT count(*) FROM py_copy WHERE a = 10")
    assert cur.fetchone()[0] == 0
    conn.rollback()
    # Isolation levels and read-only sessions.
    conn.set_session(isolation_level="REPEATABLE READ", readonly=True)
    cur.execute("SHOW transaction_isolation")
    assert cur.fetchone()[0] == "repeatable read"
    try:
        cur.execute("INSERT INTO py_copy VALUES (11, 'ro')")
        raise AssertionError("read-only transaction wrote")
    except psycopg2.errors.ReadOnlySqlTransaction:
        conn.rollback()
    conn.set_session(isolation_level="SERIALIZABLE", readonly=False)
    cur.execute("SHOW transaction_isolation")
    assert cur.fetchone()[0] == "serializable"
    conn.rollback()
    conn.set_session(isolation_level="DEFAULT", readonly="DEFAULT")
    # Autocommit: each statement commits on its own, visible to others.
    conn.autocommit = True
    cur.execute("SHOW transaction_isolation")
    assert cur.fetchone()[0] == "read committed"
    cur.execute("INSERT INTO py_copy VALUES (12, 'auto')")
    other = psycopg2.connect(url)
    ocur = other.cursor()
    ocur.execute("SELECT b FROM py_copy WHERE a = 12")
    assert ocur.fetchone() == ("auto",)
    other.close()
    # Savepoints inside an explicit block.
    cur.execute("BEGIN")
    cur.execute("INSERT INTO py_copy VALUES (13, 'kept')")
    cur.execute("SAVEPOINT s")
    cur.execute("INSERT INTO py_copy VALUES (14, 'undone')")
    cur.execute("ROLLBACK TO SAVEPOINT s")
    cur.execute("COMMIT")
    cur.execute("SELECT array_agg(a ORDER BY a) FROM py_copy WHERE a >= 12")
    assert cur.fetchone()[0] == [12, 13]
    # The connection as a context manager commits on success.
    conn.autocommit = False
    with conn:
        with conn.cursor() as c:
            c.execute("DELETE FROM py_copy WHERE a >= 12")
    cur.execute("SELECT count(*) FROM py_copy WHERE a >= 12")
    assert cur.fetchone()[0] == 0
    conn.rollback()


@check
def listen_notify(conn):
    # psycopg2's documented loop: LISTEN in autocommit, select() on the
    # connection, poll(), read conn.notifies. One notification from a
    # NOTIFY, one from pg_notify in a transaction block.
    conn.autocommit = True
    conn.cursor().execute("LISTEN py_events")
    other = psycopg2.connect(url)
    other.autocommit = True
    oc = other.cursor()
    oc.execute("NOTIFY py_events, 'one'")
    oc.execute("BEGIN")
    oc.execute("SELECT pg_notify('py_events', 'two')")
    oc.execute("COMMIT")
    got = []
    deadline = time.time() + 10
    while len(got) < 2 and time.time() < deadline:
        if select.select([conn], [], [], 1) != ([], [], []):
            conn.poll()
            while conn.notifies:
                n = conn.notifies.pop(0)
                got.append((n.channel, n.payload, n.pid))
    assert [(c, p) for c, p, _ in got] == [("py_events", "one"), ("py_events", "two")], got
    assert got[0][2] == other.get_backend_pid(), (got, other.get_backend_pid())
    other.close()


@check
def enum_and_domain(conn):
    cur = conn.cursor()
    cur.execute("DROP TABLE IF EXISTS py_moods")
    cur.execute("DROP TYPE IF EXISTS py_mood")
    cur.execute("DROP DOMAIN IF EXISTS py_pos")
    cur.execute("CREATE TYPE py_mood AS ENUM ('sad', 'ok', 'happy')")
    cur.execute("CREATE DOMAIN py_pos AS int CHECK (VALUE > 0)")
    cur.execute("CREATE TABLE py_moods (id py_pos PRIMARY KEY, m py_mood)")
    cur.execute("INSERT INTO py_moods VALUES (%s, %s), (%s, %s)", (1, "happy", 2, "sad"))
    cur.execute("SELECT id, m FROM py_moods WHERE m >= %s ORDER BY m", ("sad",))
    assert cur.fetchall() == [(2, "sad"), (1, "happy")]
    conn.commit()
    try:
        cur.execute("INSERT INTO py_moods VALUES (%s, %s)", (0, "ok"))
        raise AssertionError("the domain's CHECK let 0 in")
    except psycopg2.errors.CheckViolation:
        conn.rollback()
    try:
        cur.execute("INSERT INTO py_moods VALUES (%s, %s)", (3, "angry"))
        raise AssertionError("an unknown label went in")
    except psycopg2.errors.InvalidTextRepresentation:
        conn.rollback()
    cur.execute("DROP TABLE py_moods")
    cur.execute("DROP TYPE py_mood")
    cur.execute("DROP DOMAIN py_pos")
    conn.commit()


@check
def teardown(conn):
    conn.autocommit = True
    conn.cursor().execute("DROP TABLE IF EXISTS py_items, py_copy, py_types")


if failures:
    print("psycopg2: FAILED: " + ", ".join(failures))
    sys.exit(1)
print("psycopg2: ok")
