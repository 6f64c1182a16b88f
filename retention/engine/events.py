"""Deletion events of claimed items: their idempotency keys, and the held skips of a run.

Every decision about a record leaves one event in the hash chain
(``retention.chain.events``). The idempotency key (policy version +
record + disposition, plus the outcome and attempt or row version where one
record can see that outcome more than once, and the run for a skip, which
every run that skips the record records again) is unique, so a replayed page
records nothing twice.
"""

from __future__ import annotations

import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime

from django.db import transaction
from django.db.models import Exists, OuterRef

from retention.chain.events import NewEvent, events_append
from retention.engine.claims import ClaimedItem
from retention.engine.ledger import run_counts_add
from retention.engine.rules import expired_pending
from retention.models import DeletionEvent, EventKind, EventOutcome, RecordState, Run


@dataclass
class ClaimOutcome:
    counts: Counter[str] = field(default_factory=Counter)

    def __getitem__(self, name: str) -> int:
        return self.counts[name]


def idempotency_key(
    item: ClaimedItem,
    outcome: str,
    *,
    run_id: uuid.UUID,
    per_attempt: bool = False,
    hold_id: int | None = None,
) -> str:
    base = f"{item.policy_version_id}:{item.record_id}:{item.disposition}"
    if item.reappearances:
        # Deleted once, found again by reconciliation: a new disposal.
        base = f"{base}:r{item.reappearances}"
    if outcome in (EventOutcome.DELETED, EventOutcome.ALREADY_ABSENT):
        return base
    if hold_id is not None:
        # A row given back to a hold that came after its re-check: once per
        # hold, however many runs find it (``retention.engine.page.held_settle``).
        return f"{base}:{outcome}:h{hold_id}"
    if per_attempt:
        # A skip the store decided (an Object Lock refused the delete): a run
        # may claim the record again and be refused again, each time evidenced.
        return f"{base}:{outcome}:a{item.attempt}:{run_id}"
    if outcome in (EventOutcome.SKIPPED_HELD, EventOutcome.SKIPPED_RENEWED):
        # Per run: a replay within the run records the skip once, and every
        # run that skips the record leaves its own evidence of it.
        return f"{base}:{outcome}:v{item.row_version}:{run_id}"
    # An attempt number restarts when a record is reopened or renewed: the run
    # keeps a later run's failure from reusing an earlier one's key.
    return f"{base}:{outcome}:a{item.attempt}:{run_id}"


def event_for(
    item: ClaimedItem,
    *,
    run_id: uuid.UUID,
    outcome: str,
    now: datetime,
    reason: str = "",
    per_attempt: bool = False,
    hold_id: int | None = None,
) -> NewEvent:
    return NewEvent(
        idempotency_key=idempotency_key(
            item, outcome, run_id=run_id, per_attempt=per_attempt, hold_id=hold_id
        ),
        record_id=item.record_id,
        run_id=run_id,
        tenant_id=item.tenant_id,
        data_class=item.data_class,
        policy_version_id=item.policy_version_id,
        policy_key=item.policy_key,
        policy_version_number=item.policy_version_number,
        disposition=item.disposition,
        outcome=outcome,
        attempt=item.attempt,
        reason=reason[:2000],
        key_digest=item.key_digest,
        expires_at=item.expires_at,
        occurred_at=now,
    )


def held_skips_record(run: Run, now: datetime) -> None:
    """One skipped_held event per held expired record, and the run's count of them.

    An enforcing run counts the held skips it records, each in the
    transaction of its events (here, a page's held rows, the re-check), so
    its count and its events agree (``retention_verify --runs``). The
    measure's figure, which also counted held rows of model-row classes that
    a page has not reached yet, is what a dry run reports; called right after
    it, this replaces it by what was recorded.
    """
    recorded = DeletionEvent.objects.filter(
        run=run, kind=EventKind.OBJECT, outcome=EventOutcome.SKIPPED_HELD
    ).count()
    Run.objects.filter(pk=run.pk).update(skipped_held=recorded)
    rows = (
        expired_pending(run)
        .held()
        # A row in flight is its claimer's to record (a hold after its
        # re-check may have come too late to keep its object), and one given
        # back to its hold in this run has its skip already.
        .exclude(state=RecordState.DELETING)
        .exclude(
            Exists(
                DeletionEvent.objects.filter(
                    run=run, record=OuterRef("pk"), outcome=EventOutcome.SKIPPED_HELD
                )
            )
        )
        .order_by("id")
        .values_list(
            "id",
            "row_version",
            "tenant_id",
            "data_class",
            "key_digest",
            "expires_at",
            "attempts",
            "policy_version_id",
            "policy_version__policy__data_class",
            "policy_version__number",
            "policy_version__disposition",
        )
    )
    batch: list[NewEvent] = []
    for row in rows.iterator(chunk_size=2000):
        item = ClaimedItem(
            record_id=row[0],
            row_version=row[1],
            tenant_id=row[2],
            data_class=row[3],
            storage="",
            object_key="",
            key_digest=row[4],
            expires_at=row[5],
            attempt=row[6],
            probe=False,
            policy_version_id=row[7],
            policy_key=row[8],
            policy_version_number=row[9],
            disposition=row[10],
            erase_all_versions=False,
        )
        batch.append(
            event_for(
                item,
                run_id=run.pk,
                outcome=EventOutcome.SKIPPED_HELD,
                now=now,
                reason="legal hold applies",
            )
        )
        if len(batch) >= 2000:
            _held_skips_append(run, batch, now)
            batch = []
    if batch:
        _held_skips_append(run, batch, now)


def _held_skips_append(run: Run, events: list[NewEvent], now: datetime) -> None:
    with transaction.atomic():
        # Only what is new counts: a second call for the run records nothing twice.
        fresh = events_append(events, run_id=run.pk, now=now)
        run_counts_add(run.pk, Counter(skipped_held=len(fresh)))
