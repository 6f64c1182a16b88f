"""Finalizing a disposed page: each row's outcome, its event and the run's counts, at once.

Only rows still leased to the claim are finalized: a row reclaimed after
this claim's lease lapsed belongs to its new claimer. Transient failures go
back as ``failed``/retryable with capped exponential backoff and equal
jitter; after the class's attempts, or at once for a permanent error, the row
is ``failed`` for review with its reason.
"""

from __future__ import annotations

import logging
import random
import uuid
from collections import Counter
from collections.abc import Sequence
from datetime import datetime, timedelta

from django.db import connection, transaction

from retention import counters
from retention.chain.events import NewEvent, events_append
from retention.conf import settings
from retention.engine.claims import Claim, ClaimedItem
from retention.engine.events import ClaimOutcome, event_for
from retention.engine.ledger import run_counts_add, run_counts_sql
from retention.engine.outage import retried
from retention.models import EventOutcome, RecordState, RetentionRecord, Run, RunBatch
from retention.selectors.holds import held_record_ids, holds_after_recheck, holds_first_covering
from retention.storage import KeyResult, Outcome

logger = logging.getLogger("retention.engine")


def _backoff(attempt: int) -> timedelta:
    ceiling = min(settings.RETRY_MAX_SECONDS, settings.RETRY_BASE_SECONDS * 2 ** (attempt - 1))
    # "Equal jitter": never less than half the step, so retries stay spread.
    return timedelta(seconds=ceiling / 2 + random.uniform(0, ceiling / 2))


# A store's Object Lock that no active hold explains (a release whose locks
# are still being removed, a lock set outside Lethe): the record is tried
# again after this long, so no run waits for it or loops on it.
LOCKED_RETRY = timedelta(hours=1)

# What a page's retried or failed rows change (their lease is cleared).
_UNFINISHED_FIELDS = [
    "state",
    "retryable",
    "next_attempt_at",
    "last_error",
    "lease_owner",
    "lease_expires_at",
]


@retried("finalize")
def finalize(
    claim: Claim,
    items: Sequence[ClaimedItem],
    results: dict[int, KeyResult],
    *,
    max_attempts: int,
    now: datetime,
) -> ClaimOutcome:
    """Record a disposed page; done again while the database connection is lost.

    The page's deletes are done: only this step waits for the database to
    come back (``retention.engine.outage``), and doing it twice is safe.
    """
    outcome = ClaimOutcome()
    by_id = {item.record_id: item for item in items}
    succeeded = [rid for rid in by_id if results[rid].outcome in (Outcome.DELETED, Outcome.ABSENT)]
    others = [rid for rid in by_id if results[rid].outcome not in (Outcome.DELETED, Outcome.ABSENT)]
    with transaction.atomic():
        # Only rows still leased to this claim are ours to finalize; a row
        # reclaimed after our lease expired belongs to its new claimer.
        done = _mark_deleted(succeeded, claim.token, now)
        ours = done | set(
            RetentionRecord.objects.select_for_update()
            .filter(id__any_of=others, lease_owner=claim.token, state=RecordState.DELETING)
            .values_list("id", flat=True)
            if others
            else ()
        )
        locked = [r for r in sorted(ours - done) if results[r].outcome == Outcome.LOCKED]
        # Holds placed once these rows had passed their re-check: they did
        # not stop the delete, and the events say so.
        late = holds_after_recheck([*done, *locked], data_class=items[0].data_class)
        events: list[NewEvent] = []
        unfinished: list[RetentionRecord] = []
        failed: dict[int, str] = {}
        for record_id in sorted(ours):
            item = by_id[record_id]
            result = results[record_id]
            after = (
                f"hold #{late[record_id]} placed after the re-check" if record_id in late else ""
            )
            per_attempt = False
            if record_id in done:
                deleted = result.outcome == Outcome.DELETED
                kind = EventOutcome.DELETED if deleted else EventOutcome.ALREADY_ABSENT
                reason, count = after, "deleted" if deleted else "already_absent"
            elif result.outcome == Outcome.LOCKED:
                refused = f"the store's Object Lock refused the delete ({result.reason})"
                kind, count, per_attempt = EventOutcome.SKIPPED_HELD, "skipped_held", True
                reason = f"{after}; {refused}" if after else refused
            elif result.outcome == Outcome.TRANSIENT and item.attempt < max_attempts:
                kind, reason, count = EventOutcome.RETRY_SCHEDULED, result.reason, "retried"
                unfinished.append(_failed(record_id, reason, now + _backoff(item.attempt)))
            else:
                reason = result.reason
                if result.outcome == Outcome.TRANSIENT:
                    reason = f"gave up after {item.attempt} attempts: {reason}"
                kind, count = EventOutcome.FAILED, "failed"
                unfinished.append(_failed(record_id, reason, None))
                failed[record_id] = reason
            events.append(
                event_for(
                    item,
                    run_id=claim.run_id,
                    outcome=kind,
                    now=now,
                    reason=reason,
                    per_attempt=per_attempt,
                )
            )
            outcome.counts[count] += 1
        if unfinished:
            # One statement for the page, whatever its size.
            RetentionRecord.objects.bulk_update(unfinished, _UNFINISHED_FIELDS, batch_size=1000)
        if locked:
            _locked_release(locked, claim.token, now)
        counts = run_counts_sql(claim.run_id, outcome.counts)
        # These rows were still leased to this claim under lock: their events are new.
        events_append(
            events,
            run_id=claim.run_id,
            now=now,
            known_new=True,
            also=counts,
        )
        if claim.uncounted:
            # A claim that could not count itself without waiting counts here.
            _uncounted_count(claim, run_locked=counts is not None)
        if outcome.counts:
            counters.count_on_commit(items[0].data_class, outcome.counts)
    _log_page(claim, items, outcome, failed)
    return outcome


def _uncounted_count(claim: Claim, *, run_locked: bool) -> None:
    """Add to the run what the claims of this page's batch left uncounted.

    Taken from the batch's row, whole: with pages overlapping, the next
    page's claim may have left some too, and a redelivery after a worker
    died finds what the lost claim left. The batch's row is locked after
    the chain head and the run's row, the order of everyone who locks both
    (the run's advance and close, a claim), so no two wait on each other.
    """
    if not run_locked:
        Run.objects.select_for_update().filter(pk=claim.run_id).values_list("pk").first()
    batch = RunBatch.objects.select_for_update().filter(token=claim.token)
    left = batch.values_list("uncounted", flat=True).first()
    if left:
        batch.update(uncounted=0)
        run_counts_add(claim.run_id, Counter(claimed=left))


def held_release(claim: Claim, items: Sequence[ClaimedItem], *, now: datetime) -> ClaimOutcome:
    """Give back to their hold rows past an earlier re-check whose object is still there.

    One held skip per record and hold, whichever run finds the row: a row
    a hold keeps is not claimed again while the hold lasts. Only rows still
    leased to the claim are given back.
    """
    outcome = ClaimOutcome()
    by_id = {item.record_id: item for item in items}
    with transaction.atomic():
        ours = list(
            RetentionRecord.objects.select_for_update()
            .filter(id__any_of=list(by_id), lease_owner=claim.token, state=RecordState.DELETING)
            .values_list("id", flat=True)
        )
        holds = holds_first_covering(ours)
        # A hold released since the re-check: nothing to give the row back
        # to; it keeps its lease and is claimed again once that lapses.
        kept = sorted(rid for rid in ours if rid in holds)
        if not kept:
            return outcome
        RetentionRecord.objects.filter(id__any_of=kept, lease_owner=claim.token).update(
            state=RecordState.ACTIVE,
            lease_owner=None,
            lease_expires_at=None,
            disposal_started_at=None,
        )
        events = [
            event_for(
                by_id[rid],
                run_id=claim.run_id,
                outcome=EventOutcome.SKIPPED_HELD,
                now=now,
                reason=f"hold #{holds[rid]} placed after the re-check; the object was still "
                "there, and is kept",
                hold_id=holds[rid],
            )
            for rid in kept
        ]
        fresh = events_append(events, run_id=claim.run_id, now=now)
        counts: Counter[str] = Counter(skipped_held=len(fresh))
        run_counts_add(claim.run_id, counts)
        if fresh:
            counters.count_on_commit(items[0].data_class, counts)
            outcome.counts.update(counts)
    return outcome


def _failed(record_id: int, reason: str, retry_at: datetime | None) -> RetentionRecord:
    """A page's row left ``failed``: tried again at ``retry_at``, or (None) for review."""
    return RetentionRecord(
        pk=record_id,
        state=RecordState.FAILED,
        retryable=retry_at is not None,
        next_attempt_at=retry_at,
        last_error=reason[:2000],
    )


def _locked_release(ids: list[int], token: uuid.UUID, now: datetime) -> None:
    """Give back rows whose delete an Object Lock refused: their object is still there.

    Under an active hold they go back to ``active`` (the hold keeps claims
    off them); otherwise they wait ``LOCKED_RETRY`` as retryable, since
    nothing in the database says when the lock will go.
    """
    held = held_record_ids(ids)
    kept = [rid for rid in ids if rid in held]
    unexplained = [rid for rid in ids if rid not in held]
    free = {"lease_owner": None, "lease_expires_at": None, "disposal_started_at": None}
    if kept:
        RetentionRecord.objects.filter(id__any_of=kept, lease_owner=token).update(
            state=RecordState.ACTIVE, **free
        )
    if unexplained:
        RetentionRecord.objects.filter(id__any_of=unexplained, lease_owner=token).update(
            state=RecordState.FAILED,
            retryable=True,
            next_attempt_at=now + LOCKED_RETRY,
            last_error="the store's Object Lock refused the delete, and no active hold covers "
            "the record (a release still being mirrored, or a lock set outside Lethe)",
            **free,
        )


def _mark_deleted(ids: Sequence[int], token: uuid.UUID, now: datetime) -> set[int]:
    """Move the rows still leased to ``token`` to ``deleted``; return their ids."""
    if not ids:
        return set()
    if connection.vendor == "postgresql":
        # One statement: lock, check the lease, update, and say which rows.
        qn = connection.ops.quote_name
        with connection.cursor() as cursor:
            cursor.execute(
                f"UPDATE {qn(RetentionRecord._meta.db_table)} SET {qn('state')} = %s, "
                f"{qn('deleted_at')} = %s, {qn('lease_owner')} = NULL, "
                f"{qn('lease_expires_at')} = NULL, {qn('last_error')} = '' "
                f"WHERE {qn('id')} = ANY(%s) AND {qn('lease_owner')} = %s "
                f"AND {qn('state')} = %s RETURNING {qn('id')}",
                [RecordState.DELETED, now, list(ids), token, RecordState.DELETING],
            )
            return {row[0] for row in cursor.fetchall()}
    ours = set(
        RetentionRecord.objects.select_for_update()
        .filter(id__any_of=ids, lease_owner=token, state=RecordState.DELETING)
        .values_list("id", flat=True)
    )
    if ours:
        RetentionRecord.objects.filter(id__any_of=list(ours)).update(
            state=RecordState.DELETED,
            deleted_at=now,
            lease_owner=None,
            lease_expires_at=None,
            last_error="",
        )
    return ours


def _log_page(
    claim: Claim, items: Sequence[ClaimedItem], outcome: ClaimOutcome, failed: dict[int, str]
) -> None:
    # Ids and counts only: never a key, and not the reason either, which a
    # third-party storage adapter might have built from the key.
    if not items:
        return
    data_class = items[0].data_class
    counts = {
        k: outcome[k] for k in ("deleted", "already_absent", "skipped_held", "retried", "failed")
    }
    logger.info(
        "run %s: page of %d %s records finalized: %s",
        claim.run_id,
        len(items),
        data_class,
        " ".join(f"{k}={n}" for k, n in counts.items()),
        extra={"run_id": str(claim.run_id), "data_class": data_class, "counts": counts},
    )
    by_id = {item.record_id: item for item in items}
    for record_id in sorted(failed):
        item = by_id[record_id]
        logger.warning(
            "run %s: record %s failed (attempt %d), waiting for review",
            claim.run_id,
            record_id,
            item.attempt,
            extra={
                "run_id": str(claim.run_id),
                "record_id": record_id,
                "tenant_id": item.tenant_id,
                "data_class": item.data_class,
            },
        )
