"""A SQLAlchemy 2.x smoke test against Cairn: Core and ORM, schema creation
with foreign keys and indexes, reflection, Alembic autogenerate, INSERT ...
RETURNING, relationships, rollback and drop_all.

Run by test/compat/run.sh with the connection URL and the DBAPI driver
(psycopg2, the default, or psycopg for psycopg 3) as its arguments; any
failure raises, which fails the run. The same script passes against
PostgreSQL 15.
"""
import datetime
import decimal
import sys

from sqlalchemy import (CheckConstraint, Column, DateTime, ForeignKey, Index, Integer, MetaData, Numeric,
                        String, Table, Text, UniqueConstraint, create_engine, func, insert, inspect, select,
                        text, update)
from sqlalchemy.dialects.postgresql import JSONB, UUID, insert as pg_insert
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, relationship, selectinload

driver = sys.argv[2] if len(sys.argv) > 2 else "psycopg2"
url = sys.argv[1].replace("postgres://", "postgresql+%s://" % driver, 1)
engine = create_engine(url)

# --- Core -----------------------------------------------------------------
md = MetaData()
authors = Table(
    "sa_authors", md,
    Column("id", Integer, primary_key=True),
    Column("name", String(50), nullable=False),
    Column("email", String(100), nullable=False, unique=True),
    Column("joined", DateTime(timezone=True), server_default=func.now()),
)
books = Table(
    "sa_books", md,
    Column("id", Integer, primary_key=True),
    Column("author_id", Integer, ForeignKey("sa_authors.id", ondelete="CASCADE"), nullable=False),
    Column("title", Text, nullable=False),
    Column("isbn", String(13)),
    Column("price", Numeric(8, 2), CheckConstraint("price >= 0", name="sa_books_price_ck")),
    Column("meta", JSONB),
    Column("ref", UUID(as_uuid=True)),
    UniqueConstraint("author_id", "title", name="sa_books_author_title_uq"),
    Index("sa_books_isbn_idx", "isbn"),
)
md.drop_all(engine)
md.create_all(engine)

with engine.begin() as conn:
    ids = conn.execute(insert(authors).returning(authors.c.id, authors.c.joined),
                       [{"name": "Ann", "email": "ann@example.com"},
                        {"name": "Bob", "email": "bob@example.com"}]).all()
    assert len(ids) == 2 and all(isinstance(r.joined, datetime.datetime) for r in ids), ids
    ann = ids[0].id
    conn.execute(insert(books), [
        {"author_id": ann, "title": "First", "isbn": "1", "price": decimal.Decimal("9.50"), "meta": {"tags": ["a"]}},
        {"author_id": ann, "title": "Second", "isbn": "2", "price": decimal.Decimal("0"), "meta": None},
    ])
    # INSERT ... ON CONFLICT DO UPDATE through the dialect's construct.
    stmt = pg_insert(authors).values(name="Ann2", email="ann@example.com")
    stmt = stmt.on_conflict_do_update(index_elements=["email"], set_={"name": stmt.excluded.name})
    conn.execute(stmt)
    rows = conn.execute(
        select(authors.c.name, func.count(books.c.id).label("n"), func.sum(books.c.price).label("total"))
        .select_from(authors.outerjoin(books)).group_by(authors.c.name).order_by(authors.c.name)).all()
    assert [tuple(r) for r in rows] == [("Ann2", 2, decimal.Decimal("9.50")), ("Bob", 0, None)], rows
    n = conn.execute(update(books).where(books.c.meta["tags"].isnot(None)).values(price=books.c.price + 1)).rowcount
    assert n == 1, n
    # Bound parameters of every kind through text().
    v = conn.execute(text("SELECT CAST(:a AS int) + 1, CAST(:b AS jsonb) -> 'k', CAST(:c AS text[])"),
                     {"a": 41, "b": '{"k": [1]}', "c": ["x", "y"]}).one()
    assert tuple(v) == (42, [1], ["x", "y"]), v

# A failed transaction rolls back everything in it.
try:
    with engine.begin() as conn:
        conn.execute(insert(authors).values(name="Cy", email="cy@example.com"))
        conn.execute(insert(authors).values(name="Dup", email="bob@example.com"))
    raise AssertionError("duplicate email accepted")
except IntegrityError as e:
    code = getattr(e.orig, "sqlstate", None) or e.orig.pgcode  # psycopg 3 / psycopg2
    assert code == "23505", code
with engine.connect() as conn:
    assert conn.execute(select(func.count()).select_from(authors)).scalar() == 2

# --- Reflection -----------------------------------------------------------
insp = inspect(engine)
assert {"sa_authors", "sa_books"} <= set(insp.get_table_names()), insp.get_table_names()
cols = {c["name"]: c for c in insp.get_columns("sa_books")}
assert list(cols) == ["id", "author_id", "title", "isbn", "price", "meta", "ref"], list(cols)
assert isinstance(cols["title"]["type"], Text) and cols["title"]["nullable"] is False
assert cols["isbn"]["type"].length == 13
assert (cols["price"]["type"].precision, cols["price"]["type"].scale) == (8, 2)
assert isinstance(cols["meta"]["type"], JSONB), cols["meta"]["type"]
assert "nextval" in (cols["id"]["default"] or ""), cols["id"]
assert insp.get_pk_constraint("sa_books")["constrained_columns"] == ["id"]
fks = insp.get_foreign_keys("sa_books")
assert len(fks) == 1, fks
assert (fks[0]["constrained_columns"], fks[0]["referred_table"], fks[0]["referred_columns"]) == \
    (["author_id"], "sa_authors", ["id"]), fks
assert fks[0]["options"].get("ondelete") == "CASCADE", fks[0]
idx = {i["name"]: i for i in insp.get_indexes("sa_books")}
assert idx["sa_books_isbn_idx"]["column_names"] == ["isbn"] and not idx["sa_books_isbn_idx"]["unique"], idx
uqs = insp.get_unique_constraints("sa_books")
assert [(u["name"], u["column_names"]) for u in uqs] == [("sa_books_author_title_uq", ["author_id", "title"])], uqs
cks = insp.get_check_constraints("sa_books")
assert [c["name"] for c in cks] == ["sa_books_price_ck"], cks
assert [u["column_names"] for u in insp.get_unique_constraints("sa_authors")] == [["email"]]
# Reflecting into a fresh MetaData round-trips the schema.
md2 = MetaData()
md2.reflect(engine, only=["sa_authors", "sa_books"])
assert set(md2.tables["sa_books"].c.keys()) == set(books.c.keys())
assert [fk.target_fullname for fk in md2.tables["sa_books"].foreign_keys] == ["sa_authors.id"]

# Alembic's autogenerate compares the reflected schema with the models:
# nothing differs for the tables just created, and a column the model adds
# is the one difference found.
try:
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext
except ImportError:
    compare_metadata = None
if compare_metadata is not None:
    with engine.connect() as conn:
        mc = MigrationContext.configure(conn, opts={"include_name": lambda name, type_, parent: type_ != "table"
                                                    or name in ("sa_authors", "sa_books")})
        diff = compare_metadata(mc, md)
        assert diff == [], diff
        md3 = MetaData()
        for t in md.tables.values():
            t.to_metadata(md3)
        md3.tables["sa_authors"].append_column(Column("extra", Integer))
        diff = compare_metadata(mc, md3)
        assert [(d[0], d[2]) for d in diff] == [("add_column", "sa_authors")], diff
    print("sqlalchemy (%s): alembic autogenerate ok" % driver)

# --- ORM ------------------------------------------------------------------


class Base(DeclarativeBase):
    pass


class Team(Base):
    __tablename__ = "sa_teams"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(40), unique=True)
    members: Mapped[list["Member"]] = relationship(back_populates="team", cascade="all, delete-orphan",
                                                   order_by="Member.id")


class Member(Base):
    __tablename__ = "sa_members"
    id: Mapped[int] = mapped_column(primary_key=True)
    team_id: Mapped[int] = mapped_column(ForeignKey("sa_teams.id"), index=True)
    handle: Mapped[str] = mapped_column(String(40))
    score: Mapped[decimal.Decimal] = mapped_column(Numeric(6, 1), default=decimal.Decimal("0"))
    team: Mapped[Team] = relationship(back_populates="members")


Base.metadata.drop_all(engine)
Base.metadata.create_all(engine)

with Session(engine) as s:
    red = Team(name="red", members=[Member(handle="r1"), Member(handle="r2", score=decimal.Decimal("2.5"))])
    blue = Team(name="blue", members=[Member(handle="b1")])
    s.add_all([red, blue])
    s.commit()
    assert red.id is not None and all(m.id is not None for m in red.members)

with Session(engine) as s:
    teams = s.scalars(select(Team).options(selectinload(Team.members)).order_by(Team.name)).all()
    assert [(t.name, [m.handle for m in t.members]) for t in teams] == [("blue", ["b1"]), ("red", ["r1", "r2"])]
    red = teams[1]
    # Lazy loading the other way, then a change and a rollback.
    m = s.scalars(select(Member).where(Member.handle == "b1")).one()
    assert m.team.name == "blue"
    m.handle = "changed"
    red.members.pop(0)
    s.flush()
    assert s.scalar(select(func.count()).select_from(Member)) == 2
    s.rollback()
    assert s.scalar(select(func.count()).select_from(Member)) == 3
    assert s.scalars(select(Member.handle).order_by(Member.id)).all() == ["r1", "r2", "b1"]
    # A failed flush rolls the session back.
    s.add(Team(name="red"))
    try:
        s.commit()
        raise AssertionError("duplicate team accepted")
    except IntegrityError:
        s.rollback()
    # Delete with cascade to the members.
    s.delete(s.scalars(select(Team).where(Team.name == "red")).one())
    s.commit()
    assert s.scalar(select(func.count()).select_from(Member)) == 1

Base.metadata.drop_all(engine)
md.drop_all(engine)
insp = inspect(engine)
left = {"sa_authors", "sa_books", "sa_teams", "sa_members"} & set(insp.get_table_names())
assert not left, left
engine.dispose()
print("sqlalchemy (%s): ok" % driver)
