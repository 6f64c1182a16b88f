"""The batch task: a worker re-checks, paces, deletes and finalizes one claimed page,
then advances the run (``retention.engine.queued.run_advance``).

Safe to run twice: a batch already done (or released) does nothing, its
rows are finalized only while still leased to its token, and only the
delivery that closes it advances the run. Rows are read back by id with the
row versions the claim saw; the payload never carries an object key.
"""

from __future__ import annotations

import logging
import uuid
from datetime import timedelta
from typing import Any

from django.db.models import F
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from retention.disposal import Disposer
from retention.engine.claims import CLAIM_FIELDS, Claim, ClaimedItem, claimed_item
from retention.engine.events import ClaimOutcome
from retention.engine.page import Clock, claim_dispose
from retention.engine.publish import Publish
from retention.engine.queued import Guard, batch_release, run_advance
from retention.engine.rules import ClassRules, run_rules
from retention.models import BatchState, RetentionRecord, RunBatch
from retention.pacing import gate_for
from retention.selectors.control import kill_switch_engaged

logger = logging.getLogger("retention.dispatch")


def batch_dispose(
    *,
    payload: dict[str, Any],
    clock: Clock = timezone.now,
    disposer: Disposer | None = None,
    publish: Publish | None = None,
    guard: Guard | None = None,
) -> ClaimOutcome:
    """The batch task: re-check, pace, delete, finalize, then advance the run.

    Safe to run twice: only the delivery that closes the batch advances the
    run (publishes its successors, or closes the run).
    """
    token = uuid.UUID(payload["token"])
    outcome = ClaimOutcome()
    batch = RunBatch.objects.filter(token=token).select_related("run").first()
    if batch is None or batch.state in (
        BatchState.DONE,
        BatchState.RELEASED,
        BatchState.UNPUBLISHED,
    ):
        return outcome
    run = batch.run
    now = clock()
    RunBatch.objects.filter(token=token).update(deliveries=F("deliveries") + 1)
    if kill_switch_engaged() is not None:
        # Paused before this batch started: its rows go back untouched.
        released = batch_release(token, BatchState.RELEASED, now)
        logger.info(
            "run %s: batch %s released (%d rows) because retention is paused",
            run.pk,
            token,
            released,
            extra={"run_id": str(run.pk)},
        )
        run_advance(run_id=run.pk, clock=clock, publish=publish, guard=guard)
        return outcome
    expected = {int(record_id): int(version) for record_id, version in payload["items"]}
    items = _claimed_items(token, expected)
    rules = run_rules(run).get(payload["data_class"]) or ClassRules.from_json(
        payload["data_class"], None
    )
    lease_seconds = float(payload["lease_seconds"])
    RunBatch.objects.filter(token=token).update(
        lease_expires_at=now + timedelta(seconds=lease_seconds)
    )
    cutoff = parse_datetime(payload["cutoff"])
    assert cutoff is not None
    claim = Claim(
        run_id=run.pk,
        token=token,
        cutoff=cutoff,
        items=tuple(items),
        lease_seconds=lease_seconds,
    )
    outcome = claim_dispose(
        claim=claim,
        clock=clock,
        disposer=disposer,
        gate=gate_for(data_class=payload["data_class"], rate_limit=rules.rate_limit),
        max_attempts=rules.max_attempts,
    )
    closed = (
        RunBatch.objects.filter(token=token)
        .exclude(state=BatchState.DONE)
        .update(state=BatchState.DONE, finished_at=clock())
    )
    if closed:
        run_advance(run_id=run.pk, clock=clock, publish=publish, guard=guard)
    return outcome


def _claimed_items(token: uuid.UUID, expected: dict[int, int]) -> list[ClaimedItem]:
    """The batch's rows as claimed, with the row versions the claim saw.

    Rows no longer leased to the token (reclaimed after a lapse, renewed) are
    still listed: the re-check records a renewal and leaves the rest alone.
    """
    rows = RetentionRecord.objects.filter(pk__in=list(expected)).values(*CLAIM_FIELDS)
    return [
        claimed_item(row, row_version=expected[row["id"]])
        for row in rows.order_by("expires_at", "id")
    ]
