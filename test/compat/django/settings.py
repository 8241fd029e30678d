"""Django settings for django_check.py: one app, the database from
CAIRN_DJANGO_URL (set by the check), psycopg 3 as Django 5 prefers."""
import os
from urllib.parse import urlparse

u = urlparse(os.environ["CAIRN_DJANGO_URL"])
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": u.path.lstrip("/"),
        "USER": u.username,
        "PASSWORD": u.password or "",
        "HOST": u.hostname,
        "PORT": u.port,
        "OPTIONS": {"sslmode": "disable"},
    }
}
INSTALLED_APPS = ["django.contrib.contenttypes", "django.contrib.auth", "compatapp"]
USE_TZ = True
TIME_ZONE = "UTC"
SECRET_KEY = "compat-check-only"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
