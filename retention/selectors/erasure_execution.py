"""An erasure request as its runs execute it: what they take, and when it is due.

An erase run (``Run.erasure``) keeps in its report what it executes
(``RUN_KEY``): the request, its subject's digest, each class's frozen bound
and count; the engine's selections (``erase_records_q``, ``erase_rows``)
read it. ``erasures_due`` says which requests a run should execute now;
``replay_bound`` is a journaled bound as a replay after a restore applies it.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Exists, OuterRef, Q

from retention.models import (
    ErasureAction,
    ErasureRequest,
    ErasureState,
    LegalHold,
    Run,
    RunStatus,
)
from retention.rows.registry import RowClass, row_class
from retention.selectors.erasure import Subject, row_items, within, within_q

# Where an erase run keeps what it executes (``Run.report``): the request,
# its subject's digest and each class's frozen bound.
RUN_KEY = "erasure"
# An executing request with something left is run again this long after its last
# run; after a refused one (another run held a class's lease), sooner.
RETRY_AFTER = timedelta(hours=1)
REFUSED_RETRY_AFTER = timedelta(minutes=10)


def request_subject(request: ErasureRequest) -> Subject:
    return Subject(
        subject_id=request.subject_id,
        subject_digest=request.subject_digest,
        tenant_id=request.tenant_id,
    )


def erasure_plan(request: ErasureRequest) -> dict[str, dict[str, Any]]:
    """What an erase run of the request disposes of, per class, from its frozen scope:
    the reachable classes that delete or redact on erasure and had items then."""
    classes = (request.scope or {}).get("classes") or []
    return {
        entry["data_class"]: entry
        for entry in classes
        if entry.get("reachable")
        and entry.get("on_erasure") in (ErasureAction.DELETE, ErasureAction.REDACT)
        and entry.get("count")
    }


def erasure_run_entry(request: ErasureRequest, plan: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """What an erase run keeps of its request in its report (``RUN_KEY``): never the
    subject's id, which the engine reads from the request itself."""
    return {
        "request": str(request.pk),
        "subject_digest": request.subject_digest,
        "bounds": {name: entry.get("bound") or {} for name, entry in plan.items()},
        "counts": {name: int(entry.get("count") or 0) for name, entry in plan.items()},
    }


def _run_entry(run: Run) -> dict[str, Any]:
    report = run.report if isinstance(run.report, dict) else {}
    entry = report.get(RUN_KEY)
    return entry if isinstance(entry, dict) else {}


def erase_records_q(run: Run) -> Q:
    """An erase run's tracked records: its subject's (its tenant is the run's), each
    class within its frozen bound."""
    entry = _run_entry(run)
    bounds = entry.get("bounds") or {}
    q = Q(pk__in=[])
    for name in run.data_classes:
        if "max_record_id" in (bounds.get(name) or {}):
            q |= Q(data_class=name) & within_q(bounds[name])
    if entry.get("subject_digest"):
        q &= Q(subject_digest=entry["subject_digest"])
    return q


def erase_rows(row: RowClass, run: Run) -> models.QuerySet[Any]:
    """An erase run's rows of a class: its subject's or tenant's, within the frozen bound."""
    bound = (_run_entry(run).get("bounds") or {}).get(row.data_class)
    if run.erasure is None or not bound:
        return row.queryset().none()
    try:
        return within(row_items(row, request_subject(run.erasure)), bound)
    except (ValueError, TypeError, ValidationError):
        # An id the subject field cannot hold names no row (as in the scope).
        return row.queryset().none()


def erasures_due(*, now: datetime) -> list[ErasureRequest]:
    """The requests a run should execute now, oldest due first.

    Approved ones past their ``not_before``; executing ones with something
    left and no run of theirs running (a run that failed, stopped or was
    refused), once ``RETRY_AFTER`` has passed since their last run ended (what
    keeps a request from completing may last: a PROTECT relation, the
    breaker, a failure to look at); partially completed ones one of whose
    keeping holds has been released since.
    """
    running = Run.objects.filter(erasure=OuterRef("pk"), status=RunStatus.RUNNING)
    recent = Run.objects.filter(
        Q(finished_at__gt=now - RETRY_AFTER) & ~Q(status=RunStatus.REFUSED)
        | Q(finished_at__gt=now - REFUSED_RETRY_AFTER, status=RunStatus.REFUSED),
        erasure=OuterRef("pk"),
    )
    candidates = (
        ErasureRequest.objects.filter(
            Q(state=ErasureState.APPROVED, not_before__isnull=True)
            | Q(state=ErasureState.APPROVED, not_before__lte=now)
            | (Q(state=ErasureState.EXECUTING) & ~Exists(recent))
            | Q(state=ErasureState.PARTIALLY_COMPLETED)
        )
        .exclude(Exists(running))
        .order_by("due_at", "received_at")
    )
    due = []
    for request in candidates:
        if request.state == ErasureState.PARTIALLY_COMPLETED and not _hold_released(request):
            continue
        due.append(request)
    return due


def _hold_released(request: ErasureRequest) -> bool:
    classes = (request.outcome or {}).get("classes") or {}
    keeping = {kept["hold"] for entry in classes.values() for kept in entry.get("kept") or []}
    active = set(LegalHold.objects.active().filter(pk__in=keeping).values_list("pk", flat=True))
    return bool(keeping - active)


def replay_bound(data_class: str, bound: dict[str, Any], written_by: str) -> dict[str, Any]:
    """A journaled class bound, as a replay after a restore applies it (``within_q``):
    records created by ``written_by``; rows of a class cut by age, aged by it (or
    not aged at all). Rows of a class with only a deadline column are bound by key
    alone (``key_bound_only``)."""
    row = row_class(data_class)
    if row is None:
        return {**bound, "written_by": written_by}
    if row.age_field:
        return {**bound, "written_by": written_by, "time_field": row.age_field}
    return dict(bound)


def key_bound_only(data_class: str) -> bool:
    """Whether a replay can bound the class's rows by key only (no age column): rows
    written after a restore under keys handed out again are within reach."""
    row = row_class(data_class)
    return row is not None and not row.age_field
