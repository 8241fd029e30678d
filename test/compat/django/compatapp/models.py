"""The models django_check.py migrates and uses: a foreign key, a unique
constraint, an index, JSON, UUID, decimal, date/time and array-free types
Django maps to PostgreSQL's."""
import uuid

from django.db import models


class Author(models.Model):
    name = models.CharField(max_length=100, unique=True)
    email = models.EmailField(blank=True)
    born = models.DateField(null=True)

    class Meta:
        app_label = "compatapp"


class Book(models.Model):
    ref = models.UUIDField(default=uuid.uuid4, unique=True)
    author = models.ForeignKey(Author, on_delete=models.CASCADE, related_name="books")
    title = models.CharField(max_length=200, db_index=True)
    price = models.DecimalField(max_digits=8, decimal_places=2)
    published = models.DateTimeField(auto_now_add=True)
    meta = models.JSONField(default=dict)
    pages = models.PositiveIntegerField(default=0)

    class Meta:
        app_label = "compatapp"
        indexes = [models.Index(fields=["author", "price"], name="book_author_price")]
