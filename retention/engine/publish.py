"""Queued runs are accepted here: the run is written, then its dispatcher is published.

Every way a queued run starts (``run_retention --enqueue``, the signed API
trigger, the schedule, the watchdog re-arming a stalled run) publishes its
dispatcher through ``dispatcher_publish``. Task payloads carry run ids,
record ids and row versions, never object keys: a broker is not a place for
personal data. The dotted task paths are a contract with tasks already in a
broker: they do not change between versions.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django_q.models import Schedule

from retention.broker import Publish, publish_task
from retention.clock import db_now
from retention.engine.ledger import run_abort, run_start
from retention.exceptions import RunRefused
from retention.models import ErasureRequest, Run, RunExecutor, RunTrigger

logger = logging.getLogger("retention.dispatch")
# The control plane's requests are logged where the REST API logs its own.
api_logger = logging.getLogger("retention.api")

DISPATCH_TASK = "retention.tasks.run_dispatch"
BATCH_TASK = "retention.tasks.batch_dispose"
RESUME_TASK = "retention.tasks.run_resume"
# A running queued run keeps one resumption pending this far ahead: the
# scheduler (which looks every 30 s) fires it 10-40 s later.
RESUME_AFTER_SECONDS = 10


def dispatcher_name(run: Run) -> str:
    return f"retention-dispatch-{run.pk}"


def dispatcher_publish(run: Run, *, publish: Publish | None = None) -> None:
    """Publish the run's dispatcher task; raises what the broker raised."""
    (publish or publish_task)(DISPATCH_TASK, {"run_id": str(run.pk)}, dispatcher_name(run))


def resume_schedule_name(run_id: Any) -> str:
    return f"retention.resume.{run_id}"


def run_resume_arm(run: Run, now: datetime) -> None:
    """Have django-q2's scheduler advance this queued run again shortly; idempotent.

    A run never waits on a schedule nobody installed: a run the foreground
    guard deferred, whose retries are not due yet, or whose batches were
    lost resumes by its own one-off schedule (fired once, then gone; armed
    again while the run runs), with or without ``retention_schedule``'s
    watchdog.
    """
    name = resume_schedule_name(run.pk)
    if Schedule.objects.filter(name=name).exists():
        return
    Schedule.objects.create(
        name=name,
        func=RESUME_TASK,
        args=repr(str(run.pk)),
        schedule_type=Schedule.ONCE,
        repeats=-1,
        next_run=now + timedelta(seconds=RESUME_AFTER_SECONDS),
    )


def _queue_unavailable(run: Run, exc: Exception, now: datetime) -> RunRefused:
    """Close a run nobody will sweep, so its lease does not hold the class until it expires."""
    logger.error(
        "run %s: dispatcher could not be queued: %s",
        run.pk,
        type(exc).__name__,
        extra={"run_id": str(run.pk)},
    )
    run_abort(run=run, reason=f"could not be queued: {type(exc).__name__}", now=now)
    return RunRefused(
        f"The task queue is unavailable ({type(exc).__name__}); the run was closed.",
        reason="queue_unavailable",
        run_id=run.pk,
    )


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
    key_id: str | None = None,
    erasure: ErasureRequest | None = None,
    now: datetime,
    publish: Publish | None = None,
) -> Run:
    """Start a queued run (``run_start``) and publish its arm task.

    Raises RunRefused (the refused run kept in the ledger) as run_start does.
    The command, the schedule and the watchdog publish at once: if the arm
    task cannot be published the run is closed with status ``error`` and
    RunRefused(reason="queue_unavailable") is raised. The signed API trigger
    (``trigger="api"``, with the signing ``key_id``) publishes once the
    caller's transaction commits, so no worker looks for a run not yet
    committed; then a queue that cannot take it closes the run (``error``)
    and the caller learns it from the run's status.
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
        erasure=erasure,
        now=now,
    )
    if trigger == RunTrigger.API:
        api_logger.info("run %s started through the API: key_id=%s mode=%s", run.pk, key_id, mode)

        def publish_after_commit() -> None:
            try:
                dispatcher_publish(run, publish=publish)
            except Exception as exc:
                _queue_unavailable(run, exc, db_now())
                return
            run_resume_arm(run, db_now())

        transaction.on_commit(publish_after_commit)
        return run
    # Published now. Inside the caller's transaction the ORM broker commits the
    # task with the run; a broker outside the database may deliver it first,
    # and the arm task waits for the run to appear (else the watchdog
    # re-publishes it).
    try:
        dispatcher_publish(run, publish=publish)
    except Exception as exc:
        raise _queue_unavailable(run, exc, now) from exc
    run_resume_arm(run, now)
    return run
