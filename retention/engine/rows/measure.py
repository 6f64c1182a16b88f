"""What a run owes of each class of model rows, and what a dry run shows a reviewer.

Counts are aggregate queries at the run's fixed cutoff. The related rows a
delete would take are exact for the pages measured: Django's collector is
run over the first pages of due rows (nothing is deleted), and the report
says how many rows that covered.
"""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from typing import Any, cast

from django.db import models, router
from django.db.models import Exists, Min, OuterRef
from django.db.models.deletion import Collector, ProtectedError, RestrictedError
from django.db.models.functions import Cast

from retention.engine.rows.redact import row_mark
from retention.engine.rows.select import after_cursor, rows_due
from retention.models import Disposition, RowSkip, Run, RunMode
from retention.rows.registry import RowClass
from retention.selectors.holds import held_rows
from retention.selectors.rows import as_instant as instant
from retention.selectors.run_rules import ClassRules

# How many due rows a dry run runs the collector over, per class.
MEASURED_ROWS = 1000


def rows_pending(row: RowClass, rules: ClassRules, run: Run) -> models.QuerySet[Any]:
    """The class's due rows not disposed of yet: for a redacting class, those
    after its mark or listed as skipped (a redacted row stays, and stays due)."""
    due = rows_due(row, rules, run)
    if rules.disposition != Disposition.REDACT or run.mode == RunMode.ERASE:
        # An erase run redacts its request's rows whatever the class's mark.
        return due
    listed = RowSkip.objects.filter(data_class=row.data_class)
    pk_field = row.model._meta.pk
    skipped: Any
    if isinstance(pk_field, models.IntegerField):
        # A subquery: a class with a million held rows lists a million skips.
        skipped = listed.annotate(
            listed_pk=Cast("subject_pk", output_field=models.BigIntegerField())
        ).values("listed_pk")
    else:
        skipped = [pk_field.to_python(s) for s in listed.values_list("subject_pk", flat=True)]
    return due.filter(after_cursor(row, row_mark(row))) | due.filter(pk__in=skipped)


def _protected_q(row: RowClass) -> Any:
    """Due rows that a direct PROTECT relation blocks (nested ones show when deleting)."""
    q: Any = None
    for rel in row.model._meta.related_objects:
        if getattr(rel, "on_delete", None) not in (models.PROTECT, models.RESTRICT):
            continue
        exists = Exists(rel.related_model._base_manager.filter(**{rel.field.name: OuterRef("pk")}))
        q = exists if q is None else q | exists
    return q


def _age_period(row: RowClass, rules: ClassRules, run: Run) -> timedelta:
    """The period a class cut by its rows' age keeps them (zero for a class with deadlines)."""
    if row.by_expiry or rules.row_cutoff is None or run.mode == RunMode.ERASE:
        # An erase run's rows are due now whatever their age.
        return timedelta(0)
    return run.started_at - rules.safety_margin - rules.row_cutoff


def row_class_measure(row: RowClass, rules: ClassRules, run: Run) -> dict[str, Any]:
    """Eligible, held and protected rows of one class, with the oldest eligible time."""
    pending = rows_pending(row, rules, run)
    holds = held_rows(row.data_class, label=row.label, tenant_field=row.tenant_field)
    held_q = holds.q(row.tenant_field)
    free = pending if held_q is None else pending.exclude(held_q)
    held = 0 if held_q is None else pending.filter(held_q).count()
    figures = free.aggregate(n=models.Count("pk"), oldest=Min(row.time_field))
    protected_q = _protected_q(row)
    protected = 0
    if protected_q is not None and rules.disposition != Disposition.REDACT:
        protected = free.filter(protected_q).count()
    return {
        "kind": "rows",
        "model": row.label,
        "disposition": rules.disposition,
        "cutoff": rules.row_cutoff.isoformat() if rules.row_cutoff else None,
        "eligible": figures["n"] - protected,
        "held": held,
        "protected": protected,
        "oldest_eligible_at": (
            instant(figures["oldest"]).isoformat() if figures["oldest"] else None
        ),
        # When that row came due: its date plus the period for a class cut by
        # age (a run's oldest eligible is a deadline, as a record's expires_at).
        "oldest_due_at": (
            (instant(figures["oldest"]) + _age_period(row, rules, run)).isoformat()
            if figures["oldest"]
            else None
        ),
        # What a delete would take: the rows no hold and no PROTECT keeps.
        "_free": free if protected_q is None else free.exclude(protected_q),
    }


def related_rows(row: RowClass, free: models.QuerySet[Any]) -> dict[str, Any]:
    """What deleting the first due rows would take with them, per model (nothing deleted)."""
    pks = list(free.order_by(row.time_field, "pk").values_list("pk", flat=True)[:MEASURED_ROWS])
    page = row.model._base_manager.filter(pk__in=pks)
    collector = Collector(using=router.db_for_write(row.model), origin=page)
    taken: Counter[str] = Counter()
    nulled: Counter[str] = Counter()
    blocked = False
    try:
        collector.collect(page)
    except (ProtectedError, RestrictedError):
        blocked = True
    if not blocked:
        for model, instances in collector.data.items():
            taken[model._meta.label] += len(instances)
        for qs in collector.fast_deletes:
            taken[qs.model._meta.label] += qs.count()
        for (field, _value), batches in collector.field_updates.items():
            # Each entry is a queryset or a list of instances.
            nulled[field.model._meta.label] += sum(len(list(b)) for b in cast(Any, batches))
        taken.pop(row.label, None)
    return {
        "measured_rows": len(pks),
        "deletes": dict(sorted(taken.items())),
        "nulls": dict(sorted(nulled.items())),
        "some_blocked": blocked,
    }
