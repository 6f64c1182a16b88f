"""Which runs covered a data class: the latest dry run, the last sweep.

A run's data classes are a JSON list; matching a class in it is spelled
once, here (``runs_covering``).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable
from datetime import datetime

from django.db.models import Count, QuerySet, Sum, Value
from django.db.models.functions import Coalesce

from retention.conf import settings
from retention.models import BatchState, DeletionEvent, Run, RunBatch, RunMode, RunStatus


def runs_covering(data_class: str) -> QuerySet[Run]:
    """Runs whose data classes include ``data_class``.

    The list is stored as JSON text on every backend; with the quotes, the
    match is the whole element, and data class names have nothing to escape
    (``data_class_validator``).
    """
    return Run.objects.filter(data_classes__icontains=json.dumps(data_class))


def dry_run_latest(
    *, data_class: str, finished_since: datetime | None = None, whole_class: bool = False
) -> Run | None:
    """The newest dry run covering ``data_class``.

    ``finished_since``: only finished dry runs that finished since then, newest
    finish first (otherwise the newest started, whatever its status).
    ``whole_class``: only dry runs that looked at the whole class, not one
    tenant, a limit, or a few records (a reviewer must see what enforcement
    would do to all of it).
    """
    runs = runs_covering(data_class).filter(mode=RunMode.DRY_RUN)
    if finished_since is not None:
        runs = runs.filter(status=RunStatus.FINISHED, finished_at__gte=finished_since)
        runs = runs.order_by("-finished_at")
    else:
        runs = runs.order_by("-started_at")
    if whole_class:
        runs = runs.filter(tenant_id__isnull=True, limit__isnull=True)
    for run in runs.iterator():
        if whole_class and isinstance(run.report, dict) and run.report.get("record_ids"):
            continue
        return run
    return None


def run_last(data_class: str, *, mode: str, statuses: Iterable[str]) -> Run | None:
    """The newest run of ``mode`` covering the class that ended in one of ``statuses``."""
    return (
        runs_covering(data_class)
        .filter(mode=mode, status__in=list(statuses))
        .order_by("-finished_at")
        .first()
    )


def dry_run_reviewable(*, data_class: str, now: datetime) -> Run | None:
    """The dry run an approver may enable enforcement from (RETENTION_DRY_RUN_MAX_AGE)."""
    return dry_run_latest(
        data_class=data_class, finished_since=now - settings.DRY_RUN_MAX_AGE, whole_class=True
    )


def run_get(*, run_id: uuid.UUID | str) -> Run | None:
    return Run.objects.filter(pk=run_id).first()


def run_batches_by_state(run: Run) -> dict[str, int]:
    """A queued run's batches counted by state (``queued``: in flight)."""
    counts = dict(RunBatch.objects.filter(run=run).values_list("state").annotate(n=Count("token")))
    return {state: int(counts.get(state, 0)) for state in BatchState.values}


def run_picked_up(run: Run) -> bool:
    """Whether a worker has started on a queued run: ended it, measured it, counted
    anything or published a batch of it. ``run_retention --wait`` reads it to tell a
    run waiting for a worker from one being swept."""
    if run.status != RunStatus.RUNNING or run.dispatcher_owner is not None:
        return True
    report = run.report if isinstance(run.report, dict) else {}
    if report.get("measured") or any(run.counts().values()):
        return True
    return RunBatch.objects.filter(run=run).exists()


def run_outcomes_by_class(run_id: uuid.UUID) -> dict[str, dict[str, int]]:
    """What a run did to each class, from its events: outcome → items (a page event
    of rows counts its rows)."""
    rows = (
        DeletionEvent.objects.filter(run_id=run_id)
        .values("data_class", "outcome")
        .annotate(items=Sum(Coalesce("row_count", Value(1))))
        .order_by("data_class")
    )
    found: dict[str, dict[str, int]] = {}
    for row in rows:
        found.setdefault(row["data_class"], {})[row["outcome"]] = int(row["items"] or 0)
    return found
