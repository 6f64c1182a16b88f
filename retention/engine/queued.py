"""The queued executor: a dispatcher claims pages, django-q2 workers dispose of them.

The dispatcher claims bounded pages exactly as the inline executor does
(same ``Stepper``: stop rules, leases, retry waits) and publishes each page as
one batch task carrying record ids and the row versions it expects. Workers
re-check, wait for the shared rate gate, delete and finalize
(``retention.engine.batch``).

Nothing here trusts the broker to deliver exactly once. A batch is safe to
run twice, a lost batch's rows fall back to the claim queue when their lease
expires, and a dispatcher that dies leaves a lease that lapses: the same task
re-presented by the broker, or the watchdog schedule, takes the run over.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.db import transaction
from django.utils import timezone

from retention.conf import settings
from retention.engine.claims import Claim, Cursors, claim_release, records_claim_next
from retention.engine.events import held_skips_record
from retention.engine.inline import run_execute
from retention.engine.leases import dispatcher_acquire, dispatcher_release
from retention.engine.ledger import run_finish
from retention.engine.measure import retry_next_due, run_measure
from retention.engine.publish import (
    BATCH_TASK,
    Publish,
    batch_publisher,
    dispatcher_publish,
)
from retention.engine.rules import ClassRules, run_rules
from retention.engine.stepping import Clock, Monotonic, Stepper, Stop
from retention.models import RUN_COUNT_FIELDS, BatchState, Run, RunBatch, RunMode, RunStatus

if TYPE_CHECKING:
    from retention.guard import GuardReading

logger = logging.getLogger("retention.dispatch")

Guard = Callable[..., "GuardReading"]
ProgressFn = Callable[[Run], None]

# Publishing failures in a row before a dispatcher gives the run up.
MAX_PUBLISH_FAILURES = 3
_PROGRESS_FIELDS = (*RUN_COUNT_FIELDS, "retried")


@dataclass
class _Dispatch:
    stepper: Stepper
    sleep: Callable[[float], None]
    publish: Publish
    guard: Guard
    progress: ProgressFn | None
    rules: dict[str, ClassRules]
    deferring_since: datetime | None = None
    deferral_detail: str = ""
    publish_failures: int = 0
    next_class: int = 0
    last_deferral_write: float | None = None
    last_progress: float | None = None
    # Where each class's next claim resumes; a continuation task starts over.
    cursors: Cursors = field(default_factory=dict)

    @property
    def run(self) -> Run:
        return self.stepper.run


def run_dispatch(
    *,
    run_id: uuid.UUID | str,
    clock: Clock = timezone.now,
    sleep: Callable[[float], None] = time.sleep,
    publish: Publish | None = None,
    guard: Guard | None = None,
    budget_seconds: float | None = None,
    progress: ProgressFn | None = None,
    monotonic: Monotonic = time.monotonic,
) -> str:
    """The dispatcher task: publish a queued run's batches until it ends.

    Returns the run's status, ``joined`` when another dispatcher holds the
    run, or ``continued`` when its own time budget (below the worker's task
    timeout) ran out and a continuation was published.
    """
    run = _run_when_committed(run_id, sleep)
    if run is None:
        return "missing"
    if run.status != RunStatus.RUNNING:
        return run.status
    if run.mode == RunMode.DRY_RUN:
        # Nothing to publish: a dry run is a few aggregate queries.
        return run_execute(run=run, clock=clock, monotonic=monotonic).status
    owner = uuid.uuid4()
    if not dispatcher_acquire(run, owner, clock()):
        logger.info("run %s: another dispatcher is active; joining it", run.pk)
        return "joined"
    if guard is None:
        from retention.guard import foreground_guard_read

        guard = foreground_guard_read
    state = _Dispatch(
        stepper=Stepper(
            run=run,
            clock=clock,
            monotonic=monotonic,
            dispatcher=owner,
            pages_in_flight=settings.MAX_BATCHES_IN_FLIGHT,
        ),
        sleep=sleep,
        publish=publish or batch_publisher(),
        guard=guard,
        progress=progress,
        rules=run_rules(run),
    )
    try:
        return _dispatch_loop(state, budget_seconds)
    except BaseException as exc:
        logger.error(
            "run %s: dispatcher failed: %s",
            run.pk,
            type(exc).__name__,
            extra={"run_id": str(run.pk)},
        )
        # Claimed batches keep their leases; the watchdog or a re-presented
        # task takes the run over once the dispatcher lease lapses.
        raise
    finally:
        dispatcher_release(run, owner)


def _run_when_committed(run_id: uuid.UUID | str, sleep: Callable[[float], None]) -> Run | None:
    for _ in range(10):
        run = Run.objects.filter(pk=run_id).first()
        if run is not None:
            return run
        sleep(0.5)
    logger.error("run %s not found: its transaction rolled back, or has not committed", run_id)
    return None


def _dispatch_loop(state: _Dispatch, budget_seconds: float | None) -> str:
    run, stepper = state.run, state.stepper
    poll = settings.DISPATCH_POLL_SECONDS
    report = run.report if isinstance(run.report, dict) else {}
    if not report.get("measured"):
        # Once per run, by its first dispatcher.
        run_measure(run)
        held_skips_record(run, stepper.clock())
        Run.objects.filter(pk=run.pk).update(report={**report, "measured": True})
    ending: Stop | None = None
    while True:
        now = stepper.clock()
        stepper.heartbeat(now)
        if stepper.lost is not None:
            # No page is in hand here: published batches finish on their own.
            return _close(state, stepper.stop(now) or Stop(None, stepper.lost))
        if budget_seconds is not None and stepper.elapsed() >= budget_seconds:
            return _continue(state)
        run.refresh_from_db(fields=[*_PROGRESS_FIELDS, "status"])
        if run.status != RunStatus.RUNNING:
            return run.status
        _report_progress(state)
        if ending is None:
            ending = stepper.stop(now)
        if ending is not None:
            if _in_flight(run, now):
                state.sleep(poll)
                continue
            _end_deferral(state, now)
            return _close(state, ending)

        reading = state.guard(now=now)
        if reading.over_budget:
            _defer(state, reading, now)
            state.sleep(poll)
            continue
        _end_deferral(state, now)

        if _global_in_flight(now) >= settings.MAX_BATCHES_IN_FLIGHT:
            state.sleep(poll)
            continue
        if _claim_and_publish(state, now):
            if state.publish_failures >= MAX_PUBLISH_FAILURES:
                ending = Stop(
                    RunStatus.ERROR, "task queue unavailable: batches could not be published"
                )
            continue
        if _in_flight(run, now):
            state.sleep(poll)
            continue
        wait = stepper.retry_wait(retry_next_due(run), now)
        if wait is None:
            return run_finish(run, RunStatus.FINISHED, "", stepper.clock()).status
        state.sleep(min(wait, poll * 4))


def _close(state: _Dispatch, ending: Stop) -> str:
    if ending.status is None:
        logger.info("run %s: %s; joining the other dispatcher", state.run.pk, ending.reason)
        return "joined"
    # A run another trigger closed (abandoned) keeps its status and counts.
    return run_finish(state.run, ending.status, ending.reason, state.stepper.clock()).status


def _report_progress(state: _Dispatch) -> None:
    clock = state.stepper.monotonic
    if state.progress and (state.last_progress is None or clock() - state.last_progress >= 1.0):
        state.last_progress = clock()
        state.progress(state.run)


def _continue(state: _Dispatch) -> str:
    """Hand the run to a fresh dispatcher task before the worker's timeout."""
    run = state.run
    # Released first: the continuation must find the dispatcher lease free.
    assert state.stepper.dispatcher is not None
    dispatcher_release(run, state.stepper.dispatcher)
    try:
        dispatcher_publish(run, publish=state.publish)
    except Exception as exc:
        # The watchdog re-publishes once the (released) lease is noticed.
        logger.error("run %s: continuation could not be queued: %s", run.pk, type(exc).__name__)
    return "continued"


def _in_flight(run: Run, now: datetime) -> bool:
    """Whether this run still has published batches that may be working."""
    RunBatch.objects.filter(run=run, state=BatchState.QUEUED, lease_expires_at__lt=now).update(
        state=BatchState.EXPIRED
    )
    return RunBatch.objects.filter(run=run, state=BatchState.QUEUED).exists()


def _global_in_flight(now: datetime) -> int:
    return RunBatch.objects.filter(state=BatchState.QUEUED, lease_expires_at__gte=now).count()


def _defer(state: _Dispatch, reading: GuardReading, now: datetime) -> None:
    run = state.run
    if state.deferring_since is None:
        state.deferring_since = now
        state.deferral_detail = reading.detail
        logger.info(
            "run %s: foreground guard over budget (%s); dispatch deferred",
            run.pk,
            reading.detail,
            extra={"run_id": str(run.pk)},
        )
    clock = state.stepper.monotonic
    if state.last_deferral_write is None or clock() - state.last_deferral_write >= 5.0:
        state.last_deferral_write = clock()
        waiting = max(run.eligible - run.claimed, 0)
        Run.objects.filter(pk=run.pk).update(deferred=waiting)
        run.deferred = waiting


def _end_deferral(state: _Dispatch, now: datetime) -> None:
    if state.deferring_since is None:
        return
    run = state.run
    run.refresh_from_db(fields=["report", "deferred"])
    report = dict(run.report)
    report.setdefault("deferrals", []).append(
        {
            "from": state.deferring_since.isoformat(),
            "until": now.isoformat(),
            "records_waiting": run.deferred,
            "signal": state.deferral_detail,
        }
    )
    ended = state.stepper.stop(now) is not None
    # Dispatch resumed: nothing is held back any more. A run that ends while
    # deferring keeps the figure: that many records wait for the next run.
    fields: dict[str, Any] = {"report": report}
    if not ended:
        fields["deferred"] = 0
    Run.objects.filter(pk=run.pk).update(**fields)
    run.report = report
    state.deferring_since = None
    logger.info("run %s: foreground guard within budget; dispatch resumed", run.pk)


def _claim_and_publish(state: _Dispatch, now: datetime) -> bool:
    run, stepper = state.run, state.stepper
    names = list(run.data_classes)
    for offset in range(len(names)):
        name = names[(state.next_class + offset) % len(names)]
        rules = state.rules[name]
        size = stepper.page_size(rules)
        if size <= 0:
            return False
        # The lease covers the queue wait, the delete, and the rate gate's
        # pacing, which may make a batch wait behind every batch in flight.
        claim = records_claim_next(
            cursors=state.cursors,
            run=run,
            data_class=name,
            limit=size,
            now=now,
            lease_seconds=stepper.page_lease_seconds(size, rules),
        )
        if not claim.items:
            continue
        state.next_class = (state.next_class + offset + 1) % len(names)
        run.claimed += len(claim)
        _publish_batch(state, claim, now)
        return True
    return False


def _publish_batch(state: _Dispatch, claim: Claim, now: datetime) -> None:
    run = state.run
    data_class = claim.items[0].data_class
    RunBatch.objects.create(
        token=claim.token,
        run=run,
        data_class=data_class,
        size=len(claim),
        published_at=now,
        lease_expires_at=now + timedelta(seconds=claim.lease_seconds),
    )
    payload = {
        "run_id": str(run.pk),
        "token": str(claim.token),
        "data_class": data_class,
        "cutoff": claim.cutoff.isoformat(),
        "lease_seconds": claim.lease_seconds,
        "items": [[item.record_id, item.row_version] for item in claim.items],
    }
    try:
        state.publish(BATCH_TASK, payload, f"retention-batch-{claim.token}")
    except Exception as exc:
        state.publish_failures += 1
        logger.error(
            "run %s: batch %s could not be published (%s); its rows are released",
            run.pk,
            claim.token,
            type(exc).__name__,
            extra={"run_id": str(run.pk)},
        )
        batch_release(claim.token, BatchState.UNPUBLISHED, now)
        return
    state.publish_failures = 0


def batch_release(token: uuid.UUID, batch_state: str, now: datetime) -> int:
    """Give a batch's rows back to the claim queue, unprocessed."""
    with transaction.atomic():
        released = claim_release(token)
        RunBatch.objects.filter(token=token).update(state=batch_state, finished_at=now)
    return released
