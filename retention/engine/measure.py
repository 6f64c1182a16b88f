"""What a run owes, counted once at its fixed cutoff, and the report of a dry run.

Measuring is a handful of aggregate queries, never a walk over rows, so a
dry run over millions of records stays flat in memory. The report shows a
reviewer counts per class and tenant, held counts, a sample of ids, sizes and
key digests (never keys), and the rows waiting for review.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Count, Min
from django.utils.dateparse import parse_datetime

from retention.conf import settings
from retention.engine.breaker import breaker_held
from retention.engine.rows.dry import row_sample, row_tenants
from retention.engine.rows.measure import related_rows, row_class_measure
from retention.engine.rules import expired_pending, expired_q, run_scope
from retention.models import Disposition, Policy, PolicyVersion, RecordState, Run
from retention.rows.registry import row_class, row_class_required
from retention.selectors.run_rules import class_cutoff, run_rules


@dataclass(frozen=True, slots=True)
class Measured:
    """What a run owes: eligible per class (records or rows), and the figures of
    its classes of model rows (a dry run's report shows them)."""

    eligible: dict[str, int]
    rows: dict[str, dict[str, Any]]


def run_measure(run: Run) -> Measured:
    """Count eligible and held work once, at the fixed cutoff."""
    expired = expired_pending(run)
    # Per class in the same pass: the volume breaker weighs each class apart.
    per_class = (
        expired.not_held()
        .values("data_class")
        .annotate(n=Count("id"), oldest=Min("expires_at"))
        .order_by()
    )
    eligible: dict[str, int] = {}
    oldest: datetime | None = None
    for row in per_class:
        eligible[row["data_class"]] = row["n"]
        if oldest is None or row["oldest"] < oldest:
            oldest = row["oldest"]
    held = expired.held().count()
    rows = row_classes_measure(run)
    for name, figures in rows.items():
        eligible[name] = eligible.get(name, 0) + figures["eligible"]
        held += figures["held"]
        at = parse_datetime(figures["oldest_due_at"] or "")
        if at is not None and (oldest is None or at < oldest):
            oldest = at
    Run.objects.filter(pk=run.pk).update(
        eligible=sum(eligible.values()), oldest_eligible_at=oldest, skipped_held=held
    )
    return Measured(eligible=eligible, rows=rows)


def row_classes_measure(run: Run) -> dict[str, dict[str, Any]]:
    """The figures of each class of model rows in the run; each keeps, under
    ``_free``, the rows a delete would take (for ``related_rows``)."""
    rules = run_rules(run)
    figures: dict[str, dict[str, Any]] = {}
    for name in run.data_classes:
        row = row_class(name)
        if row is None or rules[name].row_cutoff is None:
            continue
        figures[name] = row_class_measure(row, rules[name], run)
    return figures


def dry_run_report(run: Run, row_figures: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The report of a dry run; ``row_figures``: ``run_measure``'s, of model rows."""
    expired = expired_pending(run)
    modes = dict(Policy.objects.values_list("data_class", "mode"))
    per_class: dict[str, dict[str, Any]] = {
        name: {
            "eligible": 0,
            "held": 0,
            "oldest_eligible_at": None,
            "mode": modes.get(name),
            "cutoff": class_cutoff(run, name).isoformat(),
        }
        for name in run.data_classes
    }
    for row in (
        expired.not_held().values("data_class").annotate(n=Count("id"), oldest=Min("expires_at"))
    ):
        per_class[row["data_class"]].update(
            eligible=row["n"],
            oldest_eligible_at=row["oldest"].isoformat() if row["oldest"] else None,
        )
    for held in expired.held().values("data_class").annotate(n=Count("id")):
        per_class[held["data_class"]]["held"] = held["n"]
    rules = run_rules(run)
    for name, measured in row_figures.items():
        figures = {k: v for k, v in measured.items() if k != "_free"}
        if rules[name].disposition != Disposition.REDACT:
            figures["related"] = related_rows(row_class_required(name), measured["_free"])
        per_class[name].update(figures)
    top = settings.REPORT_TOP_TENANTS
    tenants: dict[str, list[dict[str, Any]]] = {}
    for name in run.data_classes:
        rows = (
            expired.not_held()
            .filter(data_class=name)
            .values("tenant_id")
            .annotate(n=Count("id"), oldest=Min("expires_at"))
            .order_by("-n", "tenant_id")[:top]
        )
        tenants[name] = [
            {
                "tenant_id": r["tenant_id"],
                "eligible": r["n"],
                "oldest_eligible_at": r["oldest"].isoformat(),
            }
            for r in rows
        ]
    failed_for_review = dict(
        run_scope(run)
        .filter(state=RecordState.FAILED, retryable=False)
        .values_list("data_class")
        .annotate(n=Count("id"))
    )
    # A small sample for the reviewer: ids, ages, sizes (None: the host gave
    # none) and key digests, never keys.
    samples = {
        name: [
            {
                "record_id": r["id"],
                "tenant_id": r["tenant_id"],
                "key_digest": r["key_digest"],
                "created_at": r["created_at"].isoformat(),
                "due_at": r["expires_at"].isoformat(),
                "size_bytes": r["size_bytes"],
            }
            for r in expired.not_held()
            .filter(data_class=name)
            .order_by("expires_at", "id")
            .values("id", "tenant_id", "key_digest", "created_at", "expires_at", "size_bytes")[
                : settings.REPORT_SAMPLE_SIZE
            ]
        ]
        for name in run.data_classes
    }
    for name, measured in row_figures.items():
        registered, period = row_class_required(name), _row_period(rules[name].version_id)
        tenants[name] = row_tenants(registered, measured["_free"], period=period, top=top)
        samples[name] = row_sample(
            registered, measured["_free"], period=period, size=settings.REPORT_SAMPLE_SIZE
        )
    return {
        "per_data_class": per_class,
        "per_tenant": tenants,
        "sample": samples,
        "failed_for_review": failed_for_review,
    }


def _row_period(version_id: int | None) -> timedelta:
    """The period of the version a row class's run works by (a deadline is date + period)."""
    version = PolicyVersion.objects.filter(pk=version_id).first() if version_id else None
    return version.retention_period if version is not None else timedelta(0)


def retry_next_due(run: Run) -> datetime | None:
    """When the next retry of the run falls due; a class the breaker holds has none."""
    due: datetime | None = (
        run_scope(run)
        .exclude(data_class__in=breaker_held(run))
        .filter(expired_q(run), state=RecordState.FAILED, retryable=True)
        .not_held()
        .aggregate(due=Min("next_attempt_at"))["due"]
    )
    return due
