"""The events list over database rows: a page event is its rows, never "record None" (issue 25)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.urls import reverse

from retention.engine import run_execute, run_start
from retention.models import DeletionEvent, EventKind
from tests.rowhost.models import Account, RequestLog

pytestmark = pytest.mark.django_db


@pytest.fixture
def page_events(
    register_logs: Any, register_accounts: Any, make_policy: Any, now: Any
) -> list[DeletionEvent]:
    register_logs(evidence="per_batch")
    register_accounts()
    make_policy("logs.request", timedelta(days=30))
    make_policy("accounts.redact", timedelta(days=30), disposition="redact")
    for _ in range(3):
        RequestLog.objects.create(tenant_id="t1", path="/x", created_at=now - timedelta(days=40))
    for i in range(2):
        Account.objects.create(
            tenant_id="t1",
            name=f"n{i}",
            email=f"a{i}@example.com",
            closed_at=now - timedelta(days=40),
        )
    run = run_start(mode="enforce", data_classes=["logs.request", "accounts.redact"], now=now)
    run_execute(run=run, clock=lambda: now)
    return list(DeletionEvent.objects.filter(kind=EventKind.ROW).order_by("id"))


def test_events__a_page_event_shows_its_rows_and_outcome(page_events, bob_client):
    deleted = next(e for e in page_events if e.data_class == "logs.request")
    redacted = next(e for e in page_events if e.data_class == "accounts.redact")

    page = bob_client.get(reverse("admin:retention_deletionevent_changelist")).content.decode()

    assert "None" not in page
    assert "3 rows" in page and "2 rows" in page
    assert str(deleted) == f"Event #{deleted.pk}: 3 rows of logs.request: deleted"
    assert str(redacted) == f"Event #{redacted.pk}: 2 rows of accounts.redact: redacted"


def test_events__a_page_event_page_names_it_by_its_rows(page_events, bob_client):
    event = page_events[0]

    page = bob_client.get(
        reverse("admin:retention_deletionevent_change", args=[event.pk])
    ).content.decode()

    assert "record None" not in page
    assert f"Event #{event.pk}: " in page
