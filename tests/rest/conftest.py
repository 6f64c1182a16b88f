"""Fixtures for the REST API: tenant keys, signing keys, seeded receipts."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.core.cache import cache

from retention.models import DeletionEvent, EventOutcome, Policy, RetentionRecord
from retention.rest.services import tenant_key_create
from tests.helpers import enforce, put_tracked

HMAC_KEYS = {"ops-2026a": "a" * 40, "ops-2026b": "b" * 40}


@pytest.fixture(autouse=True)
def _api_settings(settings: Any) -> Any:
    settings.RETENTION_HMAC_KEYS = ",".join(f"{k}:{v}" for k, v in HMAC_KEYS.items())
    settings.RETENTION_API_THROTTLE_RATE = "100000/min"
    # Throttle counters live in the default (local memory) cache.
    cache.clear()
    yield settings
    cache.clear()


@pytest.fixture
def tenant_headers(db: Any) -> Callable[..., dict[str, str]]:
    """``tenant_headers("acme")`` → headers carrying a fresh key of that tenant."""

    def make(tenant_id: str = "acme") -> dict[str, str]:
        _, secret = tenant_key_create(tenant_id=tenant_id)
        return {"Authorization": f"Api-Key {secret}"}

    return make


@pytest.fixture
def acme(tenant_headers: Callable[..., dict[str, str]]) -> dict[str, str]:
    return tenant_headers("acme")


@pytest.fixture
def globex(tenant_headers: Callable[..., dict[str, str]]) -> dict[str, str]:
    return tenant_headers("globex")


def receipts_of(tenant_id: str) -> list[DeletionEvent]:
    return list(
        DeletionEvent.objects.filter(
            tenant_id=tenant_id, outcome__in=[EventOutcome.DELETED, EventOutcome.ALREADY_ABSENT]
        ).order_by("id")
    )


@pytest.fixture
def deleted_records(make_policy: Any, now: datetime) -> Callable[..., list[RetentionRecord]]:
    """Track objects for tenants, let them expire, and delete them with a real run.

    ``deleted_records({"acme": 2, "globex": 1}, at=now)`` returns the records,
    deleted by an enforcing run at ``at``.
    """

    def make(
        counts: dict[str, int],
        *,
        data_class: str = "idv.photo",
        at: datetime | None = None,
        period: timedelta = timedelta(days=30),
    ) -> list[RetentionRecord]:
        at = at or now
        if not Policy.objects.filter(data_class=data_class).exists():
            make_policy(data_class, period)
        records = [
            put_tracked(
                tenant_id=tenant, data_class=data_class, now=at - period - timedelta(hours=1)
            )
            for tenant, n in counts.items()
            for _ in range(n)
        ]
        enforce(now=at, start={"data_classes": [data_class]})
        for record in records:
            record.refresh_from_db()
        return records

    return make
