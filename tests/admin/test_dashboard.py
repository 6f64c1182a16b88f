"""The dashboard: backlog, lag against the promise, last run, failures, a 30-day chart."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.urls import reverse

from retention.models import RecordState, RetentionRecord
from retention.selectors.class_health import dashboard
from tests.helpers import enforce, put_tracked

pytestmark = pytest.mark.django_db

URL = "admin:retention_policy_dashboard"


@pytest.fixture
def board_data(make_policy, approver, now):
    make_policy(period=timedelta(days=30))  # enforced
    make_policy(data_class="logs.integration", period=timedelta(days=7), enforce=False)
    days = timedelta(days=1)
    # Deleted four days ago by an enforcing run (expired 10 and 6 days ago).
    put_tracked(now=now - 40 * days)
    put_tracked(now=now - 36 * days)
    run = enforce(now=now - 4 * days)
    # Expired since: 3 days and 2 hours overdue, not yet deleted.
    late = put_tracked(now=now - 33 * days)
    put_tracked(now=now - 30 * days - timedelta(hours=2))
    failed = put_tracked(now=now - 35 * days)
    RetentionRecord.objects.filter(pk=failed.pk).update(
        state=RecordState.FAILED, retryable=False, last_error="AccessDenied"
    )
    put_tracked(data_class="logs.integration", now=now - 8 * days)
    return {"run": run, "late": late}


def test_dashboard__per_class_backlog_lag_last_run_and_failures(board_data, bob_client, now):
    response = bob_client.get(reverse(URL))

    board = response.context["board"]
    photo, logs = board.classes
    assert (photo.data_class, logs.data_class) == ("idv.photo", "logs.integration")
    assert photo.backlog == 2
    assert photo.failed_for_review == 1
    assert photo.oldest_eligible_at == board_data["late"].expires_at
    assert photo.overdue > timedelta(days=3)
    assert photo.late  # over the 24-hour promise
    assert photo.last_success == board_data["run"]
    assert logs.backlog == 1
    assert not logs.late  # report-only: a backlog there is not a broken promise
    html = response.content.decode()
    assert "over the 1 day promise" in html
    assert "1 data class behind the promise" in html


def test_dashboard__the_promise_is_a_setting(board_data, bob_client, settings):
    settings.RETENTION_LAG_PROMISE = timedelta(days=5)

    board = bob_client.get(reverse(URL)).context["board"]

    assert board.promise == timedelta(days=5)
    assert not board.late_classes


def test_dashboard__chart_counts_deletions_per_day_and_the_backlog(board_data, now):
    board = dashboard(now=now)

    by_day = {point.day: point for point in board.days}
    today = now.date()
    assert len(board.days) == 30
    assert by_day[today - timedelta(days=4)].deleted == 2
    assert sum(p.deleted for p in board.days) == 2
    # Before the run: both expired records waited (expired 10 and 6 days ago).
    assert by_day[today - timedelta(days=5)].backlog == 2
    assert by_day[today - timedelta(days=7)].backlog == 1
    # Today: the late idv.photo record, the one two hours overdue, and the
    # report-only log (failed-for-review rows are not backlog).
    assert by_day[today].backlog == 3


def test_dashboard__chart_is_inline_svg_without_external_assets(board_data, bob_client):
    html = bob_client.get(reverse(URL)).content.decode()

    svg = re.search(r"<svg xmlns=.*?</svg>", html, re.S).group(0)
    assert svg.count('<rect class="bar"') == 31  # 30 days and the legend
    assert "<polyline" in svg
    assert re.findall(r"https?://[^\"]+", svg) == ["http://www.w3.org/2000/svg"]
    content = html[html.index('id="content-main"') :]
    assert "<script" not in content


def test_dashboard__narrowed_to_one_data_class(board_data, bob_client):
    response = bob_client.get(reverse(URL), {"data_class": "logs.integration"})

    board = response.context["board"]
    assert board.data_class == "logs.integration"
    assert sum(p.deleted for p in board.days) == 0


def test_dashboard__linked_from_the_admin_index(bob_client, alice_client):
    for client in (bob_client, alice_client):
        html = client.get(reverse("admin:index")).content.decode()
        assert reverse(URL) in html
        assert "Dry-run reports" in html


def test_dashboard__the_chart_counts_the_rows_of_a_page_event(register_logs, make_policy, now):
    from retention.engine import run_execute, run_start
    from tests.rowhost.models import RequestLog

    register_logs()
    make_policy("logs.request", timedelta(days=30))
    for tenant in ("acme", "acme", "globex"):
        RequestLog.objects.create(tenant_id=tenant, path="/x", created_at=now - timedelta(days=31))
    run = run_start(mode="enforce", data_classes=["logs.request"], now=now)
    run_execute(run=run, clock=lambda: now)

    board = dashboard(now=now, data_class="logs.request")

    # Two page events (one a tenant), three rows: three deletions.
    assert sum(p.deleted for p in board.days) == 3
