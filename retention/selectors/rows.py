"""What a class of model rows owes now, and what one run disposed of per class.

Read by the health check, the dashboard and the holds list, so they agree
with the engine on which rows are due: the class's rows (its model's default
manager, then its scope: ``RowClass.queryset()``) past the class's own
cutoff, with the one hold rule (``held_rows``). Everything is counted in the
database (COUNT, MIN), never by loading rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, time
from typing import Any

from django.conf import settings as django_settings
from django.db.models import Count, IntegerField, Min, Q, QuerySet, Sum, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from retention.models import (
    DeletionEvent,
    Disposition,
    EventOutcome,
    LegalHold,
    PolicyVersion,
    RowMark,
    RowSkip,
    Run,
    RunMode,
    RunStatus,
)
from retention.rows.registry import RowClass, row_classes
from retention.selectors.breaker import DISPOSED_KEY
from retention.selectors.holds import RowHolds, held_rows, hold_subject_as_read
from retention.selectors.runs import runs_covering

# What a run's events count as disposed of (the outcomes its counts add up).
DISPOSED = (EventOutcome.DELETED, EventOutcome.ALREADY_ABSENT, EventOutcome.REDACTED)
# How far back the last run that disposed of a class is looked for.
RUNS_LOOKED_AT = 200


def as_instant(value: datetime | date) -> datetime:
    """A row's time as an instant: a DateField's day is its midnight in the
    project's TIME_ZONE (aware when USE_TZ), which is how Django compares a
    date column with a run's cutoff, so no row is taken before the deadline
    its evidence names (the engine reads rows through this too). A keyset
    cursor keeps the column's own value."""
    if isinstance(value, datetime):
        return value
    midnight = datetime.combine(value, time.min)
    if not django_settings.USE_TZ:
        return midnight
    return timezone.make_aware(midnight, timezone.get_default_timezone())


def row_cutoff(row: RowClass, version: PolicyVersion, *, now: datetime) -> datetime:
    """The class's own cutoff at ``now``, as a run starting then fixes it: a row
    dated by its age is due when its time ≤ now − period − margin, a row with
    a deadline when its deadline ≤ now − margin."""
    cutoff = now - version.safety_margin
    if not row.by_expiry:
        cutoff -= version.retention_period
    return cutoff


def row_deadline(row: RowClass, version: PolicyVersion, value: datetime | date) -> datetime:
    """When a row of the class expires: its date plus the period, or its own deadline."""
    at = as_instant(value)
    return at if row.by_expiry else at + version.retention_period


def rows_owed(
    row: RowClass, version: PolicyVersion, *, now: datetime, disposition: str | None = None
) -> QuerySet[Any]:
    """The class's rows past its cutoff that a run would still dispose of.

    A redacting class keeps its redacted rows: those behind its mark are
    settled, except the ones skipped there (held, failed).
    """
    cutoff = row_cutoff(row, version, now=now)
    due = row.queryset().filter(**{f"{row.time_field}__lte": cutoff})
    if (disposition or version.disposition) != Disposition.REDACT:
        return due
    mark = RowMark.objects.filter(data_class=row.data_class).first()
    if mark is None:
        return due
    t = row.time_field
    pk_field = row.model._meta.pk
    assert pk_field is not None
    at, pk = mark.through_time, pk_field.to_python(mark.through_pk)
    skipped = RowSkip.objects.filter(data_class=row.data_class).values_list("subject_pk", flat=True)
    after = Q(**{f"{t}__gte": at}) & ~Q(**{t: at, "pk__lte": pk})
    return due.filter(after | Q(pk__in=[pk_field.to_python(s) for s in skipped]))


@dataclass(frozen=True, slots=True)
class RowFigures:
    cutoff: datetime
    backlog: int  # due, no hold on them
    held: int  # due, kept by a hold
    oldest_deadline: datetime | None  # of the backlog: when its oldest row expired


def row_class_figures(row: RowClass, version: PolicyVersion, *, now: datetime) -> RowFigures:
    """Backlog, held rows and the oldest overdue deadline of a class, in one aggregate."""
    owed = rows_owed(row, version, now=now)
    holds = held_rows(row.data_class, label=row.label, tenant_field=row.tenant_field)
    held_q = holds.q(row.tenant_field)
    cutoff = row_cutoff(row, version, now=now)
    if holds.whole_class:
        return RowFigures(cutoff, 0, owed.count(), None)
    if held_q is None:
        counts = owed.aggregate(backlog=Count("pk"), oldest=Min(row.time_field))
        held = 0
    else:
        counts = owed.aggregate(
            backlog=Count("pk", filter=~held_q),
            held=Count("pk", filter=held_q),
            oldest=Min(row.time_field, filter=~held_q),
        )
        held = counts["held"]
    oldest = counts["oldest"]
    return RowFigures(
        cutoff=cutoff,
        backlog=counts["backlog"],
        held=held,
        oldest_deadline=row_deadline(row, version, oldest) if oldest is not None else None,
    )


# --------------------------------------------------------------------------
# What a hold protects of the classes of model rows


@dataclass(frozen=True, slots=True)
class RowReach:
    rows: int  # rows of row classes the hold covers that exist now
    expired: int  # of which past their class's cutoff: kept only because of holds
    classes: int  # row classes the hold can touch


def _one_hold(hold: LegalHold, row: RowClass) -> RowHolds:
    """The rows of ``row`` this hold alone covers, on the one coverage rule (``held_rows``)."""
    empty: frozenset[str] = frozenset()
    if hold.record_id is not None or (hold.data_class and hold.data_class != row.data_class):
        return RowHolds(False, empty, empty)
    # Read as the class's fields read them, as the engine does: "07" is row 7,
    # and a value the field cannot take names no row.
    pk, tenant = hold_subject_as_read(hold, label=row.label, tenant_field=row.tenant_field)
    if hold.subject_pk is not None:
        pks = frozenset({pk}) if hold.subject_type == row.label and pk is not None else empty
        return RowHolds(False, empty, pks)
    if hold.tenant_id:
        return RowHolds(False, frozenset({tenant}) if tenant is not None else empty, empty)
    return RowHolds(hold.data_class == row.data_class, empty, empty)


def hold_row_reach(
    hold: LegalHold, *, now: datetime, versions: dict[str, PolicyVersion | None]
) -> RowReach:
    """How many rows of registered classes ``hold`` protects (``versions``: each
    class's governing version, for its cutoff). One count per class it touches."""
    rows = expired = classes = 0
    for name, row in sorted(row_classes().items()):
        covered = _one_hold(hold, row).q(row.tenant_field)
        if covered is None:
            continue
        classes += 1
        version = versions.get(name)
        aggregates: dict[str, Any] = {"rows": Count("pk")}
        if version is not None:
            due = Q(**{f"{row.time_field}__lte": row_cutoff(row, version, now=now)})
            aggregates["expired"] = Count("pk", filter=due)
        counts = row.queryset().filter(covered).aggregate(**aggregates)
        rows += counts["rows"]
        expired += counts.get("expired", 0)
    return RowReach(rows=rows, expired=expired, classes=classes)


# --------------------------------------------------------------------------
# The last run that disposed of a class


@dataclass(frozen=True, slots=True)
class ClassRun:
    run: Run
    disposed: int  # records or rows of the class the run disposed of


def run_disposed(run: Run, data_class: str) -> int:
    """What ``run`` disposed of in ``data_class``: its stored per-class tally when it
    has one, its counts when it ran one class, else its events of the class."""
    report = run.report if isinstance(run.report, dict) else {}
    tally = report.get(DISPOSED_KEY)
    if isinstance(tally, dict) and data_class in tally:
        return int(tally[data_class] or 0)
    if run.data_classes == [data_class]:
        return run.deleted + run.already_absent + run.redacted
    total = DeletionEvent.objects.filter(
        run=run, data_class=data_class, outcome__in=DISPOSED
    ).aggregate(n=Sum(Coalesce("row_count", Value(1), output_field=IntegerField())))["n"]
    return int(total or 0)


def _owed(run: Run, data_class: str) -> int | None:
    """What the run found due of the class, when it says (None: it does not)."""
    report = run.report if isinstance(run.report, dict) else {}
    entry = (report.get("breaker") or {}).get(data_class)
    if isinstance(entry, dict) and "about_to_delete" in entry:
        return int(entry["about_to_delete"] or 0)
    if run.data_classes == [data_class]:
        return run.eligible
    return None


def class_last_success(data_class: str) -> ClassRun | None:
    """The newest finished enforcing run over the whole class that did its work there.

    It disposed of the class's due rows or records, or found none due. Not a
    run in which the volume breaker held the class, nor one that was
    refused, stopped, paused, narrowed to a tenant or some records, or that
    disposed of nothing of what it found due (a class stopped for review).
    """
    runs = (
        runs_covering(data_class)
        .filter(mode=RunMode.ENFORCE, status=RunStatus.FINISHED, tenant_id__isnull=True)
        .exclude(report__has_key="record_ids")
        .order_by("-finished_at")
    )
    for run in runs[:RUNS_LOOKED_AT]:
        report = run.report if isinstance(run.report, dict) else {}
        entry = (report.get("breaker") or {}).get(data_class)
        if isinstance(entry, dict) and entry.get("held"):
            continue
        disposed = run_disposed(run, data_class)
        if disposed or _owed(run, data_class) == 0:
            return ClassRun(run=run, disposed=disposed)
    return None
