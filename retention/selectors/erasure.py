"""What an erasure request reaches: its scope, frozen when it is received.

Per class (every class with a policy, or those the request names): whether
the request can reach its items at all (a subject needs the class's subject
link, a tenant its tenant link, and the class an approved version), what the
class does on erasure (the version in force: ``on_erasure``, with the legal
basis of ``keep``), how many items exist now, the bound that keeps items
written later out of the request, and the active holds that cover some of
them, with how many each covers.

The bound: a tracked class, the largest record id now (records are never
renumbered); a class of model rows with integer primary keys, the largest
primary key of the class's model now; any other primary key, the list of
the items' keys.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import BooleanField, Count, ExpressionWrapper, Max, Q
from django.db.models.functions import Now
from django.utils.dateparse import parse_datetime

from retention.models import (
    ErasureRequest,
    ErasureState,
    LegalHold,
    Policy,
    PolicyVersion,
    RecordQuerySet,
    RecordState,
    RetentionRecord,
    Run,
)
from retention.models.erasure import OPEN_STATES
from retention.rows.registry import RowClass, row_class, row_classes
from retention.selectors.holds import held_rows
from retention.selectors.policies import version_in_force
from retention.selectors.tenant import tenant_id_required

GONE = (RecordState.DELETED, RecordState.MISSING)


@dataclass(frozen=True, slots=True)
class Subject:
    """Whom a request erases: a subject (its id and digest), a tenant, or both."""

    subject_id: str
    subject_digest: str
    tenant_id: str


def erasure_classes(data_classes: list[str] | None) -> list[str]:
    """The classes a request covers: those named, else every class with a policy or a
    registration. Unknown names are the caller's to refuse (``unknown_classes``)."""
    if data_classes:
        return sorted(set(data_classes))
    names = set(Policy.objects.values_list("data_class", flat=True)) | set(row_classes())
    return sorted(names)


def unknown_classes(data_classes: list[str]) -> list[str]:
    known = set(
        Policy.objects.filter(data_class__in=data_classes).values_list("data_class", flat=True)
    )
    return sorted(name for name in data_classes if name not in known and row_class(name) is None)


def tracked_items(data_class: str, who: Subject) -> RecordQuerySet:
    """A class's tracked records of the subject or tenant that are not gone."""
    qs: RecordQuerySet = RetentionRecord.objects.filter(data_class=data_class).exclude(
        state__in=GONE
    )
    if who.subject_digest:
        qs = qs.filter(subject_digest=who.subject_digest)
    if who.tenant_id:
        qs = qs.filter(tenant_id=who.tenant_id)
    return qs


def row_items(row: RowClass, who: Subject) -> models.QuerySet[Any]:
    """A row class's rows of the subject or tenant (its links must exist: ``unreachable``)."""
    qs = row.queryset()
    if who.subject_id:
        qs = qs.filter(**{row.subject_field or "": who.subject_id})
    if who.tenant_id:
        qs = qs.filter(**{row.tenant_field or "": who.tenant_id})
    return qs


def unreachable(row: RowClass | None, version: PolicyVersion | None, who: Subject) -> str:
    """Why the request cannot reach the class's items, or ""."""
    if version is None:
        return "no approved policy version says what an erasure does to it"
    if row is None:
        return ""
    if who.subject_id and not row.subject_field:
        return "no subject link: register_model(..., subject_field=...) names none"
    if who.tenant_id and not row.tenant_field:
        return "no tenant link: register_model(..., tenant_field=...) names none"
    return ""


def _integer_pk(model: type[models.Model]) -> bool:
    return isinstance(model._meta.pk, models.IntegerField | models.AutoField)


def _row_bound(row: RowClass, items: models.QuerySet[Any]) -> dict[str, Any]:
    if _integer_pk(row.model):
        top = row.model._base_manager.aggregate(top=Max("pk"))["top"]
        return {"max_pk": top or 0}
    return {"pks": sorted(str(pk) for pk in items.values_list("pk", flat=True))}


def within_q(bound: dict[str, Any]) -> Q:
    """As far as a frozen bound reaches: nothing written after it.

    A replay's bound (``replay_bound``) adds the time of the original
    request: after a restore, keys are handed out again, so a record
    created later (or a row whose age column is later) is out too. A row
    whose age column is empty (an account still open) has no time to tell:
    its key bounds it.
    """
    q = Q()
    if bound.get("written_by"):
        written_by = parse_datetime(bound["written_by"])
        if bound.get("time_field"):
            column = bound["time_field"]
            q &= Q(**{f"{column}__lte": written_by}) | Q(**{f"{column}__isnull": True})
        else:
            q &= Q(created_at__lte=written_by)
    if "max_record_id" in bound:
        return q & Q(pk__lte=bound["max_record_id"])
    if "max_pk" in bound:
        return q & Q(pk__lte=bound["max_pk"])
    return q & Q(pk__in=bound.get("pks", []))


def within(items: models.QuerySet[Any], bound: dict[str, Any]) -> models.QuerySet[Any]:
    """``items`` as far as a frozen bound reaches (``within_q``)."""
    return items.filter(within_q(bound))


def row_holds_count(row: RowClass, items: models.QuerySet[Any]) -> list[dict[str, Any]]:
    """The active holds covering some of ``items`` (rows), with how many each covers."""
    holds = held_rows(row.data_class, label=row.label, tenant_field=row.tenant_field)
    found = []
    for hold_id, kind, value in holds.holds:
        if kind == "class":
            covered = items
        elif kind == "row":
            covered = items.filter(pk=value)
        else:
            covered = items.filter(**{row.tenant_field or "": value})
        count = covered.count()
        if count:
            found.append({"hold": hold_id, "count": count})
    return found


def tracked_holds_count(
    data_class: str, items: models.QuerySet[RetentionRecord]
) -> list[dict[str, Any]]:
    """The active holds covering some of ``items`` (records), with how many each covers."""
    found = []
    for hold in LegalHold.objects.covering(data_class=data_class).order_by("placed_at", "pk"):
        count = items.filter(hold.scope_q()).count()
        if count:
            found.append({"hold": hold.pk, "count": count})
    return found


def class_scope(
    data_class: str, who: Subject, *, record_bound: int, bound: dict[str, Any] | None = None
) -> dict[str, Any]:
    """One class's part of a frozen scope (see the module docstring); ``bound``: a bound
    given (a replay's, from the journal) instead of the one now."""
    row = row_class(data_class)
    version = version_in_force(data_class=data_class)
    entry: dict[str, Any] = {
        "data_class": data_class,
        "kind": "rows" if row is not None else "tracked",
        "policy_version": version.number if version is not None else None,
        "on_erasure": version.on_erasure if version is not None else None,
        "erasure_basis": version.erasure_basis if version is not None else "",
        "reachable": True,
        "not_reachable_because": "",
        "count": 0,
        "holds": [],
    }
    why = unreachable(row, version, who)
    if why:
        entry.update(reachable=False, not_reachable_because=why)
        return entry
    # The bound first, then what lies within it: the counts and the holds
    # describe exactly the items the bound lets in.
    if row is None:
        bound = bound or {"max_record_id": record_bound}
        records = within(tracked_items(data_class, who), bound)
        entry.update(
            count=records.count(), bound=bound, holds=tracked_holds_count(data_class, records)
        )
    else:
        try:
            rows = row_items(row, who)
            bound = bound or _row_bound(row, rows)
            rows = within(rows, bound)
            count = rows.count()
        except (ValueError, TypeError, ValidationError):
            # An id the subject or tenant field cannot hold (text for an
            # integer key) names no row of the class.
            rows, count = row.queryset().none(), 0
            bound = bound or _row_bound(row, rows)
        entry.update(count=count, bound=bound, holds=row_holds_count(row, rows))
    return entry


def erasure_scope(who: Subject, data_classes: list[str] | None) -> dict[str, Any]:
    """The scope a request freezes at receipt: ``{"classes": [...], "total": n}``."""
    record_bound = RetentionRecord.objects.aggregate(top=Max("pk"))["top"] or 0
    classes = [
        class_scope(name, who, record_bound=record_bound) for name in erasure_classes(data_classes)
    ]
    return {"classes": classes, "total": sum(c["count"] for c in classes)}


@dataclass(frozen=True, slots=True)
class ErasureStatus:
    """Erasure requests as ``retention_check`` and the metrics see them."""

    by_state: dict[str, int]
    overdue: tuple[ErasureRequest, ...]  # open past their due date, oldest due first

    @property
    def ok(self) -> bool:
        return not self.overdue


def erasure_status(*, now: datetime) -> ErasureStatus:
    """How many requests are in each state, and the open ones past ``due_at``."""
    counts = dict(
        ErasureRequest.objects.values_list("state").annotate(n=Count("pk")).order_by("state")
    )
    overdue = ErasureRequest.objects.filter(overdue_q(now)).order_by("due_at", "received_at")
    return ErasureStatus(
        by_state={state: counts.get(state, 0) for state in ErasureState.values},
        overdue=tuple(overdue.only("pk", "state", "due_at", "received_at")),
    )


def overdue_q(now: datetime | Now) -> Q:
    """Open and past its due date: ``now`` the database's clock (``db_now()``, or
    ``Now()`` inside a query)."""
    return Q(state__in=OPEN_STATES, due_at__lt=now)


def erasure_requests_by_due(*, now: datetime | Now) -> models.QuerySet[ErasureRequest]:
    """Every request, the earliest due first, each with ``is_overdue``."""
    return ErasureRequest.objects.annotate(
        is_overdue=ExpressionWrapper(overdue_q(now), output_field=BooleanField())
    ).order_by("due_at", "received_at")


def tenant_erasure_get(*, tenant_id: str, erasure_id: uuid.UUID) -> ErasureRequest:
    """A request of the tenant (its ``tenant_id``); ``DoesNotExist`` for anyone else's."""
    return ErasureRequest.objects.filter(tenant_id=tenant_id_required(tenant_id)).get(pk=erasure_id)


@dataclass(frozen=True, slots=True)
class ClassProgress:
    """One class of a request: its frozen scope, and what its runs did to it so far.

    ``settled`` is false until the engine has written the class's outcome;
    until then nothing was erased, and ``left`` and ``verified`` are unknown.
    """

    data_class: str
    kind: str
    reachable: bool
    not_reachable_because: str
    on_erasure: str | None
    erasure_basis: str
    items: int  # at receipt, within the frozen bound
    holds_at_receipt: tuple[dict[str, Any], ...]  # {"hold", "count"}
    settled: bool
    erased: int
    redacted: int
    kept: tuple[dict[str, Any], ...]  # {"hold", "reason", "count"}
    left: int | None
    verified: bool | None

    @property
    def kept_count(self) -> int:
        return sum(int(item.get("count") or 0) for item in self.kept)


def _progress(name: str, entry: dict[str, Any], done: dict[str, Any] | None) -> ClassProgress:
    settled = done is not None
    done = done or {}
    return ClassProgress(
        data_class=name,
        kind=str(entry.get("kind", "")),
        reachable=bool(entry.get("reachable", settled)),
        not_reachable_because=str(entry.get("not_reachable_because", "")),
        on_erasure=done.get("on_erasure") or entry.get("on_erasure"),
        erasure_basis=str(done.get("basis") or entry.get("erasure_basis") or ""),
        items=int(entry.get("count") or 0),
        holds_at_receipt=tuple(entry.get("holds") or ()),
        settled=settled,
        erased=int(done.get("erased") or 0),
        redacted=int(done.get("redacted") or 0),
        kept=tuple(done.get("kept") or ()),
        left=int(done["left"]) if settled and done.get("left") is not None else None,
        verified=bool(done["verified"]) if settled and "verified" in done else None,
    )


def erasure_progress(request: ErasureRequest) -> list[ClassProgress]:
    """Per class, the scope frozen at receipt beside the outcome its runs settled."""
    outcome = dict((request.outcome or {}).get("classes") or {})
    progress = []
    for entry in (request.scope or {}).get("classes", []):
        name = str(entry.get("data_class", ""))
        progress.append(_progress(name, entry, outcome.pop(name, None)))
    # A class settled but not in the scope (never expected): shown, not dropped.
    progress += [_progress(name, {}, done) for name, done in sorted(outcome.items())]
    return progress


def erasure_runs(request: ErasureRequest) -> models.QuerySet[Run]:
    """The erase runs that executed the request, the first first."""
    return Run.objects.filter(erasure=request).order_by("started_at", "pk")
