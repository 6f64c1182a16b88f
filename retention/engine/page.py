"""Disposing of one claimed page: re-check, delete, finalize.

The re-check (short transaction) keeps only rows still leased to this claim,
at the row version the claim saw, still expired and under no hold as the
holds are now; the rest are released with their event. The delete runs
outside any transaction, after the shared rate gate. The finalize
(``retention.engine.finalize``) records each row's outcome with its event
and the run's counts in one transaction. Every step is safe to repeat.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from django.db import transaction
from django.db.models import F

from retention import counters
from retention.chain.events import NewEvent, events_append
from retention.conf import settings
from retention.engine.claims import Claim, ClaimedItem, records_claim_stranded
from retention.engine.disposal import DisposalItem, Disposer, ObjectDisposer, objects_present
from retention.engine.events import ClaimOutcome, event_for
from retention.engine.finalize import finalize, held_release
from retention.engine.ledger import run_counts_sql
from retention.engine.outage import db_retry
from retention.engine.pacing import RateGate, gate_for
from retention.models import EventOutcome, RecordState, RetentionRecord, Run
from retention.selectors.holds import held_record_ids
from retention.storage import KeyResult, Outcome

Clock = Callable[[], datetime]


def recheck(
    claim: Claim, now: datetime
) -> tuple[list[ClaimedItem], ClaimOutcome, list[ClaimedItem]]:
    """Keep the items still ours, unchanged, expired and unheld; release the rest.

    The third list: items still ours that a hold covers now but that were past
    an earlier re-check (a claimer died after it): their object may be gone
    already, so the store decides what is true of them (``held_settle``).
    """
    result = ClaimOutcome()
    by_id = {item.record_id: item for item in claim.items}
    with transaction.atomic():
        current = {
            row["id"]: row
            for row in RetentionRecord.objects.select_for_update()
            .filter(id__any_of=list(by_id))
            .values("id", "state", "lease_owner", "row_version", "expires_at")
        }
        held = held_record_ids(by_id)
        proceed: list[ClaimedItem] = []
        settle: list[ClaimedItem] = []
        release: list[int] = []
        give_back: list[ClaimedItem] = []
        events: list[NewEvent] = []

        def skip(item: ClaimedItem, outcome: str, reason: str) -> None:
            """Record why a claimed item is not deleted (its outcome is its count)."""
            events.append(
                event_for(item, run_id=claim.run_id, outcome=outcome, now=now, reason=reason)
            )
            result.counts[outcome] += 1

        for record_id, item in by_id.items():
            row = current.get(record_id)
            ours = (
                row is not None
                and row["state"] == RecordState.DELETING
                and row["lease_owner"] == claim.token
            )
            if not ours:
                # Renewed since the claim (renewal resets the row to active
                # and bumps its version); a reclaim by someone else is theirs.
                renewed = (
                    row is not None
                    and row["state"] in (RecordState.ACTIVE, RecordState.FAILED)
                    and row["row_version"] != item.row_version
                )
                if renewed:
                    skip(item, EventOutcome.SKIPPED_RENEWED, "renewed after claim")
                continue
            if record_id in held and item.probe:
                settle.append(item)
                continue
            if record_id in held:
                give_back.append(item)
                continue
            assert row is not None  # "ours" implies the row was found
            if row["expires_at"] > claim.cutoff:
                release.append(record_id)
                skip(item, EventOutcome.SKIPPED_RENEWED, "no longer expired")
                continue
            # A version bump without a renewal is a hold change; holds were
            # checked just above, against the database as it is now.
            proceed.append(item)
        if release:
            RetentionRecord.objects.filter(id__any_of=release, lease_owner=claim.token).update(
                state=RecordState.ACTIVE, lease_owner=None, lease_expires_at=None
            )
        held_events, held_counts = held_give_back(
            claim.run_id, claim.token, give_back, now, undo_claim=False
        )
        events.extend(held_events)
        result.counts.update(held_counts)
        if proceed:
            RetentionRecord.objects.filter(
                id__any_of=[i.record_id for i in proceed], lease_owner=claim.token
            ).update(
                disposal_started_at=now,
                lease_expires_at=now + timedelta(seconds=claim.lease_seconds),
            )
        if settle:
            RetentionRecord.objects.filter(
                id__any_of=[i.record_id for i in settle], lease_owner=claim.token
            ).update(lease_expires_at=now + timedelta(seconds=claim.lease_seconds))
        events_append(
            events, run_id=claim.run_id, now=now, also=run_counts_sql(claim.run_id, result.counts)
        )
        if result.counts:
            counters.count_on_commit(claim.items[0].data_class, result.counts)
    return proceed, result, settle


def held_give_back(
    run_id: uuid.UUID,
    token: uuid.UUID,
    items: Sequence[ClaimedItem],
    now: datetime,
    *,
    undo_claim: bool,
) -> tuple[list[NewEvent], Counter[str]]:
    """Give claimed rows a hold covers back to ``active``: their held skips and count.

    In the caller's transaction, under the rows' locks, before anything is
    deleted: the re-check's, and the inline claim's own second look
    (``records_claim(start_disposal=True)``), which ``undo_claim``s them: the
    attempt it counted and its disposal mark go too. The caller records the
    events with the run's counts.
    """
    if not items:
        return [], Counter()
    undo: dict[str, Any] = (
        {"attempts": F("attempts") - 1, "disposal_started_at": None} if undo_claim else {}
    )
    RetentionRecord.objects.filter(
        id__any_of=[item.record_id for item in items], lease_owner=token
    ).update(state=RecordState.ACTIVE, lease_owner=None, lease_expires_at=None, **undo)
    events = [
        event_for(
            item,
            run_id=run_id,
            outcome=EventOutcome.SKIPPED_HELD,
            now=now,
            reason="legal hold applies",
        )
        for item in items
    ]
    return events, Counter({EventOutcome.SKIPPED_HELD.value: len(items)})


def claim_dispose(
    *,
    claim: Claim,
    clock: Clock,
    disposer: Disposer | None = None,
    gate: RateGate | None = None,
    max_attempts: int | None = None,
) -> ClaimOutcome:
    """Re-check, delete and finalize one claim. Safe to call twice."""
    total = ClaimOutcome()
    if not claim.items:
        return total
    disposer = disposer or ObjectDisposer()
    if claim.rechecked:
        proceed = list(claim.items)
    else:
        proceed, rechecked, settle = recheck(claim, clock())
        total.counts.update(rechecked.counts)
        if settle:
            total.counts.update(held_settle(claim, settle, disposer, clock).counts)
    if not proceed:
        return total
    gate = gate or gate_for(data_class=proceed[0].data_class)
    # The rate gate is in the database: a restart while this page waits for
    # it is waited out (deleting twice is safe; an object gone is absent).
    results = db_retry(partial(dispose, proceed, disposer, gate), what="rate gate")
    finalized = finalize(
        claim,
        proceed,
        results,
        max_attempts=max_attempts or settings.MAX_ATTEMPTS,
        now=clock(),
    )
    total.counts.update(finalized.counts)
    return total


def dispose(
    items: Sequence[ClaimedItem], disposer: Disposer, gate: RateGate
) -> dict[int, KeyResult]:
    """The storage step: no transaction, no lock, no database."""
    results: dict[int, KeyResult] = {}
    for erase in (False, True):
        group = [item for item in items if item.erase_all_versions is erase]
        if not group:
            continue
        disposal = [
            DisposalItem(
                record_id=i.record_id, storage=i.storage, object_key=i.object_key, probe=i.probe
            )
            for i in group
        ]
        results.update(disposer.dispose(disposal, erase_versions=erase, gate=gate))
    return results


def held_settle(
    claim: Claim, items: Sequence[ClaimedItem], disposer: Disposer, clock: Clock
) -> ClaimOutcome:
    """Rows past an earlier re-check that a hold now covers: the store says what is true.

    Their claimer passed the re-check, so it may have deleted their object
    before it died. An object that is gone is recorded as already absent,
    with the note that the hold came after the re-check; one still there is
    given back to its hold, with one held skip per hold (not one per run).
    A row the store could not answer for keeps its lease, and is asked about
    again once that lapses.
    """
    outcome = ClaimOutcome()
    present: dict[int, bool | None] = {}
    for erase in (False, True):
        group = [item for item in items if item.erase_all_versions is erase]
        if group:
            present.update(objects_present(disposer, _disposal_items(group), any_version=erase))
    gone = [item for item in items if present.get(item.record_id) is False]
    kept = [item for item in items if present.get(item.record_id) is True]
    if gone:
        results = {item.record_id: KeyResult(item.object_key, Outcome.ABSENT) for item in gone}
        finalized = finalize(claim, gone, results, max_attempts=settings.MAX_ATTEMPTS, now=clock())
        outcome.counts.update(finalized.counts)
    if kept:
        outcome.counts.update(held_release(claim, kept, now=clock()).counts)
    return outcome


def stranded_settle(*, run: Run, clock: Clock, disposer: Disposer | None = None) -> ClaimOutcome:
    """Settle the rows a dead claimer left in ``deleting`` under a hold placed since.

    Claims skip held rows, so without this such a row would stay
    ``deleting`` for ever, and every run would record a held skip for an
    object that may be gone. Each run does it before recording its held
    skips (and reconciliation of a store does it too).
    """
    total = ClaimOutcome()
    disposer = disposer or ObjectDisposer()
    for name in run.data_classes:
        while True:
            claim = records_claim_stranded(run=run, data_class=name, limit=1000, now=clock())
            if not claim.items:
                break
            total.counts.update(claim_dispose(claim=claim, clock=clock, disposer=disposer).counts)
    return total


def _disposal_items(items: Sequence[ClaimedItem]) -> list[DisposalItem]:
    return [
        DisposalItem(
            record_id=i.record_id, storage=i.storage, object_key=i.object_key, probe=i.probe
        )
        for i in items
    ]
