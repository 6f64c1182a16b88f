"""Shared fixtures.

PostgreSQL-only tests (marker ``postgres``) prove claims and concurrency;
SQLite ignores SKIP LOCKED, so there they are not run, and the run says so
loudly. Browser tests (marker ``browser``) are treated the same way when
Chromium or Playwright is missing, and Redis broker tests (marker ``redis``)
when REDIS_URL is unset. Under CI all must run: a CI run without PostgreSQL,
Chromium or REDIS_URL fails.
"""

from __future__ import annotations

import functools
import os
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.conf import settings

pytest_plugins = ["tests.s3server"]

# Tests that need something a developer machine may lack: reported loudly as
# not run there, and a usage error under CI, where they must run.
_NOT_RUN: dict[str, tuple[str, list[str]]] = {}


def _on_postgres() -> bool:
    return settings.DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql"


def _postgres_missing() -> str | None:
    return None if _on_postgres() else "DATABASE_URL is not PostgreSQL"


def _browser_missing() -> str | None:
    from tests.browser import browser_missing

    return browser_missing()


def _redis_missing() -> str | None:
    return None if os.environ.get("REDIS_URL") else "REDIS_URL is not set"


_GATED: dict[str, dict[str, Any]] = {
    "postgres": {
        "missing": _postgres_missing,
        "ci": "CI=true but DATABASE_URL is not PostgreSQL: {n} PostgreSQL-only tests would "
        "not run. Set DATABASE_URL.",
        "title": "PostgreSQL-only tests NOT RUN",
        "summary": "{n} tests need PostgreSQL (SKIP LOCKED, concurrent claims) and did not "
        "run on SQLite. Run with DATABASE_URL=postgres://postgres@127.0.0.1:5432/lethe "
        "(CI does).",
    },
    "browser": {
        "missing": _browser_missing,
        "ci": "CI=true but {n} browser tests cannot run: {reason}.",
        "title": "Browser tests NOT RUN",
        "summary": "{n} tests drive a real browser and did not run: {reason}. "
        "Install Debian's chromium (CI does).",
    },
    "redis": {
        "missing": _redis_missing,
        "ci": "CI=true but REDIS_URL is not set: {n} Redis broker tests would not run. "
        "Start redis-server and set REDIS_URL.",
        "title": "Redis tests NOT RUN",
        "summary": "{n} tests need a Redis server and did not run: {reason}. "
        "Run with REDIS_URL=redis://127.0.0.1:6379/0 (CI does).",
    },
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for marker, gate in _GATED.items():
        gated = [item for item in items if item.get_closest_marker(marker)]
        if not gated:
            continue
        reason = gate["missing"]()
        if reason is None:
            continue
        if os.environ.get("CI", "").lower() == "true":
            raise pytest.UsageError(gate["ci"].format(n=len(gated), reason=reason))
        _NOT_RUN[marker] = (reason, [item.nodeid for item in gated])
        config.hook.pytest_deselected(items=gated)
        items[:] = [item for item in items if not item.get_closest_marker(marker)]


def pytest_terminal_summary(terminalreporter: Any) -> None:
    tr = terminalreporter
    for marker, (reason, nodeids) in _NOT_RUN.items():
        gate = _GATED[marker]
        tr.section(gate["title"], sep="!", red=True, bold=True)
        tr.write_line(
            gate["summary"].format(n=len(nodeids), reason=reason),
            red=True,
            bold=True,
        )
        for nodeid in nodeids:
            tr.write_line(f"  not run: {nodeid}", red=True)


@pytest.fixture
def now() -> datetime:
    return datetime(2026, 3, 14, 12, 0, 0, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _media_root(settings: Any, tmp_path: Any) -> None:
    settings.STORAGES = {
        **settings.STORAGES,
        "default": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(tmp_path / "media")},
        },
    }
    settings.RETENTION_DIGEST_KEY = "test-digest-key"
    settings.RETENTION_RETRY_BASE_SECONDS = 0.05
    settings.RETENTION_RETRY_MAX_SECONDS = 0.2


@pytest.fixture(autouse=True)
def _database_clock_follows_freezegun(request: pytest.FixtureRequest) -> Any:
    """A test that freezes the Python clock to drive an outer interface freezes
    the database's clock (``retention.clock.db_now``) with it, on PostgreSQL
    as on SQLite. A test about skewed hosts (fixture ``host_clock``) keeps
    the real database clock while freezegun moves the host's."""
    if "host_clock" in request.fixturenames or not _on_postgres():
        yield
        return
    from django.db import connection
    from django.utils import timezone
    from freezegun.api import freeze_factories

    from retention.clock import DB_NOW_SQL

    def pin(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        if sql == DB_NOW_SQL and freeze_factories:
            return execute("SELECT %s::timestamptz", [timezone.now()], many, context)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(pin):
        yield


@pytest.fixture
def author(db: Any) -> Any:
    from tests.factories import UserFactory

    return UserFactory(username="author")


@pytest.fixture
def approver(db: Any) -> Any:
    from tests.factories import approver_user

    return approver_user("approver")


@pytest.fixture
def make_policy(author: Any, approver: Any, now: datetime) -> Any:
    """Create an approved policy version; enforce=True also enables enforcement."""
    from retention import services
    from retention.models import DataClassMode, Policy

    def make(
        data_class: str = "idv.photo",
        period: timedelta = timedelta(days=30),
        *,
        enforce: bool = True,
        at: datetime | None = None,
        **rules: Any,
    ) -> Any:
        when = at or now - timedelta(days=400)
        version = services.policy_version_propose(
            data_class=data_class, retention_period=period, author=author, now=when, **rules
        )
        services.policy_version_submit(version=version, by=author, now=when)
        services.policy_version_approve(version=version, approver=approver, now=when)
        if enforce:
            Policy.objects.filter(data_class=data_class).update(mode=DataClassMode.ENFORCE)
        version.refresh_from_db()
        return version

    return make


@pytest.fixture
def row_registry() -> Any:
    """The registry of model rows; what a test registers is forgotten after it."""
    from retention.rows import registry

    before = registry.row_classes()
    yield registry
    registry._registry.clear()
    registry._registry.update(before)


# The rowhost models as most tests govern them. Each fixture is
# ``register_model`` with those arguments: a test passes only what differs
# (``evidence="per_batch"``, ``tenant_field=None``, another ``data_class``),
# and what it registers is forgotten after it (``row_registry``).


def _registering(model: str, **defaults: Any) -> Any:
    from retention import api
    from tests.rowhost import models

    return functools.partial(api.register_model, getattr(models, model), **defaults)


@pytest.fixture
def register_logs(row_registry: Any) -> Any:
    """``rowhost.RequestLog`` as ``logs.request``: rows age by ``created_at``, per ``tenant_id``."""
    return _registering(
        "RequestLog", data_class="logs.request", age_field="created_at", tenant_field="tenant_id"
    )


@pytest.fixture
def register_accounts(row_registry: Any) -> Any:
    """``rowhost.Account`` as ``accounts.redact``: closed accounts, name and email redacted."""
    from retention import redaction

    redact = {"name": redaction.Constant("[redacted]"), "email": redaction.Digest()}
    return _registering(
        "Account",
        data_class="accounts.redact",
        age_field="closed_at",
        tenant_field="tenant_id",
        redact=redact,
    )


@pytest.fixture
def register_shipments(row_registry: Any) -> Any:
    """``rowhost.Shipment`` as ``pod.shipment``: delivered shipments, their proof file with them."""
    return _registering(
        "Shipment", data_class="pod.shipment", age_field="delivered_at", files=("proof",)
    )
