"""Django 5 on psycopg 3 against Cairn (test/compat/run.sh runs it with a
postgres:// URL): makemigrations and migrate (auth and contenttypes too),
CRUD through the ORM, QuerySet.iterator() (a named server-side cursor),
transaction.atomic with nested savepoints and rollbacks,
select_for_update, aggregates, bulk_create, inspectdb reading the tables
back, and migrating the app to zero. Every step asserts what it read; the
exit status is 1 on the first failure."""
import io
import os
import shutil
import sys
import tempfile
from decimal import Decimal

here = os.path.dirname(os.path.abspath(__file__))
work = tempfile.mkdtemp(prefix="cairn-django-")
shutil.copytree(os.path.join(here, "django"), os.path.join(work, "proj"))
sys.path.insert(0, os.path.join(work, "proj"))
os.environ["CAIRN_DJANGO_URL"] = sys.argv[1]
os.environ["DJANGO_SETTINGS_MODULE"] = "settings"

import django  # noqa: E402
from django.core.management import call_command  # noqa: E402

django.setup()

from django.db import IntegrityError, connection, transaction  # noqa: E402
from django.db.backends.postgresql.psycopg_any import is_psycopg3  # noqa: E402
from django.db.models import Count, Sum  # noqa: E402

from compatapp.models import Author, Book  # noqa: E402


def step(name):
    print("django:", name)


try:
    assert is_psycopg3, "Django is not using psycopg 3"
    with connection.cursor() as c:
        c.execute("DROP TABLE IF EXISTS compatapp_book, compatapp_author, django_migrations CASCADE")
        c.execute("DROP TABLE IF EXISTS auth_group_permissions, auth_user_groups, auth_user_user_permissions,"
                  " auth_permission, auth_group, auth_user, django_content_type CASCADE")

    step("makemigrations and migrate")
    call_command("makemigrations", "compatapp", verbosity=0)
    call_command("migrate", verbosity=0)
    out = io.StringIO()
    call_command("showmigrations", "compatapp", stdout=out)
    assert "[X] 0001_initial" in out.getvalue(), out.getvalue()
    tables = set(connection.introspection.table_names())
    for t in ("compatapp_author", "compatapp_book", "auth_user", "django_content_type", "django_migrations"):
        assert t in tables, (t, sorted(tables))
    cons = connection.introspection.get_constraints(connection.cursor(), "compatapp_book")
    assert "book_author_price" in cons and cons["book_author_price"]["columns"] == ["author_id", "price"], cons
    assert any(c["foreign_key"] == ("compatapp_author", "id") for c in cons.values()), cons
    assert any(c["unique"] and c["columns"] == ["ref"] for c in cons.values()), cons

    step("CRUD")
    a = Author.objects.create(name="Ursula", email="u@example.com")
    b = Author.objects.create(name="Stanislaw")
    Book.objects.create(author=a, title="The Dispossessed", price=Decimal("12.50"), meta={"tags": ["sf"]}, pages=387)
    Book.objects.bulk_create([Book(author=b, title=f"Book {i}", price=Decimal(i), pages=i * 10) for i in range(1, 51)])
    assert Book.objects.count() == 51
    got = Book.objects.get(title="The Dispossessed")
    assert got.author.name == "Ursula" and got.price == Decimal("12.50") and got.meta == {"tags": ["sf"]}, got
    assert Book.objects.filter(meta__tags__contains=["sf"]).count() == 1
    Book.objects.filter(author=b, pages__gt=250).update(price=Decimal("99.99"))
    assert Book.objects.filter(price=Decimal("99.99")).count() == 25
    Book.objects.filter(author=b, pages__lte=100).delete()
    assert Book.objects.count() == 41
    per = {r["author__name"]: (r["n"], r["total"]) for r in
           Book.objects.values("author__name").annotate(n=Count("id"), total=Sum("price"))}
    assert per["Ursula"] == (1, Decimal("12.50")), per
    assert per["Stanislaw"][0] == 40, per
    names = list(Author.objects.annotate(n=Count("books")).order_by("-n").values_list("name", flat=True))
    assert names == ["Stanislaw", "Ursula"], names

    step("QuerySet.iterator()")
    # Outside a transaction psycopg 3 runs it as a named (server-side)
    # cursor fetching chunk_size rows at a time.
    seen = [bk.pages for bk in Book.objects.filter(author=b).order_by("pages").iterator(chunk_size=7)]
    assert seen == list(range(110, 510, 10)), seen
    with transaction.atomic():
        n = sum(1 for _ in Book.objects.all().iterator(chunk_size=5))
        assert n == 41, n

    step("transactions")
    try:
        with transaction.atomic():
            Author.objects.create(name="Temp")
            raise RuntimeError("roll back")
    except RuntimeError:
        pass
    assert not Author.objects.filter(name="Temp").exists()
    with transaction.atomic():
        Author.objects.create(name="Outer")
        try:
            with transaction.atomic():  # a savepoint
                Author.objects.create(name="Ursula")  # unique violation
        except IntegrityError:
            pass
        Author.objects.create(name="Outer2")
    assert set(Author.objects.values_list("name", flat=True)) == {"Ursula", "Stanislaw", "Outer", "Outer2"}
    with transaction.atomic():
        locked = Author.objects.select_for_update().get(name="Outer")
        locked.email = "o@example.com"
        locked.save()
    assert Author.objects.get(name="Outer").email == "o@example.com"

    step("inspectdb")
    out = io.StringIO()
    call_command("inspectdb", "compatapp_book", "compatapp_author", stdout=out)
    src = out.getvalue()
    for want in ("class CompatappBook(models.Model):", "class CompatappAuthor(models.Model):",
                 "title = models.CharField(max_length=200)",
                 "price = models.DecimalField(max_digits=8, decimal_places=2)",
                 "author = models.ForeignKey('CompatappAuthor', models.DO_NOTHING)",
                 "ref = models.UUIDField(unique=True)", "meta = models.JSONField()",
                 "name = models.CharField(unique=True, max_length=100)"):
        assert want in src, (want, src)

    step("migrate to zero")
    call_command("migrate", "compatapp", "zero", verbosity=0)
    tables = set(connection.introspection.table_names())
    assert "compatapp_book" not in tables and "compatapp_author" not in tables, sorted(tables)
except Exception:
    import traceback

    traceback.print_exc()
    print("django: FAILED")
    sys.exit(1)
finally:
    shutil.rmtree(work, ignore_errors=True)
print("django: all checks ok (Django %s, psycopg %s)" % (django.get_version(), __import__("psycopg").__version__))
