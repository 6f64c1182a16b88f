"""Settings of the example project.

The deployment comes from the environment (SPEC §4): with nothing set this is
the embedded default (SQLite, local files, django-q2's ORM broker), so
`make demo` needs no services.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import dj_database_url

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("LETHE_VAR_DIR", BASE_DIR / "var"))
VAR_DIR.mkdir(parents=True, exist_ok=True)

SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "insecure-development-key-change-me")
# Off unless asked for: with DEBUG on, an error page shows the traceback and settings.
DEBUG = os.environ.get("DJANGO_DEBUG", "0") == "1"
ALLOWED_HOSTS = os.environ.get("DJANGO_ALLOWED_HOSTS", "localhost,127.0.0.1,testserver").split(",")

INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_q",
    "rest_framework",
    "rest_framework_api_key",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "retention",
    # The REST API and its tenant keys: a sub-app, for hosts that serve the API.
    "retention.rest",
    # Below retention, whose admin/base_site.html adds the kill-switch banner.
    "django.contrib.admin",
    "uploads",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "config.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

WSGI_APPLICATION = "config.wsgi.application"

# An empty DATABASE_URL (as `make demo` sets it) means "absent", not "no database".
DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL") or f"sqlite:///{VAR_DIR / 'lethe.sqlite3'}",
        conn_max_age=int(os.environ.get("DATABASE_CONN_MAX_AGE", "0")),
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Several writers (the engine and a renewal) must wait, not fail with
    # "database is locked".
    DATABASES["default"].setdefault("OPTIONS", {})["timeout"] = 20

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"

MEDIA_ROOT = Path(os.environ.get("LETHE_MEDIA_ROOT", VAR_DIR / "media"))

STORAGES: dict[str, dict[str, Any]] = {
    "default": {
        "BACKEND": "django.core.files.storage.FileSystemStorage",
        "OPTIONS": {"location": str(MEDIA_ROOT)},
    },
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
if os.environ.get("AWS_STORAGE_BUCKET_NAME"):
    STORAGES["default"] = {
        "BACKEND": "storages.backends.s3.S3Storage",
        "OPTIONS": {
            "bucket_name": os.environ["AWS_STORAGE_BUCKET_NAME"],
            "endpoint_url": os.environ.get("AWS_S3_ENDPOINT_URL") or None,
            "access_key": os.environ.get("AWS_ACCESS_KEY_ID"),
            "secret_key": os.environ.get("AWS_SECRET_ACCESS_KEY"),
            "region_name": os.environ.get("AWS_S3_REGION_NAME") or None,
            "file_overwrite": False,
        },
    }
# Legal holds enforced by the store: storage aliases, comma-separated, whose
# objects get an S3 Object Lock legal hold while held (the bucket needs Object
# Lock enabled), e.g. RETENTION_OBJECT_LOCK_HOLDS=default.
RETENTION_OBJECT_LOCK_HOLDS = os.environ.get("RETENTION_OBJECT_LOCK_HOLDS", "")

# Retention batches go to the cluster named here; a host's foreground work
# (the queue the foreground guard watches) usually has a cluster of its own.
Q_CLUSTER: dict[str, Any] = {
    "name": os.environ.get("Q_CLUSTER_NAME", "lethe"),
    "workers": int(os.environ.get("Q_WORKERS", "2")),
    "timeout": int(os.environ.get("Q_TIMEOUT", "600")),
    "retry": int(os.environ.get("Q_RETRY", "900")),
    # Missed slots after downtime would each be replayed; the scheduled task
    # coalesces them anyway (one run per slot), this avoids the noise.
    "catch_up": False,
    # ORM broker: how often an idle cluster looks for a task (django-q2's
    # default is 0.2 s). Each queued run waits for it twice before its first
    # batch starts (its arm task, then the batches the arm publishes).
    "poll": float(os.environ.get("Q_POLL", "0.1")),
    "orm": "default",
}
if os.environ.get("REDIS_URL"):
    Q_CLUSTER.pop("orm")
    Q_CLUSTER["redis"] = os.environ["REDIS_URL"]

# Keyed digest of object keys in the audit trail. Production must set it.
RETENTION_DIGEST_KEY = os.environ.get("RETENTION_DIGEST_KEY", f"dev-digest:{SECRET_KEY}")
RETENTION_HMAC_KEYS = os.environ.get("RETENTION_HMAC_KEYS", "")

# Chain heads signed (Ed25519) and anchored outside the database; off unless both are set.
# An s3:// anchor uses the same endpoint and credentials as the uploads' bucket.
RETENTION_SIGNING_KEY = os.environ.get("RETENTION_SIGNING_KEY", "")
_anchor = os.environ.get("RETENTION_EVIDENCE_ANCHOR", "").strip()
RETENTION_EVIDENCE_ANCHOR: str | dict[str, Any] = _anchor
if _anchor.startswith("s3://"):
    RETENTION_EVIDENCE_ANCHOR = {
        "url": _anchor,
        "endpoint_url": os.environ.get("AWS_S3_ENDPOINT_URL") or None,
        "region_name": os.environ.get("AWS_S3_REGION_NAME") or None,
        "access_key": os.environ.get("AWS_ACCESS_KEY_ID") or None,
        "secret_key": os.environ.get("AWS_SECRET_ACCESS_KEY") or None,
    }

# The REST API (SPEC §3.2). The API views name their own authentication,
# permissions, throttles and error handling; the project only picks the schema.
REST_FRAMEWORK = {
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Lethe API",
    "DESCRIPTION": "Deletion receipts and reports for tenants; a signed trigger for operators.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SCHEMA_PATH_PREFIX": "/api/v1",
    # Multipart requests get their own component, with the file as binary.
    "COMPONENT_SPLIT_REQUEST": True,
    # Swagger UI from the sidecar package: the docs page works offline.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

# Uploads through the API: checked on the bytes (magic numbers), not the
# client's Content-Type. A data class not listed here accepts no upload.
UPLOADS_STORAGE = os.environ.get("UPLOADS_STORAGE", "default")
UPLOADS_MAX_BYTES = int(os.environ.get("UPLOADS_MAX_BYTES", str(20 * 1024 * 1024)))
UPLOADS_ALLOWED_TYPES = {
    "idv.photo": ["image/jpeg", "image/png", "image/heic", "image/webp"],
    "pod.scan": ["application/pdf", "image/jpeg", "image/png", "image/tiff"],
    "logs.integration": ["text/plain", "application/gzip"],
}

# The volume breaker: on unless 0 or false (benchmarks and load tests turn it off).
_breaker = os.environ.get("RETENTION_BREAKER_ENABLED", "1").strip().lower()
RETENTION_BREAKER_ENABLED = _breaker not in ("0", "false")
# Queued runs: batches in flight across all hosts (the library's default is 4);
# a deployment with more workers than that raises it to keep each one busy.
RETENTION_MAX_BATCHES_IN_FLIGHT = int(os.environ.get("RETENTION_MAX_BATCHES_IN_FLIGHT", "4"))

# The data map (`manage.py retention_datamap --strict`, docs/data-map.md): the
# models with personal-looking fields that no data class governs, each with why.
RETENTION_EXEMPT_MODELS = {
    "auth.User": "Staff accounts of the governance owners and operators: the audit trail "
    "(authors, approvers, holds) names them, so they are kept as long as the evidence.",
    "auth.Group": "Permission groups (the governance roles): role names, no personal data.",
    "django_q.Schedule": "The retention schedule: task names, no personal data.",
    "django_q.Task": "Results of Lethe's own queued tasks: run and batch ids, no personal data.",
    "django_q.Success": "django-q2's view of its successful tasks (django_q.Task).",
    "django_q.Failure": "django-q2's view of its failed tasks (django_q.Task).",
    "rest_framework_api_key.APIKey": "Unused: tenants' API keys are retention_rest.TenantAPIKey.",
    "uploads.Upload": "The index of tracked uploads: each row belongs to the retention record "
    "whose data class governs its file. Its file name outlives the file (a known gap).",
}

# Prometheus metrics at /metrics/: off (404) until an allow list or a token is set.
RETENTION_METRICS_ALLOWED_IPS = os.environ.get("RETENTION_METRICS_ALLOWED_IPS", "")
RETENTION_METRICS_TOKEN = os.environ.get("RETENTION_METRICS_TOKEN", "")

# RETENTION_LOG_FORMAT=json: one JSON object per line (retention.logging).
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "text": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"},
        "json": {"()": "retention.logging.JsonFormatter"},
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": "json" if os.environ.get("RETENTION_LOG_FORMAT") == "json" else "text",
        }
    },
    "loggers": {
        "retention": {
            "handlers": ["console"],
            "level": os.environ.get("RETENTION_LOG_LEVEL", "WARNING"),
        },
        # At DEBUG these log request URLs and parameters, which hold object
        # keys; whatever level the root logger is given, keep them at WARNING.
        **{
            name: {"level": "WARNING"}
            for name in ("boto3", "botocore", "s3transfer", "urllib3", "storages")
        },
    },
}
