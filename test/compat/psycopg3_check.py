"""A psycopg 3 client against Cairn: server-side (named) cursors, COPY in
both directions, pipeline mode, prepared statements, typed parameters.

Run by test/compat/run.sh with the connection URL as its argument. Each
check runs on a fresh connection; every failure is printed and the script
exits 1 if any failed. The same script passes against PostgreSQL 15.
"""
import decimal
import sys
import traceback

import psycopg
import psycopg.errors
from psycopg.types.string import TextLoader  # noqa: F401 (the import checks the package is whole)

url = sys.argv[1]
failures = []


def check(fn):
    """Runs one check on a fresh connection; records its failure."""
    try:
        with psycopg.connect(url) as conn:
            fn(conn)
        print("psycopg3: %s ok" % fn.__name__)
    except Exception:
        failures.append(fn.__name__)
        print("psycopg3: %s FAILED" % fn.__name__)
        traceback.print_exc()


def setup():
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS p3_items, p3_copy")
        conn.execute("CREATE TABLE p3_items (id int PRIMARY KEY, name text NOT NULL, price numeric(10,2))")
        conn.execute("CREATE TABLE p3_copy (id int PRIMARY KEY, note text, at date)")


setup()


@check
def basics_and_errors(conn):
    assert "PostgreSQL 15" in conn.execute("SELECT version()").fetchone()[0]
    assert conn.info.encoding == "utf-8"
    try:
        conn.execute("SELECT * FROM no_such_table")
        raise AssertionError("no error")
    except psycopg.errors.UndefinedTable:
        conn.rollback()
    cur = conn.execute("SELECT %s::int + 1, %s || 'x', %s", (41, "a", decimal.Decimal("1.5")))
    assert cur.fetchone() == (42, "ax", decimal.Decimal("1.5"))
    conn.commit()


@check
def server_side_cursor(conn):
    # Named cursors are DECLARE/FETCH/CLOSE; psycopg reads pg_cursors.
    with conn.cursor(name="p3_named") as cur:
        cur.itersize = 7
        cur.execute("SELECT g, g * 2 FROM generate_series(1, 50) g")
        assert cur.fetchone() == (1, 2)
        assert cur.fetchmany(3) == [(2, 4), (3, 6), (4, 8)]
        rest = list(cur)
        assert len(rest) == 46 and rest[-1] == (50, 100), rest[-3:]
    n = conn.execute("SELECT count(*) FROM pg_catalog.pg_cursors WHERE name = 'p3_named'").fetchone()[0]
    assert n == 0, n
    conn.commit()


@check
def copy_both_ways(conn):
    with conn.cursor() as cur:
        with cur.copy("COPY p3_copy (id, note, at) FROM STDIN") as cp:
            for i in range(100):
                cp.write_row((i, "n%d" % i, "2024-01-%02d" % (i % 28 + 1)))
        conn.commit()
        with cur.copy("COPY (SELECT id, note FROM p3_copy WHERE id < 3 ORDER BY id) TO STDOUT") as cp:
            rows = list(cp.rows())
        assert rows == [("0", "n0"), ("1", "n1"), ("2", "n2")], rows
        assert cur.execute("SELECT count(*) FROM p3_copy").fetchone()[0] == 100


@check
def pipeline(conn):
    with conn.pipeline():
        cur = conn.cursor()
        for i in range(20):
            cur.execute("INSERT INTO p3_items (id, name, price) VALUES (%s, %s, %s)", (i, "i%d" % i, i))
        cur2 = conn.execute("SELECT count(*), sum(price) FROM p3_items")
    assert cur2.fetchone() == (20, 190)
    conn.commit()
    # An error in a pipeline fails that statement and what follows, then
    # the connection goes on.
    try:
        with conn.pipeline():
            conn.execute("INSERT INTO p3_items (id, name) VALUES (100, 'ok')")
            conn.execute("INSERT INTO p3_items (id, name) VALUES (1, 'dup')")
            conn.execute("INSERT INTO p3_items (id, name) VALUES (101, 'never')")
        raise AssertionError("no error")
    except psycopg.errors.UniqueViolation:
        conn.rollback()
    assert conn.execute("SELECT count(*) FROM p3_items WHERE id >= 100").fetchone()[0] == 0


@check
def prepared_and_typed_params(conn):
    for i in range(6):  # prepare_threshold: the 5th execution prepares
        got = conn.execute("SELECT name FROM p3_items WHERE id = %s", (i,), prepare=True).fetchone()
        assert got == ("i%d" % i,), got
    # An untyped parameter cast to regclass, and a regclass-typed one.
    oid = conn.execute("SELECT CAST(%s AS regclass)::oid", ("pg_catalog.pg_class",)).fetchone()[0]
    assert oid == 1259, oid
    oid = conn.execute("SELECT %s::regclass::oid", ("p3_items",)).fetchone()[0]
    assert oid == conn.execute("SELECT 'p3_items'::regclass::oid").fetchone()[0]
    # int2 compares with oid implicitly (reflection queries do).
    assert conn.execute("SELECT %s::int2 = 1259::oid", (1259,)).fetchone()[0] is True
    conn.commit()


if failures:
    print("psycopg3: FAILED: %s" % ", ".join(failures))
    sys.exit(1)
print("psycopg3: all checks ok")
