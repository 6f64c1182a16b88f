"""A hold committed while the inline claim walks its rows keeps its record (issue 26 review).

On PostgreSQL READ COMMITTED, the claim's ``NOT EXISTS`` over holds reads
the statement's snapshot: a hold (its row and the records' version bump)
committed after the statement started but before the claim locked the row
is not seen by it. The claim then asks again, in a new statement of its own
transaction, and gives such rows back to their hold before anything is
deleted. The claim statement is stopped on its first row by an advisory
lock this test holds, so the hold lands in that window every time.
"""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.db.models import BooleanField, Q
from django.db.models.expressions import RawSQL

from retention import api, engine
from retention.engine import claims
from retention.engine.page import stranded_settle
from retention.models import DeletionEvent, EventOutcome, RecordState, RetentionRecord, Run, RunMode
from tests.helpers import exists, on_own_connection, put_tracked

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

GATE = (4242, 26)


def _waiting_on_gate() -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted "
            "AND classid = %s AND objid = %s AND objsubid = 2",
            list(GATE),
        )
        (waiting,) = cursor.fetchone()
    return bool(waiting)


@pytest.fixture
def first_and_second(make_policy: Any, now: Any) -> tuple[RetentionRecord, RetentionRecord]:
    """Two expired records of one tenant; the claim reaches ``first`` (the older) first."""
    make_policy()
    return (
        put_tracked(tenant_id="acme", now=now - timedelta(days=32)),
        put_tracked(tenant_id="acme", now=now - timedelta(days=31)),
    )


def _claim_while_held(
    run: Run, first: Any, held: Any, *, reason: str, approver: Any, now: Any, monkeypatch: Any
) -> Any:
    """The inline claim, with a hold on ``held`` committed while its statement waits on ``first``.

    Returns the claim and the hold.
    """
    table = RetentionRecord._meta.db_table
    stall = RawSQL(
        f'CASE WHEN "{table}"."id" = %s '
        "THEN pg_advisory_xact_lock_shared(%s, %s)::text = '' ELSE true END",
        [first.pk, *GATE],
        output_field=BooleanField(),
    )
    after_q = claims._after_q
    monkeypatch.setattr(claims, "_after_q", lambda after: after_q(after) & Q(stall))

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_lock(%s, %s)", list(GATE))
    thread, result = on_own_connection(
        lambda: engine.records_claim(
            run=run, data_class="idv.photo", limit=10, now=now, start_disposal=True
        )
    )
    try:
        for _ in range(500):
            if _waiting_on_gate():
                break
            threading.Event().wait(0.02)
        assert _waiting_on_gate(), "the claim statement never reached its first row"
        placed = api.place_hold(reason=reason, placed_by=approver, record=held, now=now)
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s, %s)", list(GATE))
        thread.join(timeout=30)
        monkeypatch.setattr(claims, "_after_q", after_q)
    assert "error" not in result, result
    return result["value"], placed


def test_claim__a_hold_committed_while_the_claim_statement_runs_keeps_its_record(
    first_and_second, now, approver, monkeypatch
):
    first, target = first_and_second
    run = engine.run_start(mode=RunMode.ENFORCE, now=now)

    # The claim statement waits, on its first row, for the gate this test holds.
    claim_made, hold = _claim_while_held(
        run, first, target, reason="Case 26", approver=approver, now=now, monkeypatch=monkeypatch
    )

    assert [item.record_id for item in claim_made.items] == [first.pk]
    target.refresh_from_db()
    assert target.state == RecordState.ACTIVE
    assert (target.lease_owner, target.lease_expires_at, target.disposal_started_at) == (
        None,
        None,
        None,
    )
    assert target.attempts == 0
    skip = DeletionEvent.objects.get(record=target)
    assert (skip.outcome, skip.reason) == (EventOutcome.SKIPPED_HELD, "legal hold applies")

    outcome = engine.claim_dispose(claim=claim_made, clock=lambda: now + timedelta(seconds=1))
    assert outcome["deleted"] == 1
    assert exists(target) and not exists(first)
    assert not DeletionEvent.objects.filter(record=target, outcome=EventOutcome.DELETED).exists()
    assert not DeletionEvent.objects.filter(reason__contains=f"hold #{hold.pk}").exists()
    counted = Run.objects.get(pk=run.pk)
    assert (counted.claimed, counted.skipped_held, counted.deleted) == (1, 1, 1)


def test_claim__a_retried_row_held_meanwhile_is_left_for_the_store_to_decide(
    first_and_second, now, approver, monkeypatch
):
    first, retried = first_and_second
    # An earlier attempt passed its re-check, then its delete went unanswered.
    RetentionRecord.objects.filter(pk=retried.pk).update(
        state=RecordState.FAILED,
        retryable=True,
        next_attempt_at=now - timedelta(minutes=1),
        attempts=1,
        disposal_started_at=now - timedelta(minutes=5),
    )
    run = engine.run_start(mode=RunMode.ENFORCE, now=now)

    claim_made, hold = _claim_while_held(
        run, first, retried, reason="Case 27", approver=approver, now=now, monkeypatch=monkeypatch
    )

    assert [item.record_id for item in claim_made.items] == [first.pk]
    retried.refresh_from_db()
    # Its object may be gone already: left as a dead claimer's row would be.
    assert (retried.state, retried.lease_expires_at, retried.attempts) == (
        RecordState.DELETING,
        now,
        1,
    )
    engine.claim_dispose(claim=claim_made, clock=lambda: now + timedelta(seconds=1))
    stranded_settle(run=run, clock=lambda: now + timedelta(seconds=2))

    retried.refresh_from_db()
    assert retried.state == RecordState.ACTIVE and exists(retried)
    event = DeletionEvent.objects.get(record=retried)
    assert event.outcome == EventOutcome.SKIPPED_HELD
    assert event.reason.startswith(f"hold #{hold.pk} placed after the re-check; the object")
