"""An asyncpg client against Cairn: connect, errors, prepared statements,
executemany, COPY, a pool, and SQLAlchemy 2's async engine on top
(reflection, and the ORM with an AsyncSession).

Run by test/compat/run.sh with the connection URL as its argument. Each
check runs on its own connection with a deadline (a protocol mismatch shows
as a hang, which the deadline turns into a failure); every failure is
printed and the script exits 1 if any failed. The same script passes
against PostgreSQL 15.
"""
import asyncio
import decimal
import io
import sys
import traceback

import asyncpg

url = sys.argv[1]
failures = []
checks = []
DEADLINE = 60  # seconds; only to turn a hang into a failure


def check(fn):
    checks.append(fn)
    return fn


async def run_one(fn):
    conn = await asyncio.wait_for(asyncpg.connect(url), DEADLINE)
    try:
        await asyncio.wait_for(fn(conn), DEADLINE)
        print("asyncpg: %s ok" % fn.__name__)
    except Exception:
        failures.append(fn.__name__)
        print("asyncpg: %s FAILED" % fn.__name__)
        traceback.print_exc()
    finally:
        await conn.close()


@check
async def connect_and_version(conn):
    v = await conn.fetchval("SELECT version()")
    assert "PostgreSQL 15" in v, v
    assert conn.get_server_version().major == 15


@check
async def errors_while_preparing(conn):
    # asyncpg sends Parse, Describe and Flush, and waits: the error must
    # arrive before any Sync, and the connection must go on afterwards.
    for sql, exc in [
        ("SELEC 1", asyncpg.exceptions.PostgresSyntaxError),
        ("SELECT * FROM no_such_table", asyncpg.exceptions.UndefinedTableError),
        ("SELECT no_such_column FROM ap_items", asyncpg.exceptions.UndefinedColumnError),
    ]:
        try:
            await conn.fetch(sql)
        except exc:
            pass
        else:
            raise AssertionError("%s: no error" % sql)
        assert await conn.fetchval("SELECT 1") == 1
    try:
        await conn.prepare("SELECT $1::int / 0 FROM no_such_table")
    except asyncpg.exceptions.UndefinedTableError:
        pass
    else:
        raise AssertionError("prepare: no error")


@check
async def error_while_executing(conn):
    try:
        await conn.fetchval("SELECT 1 / $1::int", 0)
    except asyncpg.exceptions.DivisionByZeroError:
        pass
    else:
        raise AssertionError("no error")
    async with conn.transaction():
        await conn.execute("INSERT INTO ap_items (name, price) VALUES ('tx', 1)")
        try:
            async with conn.transaction():  # a savepoint
                await conn.execute("INSERT INTO ap_items (id, name, price) VALUES (-1, 'a', 1), (-1, 'b', 1)")
        except asyncpg.exceptions.UniqueViolationError:
            pass
    assert await conn.fetchval("SELECT count(*) FROM ap_items WHERE name = 'tx'") == 1


@check
async def prepared_statements(conn):
    stmt = await conn.prepare("SELECT $1::int8 + 1, $2::text || 'x', $3::numeric")
    assert [a.name for a in stmt.get_attributes()] == ["?column?", "?column?", "numeric"]
    for i in range(5):
        row = await stmt.fetchrow(i, "s%d" % i, decimal.Decimal("1.50"))
        assert tuple(row) == (i + 1, "s%dx" % i, decimal.Decimal("1.50")), row
    ins = await conn.prepare("INSERT INTO ap_items (name, price, tags) VALUES ($1, $2, $3) RETURNING id")
    ids = [await ins.fetchval("p%d" % i, decimal.Decimal(i), ["a", str(i)]) for i in range(3)]
    rows = await conn.fetch("SELECT name, price, tags FROM ap_items WHERE id = ANY($1::int8[]) ORDER BY id", ids)
    assert [tuple(r) for r in rows] == [("p%d" % i, decimal.Decimal(i), ["a", str(i)]) for i in range(3)], rows


@check
async def executemany(conn):
    await conn.executemany(
        "INSERT INTO ap_items (name, price) VALUES ($1, $2)",
        [("many%d" % i, decimal.Decimal(i)) for i in range(50)],
    )
    n, total = await conn.fetchrow("SELECT count(*), sum(price) FROM ap_items WHERE name LIKE 'many%'")
    assert (n, total) == (50, sum(range(50))), (n, total)


@check
async def copy(conn):
    n = await conn.copy_records_to_table(
        "ap_copy", records=[(i, "r%d" % i) for i in range(100)], columns=["id", "note"]
    )
    assert n == "COPY 100", n
    buf = io.BytesIO()
    await conn.copy_from_query("SELECT id, note FROM ap_copy WHERE id < 3 ORDER BY id", output=buf, format="csv")
    assert buf.getvalue() == b"0,r0\n1,r1\n2,r2\n", buf.getvalue()
    await conn.copy_to_table("ap_copy", source=io.BytesIO(b"1000\tx\n1001\ty\n"))
    assert await conn.fetchval("SELECT count(*) FROM ap_copy") == 102


@check
async def cursor_and_types(conn):
    async with conn.transaction():
        got = [r[0] async for r in conn.cursor("SELECT g FROM generate_series(1, 250) g", prefetch=40)]
    assert got == list(range(1, 251))
    row = await conn.fetchrow("SELECT '{\"a\": 1}'::jsonb, now()::date, 'f47ac10b-58cc-4372-a567-0e02b2c3d479'::uuid")
    assert row[0] == '{"a": 1}' and str(row[2]) == "f47ac10b-58cc-4372-a567-0e02b2c3d479", row


async def pool():
    p = await asyncpg.create_pool(url, min_size=2, max_size=4)
    try:
        got = await asyncio.gather(*[p.fetchval("SELECT $1::int * 2", i) for i in range(20)])
        assert got == [i * 2 for i in range(20)], got
        try:
            await p.fetchval("SELECT * FROM no_such_table")
        except asyncpg.exceptions.UndefinedTableError:
            pass
        assert await p.fetchval("SELECT 1") == 1
    finally:
        await p.close()


async def sqlalchemy_async():
    import sqlalchemy as sa
    from sqlalchemy.ext.asyncio import create_async_engine

    engine = create_async_engine(url.replace("postgres://", "postgresql+asyncpg://", 1).split("?")[0])
    try:
        async with engine.connect() as c:
            names = await c.run_sync(lambda sc: sa.inspect(sc).get_table_names())
            assert "ap_items" in names, names
            cols = await c.run_sync(lambda sc: sa.inspect(sc).get_columns("ap_items"))
            assert [c["name"] for c in cols] == ["id", "name", "price", "tags"], cols
            pk = await c.run_sync(lambda sc: sa.inspect(sc).get_pk_constraint("ap_items"))
            assert pk["constrained_columns"] == ["id"], pk
            md = sa.MetaData()
            await c.run_sync(lambda sc: md.reflect(sc, only=["ap_items"]))
            t = md.tables["ap_items"]
            n = (await c.execute(sa.select(sa.func.count()).select_from(t))).scalar()
            assert n >= 0
    finally:
        await engine.dispose()


async def sqlalchemy_async_orm():
    # The ORM on the async engine: a declarative model pair with a
    # relationship, AsyncSession add/commit, a select with selectinload,
    # an update, a rollback that leaves nothing, a delete.
    import sqlalchemy as sa
    from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker, create_async_engine
    from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship, selectinload

    class Base(DeclarativeBase):
        pass

    class Author(Base):
        __tablename__ = "ap_orm_authors"
        id: Mapped[int] = mapped_column(primary_key=True)
        name: Mapped[str] = mapped_column(sa.String(50), unique=True)
        books: Mapped[list["Book"]] = relationship(back_populates="author", cascade="all, delete-orphan")

    class Book(Base):
        __tablename__ = "ap_orm_books"
        id: Mapped[int] = mapped_column(primary_key=True)
        title: Mapped[str]
        price: Mapped[decimal.Decimal] = mapped_column(sa.Numeric(8, 2))
        author_id: Mapped[int] = mapped_column(sa.ForeignKey("ap_orm_authors.id"))
        author: Mapped[Author] = relationship(back_populates="books")

    engine = create_async_engine(url.replace("postgres://", "postgresql+asyncpg://", 1).split("?")[0])
    try:
        async with engine.begin() as c:
            await c.run_sync(Base.metadata.drop_all)
            await c.run_sync(Base.metadata.create_all)
        Session = async_sessionmaker(engine, expire_on_commit=False)
        async with Session() as s:
            s.add_all([Author(name="ann", books=[Book(title="a1", price=decimal.Decimal("9.50")),
                                                 Book(title="a2", price=decimal.Decimal("12.00"))]),
                       Author(name="bob", books=[Book(title="b1", price=decimal.Decimal("5.25"))])])
            await s.commit()
        async with Session() as s:
            authors = (await s.execute(sa.select(Author).options(selectinload(Author.books)).order_by(Author.name))).scalars().all()
            got = [(a.name, sorted(b.title for b in a.books)) for a in authors]
            assert got == [("ann", ["a1", "a2"]), ("bob", ["b1"])], got
            total = (await s.execute(sa.select(sa.func.sum(Book.price)))).scalar()
            assert total == decimal.Decimal("26.75"), total
            authors[1].name = "robert"
            await s.commit()
        async with Session() as s:
            s.add(Author(name="ann"))  # unique violation
            try:
                await s.commit()
                raise AssertionError("duplicate name committed")
            except sa.exc.IntegrityError:
                await s.rollback()
            bob = (await s.execute(sa.select(Author).where(Author.name == "robert"))).scalar_one()
            await s.delete(bob)
            await s.commit()
        async with Session() as s:
            names = (await s.execute(sa.select(Author.name).order_by(Author.name))).scalars().all()
            assert names == ["ann"], names
            n = (await s.execute(sa.select(sa.func.count()).select_from(Book))).scalar()
            assert n == 2, n
        async with engine.begin() as c:
            await c.run_sync(Base.metadata.drop_all)
    finally:
        await engine.dispose()


async def main():
    conn = await asyncpg.connect(url)
    await conn.execute("DROP TABLE IF EXISTS ap_items, ap_copy")
    await conn.execute(
        "CREATE TABLE ap_items (id bigserial PRIMARY KEY, name text NOT NULL, price numeric(10,2), tags text[])"
    )
    await conn.execute("CREATE TABLE ap_copy (id int PRIMARY KEY, note text)")
    await conn.close()
    for fn in checks:
        await run_one(fn)
    extra = [("pool", pool), ("sqlalchemy_async_reflection", sqlalchemy_async), ("sqlalchemy_async_orm", sqlalchemy_async_orm)]
    for name, fn in extra:
        try:
            await asyncio.wait_for(fn(), DEADLINE)
            print("asyncpg: %s ok" % name)
        except Exception:
            failures.append(name)
            print("asyncpg: %s FAILED" % name)
            traceback.print_exc()


asyncio.run(main())
if failures:
    print("asyncpg: FAILED: %s" % ", ".join(failures))
    sys.exit(1)
print("asyncpg: all %d checks ok" % (len(checks) + 3))
