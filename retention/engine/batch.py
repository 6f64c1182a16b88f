"""The batch task: a worker claims a page of its run, deletes it, finalizes it,
and goes on with the next page for up to ``RETENTION_BATCH_SECONDS``; then it
advances the run (``retention.engine.queued.run_advance``).

A batch is bounded in time, not in pages: it holds its worker for that long
plus one page at most, so foreground tasks on the same cluster wait for no
more than that, while the hand-over from one task to the next (the broker's
poll, the run's advance, the task's result) is paid once for several pages.
Each page's claim checks the run's stops (closed, kill switch, limit,
deadline or next slot) on the run as it is then, and the foreground guard
is asked before every page after the first.

The claim happens here, on the worker, right before the delete, so it is
the re-check too, as on the inline path: under row locks it takes only rows
that are expired and unheld as the holds are now, and marks them as being
disposed of in the same write. Nothing waits in the broker between a claim
and its delete, and the payload carries no record and no object key: a run
id, the batch's token and its data class.

Safe to run twice: a batch already done (or released) does nothing; a batch
redelivered after its worker died first disposes of the rows still leased
to its token (re-checking them and probing the store), then goes on as any
batch; only the delivery that closes a batch advances the run.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils.dateparse import parse_datetime

from retention.broker import Publish
from retention.clock import db_now
from retention.conf import settings
from retention.engine.breaker import breaker_held
from retention.engine.claims import (
    CLAIM_FIELDS,
    Claim,
    ClaimedItem,
    Cursors,
    claimed_item,
    records_claim_next,
)
from retention.engine.disposal import Disposer, ObjectDisposer, can_overlap
from retention.engine.events import ClaimOutcome
from retention.engine.overlap import Overlap
from retention.engine.pacing import gate_for
from retention.engine.page import Clock, claim_dispose
from retention.engine.queued import Guard, batch_release, foreground_guard, run_advance
from retention.engine.rows.batch import rows_batch
from retention.engine.rules import rules_version
from retention.engine.stepping import Stepper
from retention.models import BatchState, RecordState, RetentionRecord, Run, RunBatch, RunStatus
from retention.rows.registry import row_class
from retention.selectors.control import kill_switch_paused
from retention.selectors.run_rules import class_cutoff, run_rules

logger = logging.getLogger("retention.dispatch")


def batch_dispose(
    *,
    payload: dict[str, Any],
    clock: Clock = db_now,
    disposer: Disposer | None = None,
    publish: Publish | None = None,
    guard: Guard | None = None,
    monotonic: Callable[[], float] = time.monotonic,
) -> ClaimOutcome:
    """The batch task: claim, delete and finalize pages for a while, then advance the run."""
    token = uuid.UUID(payload["token"])
    outcome = ClaimOutcome()
    batch = RunBatch.objects.filter(token=token).select_related("run").first()
    if batch is None:
        return outcome
    run = batch.run
    now = clock()
    # The delivery is counted only while the batch is open: one done, released
    # or never published does nothing, and so does one the advance closed
    # meanwhile (nothing left for it, ``_idle_batches_close``).
    taken = (
        RunBatch.objects.filter(token=token)
        .exclude(state__in=(BatchState.DONE, BatchState.RELEASED, BatchState.UNPUBLISHED))
        .update(deliveries=F("deliveries") + 1)
    )
    if not taken:
        return outcome
    if kill_switch_paused():
        # Paused before this batch deleted anything: its rows go back untouched.
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
    if batch.data_class in breaker_held(run):
        # The advance publishes none for a held class; one that got out deletes nothing.
        released = batch_release(token, BatchState.RELEASED, now)
        logger.warning(
            "run %s: batch %s of %s released (%d rows): the volume breaker holds the class",
            run.pk,
            token,
            batch.data_class,
            released,
            extra={"run_id": str(run.pk)},
        )
        run_advance(run_id=run.pk, clock=clock, publish=publish, guard=guard)
        return outcome
    rules = run_rules(run)[batch.data_class]
    gate = gate_for(data_class=batch.data_class, rate_limit=rules.rate_limit)
    deadline = monotonic() + settings.BATCH_SECONDS
    goes_on = partial(_goes_on, deadline, guard, clock, monotonic)
    if rules.row_cutoff is not None and row_class(batch.data_class) is not None:
        # Read once for the delivery: each page checks the registration against it.
        version = rules_version(rules)
        while batch.state == BatchState.QUEUED:
            gate.acquire(max(rules.batch_size, 1))
            if not rows_batch(run, batch, clock(), version=version) or not goes_on():
                break
        return _close(token, run, clock, publish, guard, outcome)
    disposer = disposer or ObjectDisposer()
    overlap = Overlap(clock, lambda _claim, page: outcome.counts.update(page.counts))
    try:
        # Only a redelivery can find rows leased to this batch's token.
        claim = _claimed_before(run, batch, clock()) if batch.deliveries else None
        while True:
            if claim is None and batch.state == BatchState.QUEUED:
                claim = _claim(run, batch, clock())
            # A batch given up on (expired) claims nothing new: others took its work.
            if claim is None or not claim.items:
                break
            storages = {item.storage for item in claim.items}
            if claim.rechecked and can_overlap(disposer, storages, gate):
                # As inline: this page's deletes go out while the last one is finalized.
                overlap.submit(claim, disposer, gate, max_attempts=rules.max_attempts)
            else:
                overlap.settle()
                page = claim_dispose(
                    claim=claim,
                    clock=clock,
                    disposer=disposer,
                    gate=gate,
                    max_attempts=rules.max_attempts,
                )
                outcome.counts.update(page.counts)
            if not goes_on():
                break
            claim = None
        overlap.settle()
    finally:
        overlap.close()
    return _close(token, run, clock, publish, guard, outcome)


def _goes_on(
    deadline: float, guard: Guard | None, clock: Clock, monotonic: Callable[[], float]
) -> bool:
    """Whether the batch takes another page: within its time, the foreground within budget.

    ``RETENTION_BATCH_SECONDS`` bounds how long a batch holds its worker (one
    page more at most); the next page's claim checks the run's own stops.
    """
    if monotonic() >= deadline:
        return False
    return not (guard or foreground_guard())(now=clock()).over_budget


def _close(
    token: uuid.UUID,
    run: Run,
    clock: Clock,
    publish: Publish | None,
    guard: Guard | None,
    outcome: ClaimOutcome,
) -> ClaimOutcome:
    """Close the batch; only the delivery that closes it advances the run."""
    closed = (
        RunBatch.objects.filter(token=token)
        .exclude(state=BatchState.DONE)
        .update(state=BatchState.DONE, finished_at=clock())
    )
    if closed:
        run_advance(run_id=run.pk, clock=clock, publish=publish, guard=guard)
    return outcome


def _claim(run: Run, batch: RunBatch, now: datetime) -> Claim:
    """Claim this batch's next page under its token, from the class's cursor.

    A run with a limit claims under its row's lock, so concurrent batches
    never claim past it. Without one, the claim never waits for the run's
    row: its walk skips rows other claimers hold, and at its end it records
    the page (its count, the class's cursor) only if the row is free. When
    another worker's finalize (or the run's advance) holds it, the count
    goes with this page's finalize and the cursor is not kept; the cursor
    kept is the furthest any batch recorded, and rows a batch went past are
    taken by the pass from the start that follows an empty page.
    """
    # A run's limit is fixed when it is created: the batch's copy of the run
    # says which way to read it, and the run is read once, as it is now.
    with transaction.atomic():
        runs = Run.objects.select_for_update() if run.limit is not None else Run.objects
        return _claim_page(runs.get(pk=run.pk), batch, now)


def _claim_page(run: Run, batch: RunBatch, now: datetime) -> Claim:
    # The lease covers the rate gate's pacing behind every batch in flight.
    stepper = Stepper(run=run, clock=lambda: now, pages_in_flight=settings.MAX_BATCHES_IN_FLIGHT)
    rules = run_rules(run)[batch.data_class]
    # A run closed, paused, at its limit or past its deadline claims no more.
    stopped = run.status != RunStatus.RUNNING or stepper.stop(now) is not None
    size = 0 if stopped else stepper.page_size(rules)
    cursors = _cursors(run.report if isinstance(run.report, dict) else {})
    claim = Claim(run.pk, batch.token, class_cutoff(run, batch.data_class), ())
    if size > 0:
        claim = records_claim_next(
            cursors=cursors,
            run=run,
            data_class=batch.data_class,
            limit=size,
            now=now,
            lease_seconds=stepper.page_lease_seconds(size, rules),
            start_disposal=True,
            token=batch.token,
            # A limited run counts under the lock it holds; others at the end.
            count_claimed=run.limit is not None,
        )
    # The report as it is now (the advance and other batches write it too),
    # if no one holds the run's row.
    locked = Run.objects.select_for_update(skip_locked=True).filter(pk=run.pk).first()
    RunBatch.objects.filter(token=batch.token).update(
        size=F("size") + len(claim),
        lease_expires_at=now + timedelta(seconds=claim.lease_seconds),
        # Kept with the batch until a finalize counts them: a worker may die first.
        uncounted=F("uncounted") + (claim.uncounted if locked is None else 0),
    )
    if locked is None:
        return claim
    report = dict(locked.report) if isinstance(locked.report, dict) else {}
    kept = _cursors(report)
    mine = cursors.get(batch.data_class)
    other = kept.get(batch.data_class)
    kept[batch.data_class] = max(mine, other) if mine and other else (mine or other)
    report["cursors"] = {
        name: [cursor[0].isoformat(), cursor[1]] if cursor else None
        for name, cursor in kept.items()
    }
    Run.objects.filter(pk=run.pk).update(report=report, claimed=F("claimed") + claim.uncounted)
    return replace(claim, uncounted=0)


def _cursors(report: dict[str, Any]) -> Cursors:
    cursors: Cursors = {}
    for name, value in (report.get("cursors") or {}).items():
        at = parse_datetime(value[0]) if value else None
        cursors[name] = (at, int(value[1])) if value and at is not None else None
    return cursors


def _claimed_before(run: Run, batch: RunBatch, now: datetime) -> Claim | None:
    """The rows an earlier delivery of this batch claimed and did not finish.

    Re-checked again before they are deleted (the hold or renewal may have
    come since) and probed (the object may be gone already). The batch is in
    flight again while it finishes them, under a page's lease: its lease may
    have lapsed (it was marked expired), and the re-check renews the rows'
    leases, so without this the run could close while their deletes are
    still going out.
    """
    rows = (
        RetentionRecord.objects.filter(lease_owner=batch.token, state=RecordState.DELETING)
        .order_by("expires_at", "id")
        .values(*CLAIM_FIELDS)
    )
    items: list[ClaimedItem] = [claimed_item(row) for row in rows]
    if not items:
        return None
    stepper = Stepper(run=run, clock=lambda: now, pages_in_flight=settings.MAX_BATCHES_IN_FLIGHT)
    lease = stepper.page_lease_seconds(len(items), run_rules(run)[batch.data_class])
    RunBatch.objects.filter(token=batch.token).exclude(state=BatchState.DONE).update(
        state=BatchState.QUEUED, lease_expires_at=now + timedelta(seconds=lease)
    )
    return Claim(
        run_id=run.pk,
        token=batch.token,
        cutoff=class_cutoff(run, items[0].data_class),
        items=tuple(items),
        lease_seconds=lease,
        # What the lost delivery's claims left uncounted: its finalize counts it.
        uncounted=batch.uncounted,
    )
