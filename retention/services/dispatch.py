"""Queued runs: one dispatcher claims pages, django-q2 workers dispose of them.

The run is written (and its single-flight leases taken) before the caller is
answered. A dispatcher task then claims bounded pages exactly as the inline
engine does and publishes each page as one batch task carrying record ids and
the row versions it expects, never object keys (a broker is not a place for
personal data). Workers re-check, wait for the shared rate gate, delete and
finalize through the same code as the inline path.

Nothing here trusts the broker to deliver exactly once. A batch is safe to
run twice (its rows are finalized only while still leased to its token), a
lost batch's rows fall back to the claim queue when their lease expires, and
a dispatcher that dies leaves a lease that lapses: the same task re-presented
by the broker, or the watchdog schedule, takes the run over.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from retention.conf import settings
from retention.disposal import Disposer
from retention.exceptions import RunRefused
from retention.models import (
    RUN_COUNT_FIELDS,
    BatchState,
    RecordState,
    RetentionRecord,
    Run,
    RunBatch,
    RunExecutor,
    RunLease,
    RunMode,
    RunStatus,
    RunTrigger,
)
from retention.pacing import gate_for
from retention.services.control import kill_switch_is_paused
from retention.services.runs import (
    CLAIM_FIELDS,
    Claim,
    ClaimedItem,
    ClaimOutcome,
    Cursors,
    claim_dispose,
    claimed_item,
    held_skips_record,
    records_claim_next,
    retry_next_due,
    run_execute,
    run_finish,
    run_measure,
    run_start,
)

if TYPE_CHECKING:
    from retention.guard import GuardReading

logger = logging.getLogger("retention.dispatch")

DISPATCH_TASK = "retention.tasks.run_dispatch"
BATCH_TASK = "retention.tasks.batch_dispose"

Clock = Callable[[], datetime]
# (dotted task path, payload, task name) -> None; raises when it cannot publish.
Publish = Callable[[str, dict[str, Any], str], None]
Guard = Callable[..., "GuardReading"]
ProgressFn = Callable[[Run], None]

# Publishing failures in a row before a dispatcher gives the run up.
MAX_PUBLISH_FAILURES = 3


def publish_task(func: str, payload: dict[str, Any], name: str) -> None:
    """Publish one task through django-q2 to this project's cluster."""
    from django_q.tasks import async_task  # type: ignore[import-untyped]

    async_task(func, payload, task_name=name, group="retention")


def _batch_publisher() -> Publish:
    """A publisher holding one broker for a dispatcher's many batches.

    Building a broker per task would, on the ORM broker, also close and
    reopen the database connection every time.
    """
    from django_q.brokers import get_broker  # type: ignore[import-untyped]
    from django_q.tasks import async_task  # type: ignore[import-untyped]

    broker = get_broker()

    def publish(func: str, payload: dict[str, Any], name: str) -> None:
        async_task(func, payload, task_name=name, group="retention", broker=broker)

    return publish


# --------------------------------------------------------------------------
# Accepting a queued run


def run_enqueue(
    *,
    mode: str,
    trigger: str,
    data_classes: Sequence[str] | None = None,
    tenant_id: str | None = None,
    limit: int | None = None,
    max_seconds: float | None = None,
    schedule_slot: datetime | None = None,
    deadline_at: datetime | None = None,
    now: datetime,
    publish: Publish | None = None,
) -> Run:
    """Write a queued run and publish its dispatcher once the run is committed.

    Raises RunRefused (the refused run kept in the ledger) as run_start does.
    If the dispatcher cannot be published the run is closed with status
    ``error`` and RunRefused(reason="queue_unavailable") is raised.
    """
    if max_seconds is not None:
        if max_seconds <= 0:
            raise RunRefused("--max-seconds must be positive.", reason="bad_arguments")
        budget_end = now + timedelta(seconds=max_seconds)
        deadline_at = min(deadline_at, budget_end) if deadline_at else budget_end
    run = run_start(
        mode=mode,
        trigger=trigger,
        data_classes=data_classes,
        tenant_id=tenant_id,
        limit=limit,
        executor=RunExecutor.QUEUE,
        schedule_slot=schedule_slot,
        deadline_at=deadline_at,
        now=now,
    )
    # Published now. Inside the caller's transaction the ORM broker commits the
    # task with the run; a broker outside the database may deliver it first,
    # and the dispatcher waits for the run to appear (else the watchdog
    # re-publishes it).
    try:
        (publish or publish_task)(DISPATCH_TASK, {"run_id": str(run.pk)}, _dispatch_name(run))
    except Exception as exc:
        logger.error(
            "run %s: dispatcher could not be queued: %s",
            run.pk,
            type(exc).__name__,
            extra={"run_id": str(run.pk)},
        )
        run_finish(run, RunStatus.ERROR, f"could not be queued: {type(exc).__name__}", now)
        raise RunRefused(
            f"The task queue is unavailable ({type(exc).__name__}); the run was closed.",
            reason="queue_unavailable",
            run_id=run.pk,
        ) from exc
    return run


def _dispatch_name(run: Run) -> str:
    return f"retention-dispatch-{run.pk}"


# --------------------------------------------------------------------------
# The schedule


def schedule_slot_for(cron: str, now: datetime) -> tuple[datetime, datetime]:
    """The latest cron slot at or before ``now`` and the one after it, in UTC."""
    from croniter import croniter  # type: ignore[import-untyped]

    base = now.astimezone(UTC).replace(microsecond=0)
    itr = croniter(cron, base + timedelta(seconds=1))
    previous = itr.get_prev(datetime)
    following = croniter(cron, base).get_next(datetime)
    return previous, following


def run_schedule_fire(*, now: datetime, publish: Publish | None = None) -> Run | None:
    """What the scheduled task does: start the run of the current slot, once.

    Every firing that falls in the same slot (a second cluster, missed slots
    replayed after downtime) finds the slot's run and joins it. The run stops
    claiming when the next slot begins, so runs never overlap by design.
    """
    slot, next_slot = schedule_slot_for(settings.SCHEDULE_CRON, now)
    existing = Run.objects.filter(schedule_slot=slot).first()
    if existing is not None:
        logger.info(
            "schedule slot %s already has run %s (%s): joining it",
            slot.isoformat(),
            existing.pk,
            existing.status,
            extra={"run_id": str(existing.pk)},
        )
        return existing
    try:
        return run_enqueue(
            mode=RunMode.ENFORCE,
            trigger=RunTrigger.SCHEDULE,
            schedule_slot=slot,
            deadline_at=next_slot,
            now=now,
            publish=publish,
        )
    except IntegrityError:
        # Another firing of the same slot won the insert a moment ago.
        return Run.objects.filter(schedule_slot=slot).first()
    except RunRefused as exc:
        logger.warning("scheduled run refused (%s): %s", exc.reason, exc)
        return Run.objects.filter(pk=exc.run_id).first() if exc.run_id else None


def runs_resume_stalled(*, now: datetime, publish: Publish | None = None) -> list[Run]:
    """The watchdog: re-publish the dispatcher of queued runs nobody dispatches.

    A dispatcher lost with its worker (a broker that does not re-present
    unacknowledged tasks, e.g. Redis) leaves a lapsed dispatcher lease.
    """
    grace = now - timedelta(seconds=settings.DISPATCHER_LEASE_SECONDS)
    stalled = list(
        Run.objects.filter(status=RunStatus.RUNNING, executor=RunExecutor.QUEUE)
        .filter(
            Q(dispatcher_expires_at__lt=now)
            | Q(dispatcher_expires_at__isnull=True, started_at__lt=grace)
        )
        .order_by("started_at")
    )
    for run in stalled:
        logger.warning(
            "run %s has no live dispatcher: publishing a new one",
            run.pk,
            extra={"run_id": str(run.pk)},
        )
        (publish or publish_task)(DISPATCH_TASK, {"run_id": str(run.pk)}, _dispatch_name(run))
    return stalled


# --------------------------------------------------------------------------
# The dispatcher


def _dispatcher_acquire(run: Run, owner: uuid.UUID, now: datetime) -> bool:
    expires = now + timedelta(seconds=settings.DISPATCHER_LEASE_SECONDS)
    taken = (
        Run.objects.filter(pk=run.pk, status=RunStatus.RUNNING)
        .filter(
            Q(dispatcher_owner__isnull=True)
            | Q(dispatcher_expires_at__lt=now)
            | Q(dispatcher_owner=owner)
        )
        .update(dispatcher_owner=owner, dispatcher_expires_at=expires)
    )
    return taken == 1


def _dispatcher_release(run: Run, owner: uuid.UUID) -> None:
    Run.objects.filter(pk=run.pk, dispatcher_owner=owner).update(
        dispatcher_owner=None, dispatcher_expires_at=None
    )


def _heartbeat(run: Run, owner: uuid.UUID, now: datetime) -> str | None:
    """Renew the dispatcher lease and the run's class leases; say what was lost."""
    expires = now + timedelta(seconds=settings.DISPATCHER_LEASE_SECONDS)
    kept = Run.objects.filter(pk=run.pk, dispatcher_owner=owner).update(
        dispatcher_expires_at=expires
    )
    if not kept:
        return "dispatcher lease taken over"
    run_expires = now + timedelta(seconds=settings.RUN_LEASE_SECONDS)
    held = RunLease.objects.filter(owner=run.lease_owner).update(expires_at=run_expires)
    if held < len(run.data_classes):
        return "run lease lost"
    Run.objects.filter(pk=run.pk).update(lease_expires_at=run_expires)
    return None


@dataclass
class _Dispatch:
    run: Run
    owner: uuid.UUID
    clock: Clock
    sleep: Callable[[float], None]
    publish: Publish
    guard: Guard
    progress: ProgressFn | None
    deferring_since: datetime | None = None
    deferral_detail: str = ""
    publish_failures: int = 0
    next_class: int = 0
    last_heartbeat: float = 0.0
    last_deferral_write: float = 0.0
    last_progress: float = 0.0
    # Where each class's next claim resumes; a continuation task starts over.
    cursors: Cursors = field(default_factory=dict)


def run_dispatch(
    *,
    run_id: uuid.UUID | str,
    clock: Clock = timezone.now,
    sleep: Callable[[float], None] = time.sleep,
    publish: Publish | None = None,
    guard: Guard | None = None,
    budget_seconds: float | None = None,
    progress: ProgressFn | None = None,
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
        return run_execute(run=run, clock=clock).status
    owner = uuid.uuid4()
    if not _dispatcher_acquire(run, owner, clock()):
        logger.info("run %s: another dispatcher is active; joining it", run.pk)
        return "joined"
    if guard is None:
        from retention.guard import foreground_guard_read

        guard = foreground_guard_read
    state = _Dispatch(
        run=run,
        owner=owner,
        clock=clock,
        sleep=sleep,
        publish=publish or _batch_publisher(),
        guard=guard,
        progress=progress,
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
        _dispatcher_release(run, owner)


def _run_when_committed(run_id: uuid.UUID | str, sleep: Callable[[float], None]) -> Run | None:
    for _ in range(10):
        run = Run.objects.filter(pk=run_id).first()
        if run is not None:
            return run
        sleep(0.5)
    logger.error("run %s not found: its transaction rolled back, or has not committed", run_id)
    return None


def _dispatch_loop(state: _Dispatch, budget_seconds: float | None) -> str:
    run = state.run
    started = time.monotonic()
    poll = settings.DISPATCH_POLL_SECONDS
    lease = settings.DISPATCHER_LEASE_SECONDS
    report = run.report if isinstance(run.report, dict) else {}
    if not report.get("measured"):
        # Once per run, by its first dispatcher.
        run_measure(run)
        held_skips_record(run, state.clock())
        Run.objects.filter(pk=run.pk).update(report={**report, "measured": True})
    rules = report.get("rules", {})
    ending: tuple[str, str] | None = None
    while True:
        now = state.clock()
        # Well inside the lease, so a busy moment never lets it lapse.
        if time.monotonic() - state.last_heartbeat >= min(5.0, lease / 3):
            lost = _heartbeat(run, state.owner, now)
            state.last_heartbeat = time.monotonic()
            if lost == "dispatcher lease taken over":
                return "joined"
            if lost is not None:
                return run_finish(run, RunStatus.ABANDONED, lost, now).status
        if budget_seconds is not None and time.monotonic() - started >= budget_seconds:
            return _continue(state)
        run.refresh_from_db(fields=[*_PROGRESS_FIELDS, "status"])
        if run.status != RunStatus.RUNNING:
            return run.status
        _report_progress(state)
        if ending is None:
            ending = _should_stop(run, now)
        if ending is not None:
            if _in_flight(run, now):
                state.sleep(poll)
                continue
            _end_deferral(state, now)
            return run_finish(run, ending[0], ending[1], state.clock()).status

        reading = state.guard(now=now)
        if reading.over_budget:
            _defer(state, reading, now)
            state.sleep(poll)
            continue
        _end_deferral(state, now)

        if _global_in_flight(now) >= settings.MAX_BATCHES_IN_FLIGHT:
            state.sleep(poll)
            continue
        if _claim_and_publish(state, rules, now):
            if state.publish_failures >= MAX_PUBLISH_FAILURES:
                ending = (RunStatus.ERROR, "task queue unavailable: batches could not be published")
            continue
        if _in_flight(run, now):
            state.sleep(poll)
            continue
        due = retry_next_due(run)
        if due is None:
            return run_finish(run, RunStatus.FINISHED, "", state.clock()).status
        wait = (due - now).total_seconds()
        if wait > settings.RETRY_WAIT_IN_RUN_SECONDS or (
            run.deadline_at is not None and due >= run.deadline_at
        ):
            return run_finish(run, RunStatus.FINISHED, "", state.clock()).status
        state.sleep(min(max(wait, 0.0) + 0.01, poll * 4))


_PROGRESS_FIELDS = (*RUN_COUNT_FIELDS, "retried")


def _report_progress(state: _Dispatch) -> None:
    if state.progress and time.monotonic() - state.last_progress >= 1.0:
        state.last_progress = time.monotonic()
        state.progress(state.run)


def _should_stop(run: Run, now: datetime) -> tuple[str, str] | None:
    if kill_switch_is_paused():
        return RunStatus.PAUSED, "kill switch engaged"
    if run.deadline_at is not None and now >= run.deadline_at:
        return RunStatus.STOPPED, "time budget reached"
    if run.limit is not None and run.claimed >= run.limit:
        return RunStatus.STOPPED, f"limit of {run.limit} records reached"
    return None


def _continue(state: _Dispatch) -> str:
    """Hand the run to a fresh dispatcher task before the worker's timeout."""
    run = state.run
    # Released first: the continuation must find the dispatcher lease free.
    _dispatcher_release(run, state.owner)
    try:
        state.publish(DISPATCH_TASK, {"run_id": str(run.pk)}, _dispatch_name(run))
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
    if time.monotonic() - state.last_deferral_write >= 5.0:
        state.last_deferral_write = time.monotonic()
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
    ended = _should_stop(run, now) is not None
    # Dispatch resumed: nothing is held back any more. A run that ends while
    # deferring keeps the figure: that many records wait for the next run.
    fields: dict[str, Any] = {"report": report}
    if not ended:
        fields["deferred"] = 0
    Run.objects.filter(pk=run.pk).update(**fields)
    run.report = report
    state.deferring_since = None
    logger.info("run %s: foreground guard within budget; dispatch resumed", run.pk)


def _claim_and_publish(state: _Dispatch, rules: dict[str, dict], now: datetime) -> bool:
    run = state.run
    names = list(run.data_classes)
    for offset in range(len(names)):
        name = names[(state.next_class + offset) % len(names)]
        class_rules = rules.get(name, {})
        size = int(class_rules.get("batch_size", 500))
        if run.limit is not None:
            size = min(size, run.limit - run.claimed)
            if size <= 0:
                return False
        rate = class_rules.get("rate_limit")
        # The lease covers the queue wait, the delete, and the rate gate's
        # pacing, which may make a batch wait behind every batch in flight.
        pacing = size / rate * settings.MAX_BATCHES_IN_FLIGHT if rate else 0.0
        lease_seconds = settings.LEASE_SECONDS + pacing
        claim = records_claim_next(
            cursors=state.cursors,
            run=run,
            data_class=name,
            limit=size,
            now=now,
            lease_seconds=lease_seconds,
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
        _release(claim.token, BatchState.UNPUBLISHED, now)
        return
    state.publish_failures = 0


def _release(token: uuid.UUID, batch_state: str, now: datetime) -> int:
    """Give a batch's rows back to the claim queue, unprocessed."""
    with transaction.atomic():
        released = RetentionRecord.objects.filter(
            lease_owner=token, state=RecordState.DELETING
        ).update(
            state=RecordState.ACTIVE,
            lease_owner=None,
            lease_expires_at=None,
            attempts=F("attempts") - 1,
        )
        RunBatch.objects.filter(token=token).update(state=batch_state, finished_at=now)
    return released


# --------------------------------------------------------------------------
# The worker


def batch_dispose(
    *,
    payload: dict[str, Any],
    clock: Clock = timezone.now,
    disposer: Disposer | None = None,
) -> ClaimOutcome:
    """The batch task: re-check, pace, delete, finalize. Safe to run twice."""
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
    if kill_switch_is_paused():
        # Paused before this batch started: its rows go back untouched.
        released = _release(token, BatchState.RELEASED, now)
        logger.info(
            "run %s: batch %s released (%d rows) because retention is paused",
            run.pk,
            token,
            released,
            extra={"run_id": str(run.pk)},
        )
        return outcome
    expected = {int(record_id): int(version) for record_id, version in payload["items"]}
    items = _claimed_items(token, expected)
    rules = run.report.get("rules", {}).get(payload["data_class"], {})
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
        gate=gate_for(data_class=payload["data_class"], rate_limit=rules.get("rate_limit")),
        max_attempts=int(rules.get("max_attempts") or settings.MAX_ATTEMPTS),
    )
    RunBatch.objects.filter(token=token).update(state=BatchState.DONE, finished_at=clock())
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
