"""A hold placed while a page is in flight is never silent (issue 17, point 3).

A record past its re-check is deleted even if a hold covering it is placed
a moment later: ``place_hold`` says how many such records there were, and
their deletion events say the hold came after the re-check.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from retention import api, engine
from retention.models import DeletionEvent, EventOutcome, RecordState, RunMode
from tests.helpers import exists, put_tracked

pytestmark = pytest.mark.django_db


def test_place_hold__counts_records_past_their_recheck_and_their_events_say_so(
    make_policy, now, approver
):
    make_policy()
    flying = [put_tracked(tenant_id="acme", now=now - timedelta(days=31)) for _ in range(2)]
    other = put_tracked(tenant_id="globex", now=now - timedelta(days=31))
    run = engine.run_start(mode=RunMode.ENFORCE, now=now)
    # The inline claim is the re-check: all three are past it, being disposed of.
    claim = engine.records_claim(
        run=run, data_class="idv.photo", limit=10, now=now, start_disposal=True
    )
    assert len(claim) == 3

    hold = api.place_hold(
        reason="Case 11", placed_by=approver, tenant_id="acme", now=now + timedelta(seconds=1)
    )
    outcome = engine.claim_dispose(claim=claim, clock=lambda: now + timedelta(seconds=2))

    assert hold.in_flight == 2
    assert outcome["deleted"] == 3
    for record in flying:
        record.refresh_from_db()
        assert record.state == RecordState.DELETED and not exists(record)
        event = DeletionEvent.objects.get(record=record)
        assert (event.outcome, event.reason) == (
            EventOutcome.DELETED,
            f"hold #{hold.pk} placed after the re-check",
        )
    assert DeletionEvent.objects.get(record=other).reason == ""


def test_place_hold__records_not_yet_past_their_recheck_are_not_in_flight_and_are_kept(
    make_policy, now, approver
):
    make_policy()
    record = put_tracked(tenant_id="acme", now=now - timedelta(days=31))
    run = engine.run_start(mode=RunMode.ENFORCE, now=now)
    # A queued batch's claim without the re-check: the re-check comes before the delete.
    claim = engine.records_claim(run=run, data_class="idv.photo", limit=10, now=now)

    hold = api.place_hold(reason="Case 12", placed_by=approver, record=record, now=now)
    outcome = engine.claim_dispose(claim=claim, clock=lambda: now)

    assert hold.in_flight == 0
    assert (outcome["skipped_held"], outcome["deleted"]) == (1, 0)
    assert exists(record)


def test_place_hold__a_hold_already_in_place_before_the_recheck_is_not_said_to_come_after(
    make_policy, now, approver
):
    make_policy()
    record = put_tracked(tenant_id="acme", now=now - timedelta(days=31))
    put_tracked(tenant_id="globex", now=now - timedelta(days=31))
    api.place_hold(reason="Case 13", placed_by=approver, tenant_id="acme", now=now)
    run = engine.run_start(mode=RunMode.ENFORCE, now=now)
    claim = engine.records_claim(
        run=run, data_class="idv.photo", limit=10, now=now, start_disposal=True
    )

    engine.claim_dispose(claim=claim, clock=lambda: now)

    # The held record was never claimed; the other one's event names no hold.
    assert [item.tenant_id for item in claim.items] == ["globex"]
    assert not DeletionEvent.objects.filter(record=record).exists()
    assert DeletionEvent.objects.get(outcome=EventOutcome.DELETED).reason == ""
