"""`retention_check` and reconciliation: the last findings per storage, and reappeared
objects that were not deleted again within the promise (issue 15)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import storages

from retention import api
from retention.models import DataClassMode, Policy, RecordState, RetentionRecord, RunStatus
from tests.factories import ReconcileRunFactory
from tests.helpers import RECONCILE_COUNTS, enforce, put_tracked
from tests.helpers import retention_check as check
from tests.helpers import retention_check_json as check_json

pytestmark = pytest.mark.django_db

PERIOD = timedelta(days=30)
PROMISE = timedelta(hours=24)
SECOND = timedelta(seconds=1)


def broken_of(report: dict[str, Any], data_class: str) -> list[str]:
    (item,) = [c for c in report["data_classes"] if c["data_class"] == data_class]
    return item["broken"]


def reappear(record: RetentionRecord, at: datetime) -> RetentionRecord:
    """The object is in the store again, and reconciliation put its record back in the queue."""
    assert storages[record.storage].save(record.object_key, ContentFile(b"x")) == record.object_key
    RetentionRecord.objects.filter(pk=record.pk).update(
        state=RecordState.ACTIVE,
        deleted_at=None,
        reappeared_at=at,
        reappearances=1,
        lease_owner=None,
        lease_expires_at=None,
        disposal_started_at=None,
    )
    record.refresh_from_db()
    return record


def deleted_then_reappeared(make_policy: Any, now: datetime, **policy: Any) -> RetentionRecord:
    """A record expiring at ``now``, deleted by the sweep at ``now``, back in the store at once.

    At ``now + PROMISE`` the sweep is exactly a promise old and the record exactly a
    promise overdue: neither breaks the lag promise yet, so the reappearance decides.
    """
    make_policy(period=PERIOD, **policy)
    record = put_tracked(now=now - PERIOD)
    sweep = enforce(now=now)
    record.refresh_from_db()
    assert sweep.status == RunStatus.FINISHED and record.state == RecordState.DELETED
    return reappear(record, now)


def test_check__a_reappeared_record_within_the_promise_exits_0(make_policy, now):
    deleted_then_reappeared(make_policy, now)

    code, out, _ = check(at=now + PROMISE - SECOND)
    _, report = check_json(at=now + PROMISE - SECOND)

    assert code == 0
    assert "idv.photo [enforce] ok" in out
    assert "reappeared after deletion" not in out
    assert broken_of(report, "idv.photo") == []
    assert report["reconciliation"]["reappeared_overdue"] == []


def test_check__a_reappeared_record_not_deleted_again_a_promise_later_exits_1(make_policy, now):
    deleted_then_reappeared(make_policy, now)

    code, out, error = check(at=now + PROMISE)
    _, report = check_json(at=now + PROMISE)

    assert code == 1
    assert "idv.photo [enforce] BROKEN: reappeared objects not deleted again" in out
    assert (
        "  reappeared after deletion, not deleted again 1; oldest reappeared "
        "2026-03-14 12:00 UTC, 1 day ago (over the promise)"
    ) in out
    assert error == "retention promise broken: idv.photo (reappeared objects not deleted again)"
    assert report["ok"] is False and report["broken"] == ["idv.photo"]
    assert broken_of(report, "idv.photo") == ["reappeared_not_deleted"]
    assert report["reconciliation"]["reappeared_overdue"] == [
        {"data_class": "idv.photo", "records": 1, "oldest_reappeared_at": "2026-03-14T12:00:00Z"}
    ]


def test_check__the_reappearance_promise_is_the_lag_promise_setting(make_policy, now, settings):
    deleted_then_reappeared(make_policy, now)
    settings.RETENTION_LAG_PROMISE = timedelta(hours=48)

    code, report = check_json(at=now + PROMISE)

    assert code == 0
    assert report["reconciliation"]["reappeared_overdue"] == []


def test_check__a_reappeared_record_deleted_again_exits_0(make_policy, now):
    record = deleted_then_reappeared(make_policy, now)
    again = enforce(now=now + timedelta(hours=1))
    record.refresh_from_db()
    assert again.deleted == 1 and record.deleted_at is not None

    code, report = check_json(at=now + 3 * PROMISE)

    assert code == 0
    assert report["reconciliation"]["reappeared_overdue"] == []


def test_check__a_reappeared_record_found_missing_since_exits_0(make_policy, now):
    record = deleted_then_reappeared(make_policy, now)
    RetentionRecord.objects.filter(pk=record.pk).update(state=RecordState.MISSING)

    code, report = check_json(at=now + 3 * PROMISE)

    assert code == 0
    assert report["reconciliation"]["reappeared_overdue"] == []


def test_check__a_reappeared_record_under_a_hold_is_kept_on_purpose(make_policy, now, approver):
    deleted_then_reappeared(make_policy, now)
    api.place_hold(reason="Case 12", placed_by=approver, tenant_id="acme", now=now)

    code, report = check_json(at=now + 3 * PROMISE)

    assert code == 0
    assert broken_of(report, "idv.photo") == []


def test_check__a_reappeared_record_renewed_since_is_not_owed(make_policy, now):
    record = deleted_then_reappeared(make_policy, now)
    api.renew(record, now=now + timedelta(hours=1))

    code, report = check_json(at=now + 3 * PROMISE)

    assert code == 0
    assert report["reconciliation"]["reappeared_overdue"] == []


def test_check__a_reappeared_record_of_a_report_only_class_is_listed_not_checked(make_policy, now):
    deleted_then_reappeared(make_policy, now)
    # Back to report-only after the reappearance: nothing is promised for the class.
    Policy.objects.filter(data_class="idv.photo").update(mode=DataClassMode.REPORT_ONLY)

    code, out, _ = check(at=now + 3 * PROMISE)
    _, report = check_json(at=now + 3 * PROMISE)

    assert code == 0
    assert "idv.photo [report-only] report-only, not checked" in out
    assert "reappeared after deletion, not deleted again 1" in out
    assert broken_of(report, "idv.photo") == []
    assert [r["data_class"] for r in report["reconciliation"]["reappeared_overdue"]] == [
        "idv.photo"
    ]


# --------------------------------------------------------------------------
# The last reconciliation per storage


@pytest.fixture
def reconciled(now):
    """``s3`` last reconciled 3 days ago; ``default`` by a dry run 2 hours ago (which counts:
    it observed the store). A newer run that ended in error observed nothing complete."""
    older = ReconcileRunFactory(
        finished_at=now - timedelta(days=3),
        storages={
            "default": {"orphans": 9, "missing": 9, "listed": 90, "tracked": 90},
            "s3": {
                "orphans": 4,
                "missing": 1,
                "reappeared": 2,
                "leftover_versions": 3,
                "listed": 120,
                "tracked": 118,
                "adopted": 0,
            },
        },
    )
    newer = ReconcileRunFactory(
        finished_at=now - timedelta(hours=2),
        dry_run=True,
        storages={"default": {"orphans": 1, "missing": 0, "listed": 10, "tracked": 9}},
    )
    ReconcileRunFactory(
        status=RunStatus.ERROR,
        finished_at=now - timedelta(minutes=5),
        storages={"s3": {"orphans": 99}},
    )
    ReconcileRunFactory(status=RunStatus.REFUSED, finished_at=now, storages={})
    return {"older": older, "newer": newer}


def test_check__prints_the_last_reconciliation_per_storage_and_its_age(db, reconciled, now):
    code, out, _ = check(at=now)

    assert code == 0
    lines = out.splitlines()
    at = lines.index("Last reconciliation per storage (the store compared with the records):")
    assert lines[at + 1 :] == [
        "  default: orphans 1, missing 0, reappeared 0, leftover versions 0; reconciled "
        f"2026-03-14 10:00 UTC, 2 hours ago (dry run) (run {reconciled['newer'].pk})",
        "  s3: orphans 4, missing 1, reappeared 2, leftover versions 3; reconciled "
        f"2026-03-11 12:00 UTC, 3 days ago (run {reconciled['older'].pk})",
    ]


def test_check__json_lists_the_last_reconciliation_per_storage_with_stable_keys(
    db, reconciled, now
):
    code, report = check_json(at=now)

    assert code == 0
    assert set(report["reconciliation"]) == {"storages", "reappeared_overdue"}
    default, s3 = report["reconciliation"]["storages"]
    assert set(default) == {"storage", "run_id", "finished_at", "age_seconds", "dry_run", "counts"}
    assert set(default["counts"]) == set(RECONCILE_COUNTS)
    assert default == {
        "storage": "default",
        "run_id": str(reconciled["newer"].pk),
        "finished_at": "2026-03-14T10:00:00Z",
        "age_seconds": 2 * 3600,
        "dry_run": True,
        "counts": {
            "orphans": 1,
            "missing": 0,
            "reappeared": 0,
            "leftover_versions": 0,
            "listed": 10,
            "tracked": 9,
            "adopted": 0,
        },
    }
    assert (s3["storage"], s3["run_id"], s3["age_seconds"], s3["dry_run"]) == (
        "s3",
        str(reconciled["older"].pk),
        3 * 86400,
        False,
    )
    assert s3["counts"]["leftover_versions"] == 3


def test_check__says_when_no_reconciliation_finished_yet(db, now):
    ReconcileRunFactory(status=RunStatus.REFUSED, finished_at=now, storages={})

    code, out, _ = check(at=now)
    _, report = check_json(at=now)

    assert code == 0
    assert "Last reconciliation per storage: none finished yet." in out
    assert report["reconciliation"] == {"storages": [], "reappeared_overdue": []}


def test_check__an_old_object_reappearing_is_late_from_when_it_was_found_not_its_deadline(
    make_policy, now
):
    from retention import engine

    make_policy(period=PERIOD)
    record = put_tracked(now=now - PERIOD - timedelta(days=60))
    assert enforce(now=now).deleted == 1
    assert storages[record.storage].save(record.object_key, ContentFile(b"x")) == record.object_key
    engine.reconcile_run(now=now)
    record.refresh_from_db()
    assert (record.state, record.reappeared_at) == (RecordState.FAILED, now)

    code, _, _ = check(at=now + PROMISE - SECOND)
    late_code, late_out, _ = check(at=now + PROMISE + SECOND)

    assert code == 0
    assert late_code == 1
    assert "reappeared" in late_out
