"""The queued executor: batches that claim their successors; no task waits for the run.

A queued run moves in bounded steps, each one short task on a django-q2
worker:

- the *arm* task (``run_arm``; its task path is ``retention.tasks.run_dispatch``,
  published when the run is accepted) measures the run once, lets the volume
  breaker decide each class (``retention.engine.breaker``; no batch of a held
  class is published), and publishes its first batches;
- each *batch* task (``retention.engine.batch``) claims one page itself,
  right before deleting it (so the claim is the re-check, as inline),
  finalizes it, then *advances* the run: under a short lock on the run's row
  it asks the same ``Stepper`` as the inline executor whether to stop, reads
  the foreground guard, and publishes as many batches as there are pages
  left to claim while fewer than ``RETENTION_MAX_BATCHES_IN_FLIGHT`` batches
  are unfinished;
- the run is closed by the advance that finds nothing left to claim and no
  batch in flight (or, once it must stop, by the last batch to finish).

A run whose chain of batches broke (a worker killed, a broker that lost a
task, a guard over budget, retries not yet due) is advanced again once no
batch of it is in flight: by its own one-off resumption schedule, kept
pending while it runs (``retention.engine.publish.run_resume_arm``), and by
the watchdog schedule (``retention.engine.schedule.runs_resume_stalled``)
where ``retention_schedule`` installed it. Nothing trusts the broker to
deliver once: a batch is finalized only while its rows are still leased to
it, and only the delivery that closes a batch advances the run.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.db import transaction
from django.db.models import Count, Q, QuerySet

from retention.broker import Publish, batch_publisher
from retention.clock import db_now
from retention.conf import settings
from retention.engine.breaker import breaker_decide, breaker_held
from retention.engine.claims import claim_release, claimable_count
from retention.engine.events import held_skips_record
from retention.engine.inline import run_execute
from retention.engine.ledger import run_finish
from retention.engine.measure import retry_next_due, run_measure
from retention.engine.page import stranded_settle
from retention.engine.publish import BATCH_TASK
from retention.engine.rows.sweep import row_class_names
from retention.engine.stepping import Clock, Monotonic, Stepper
from retention.models import (
    BatchState,
    RecordState,
    RetentionRecord,
    Run,
    RunBatch,
    RunMode,
    RunStatus,
)
from retention.selectors.run_rules import class_cutoff, run_rules

if TYPE_CHECKING:
    from retention.engine.guard import GuardReading

logger = logging.getLogger("retention.dispatch")

Guard = Callable[..., "GuardReading"]

# Publishing failures in a row (over any number of advances) before the run
# is given up: the task queue is not taking work.
MAX_PUBLISH_FAILURES = 3


def run_arm(
    *,
    run_id: uuid.UUID | str,
    clock: Clock = db_now,
    sleep: Callable[[float], None] = time.sleep,
    publish: Publish | None = None,
    guard: Guard | None = None,
    monotonic: Monotonic = time.monotonic,
) -> str:
    """The arm task: measure a queued run once, publish its first batches, return.

    Returns the run's status after arming (``running`` while batches work).
    """
    run = _run_when_committed(run_id, sleep)
    if run is None:
        return "missing"
    if run.status != RunStatus.RUNNING:
        return run.status
    if run.mode == RunMode.DRY_RUN:
        # Nothing to publish: a dry run is a few aggregate queries.
        return run_execute(run=run, clock=clock, monotonic=monotonic).status
    # Outside the run's lock: it may ask the store about rows a dead batch left.
    stranded_settle(run=run, clock=clock)
    _measure_once(run, clock())
    return run_advance(run_id=run.pk, clock=clock, publish=publish, guard=guard)


def _run_when_committed(run_id: uuid.UUID | str, sleep: Callable[[float], None]) -> Run | None:
    for _ in range(10):
        run = Run.objects.filter(pk=run_id).first()
        if run is not None:
            return run
        sleep(0.5)
    logger.error("run %s not found: its transaction rolled back, or has not committed", run_id)
    return None


def _measure_once(run: Run, now: datetime) -> None:
    """Count what the run owes, record its held skips and the breaker's decision, once per run."""
    with transaction.atomic():
        locked = Run.objects.select_for_update().get(pk=run.pk)
        report = locked.report if isinstance(locked.report, dict) else {}
        if report.get("measured"):
            return
        measured = run_measure(run)
        held_skips_record(run, now)
        # Before any batch is published: no batch of a held class is.
        if breaker_decide(run, eligible=measured.eligible, rows=measured.rows, now=now):
            report = run.report  # with the decision in it
        Run.objects.filter(pk=run.pk).update(report={**report, "measured": True})


def run_advance(
    *,
    run_id: uuid.UUID | str,
    clock: Clock = db_now,
    publish: Publish | None = None,
    guard: Guard | None = None,
) -> str:
    """One step of a queued run: publish its next batches, or close it. Bounded.

    Decided under the run row's lock, so two batches finishing together
    neither both publish past the limit nor both close the run; the
    batches are published after that lock is released.
    """
    now = clock()
    slots: list[RunBatch] = []
    with transaction.atomic():
        run = Run.objects.select_for_update().filter(pk=run_id).first()
        if run is None or run.status != RunStatus.RUNNING:
            return run.status if run is not None else "missing"
        stepper = Stepper(run=run, clock=clock, pages_in_flight=settings.MAX_BATCHES_IN_FLIGHT)
        stepper.heartbeat(now)
        in_flight = _in_flight(run, now)
        stop = stepper.stop(now)
        if stop is not None:
            if in_flight:
                return run.status  # the last batch to finish closes the run
            _deferral_end(run, now, ending=True)
            return run_finish(run, stop.status, stop.reason, now).status
        reading = (guard or foreground_guard())(now=now)
        if reading.over_budget:
            _deferral_start(run, reading, now)
            return run.status
        _deferral_end(run, now, ending=False)
        free = settings.MAX_BATCHES_IN_FLIGHT - _global_in_flight(now)
        slots = _open_slots(run, stepper, free, now)
        if not slots and in_flight:
            in_flight -= _idle_batches_close(run, now)
        if not slots and not in_flight:
            wait = stepper.retry_wait(retry_next_due(run), now)
            if wait is None and not _disposing(run, now):
                return run_finish(run, RunStatus.FINISHED, "", now).status
            # Retries fall due soon: the run's resumption (or the watchdog) advances it then.
    if not slots:
        return run.status
    streak = _publish(run, slots, publish or batch_publisher(), now)
    if streak and streak < MAX_PUBLISH_FAILURES:
        # Nothing went out: try again at once, until MAX_PUBLISH_FAILURES in
        # a row give the run up.
        return run_advance(run_id=run_id, clock=clock, publish=publish, guard=guard)
    # A broker that runs tasks at once (sync) may have carried the run to its end.
    run.refresh_from_db(fields=["status"])
    return run.status


def foreground_guard() -> Guard:
    """The host's foreground guard: asked before publishing, and by a batch before a page."""
    from retention.engine.guard import foreground_guard_read

    return foreground_guard_read


def _open_slots(run: Run, stepper: Stepper, free: int, now: datetime) -> list[RunBatch]:
    """Up to ``free`` new batches, as many as there are pages left to claim.

    Counted, not claimed: each batch claims its own page when a worker runs
    it. Batches already published and not yet claimed count against the
    pages of their class.
    """
    if free <= 0:
        return []
    rules = run_rules(run)
    waiting = dict(
        RunBatch.objects.filter(run=run, state=BatchState.QUEUED, size=0)
        .values_list("data_class")
        .annotate(n=Count("token"))
    )
    pages: dict[str, int] = {}
    report = dict(run.report) if isinstance(run.report, dict) else {}
    rows_done = report.get("rows_done") or {}
    row_names = set(row_class_names(run, rules))
    held = breaker_held(run)
    busy = set(
        RunBatch.objects.filter(run=run, state=BatchState.QUEUED, data_class__in=row_names)
        .values_list("data_class", flat=True)
        .distinct()
    )
    for name in run.data_classes:
        size = stepper.page_size(rules[name])
        if size <= 0 or name in held:
            continue
        if name in row_names:
            # Model rows: one page at a time per class, each after the last one's cursor.
            pages[name] = 0 if rows_done.get(name) or name in busy else 1
            continue
        ahead = int(waiting.get(name, 0))
        rows = claimable_count(run=run, data_class=name, now=now, up_to=size * (free + ahead))
        pages[name] = max(-(-rows // size) - ahead, 0)
    slots: list[RunBatch] = []
    names = list(run.data_classes)
    turn = int(report.get("next_class", 0))
    while len(slots) < free and any(pages.values()):
        name = names[turn % len(names)]
        turn += 1
        if not pages.get(name):
            continue
        pages[name] -= 1
        lease = stepper.page_lease_seconds(stepper.page_size(rules[name]), rules[name])
        slots.append(
            RunBatch.objects.create(
                token=uuid.uuid4(),
                run=run,
                data_class=name,
                size=0,
                published_at=now,
                lease_expires_at=now + timedelta(seconds=lease),
            )
        )
    if slots:
        report["next_class"] = turn % len(names)
        Run.objects.filter(pk=run.pk).update(report=report)
        run.report = report
    return slots


def _idle_batches_close(run: Run, now: datetime) -> int:
    """Close the run's batches no worker took yet, of classes with nothing left to claim.

    They would only be delivered to find nothing: each costs a hand-over, and
    the run would wait for them to close. A batch is taken when its delivery
    is counted (``batch_dispose``), in an UPDATE as atomic as this one, so a
    batch is either taken or closed here, never both. Model-row classes keep
    theirs (their one batch at a time is the class's next page).
    """
    rules = run_rules(run)
    row_names = set(row_class_names(run, rules))
    exhausted = [
        name
        for name in run.data_classes
        if name not in row_names and not claimable_count(run=run, data_class=name, now=now, up_to=1)
    ]
    if not exhausted:
        return 0
    return (
        batches_in_flight(now)
        .filter(run=run, data_class__in=exhausted, deliveries=0, size=0)
        .update(state=BatchState.DONE, finished_at=now)
    )


def _publish(run: Run, slots: list[RunBatch], publish: Publish, now: datetime) -> int:
    """Publish the new batches; return the run's streak of publications that all
    failed (0 when any went out). A batch that did not go out is closed."""
    failures = 0
    for slot in slots:
        payload = {"run_id": str(run.pk), "token": str(slot.token), "data_class": slot.data_class}
        try:
            publish(BATCH_TASK, payload, f"retention-batch-{slot.token}")
        except Exception as exc:
            failures += 1
            logger.error(
                "run %s: batch %s could not be published (%s)",
                run.pk,
                slot.token,
                type(exc).__name__,
                extra={"run_id": str(run.pk)},
            )
            batch_release(slot.token, BatchState.UNPUBLISHED, now)
    return _publish_failures_count(run, 1 if failures == len(slots) else 0, now)


def _publish_failures_count(run: Run, failed: int, now: datetime) -> int:
    """Give the run up after MAX_PUBLISH_FAILURES publications failed in a row."""
    with transaction.atomic():
        locked = Run.objects.select_for_update().get(pk=run.pk)
        report = dict(locked.report) if isinstance(locked.report, dict) else {}
        before = int(report.get("publish_failures", 0))
        streak = before + failed if failed else 0
        if streak != before:
            report["publish_failures"] = streak
            Run.objects.filter(pk=run.pk).update(report=report)
    if streak >= MAX_PUBLISH_FAILURES and not _in_flight(run, now):
        run_finish(
            run, RunStatus.ERROR, "task queue unavailable: batches could not be published", now
        )
    return streak


def batches_in_flight(now: datetime) -> QuerySet[RunBatch]:
    """Published batches that may still be working: queued, their lease not lapsed."""
    return RunBatch.objects.filter(state=BatchState.QUEUED, lease_expires_at__gte=now)


def _in_flight(run: Run, now: datetime) -> int:
    """This run's batches in flight; its lapsed ones are marked expired."""
    RunBatch.objects.filter(run=run, state=BatchState.QUEUED, lease_expires_at__lt=now).update(
        state=BatchState.EXPIRED
    )
    return batches_in_flight(now).filter(run=run).count()


def _disposing(run: Run, now: datetime) -> bool:
    """Whether rows of the run's classes are still under a live lease, with no batch in flight.

    Only this run can hold them (one enforcing run per class). The run stays
    open until they are done or their lease lapses (then they are claimable,
    and the watchdog carries the run on): it never closes while deletes may
    still be going out. Walks the due index up to each class's cutoff only.
    """
    due = Q()
    for name in run.data_classes:
        due |= Q(data_class=name, expires_at__lte=class_cutoff(run, name))
    if not due:
        return False
    return (
        RetentionRecord.objects.pending()
        .filter(due, state=RecordState.DELETING, lease_expires_at__gt=now)
        .exists()
    )


def _global_in_flight(now: datetime) -> int:
    return batches_in_flight(now).count()


def _deferral_start(run: Run, reading: GuardReading, now: datetime) -> None:
    report = dict(run.report) if isinstance(run.report, dict) else {}
    waiting = max(run.eligible - run.claimed, 0)
    if "deferring" not in report:
        report["deferring"] = {"from": now.isoformat(), "signal": reading.detail}
        logger.info(
            "run %s: foreground guard over budget (%s); dispatch deferred",
            run.pk,
            reading.detail,
            extra={"run_id": str(run.pk)},
        )
    Run.objects.filter(pk=run.pk).update(report=report, deferred=waiting)
    run.report, run.deferred = report, waiting


def _deferral_end(run: Run, now: datetime, *, ending: bool) -> None:
    report = dict(run.report) if isinstance(run.report, dict) else {}
    deferring: dict[str, Any] | None = report.pop("deferring", None)
    if deferring is None:
        return
    report.setdefault("deferrals", []).append(
        {
            "from": deferring["from"],
            "until": now.isoformat(),
            "records_waiting": run.deferred,
            "signal": deferring["signal"],
        }
    )
    # Dispatch resumed: nothing is held back any more. A run that ends while
    # deferring keeps the figure: that many records wait for the next run.
    fields: dict[str, Any] = {"report": report}
    if not ending:
        fields["deferred"] = 0
        run.deferred = 0
    Run.objects.filter(pk=run.pk).update(**fields)
    run.report = report
    logger.info("run %s: foreground guard within budget; dispatch resumed", run.pk)


def batch_release(token: uuid.UUID, batch_state: str, now: datetime) -> int:
    """Give a batch's rows back to the claim queue, unprocessed."""
    with transaction.atomic():
        released = claim_release(token)
        RunBatch.objects.filter(token=token).update(state=batch_state, finished_at=now)
    return released
