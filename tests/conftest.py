"""Shared fixtures.

PostgreSQL-only tests (marker ``postgres``) prove claims and concurrency;
SQLite ignores SKIP LOCKED, so there they are not run, and the run says so
loudly. Under CI they must run: a CI run without PostgreSQL fails.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.conf import settings

pytest_plugins = ["tests.s3server"]

_NOT_RUN: list[str] = []


def _on_postgres() -> bool:
    return settings.DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _on_postgres():
        return
    pg_only = [item for item in items if item.get_closest_marker("postgres")]
    if not pg_only:
        return
    if os.environ.get("CI", "").lower() == "true":
        raise pytest.UsageError(
            f"CI=true but DATABASE_URL is not PostgreSQL: {len(pg_only)} PostgreSQL-only "
            "tests would not run. Set DATABASE_URL."
        )
    _NOT_RUN.extend(item.nodeid for item in pg_only)
    config.hook.pytest_deselected(items=pg_only)
    items[:] = [item for item in items if not item.get_closest_marker("postgres")]


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _NOT_RUN:
        return
    tr = terminalreporter
    tr.section("PostgreSQL-only tests NOT RUN", sep="!", red=True, bold=True)
    tr.write_line(
        f"{len(_NOT_RUN)} tests need PostgreSQL (SKIP LOCKED, concurrent claims) and did not "
        "run on SQLite. Run with DATABASE_URL=postgres://postgres@127.0.0.1:5432/lethe "
        "(CI does).",
        red=True,
        bold=True,
    )
    for nodeid in _NOT_RUN:
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
