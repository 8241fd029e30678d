"""A psycopg2 client against Cairn: the calls an application makes first.

Run by test/compat/run.sh with the connection URL as its argument; any
failure raises, which fails the run.
"""
import decimal
import sys
import uuid
import datetime

import psycopg2
import psycopg2.errors
import psycopg2.extras

url = sys.argv[1]
conn = psycopg2.connect(url)
cur = conn.cursor()

cur.execute("SELECT version()")
assert "PostgreSQL 15" in cur.fetchone()[0]

cur.execute("""CREATE TABLE py_items (
    id bigserial PRIMARY KEY,
    sku uuid NOT NULL UNIQUE,
    price numeric(10,2) NOT NULL CHECK (price >= 0),
    tags text[],
    seen date,
    attrs jsonb)""")
conn.commit()

rows = [(uuid.uuid4(), decimal.Decimal("9.99"), ["a", "b"], datetime.date(2026, 1, 2),
         psycopg2.extras.Json({"k": 1})),
        (uuid.uuid4(), decimal.Decimal("0.50"), [], None, None)]
psycopg2.extras.register_uuid()
cur.executemany("INSERT INTO py_items (sku, price, tags, seen, attrs) VALUES (%s, %s, %s, %s, %s)", rows)
conn.commit()

cur.execute("SELECT sku, price, tags, seen, attrs FROM py_items ORDER BY id")
got = cur.fetchall()
assert got[0][0] == rows[0][0], got
assert got[0][1] == decimal.Decimal("9.99"), got
assert got[0][2] == ["a", "b"], got
assert got[0][3] == datetime.date(2026, 1, 2), got
assert got[0][4] == {"k": 1}, got
assert got[1][2] == [] and got[1][3] is None and got[1][4] is None, got

# Constraint errors arrive with their SQLSTATE and leave the row count alone.
try:
    cur.execute("INSERT INTO py_items (sku, price) VALUES (%s, %s)", (rows[0][0], 1))
    raise AssertionError("duplicate accepted")
except psycopg2.errors.UniqueViolation:
    conn.rollback()
try:
    cur.execute("INSERT INTO py_items (sku, price) VALUES (%s, %s)", (uuid.uuid4(), -1))
    raise AssertionError("check violation accepted")
except psycopg2.errors.CheckViolation:
    conn.rollback()
cur.execute("SELECT count(*) FROM py_items")
assert cur.fetchone()[0] == 2

# Server-side cursor (named portal fetched in batches).
cur.execute("INSERT INTO py_items (sku, price) SELECT gen_random_uuid(), g FROM generate_series(1, 500) g")
conn.commit()
named = conn.cursor(name="big")
named.itersize = 50
named.execute("SELECT id FROM py_items ORDER BY id")
n = sum(1 for _ in named)
named.close()
assert n == 502, n
conn.commit()

# COPY both ways.
import io
buf = io.StringIO()
cur.copy_expert("COPY (SELECT id, price FROM py_items WHERE id <= 2 ORDER BY id) TO STDOUT WITH CSV HEADER", buf)
assert buf.getvalue().splitlines()[0] == "id,price", buf.getvalue()
cur.execute("CREATE TABLE py_copy (a int, b text)")
cur.copy_expert("COPY py_copy FROM STDIN WITH CSV", io.StringIO("1,x\n2,\"y,z\"\n"))
cur.execute("SELECT a, b FROM py_copy ORDER BY a")
assert cur.fetchall() == [(1, "x"), (2, "y,z")]

# Autocommit and isolation levels.
conn.commit()
conn.autocommit = True
cur.execute("SHOW transaction_isolation")
print("default isolation:", cur.fetchone()[0])
cur.execute("DROP TABLE py_items, py_copy")
conn.close()
print("psycopg2: ok")
