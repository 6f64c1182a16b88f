"""GET /api/v1/deletions/report/: on time vs late, overdue, held (SPEC §3.2)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.files.storage import storages
from freezegun import freeze_time

from retention import api
from tests.helpers import enforce, put_tracked

pytestmark = pytest.mark.django_db

PERIOD = timedelta(days=30)


@pytest.fixture
def scenario(settings, make_policy, approver, now):
    """A run at ``now`` (T), then a report six hours later (R), with a 1 h promise."""
    settings.RETENTION_LAG_PROMISE = timedelta(hours=1)
    make_policy("idv.photo", PERIOD)
    make_policy("logs.integration", PERIOD, enforce=False)
    t, r = now, now + timedelta(hours=6)

    def track(tenant="acme", data_class="idv.photo", expires=None):
        return put_tracked(tenant_id=tenant, data_class=data_class, now=expires - PERIOD)

    on_time = track(expires=t - timedelta(minutes=30))
    late = track(expires=t - timedelta(hours=2))
    absent = track(expires=t - timedelta(minutes=10))
    storages["default"].delete(absent.object_key)
    enforce(now=t)

    overdue = track(expires=r - timedelta(hours=3))
    track(expires=r - timedelta(minutes=30))  # expired, within the promise: not overdue
    held = track(expires=r - timedelta(hours=5))
    api.place_hold(reason="case 7", placed_by=approver, record=held, now=t)
    report_only = track(data_class="logs.integration", expires=r - timedelta(days=2))
    track(tenant="globex", expires=r - timedelta(hours=10))
    return {
        "run_at": t,
        "report_at": r,
        "on_time": on_time,
        "late": late,
        "overdue": overdue,
        "report_only": report_only,
    }


def test_report__splits_on_time_and_late_and_finds_the_oldest_overdue(client, acme, scenario):
    with freeze_time(scenario["report_at"]):
        response = client.get("/api/v1/deletions/report/", headers=acme)

    assert response.status_code == 200
    body = response.json()
    assert body["tenant_id"] == "acme"
    assert body["lag_promise_seconds"] == 3600
    assert body["generated_at"] == "2026-03-14T18:00:00Z"
    assert body["data_classes"] == [
        {
            "data_class": "idv.photo",
            "deleted": 2,
            "already_absent": 1,
            "redacted": 0,
            "on_time": 2,
            "late": 1,
            "missing": 0,
            "overdue": 1,
            "held": 1,
            "oldest_overdue": {
                "record_id": scenario["overdue"].pk,
                "data_class": "idv.photo",
                "expires_at": "2026-03-14T15:00:00Z",
                "overdue_by_seconds": 3 * 3600,
            },
        },
        {
            "data_class": "logs.integration",
            "deleted": 0,
            "already_absent": 0,
            "redacted": 0,
            "on_time": 0,
            "late": 0,
            "missing": 0,
            "overdue": 1,
            "held": 0,
            "oldest_overdue": {
                "record_id": scenario["report_only"].pk,
                "data_class": "logs.integration",
                "expires_at": "2026-03-12T18:00:00Z",
                "overdue_by_seconds": 2 * 86400,
            },
        },
    ]
    assert body["oldest_overdue"]["record_id"] == scenario["report_only"].pk


def test_report__window_counts_only_receipts_deleted_inside_it(client, acme, scenario):
    with freeze_time(scenario["report_at"]):
        before = client.get(
            "/api/v1/deletions/report/?until=2026-03-14T12:00:00Z", headers=acme
        ).json()
        during = client.get(
            "/api/v1/deletions/report/?since=2026-03-14T12:00:00Z&until=2026-03-14T12:00:01Z",
            headers=acme,
        ).json()

    photo_before = before["data_classes"][0]
    assert (photo_before["deleted"], photo_before["already_absent"]) == (0, 0)
    assert photo_before["overdue"] == 1  # overdue is as of now, not windowed
    assert (before["since"], before["until"]) == (None, "2026-03-14T12:00:00Z")
    photo_during = during["data_classes"][0]
    assert (photo_during["deleted"], photo_during["on_time"], photo_during["late"]) == (2, 2, 1)


def test_report__a_longer_promise_turns_late_into_on_time(client, acme, scenario, settings):
    settings.RETENTION_LAG_PROMISE = timedelta(hours=3)

    with freeze_time(scenario["report_at"]):
        body = client.get("/api/v1/deletions/report/", headers=acme).json()

    photo = body["data_classes"][0]
    assert (photo["on_time"], photo["late"], photo["overdue"]) == (3, 0, 0)


def test_report__bad_window_answers_400_invalid(client, acme):
    response = client.get(
        "/api/v1/deletions/report/?since=2026-03-14T00:00:00Z&until=2026-03-14T00:00:00Z",
        headers=acme,
    )

    assert response.status_code == 400
    assert response.json()["code"] == "invalid"
    assert "until" in response.json()["field_errors"]


@pytest.mark.parametrize("evidence", ["per_row", "per_batch"])
def test_report__a_page_event_counts_its_rows(
    client, acme, register_logs, make_policy, now, evidence
):
    from retention.engine import run_execute, run_start
    from tests.rowhost.models import RequestLog

    register_logs(evidence=evidence)
    make_policy("logs.request", PERIOD)
    for _ in range(3):
        RequestLog.objects.create(tenant_id="acme", path="/x", created_at=now - PERIOD * 2)
    run = run_start(mode="enforce", data_classes=["logs.request"], now=now)
    run_execute(run=run, clock=lambda: now)

    with freeze_time(now):
        body = client.get("/api/v1/deletions/report/", headers=acme).json()

    (logs,) = [c for c in body["data_classes"] if c["data_class"] == "logs.request"]
    # Due 30 days before the run, far past the promise: three rows, all late.
    assert (logs["deleted"], logs["late"], logs["on_time"]) == (3, 3, 0)


def test_report__a_per_row_page_counts_each_rows_lateness(
    client, acme, settings, register_logs, make_policy, now
):
    from retention.engine import run_execute, run_start
    from tests.rowhost.models import RequestLog

    settings.RETENTION_LAG_PROMISE = timedelta(hours=1)
    register_logs()
    make_policy("logs.request", PERIOD)
    # One page: two rows due 3 h and 2 h before the run (late), one 30 min before.
    for ago in (timedelta(hours=3), timedelta(hours=2), timedelta(minutes=30)):
        RequestLog.objects.create(tenant_id="acme", path="/x", created_at=now - PERIOD - ago)
    run = run_start(mode="enforce", data_classes=["logs.request"], now=now)
    run_execute(run=run, clock=lambda: now)

    with freeze_time(now):
        body = client.get("/api/v1/deletions/report/", headers=acme).json()

    (logs,) = [c for c in body["data_classes"] if c["data_class"] == "logs.request"]
    assert (logs["deleted"], logs["late"], logs["on_time"]) == (3, 2, 1)
