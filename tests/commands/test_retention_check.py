"""`retention_check`: pages on lag against the promise, not on "cron ran" (SPEC §3.1)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from retention import services
from retention.models import ErasureState, RecordState, RetentionRecord, Run, RunMode
from tests.helpers import enforce, put_tracked
from tests.helpers import retention_check as check
from tests.helpers import retention_check_json as check_json

pytestmark = pytest.mark.django_db

PERIOD = timedelta(days=30)
MARGIN = timedelta(hours=2)
MINUTE = timedelta(minutes=1)
PROMISE = timedelta(hours=24)

CLASS_KEYS = {
    "data_class",
    "mode",
    "enforced",
    "ok",
    "broken",
    "backlog",
    "held",
    "oldest_eligible_at",
    "overdue_seconds",
    "failed_for_review",
    "retrying",
    "last_success_at",
    "last_success_age_seconds",
    "last_success_run_id",
    "breaker_trip",
}


def by_class(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["data_class"]: c for c in report["data_classes"]}


@pytest.fixture
def expiring(make_policy, now):
    """A record expiring at ``now``; a full sweep an hour later leaves it alone.

    The safety margin (2 h) keeps the sweep's cutoff before the deadline: the
    record becomes eligible at the next sweep, as in a nightly schedule.
    """
    make_policy(period=PERIOD, safety_margin=MARGIN)
    record = put_tracked(now=now - PERIOD)
    sweep = enforce(now=now + timedelta(hours=1))
    assert sweep.status == "finished" and sweep.deleted == 0
    return {"record": record, "sweep": sweep, "expires_at": now}


def test_check__a_record_just_within_the_promise_exits_0(expiring):
    code, out, _ = check(at=expiring["expires_at"] + PROMISE - MINUTE)

    assert code == 0
    assert "idv.photo [enforce] ok" in out
    assert "backlog 1; oldest expired 2026-03-14 12:00 UTC, 23 hours 59 minutes ago" in out
    assert "(within the promise)" in out


def test_check__a_record_just_past_the_promise_exits_1(expiring):
    code, out, error = check(at=expiring["expires_at"] + PROMISE + MINUTE)

    assert code == 1
    assert "idv.photo [enforce] BROKEN: overdue records" in out
    assert "1 day 1 minute ago (over the promise)" in out
    assert error == "retention promise broken: idv.photo (overdue records)"


def test_check__the_promise_is_the_setting(expiring, settings):
    settings.RETENTION_LAG_PROMISE = timedelta(hours=48)

    code, report = check_json(at=expiring["expires_at"] + PROMISE + MINUTE)

    assert code == 0
    assert report["lag_promise_seconds"] == 48 * 3600
    assert by_class(report)["idv.photo"]["overdue_seconds"] == 24 * 3600 + 60


def test_check__a_held_record_is_not_overdue(expiring, approver):
    services.legal_hold_place(
        reason="Case 7",
        placed_by=approver,
        tenant_id="acme",
        now=expiring["expires_at"],
    )

    code, report = check_json(at=expiring["expires_at"] + 3 * PROMISE)

    assert code == 0
    photo = by_class(report)["idv.photo"]
    assert (photo["backlog"], photo["held"], photo["overdue_seconds"]) == (0, 1, None)


def test_check__failures_waiting_for_review_exit_1(make_policy, now):
    make_policy(period=PERIOD)
    failed = put_tracked(now=now - PERIOD)
    RetentionRecord.objects.filter(pk=failed.pk).update(
        state=RecordState.FAILED, retryable=False, last_error="AccessDenied"
    )

    code, out, error = check(at=now + timedelta(minutes=5))

    assert code == 1
    assert "failed, waiting for review 1; retrying 0" in out
    assert error == "retention promise broken: idv.photo (failures waiting for review)"


def test_check__a_retry_within_the_promise_exits_0(expiring):
    RetentionRecord.objects.filter(pk=expiring["record"].pk).update(
        state=RecordState.FAILED, retryable=True, next_attempt_at=expiring["expires_at"]
    )

    code, report = check_json(at=expiring["expires_at"] + timedelta(hours=3))

    assert code == 0
    photo = by_class(report)["idv.photo"]
    assert (photo["backlog"], photo["retrying"], photo["failed_for_review"]) == (1, 1, 0)


def test_check__a_backlog_and_no_sweep_within_the_promise_exits_1(expiring):
    # Fresh backlog (3 hours overdue), but the last sweep is older than the promise.
    at = expiring["sweep"].finished_at + PROMISE + MINUTE

    code, report = check_json(at=at)

    assert code == 1
    assert report["broken"] == ["idv.photo"]
    photo = by_class(report)["idv.photo"]
    assert photo["broken"] == ["overdue", "no_recent_success"]
    assert photo["last_success_run_id"] == str(expiring["sweep"].pk)
    assert photo["last_success_age_seconds"] == 24 * 3600 + 60


def test_check__an_old_sweep_without_backlog_exits_0(make_policy, now):
    make_policy(period=PERIOD)
    put_tracked(now=now)  # expires in 30 days
    sweep = enforce(now=now)

    code, out, _ = check(at=now + 10 * PROMISE)

    assert code == 0
    assert f"last successful run 2026-03-14 12:00 UTC, 10 days ago (run {sweep.pk})" in out


def test_check__never_swept_with_a_backlog_exits_1(make_policy, now):
    make_policy(period=PERIOD)
    put_tracked(now=now - PERIOD)

    code, out, error = check(at=now + timedelta(hours=1))

    assert code == 1
    assert "last successful run: never" in out
    assert error == "retention promise broken: idv.photo (no successful run)"


def test_check__a_run_narrowed_to_one_tenant_is_not_a_sweep(make_policy, now):
    make_policy(period=PERIOD)
    put_tracked(tenant_id="globex", now=now - PERIOD + timedelta(hours=2))
    enforce(now=now + timedelta(hours=1), start={"tenant_id": "acme"})
    assert Run.objects.get(mode=RunMode.ENFORCE).status == "finished"

    code, report = check_json(at=now + timedelta(hours=3))

    assert code == 1
    assert by_class(report)["idv.photo"]["broken"] == ["no_recent_success"]
    assert by_class(report)["idv.photo"]["last_success_run_id"] is None


def test_check__report_only_classes_are_listed_never_broken(make_policy, now):
    make_policy(data_class="logs.integration", period=timedelta(days=7), enforce=False)
    put_tracked(data_class="logs.integration", now=now - timedelta(days=60))

    code, out, _ = check(at=now)
    _, report = check_json(at=now)

    assert code == 0
    assert "logs.integration [report-only] report-only, not checked" in out
    logs = by_class(report)["logs.integration"]
    assert (logs["enforced"], logs["ok"], logs["broken"], logs["backlog"]) == (False, True, [], 1)
    assert logs["overdue_seconds"] > 50 * 86400


def test_check__json_schema(expiring, make_policy):
    make_policy(data_class="logs.integration", period=timedelta(days=7), enforce=False)
    at = expiring["expires_at"] + PROMISE + MINUTE

    code, report = check_json(at=at)

    assert code == 1
    assert set(report) == {
        "ok",
        "checked_at",
        "lag_promise_seconds",
        "paused",
        "broken",
        "data_classes",
        "reconciliation",
        "workers",
        "erasures",
    }
    assert report["erasures"] == {
        "ok": True,
        "by_state": dict.fromkeys(ErasureState.values, 0),
        "overdue": [],
    }
    assert report["workers"] == {
        "ok": True,
        "broken": [],
        "clock_skew_limit_seconds": 60.0,
        "hosts": [],
        "watchdog_installed": False,
        "queued_runs_recent": False,
    }
    assert report["ok"] is False
    assert report["checked_at"] == "2026-03-15T12:01:00Z"
    assert report["paused"] is False
    assert [c["data_class"] for c in report["data_classes"]] == ["idv.photo", "logs.integration"]
    photo = by_class(report)["idv.photo"]
    assert set(photo) == CLASS_KEYS
    assert photo == {
        "data_class": "idv.photo",
        "mode": "enforce",
        "enforced": True,
        "ok": False,
        "broken": ["overdue"],
        "backlog": 1,
        "held": 0,
        "oldest_eligible_at": "2026-03-14T12:00:00Z",
        "overdue_seconds": 24 * 3600 + 60,
        "failed_for_review": 0,
        "retrying": 0,
        "last_success_at": "2026-03-14T13:00:00Z",
        "last_success_age_seconds": 23 * 3600 + 60,
        "last_success_run_id": str(expiring["sweep"].pk),
        "breaker_trip": None,
    }


def test_check__no_data_class_exits_0(db, now):
    code, report = check_json(at=now)

    assert code == 0
    assert (report["ok"], report["data_classes"], report["broken"]) == (True, [], [])


def test_check__says_when_the_kill_switch_is_engaged(expiring, approver):
    services.kill_switch_pause(by=approver, reason="incident 42", now=expiring["expires_at"])

    code, out, _ = check(at=expiring["expires_at"] + timedelta(hours=2))
    _, report = check_json(at=expiring["expires_at"] + timedelta(hours=2))

    assert code == 0
    assert "Kill switch engaged: nothing new is claimed (incident 42)." in out
    assert report["paused"] is True
