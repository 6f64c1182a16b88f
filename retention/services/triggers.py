"""Runs triggered from outside, through the signed control-plane endpoint.

The run is written to the ledger (and its leases taken) before the caller is
answered; the sweep itself is a queued run (retention.services.dispatch): a
dispatcher task publishes its batches to django-q2 workers, so it never
occupies a web worker nor dies with the HTTP request, and it is paced, guarded
and paused like any queued run. With the ORM broker the task is a row in the
same database, committed with the run.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime, timedelta

from django.db import IntegrityError, transaction
from django.utils import timezone
from django_q.tasks import async_task  # type: ignore[import-untyped]

from retention.conf import settings
from retention.exceptions import RetentionError
from retention.models import Run, RunExecutor, RunTrigger, SeenRequestSignature
from retention.services.dispatch import DISPATCH_TASK
from retention.services.runs import run_abort, run_start

logger = logging.getLogger("retention.api")

QUEUED_TASK = DISPATCH_TASK


class SignatureReplayed(RetentionError):
    code = "signature_replayed"


def request_signature_consume(
    *, digest: str, key_id: str, signed_at: datetime, now: datetime
) -> None:
    """Record a verified signature; raise SignatureReplayed if it was seen before.

    The primary key makes this race-free: of two identical requests arriving
    together, exactly one insert succeeds.
    """
    window = timedelta(seconds=settings.SIGNATURE_WINDOW_SECONDS)
    # Past the window a replay is refused as stale, so the row is no longer needed.
    SeenRequestSignature.objects.filter(signed_at__lt=now - window).delete()
    try:
        with transaction.atomic():
            SeenRequestSignature.objects.create(
                digest=digest, key_id=key_id, signed_at=signed_at, seen_at=now
            )
    except IntegrityError:
        raise SignatureReplayed("This signed request was already accepted once.") from None


def run_trigger(
    *,
    mode: str,
    data_classes: Sequence[str] | None,
    tenant_id: str | None,
    limit: int | None,
    max_seconds: float | None,
    key_id: str,
    now: datetime,
) -> Run:
    """Start a run (trigger ``api``) and queue its sweep once the run is committed.

    Raises RunRefused, with the refused run kept in the ledger, as run_start does.
    """
    run = run_start(
        mode=mode,
        trigger=RunTrigger.API,
        data_classes=data_classes,
        tenant_id=tenant_id,
        limit=limit,
        executor=RunExecutor.QUEUE,
        deadline_at=now + timedelta(seconds=max_seconds) if max_seconds else None,
        now=now,
    )
    logger.info("run %s started through the API: key_id=%s mode=%s", run.pk, key_id, mode)
    # A worker that picked the task up before the commit would not see the run.
    transaction.on_commit(lambda: _publish(run))
    return run


def _publish(run: Run) -> None:
    try:
        async_task(
            QUEUED_TASK,
            {"run_id": str(run.pk)},
            task_name=f"retention-dispatch-{run.pk}",
            group="retention",
        )
    except Exception as exc:
        # The run is recorded but nobody will sweep it: close it now so its
        # lease does not hold the data class until it expires.
        logger.error("run %s could not be queued: %s", run.pk, type(exc).__name__)
        run_abort(run=run, reason=f"could not be queued: {type(exc).__name__}", now=timezone.now())


def run_execute_queued(run_id: str, max_seconds: float | None = None) -> str:
    """The task name queued by earlier versions: hand the run to a dispatcher.

    Kept so that tasks already in a broker during an upgrade still run.
    """
    from retention.tasks import run_dispatch as dispatch_task

    return dispatch_task({"run_id": run_id})
