"""The dashboard over classes of model rows: each class's own figures (issue 25)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.urls import reverse
from freezegun import freeze_time

from retention import api
from retention.engine import run_execute, run_start
from tests.rowhost.models import RequestLog, Shipment

pytestmark = pytest.mark.django_db

URL = "admin:retention_policy_dashboard"


@pytest.fixture
def two_classes(register_logs: Any, make_policy: Any, now: Any) -> None:
    register_logs()
    api.register_model(
        Shipment, data_class="shipments", expires_field="expires_at", tenant_field="tenant_id"
    )
    make_policy("logs.request", timedelta(days=30))
    make_policy("shipments", timedelta(days=365))


def _rows(now: Any, *, logs: int, shipments: int, tenant: str = "t1") -> None:
    for _ in range(logs):
        RequestLog.objects.create(tenant_id=tenant, path="/x", created_at=now - timedelta(days=40))
    for _ in range(shipments):
        Shipment.objects.create(
            tenant_id=tenant, delivered_at=now - timedelta(days=400), expires_at=now
        )


def test_dashboard__each_row_class_shows_what_the_last_run_disposed_of_in_it(
    two_classes, bob_client, now
):
    _rows(now - timedelta(days=1), logs=3, shipments=2)
    run = run_start(
        mode="enforce", data_classes=["logs.request", "shipments"], now=now - timedelta(hours=1)
    )
    run = run_execute(run=run, clock=lambda: now - timedelta(hours=1))
    assert run.deleted == 5

    with freeze_time(now):
        response = bob_client.get(reverse(URL))

    by_name = {c.data_class: c for c in response.context["board"].classes}
    logs, shipments = by_name["logs.request"], by_name["shipments"]
    assert (logs.last_success, shipments.last_success) == (run, run)
    assert (logs.last_success_disposed, shipments.last_success_disposed) == (3, 2)
    html = response.content.decode()
    assert "(3 rows deleted)" in html
    assert "(2 rows deleted)" in html
    assert "(5 deleted)" not in html


def test_dashboard__row_classes_count_their_backlog_and_held_rows(
    two_classes, author, bob_client, now
):
    _rows(now - timedelta(days=1), logs=3, shipments=2, tenant="t1")
    _rows(now - timedelta(days=1), logs=4, shipments=1, tenant="t2")
    api.place_hold(reason="case 9", placed_by=author, tenant_id="t2", now=now)

    with freeze_time(now):
        response = bob_client.get(reverse(URL))

    by_name = {c.data_class: c for c in response.context["board"].classes}
    assert (by_name["logs.request"].backlog, by_name["logs.request"].held) == (3, 4)
    assert (by_name["shipments"].backlog, by_name["shipments"].held) == (2, 1)
    # The oldest row of the log class was due 10 days ago (40 days old, 30 kept).
    assert by_name["logs.request"].overdue == timedelta(days=11)
    html = response.content.decode()
    assert "4 rows" in html
    assert "the line counts tracked records only" in html
