"""A hold that lands after the re-check, then a crash, leaves the truth (issue 26, point 2).

A claimer past its re-check deletes; it dies before recording anything; a
hold covering those records is placed. The next run finds them ``deleting``
under a hold, which no claim takes: it asks the store. An object already gone
is recorded as already absent with the note that the hold came after the
re-check; one still there goes back to its hold with one held skip per hold,
however many runs come after. Records, bucket (moto over HTTP) and chain agree.
"""

from __future__ import annotations

from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command

from retention import api, engine
from retention.models import DeletionEvent, EventOutcome, RecordState, RetentionRecord, Run, RunMode
from tests.fakes import DiesAfterDelete, FakeTime, Queue, dispatch, enqueue
from tests.helpers import add_s3_storage, chain_ok, enforce, exists, put_tracked

pytestmark = pytest.mark.django_db


@pytest.fixture
def s3(settings: Any, s3_server: Any, s3_bucket: str) -> str:
    return add_s3_storage(settings, "s3", s3_server.endpoint_url, s3_bucket)


def _expired(s3: str, now: Any, count: int, tenant: str = "acme") -> list[RetentionRecord]:
    """``count`` objects of ``tenant`` in the bucket, a day past their 30 days."""
    return [
        put_tracked(tenant_id=tenant, now=now - timedelta(days=31), storage=s3)
        for _ in range(count)
    ]


def outcomes(record: RetentionRecord) -> list[tuple[str, str]]:
    return list(
        DeletionEvent.objects.filter(record=record).order_by("id").values_list("outcome", "reason")
    )


def verify_runs_ok() -> None:
    out = StringIO()
    call_command("retention_verify", "--runs", stdout=out)
    assert "Run counts agree with their events." in out.getvalue(), out.getvalue()


def test_inline_killed_after_delete_then_hold__next_run_records_the_truth_once(
    make_policy, now, approver, s3
):
    make_policy(batch_size=50)
    acme = _expired(s3, now, 6)
    globex = _expired(s3, now, 2, tenant="globex")
    page = sorted([*acme, *globex], key=lambda r: (r.expires_at, r.pk))
    # The kill came after the first five objects' delete answered.
    gone_ids = {r.pk for r in page[:5]}

    first = engine.run_start(mode=RunMode.ENFORCE, now=now)
    with pytest.raises(SystemExit):
        engine.run_execute(run=first, clock=lambda: now, disposer=DiesAfterDelete(reached=5))
    assert set(RetentionRecord.objects.values_list("state", flat=True)) == {RecordState.DELETING}
    assert DeletionEvent.objects.count() == 0

    hold = api.place_hold(
        reason="Case 26", placed_by=approver, tenant_id="acme", now=now + timedelta(minutes=1)
    )
    assert hold.in_flight == 6

    later = now + timedelta(minutes=10)  # the dead claimer's leases have lapsed
    second = enforce(now=later)
    third = enforce(now=later + timedelta(days=1))

    after = f"hold #{hold.pk} placed after the re-check"
    for record in acme:
        record.refresh_from_db()
        if record.pk in gone_ids:
            assert record.state == RecordState.DELETED and not exists(record)
            assert outcomes(record) == [(EventOutcome.ALREADY_ABSENT, after)]
        else:
            assert record.state == RecordState.ACTIVE and exists(record)
            assert record.lease_owner is None and record.disposal_started_at is None
            settled = [o for o in outcomes(record) if o[1].startswith(after)]
            # One held skip for this hold, not one per run; never a deletion.
            assert settled == [
                (EventOutcome.SKIPPED_HELD, f"{after}; the object was still there, and is kept")
            ]
            assert not DeletionEvent.objects.filter(
                record=record, outcome__in=[EventOutcome.DELETED, EventOutcome.ALREADY_ABSENT]
            ).exists()
    for record in globex:
        record.refresh_from_db()
        assert record.state == RecordState.DELETED and not exists(record)
        expected = EventOutcome.ALREADY_ABSENT if record.pk in gone_ids else EventOutcome.DELETED
        assert outcomes(record) == [(expected, "")]
    # No "legal hold applies" for an object that is gone, in either run.
    assert not DeletionEvent.objects.filter(
        record__in=gone_ids, outcome=EventOutcome.SKIPPED_HELD
    ).exists()
    second.refresh_from_db()
    third.refresh_from_db()
    kept = len(acme) - len(gone_ids & {r.pk for r in acme})
    assert second.skipped_held == kept
    assert second.already_absent == len(gone_ids)
    assert second.deleted == len([r for r in globex if r.pk not in gone_ids])
    assert RetentionRecord.objects.filter(state=RecordState.DELETING).count() == 0
    chain_ok()
    verify_runs_ok()


def test_queued_batch_killed_after_delete_then_hold__redelivery_records_the_truth(
    make_policy, now, approver, s3
):
    make_policy(batch_size=10)
    records = _expired(s3, now, 4)
    queue = Queue(FakeTime(now))
    holds: list[Any] = []

    def crash_hold_redeliver(payload: dict[str, Any]) -> None:
        with pytest.raises(SystemExit):
            queue.run_batch(payload, disposer=DiesAfterDelete(reached=2))
        holds.append(
            api.place_hold(reason="Case 26q", placed_by=approver, tenant_id="acme", now=now)
        )
        queue.run_batch(payload)

    queue.deliver = crash_hold_redeliver
    run = enqueue(now, queue)
    dispatch(run, queue)

    (hold,) = holds
    assert hold.in_flight == 4
    after = f"hold #{hold.pk} placed after the re-check"
    states = []
    for record in records:
        record.refresh_from_db()
        states.append(record.state)
        if exists(record):
            assert record.state == RecordState.ACTIVE
            assert outcomes(record) == [
                (EventOutcome.SKIPPED_HELD, f"{after}; the object was still there, and is kept")
            ]
        else:
            assert record.state == RecordState.DELETED
            assert outcomes(record) == [(EventOutcome.ALREADY_ABSENT, after)]
    assert sorted(states) == [RecordState.ACTIVE] * 2 + [RecordState.DELETED] * 2
    run.refresh_from_db()
    assert (run.already_absent, run.skipped_held, run.deleted) == (2, 2, 0)
    chain_ok()
    verify_runs_ok()


def test_queued_batch_lost_after_delete_then_hold__next_run_settles_the_rows(
    make_policy, now, approver, s3
):
    """The batch is never delivered again (a broker that lost it): the next run settles."""
    make_policy(batch_size=10)
    records = _expired(s3, now, 4)
    queue = Queue(FakeTime(now))

    def crash(payload: dict[str, Any]) -> None:
        with pytest.raises(SystemExit):
            queue.run_batch(payload, disposer=DiesAfterDelete(reached=3))

    queue.deliver = crash
    first = enqueue(now, queue)
    dispatch(first, queue)
    hold = api.place_hold(reason="Case 26l", placed_by=approver, tenant_id="acme", now=now)
    assert hold.in_flight == 4
    # The run's lease and the rows' leases lapse; the watchdog gives the run up.
    Run.objects.filter(pk=first.pk).update(lease_expires_at=now)
    queue.clock.now = now + timedelta(minutes=10)
    queue.deliver = queue.run_batch
    second = enqueue(queue.clock.now, queue)
    dispatch(second, queue)

    after = f"hold #{hold.pk} placed after the re-check"
    kept = 0
    for record in records:
        record.refresh_from_db()
        if exists(record):
            kept += 1
            assert record.state == RecordState.ACTIVE
            assert [o for o in outcomes(record) if o[1].startswith(after)] == [
                (EventOutcome.SKIPPED_HELD, f"{after}; the object was still there, and is kept")
            ]
        else:
            assert record.state == RecordState.DELETED
            assert outcomes(record) == [(EventOutcome.ALREADY_ABSENT, after)]
    assert kept == 1
    second.refresh_from_db()
    assert (second.already_absent, second.skipped_held) == (3, 1)
    chain_ok()
    verify_runs_ok()
