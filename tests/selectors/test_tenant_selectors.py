"""Tenant-scoped reads (retention.selectors.tenant)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from retention.models import DeletionEvent, EventOutcome, RetentionRecord
from retention.selectors.explain import duration_words, record_retention_explain, tenant_record_get
from retention.selectors.tenant import deletion_receipt_rows, deletion_receipts
from tests.helpers import enforce, put_tracked

pytestmark = pytest.mark.django_db


def add_event(record, version, *, at, outcome=EventOutcome.DELETED):
    return DeletionEvent.objects.create(
        idempotency_key=f"test:{DeletionEvent.objects.count()}",
        record=record,
        tenant_id=record.tenant_id,
        data_class=record.data_class,
        policy_version=version,
        policy_key=record.data_class,
        policy_version_number=version.number,
        disposition="delete",
        outcome=outcome,
        attempt=1,
        key_digest="0" * 64,
        expires_at=at - timedelta(hours=1),
        occurred_at=at,
    )


@pytest.mark.parametrize("chunk_size", [1, 2, 3, 4, 100])
def test_receipt_rows__every_receipt_once_by_deletion_time_across_shared_timestamps(
    make_policy, now, chunk_size
):
    version = make_policy()
    record = put_tracked(tenant_id="acme", now=now)
    other = put_tracked(tenant_id="globex", now=now)
    # A run finalizes a batch at one instant: many receipts share a timestamp.
    times = [now, now, now, now, now + timedelta(seconds=1), now - timedelta(seconds=1), now]
    events = [add_event(record, version, at=t) for t in times]
    add_event(other, version, at=now)
    add_event(record, version, at=now, outcome=EventOutcome.SKIPPED_HELD)

    rows = list(deletion_receipt_rows(tenant_id="acme", chunk_size=chunk_size))

    expected = sorted(events, key=lambda e: (e.occurred_at, e.pk))
    assert [row[0] for row in rows] == [e.pk for e in expected]


def test_receipt_rows__filters_match_the_list_selector(make_policy, now):
    version = make_policy()
    record = put_tracked(tenant_id="acme", now=now)
    for hours in range(6):
        add_event(record, version, at=now + timedelta(hours=hours))
    window = {"since": now + timedelta(hours=1), "until": now + timedelta(hours=4)}

    rows = list(deletion_receipt_rows(tenant_id="acme", chunk_size=2, **window))

    listed = deletion_receipts(tenant_id="acme", **window).order_by("id")
    assert [row[0] for row in rows] == list(listed.values_list("id", flat=True))
    assert len(rows) == 3


def test_tenant_selectors__refuse_an_empty_tenant(db):
    with pytest.raises(ValueError):
        deletion_receipts(tenant_id="")
    with pytest.raises(ValueError):
        tenant_record_get(tenant_id="", record_id=1)


def test_tenant_record_get__another_tenants_record_does_not_exist(make_policy, now):
    make_policy()
    theirs = put_tracked(tenant_id="globex", now=now)

    with pytest.raises(RetentionRecord.DoesNotExist):
        tenant_record_get(tenant_id="acme", record_id=theirs.pk)
    with pytest.raises(RetentionRecord.DoesNotExist):
        record_retention_explain(
            tenant_id="acme", record_id=theirs.pk, now=now, promise=timedelta(hours=24)
        )


@pytest.mark.parametrize(
    ("value", "words"),
    [
        (timedelta(0), "no time at all"),
        (timedelta(days=30), "30 days"),
        (timedelta(days=1, hours=6, minutes=5), "1 day 6 hours"),
        (timedelta(hours=1), "1 hour"),
        (timedelta(seconds=90), "1 minute 30 seconds"),
    ],
)
def test_duration_words__reads_like_a_person_would_say_it(value, words):
    assert duration_words(value) == words


def test_explain__a_record_whose_object_was_gone_at_deletion_was_not_found_not_deleted(
    make_policy, now
):
    from django.core.files.storage import storages

    make_policy()
    absent = put_tracked(tenant_id="acme", now=now - timedelta(days=31))
    deleted = put_tracked(tenant_id="acme", now=now - timedelta(days=31))
    storages["default"].delete(absent.object_key)
    run = enforce(now=now)
    assert (run.deleted, run.already_absent) == (1, 1)

    def explained(record):
        return record_retention_explain(
            tenant_id="acme", record_id=record.pk, now=now, promise=timedelta(hours=24)
        ).explanation

    assert "It was not found at deletion time (2026-03-14 12:00 UTC)" in explained(absent)
    assert "deleted on" not in explained(absent)
    assert "It was deleted on 2026-03-14 12:00 UTC" in explained(deleted)
    assert "not found" not in explained(deleted)
