"""The volume breaker: a run about to dispose of far more of a class than is normal
disposes of none of it, until an approver has looked.

Decided once per class per run, from the figures the run's measure counted,
before the run's first page: inline in ``run_execute``, queued in the arm
task under the run's lock with the measure (``queued._measure_once``), for
tracked objects and model rows alike. A class trips when the run would
dispose of at least ``min_count`` of it and of more than ``max_fraction`` of
its not-yet-deleted records or rows, or of more than ``max_multiple`` times
its median day of the last two weeks (``retention.selectors.breaker``). With
no disposals at all in that window (a first sweep) only the fraction applies.

The decision is written to the run's report (``REPORT_KEY``), so every page
and every batch on every host reads the same one (``breaker_held``). A
tripped class writes a ``BreakerTrip`` with the figures and a sample (ids and
digests, never keys), counts its records or rows as the run's ``tripped``,
and stays held in every later run until ``breaker_release``; the next full
sweep then disposes of it without checking and marks the release used.
A dry run decides nothing: its report says what an enforcing run would.
An erase run compares each class with the frozen scope its request's
approver approved instead, and holds it (no trip to release) when it would
dispose of more.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import IntegerField, Sum, Value
from django.db.models.functions import Coalesce

from retention.conf import settings
from retention.digest import key_digests
from retention.engine.rules import expired_pending
from retention.formatting import human
from retention.models import BreakerState, BreakerTrip, DeletionEvent, EventOutcome, Run, RunMode
from retention.rows.registry import row_class
from retention.selectors.breaker import (
    DISPOSED_KEY,
    HISTORY_DAYS,
    breaker_enabled,
    breaker_limits,
    breaker_release_waiting,
    breaker_trip_open,
    daily_disposals,
    history_runs,
    median_daily,
    records_not_deleted,
    trip_summary,
)
from retention.selectors.erasure_execution import RUN_KEY as ERASE_KEY

REPORT_KEY = "breaker"
FRACTION = "fraction"
MULTIPLE = "multiple"
# What a run's events count as disposed of (the same outcomes its counts have).
DISPOSED = (EventOutcome.DELETED, EventOutcome.ALREADY_ABSENT, EventOutcome.REDACTED)

Figures = Mapping[str, Mapping[str, Any]]


def breaker_held(run: Run) -> frozenset[str]:
    """The run's classes the breaker holds: no page, no batch of them disposes of anything."""
    report = run.report if isinstance(run.report, dict) else {}
    entries = report.get(REPORT_KEY) or {}
    return frozenset(
        name for name, entry in entries.items() if isinstance(entry, dict) and entry.get("held")
    )


def breaker_decide(
    run: Run, *, eligible: Mapping[str, int], rows: Figures, now: datetime
) -> dict[str, dict[str, Any]]:
    """Decide each class of an enforcing run; record the trips, ``tripped`` and the report.

    ``eligible``: what the measure counted per class; ``rows``: its figures
    of model-row classes (their ``_free`` rows give the sample).
    """
    if run.mode == RunMode.ERASE and run.data_classes:
        entries = {
            name: _erase_decide(run, name, eligible.get(name, 0)) for name in run.data_classes
        }
    elif run.mode != RunMode.ENFORCE or not breaker_enabled() or not run.data_classes:
        return {}
    else:
        entries = {
            name: _decide(run, name, _about(run, eligible.get(name, 0)), rows.get(name), now)
            for name in run.data_classes
        }
    tripped = sum(int(e["about_to_delete"]) for e in entries.values() if e["held"])
    with transaction.atomic():
        locked = Run.objects.select_for_update().get(pk=run.pk)
        report = dict(locked.report) if isinstance(locked.report, dict) else {}
        report[REPORT_KEY] = entries
        Run.objects.filter(pk=run.pk).update(report=report, tripped=tripped)
    run.report, run.tripped = report, tripped
    return entries


def breaker_preview(
    run: Run, *, eligible: Mapping[str, int], rows: Figures
) -> dict[str, dict[str, Any]]:
    """A dry run's view: what an enforcing run would decide now; no trip, no release used."""
    if not breaker_enabled():
        return {}
    entries: dict[str, dict[str, Any]] = {}
    for name in run.data_classes:
        about = _about(run, eligible.get(name, 0))
        entry: dict[str, Any] = {"about_to_delete": about, "would_trip": False}
        trip = breaker_trip_open(name)
        release = breaker_release_waiting(name) if trip is None else None
        if trip is not None:
            entry.update(held_by_trip=trip.pk, reason=_held_reason(trip))
        elif release is not None:
            entry.update(released_by_trip=release.pk)
        else:
            figures = _figures(run, name, about)
            entry["figures"] = figures
            if figures["exceeded"]:
                limit = figures["exceeded"][0]
                entry.update(
                    would_trip=True,
                    limit=limit,
                    reason=trip_summary(limit, figures),
                    sample=_sample(run, name, rows.get(name)),
                )
        entries[name] = entry
    return entries


def _about(run: Run, eligible: int) -> int:
    """What the run may dispose of: its eligible, at most its ``--limit``."""
    return min(eligible, run.limit) if run.limit is not None else eligible


def _erase_decide(run: Run, name: str, about: int) -> dict[str, Any]:
    """An erase run's class: held when it would dispose of more than the frozen scope
    its approver saw (whatever the breaker's settings: the approval was of that scope)."""
    frozen = int(((run.report.get(ERASE_KEY) or {}).get("counts") or {}).get(name, 0))
    entry: dict[str, Any] = {"about_to_delete": about, "held": about > frozen, "frozen": frozen}
    if about > frozen:
        entry["reason"] = (
            f"would dispose of {about}, more than the {frozen} of the scope its approver "
            "approved; nothing of it is disposed of"
        )
    return entry


def _decide(
    run: Run, name: str, about: int, row_figures: Mapping[str, Any] | None, now: datetime
) -> dict[str, Any]:
    entry: dict[str, Any] = {"about_to_delete": about, "held": False}
    trip = breaker_trip_open(name)
    if trip is not None:
        # Held again, counted again; the open trip stays the one to review.
        entry.update(held=True, trip_id=trip.pk, limit=trip.limit, reason=_held_reason(trip))
        return entry
    release = breaker_release_waiting(name)
    if release is not None:
        entry["released_by_trip"] = release.pk
        # A run narrowed to a tenant or to records leaves the release to the
        # sweep it was given for (a zero-period upload's run would use it up).
        report = run.report if isinstance(run.report, dict) else {}
        if not run.tenant_id and not report.get("record_ids"):
            BreakerTrip.objects.filter(data_class=name, state=BreakerState.RELEASED).update(
                state=BreakerState.USED, used_by_run=run
            )
            entry["release_used"] = True
        return entry
    figures = _figures(run, name, about)
    entry["figures"] = figures
    if not figures["exceeded"]:
        return entry
    limit = figures["exceeded"][0]
    sample = _sample(run, name, row_figures)
    trip = BreakerTrip.objects.create(
        data_class=name,
        run=run,
        state=BreakerState.TRIPPED,
        tripped_at=now,
        limit=limit,
        figures=figures,
        sample=sample,
    )
    entry.update(
        held=True, trip_id=trip.pk, limit=limit, reason=trip_summary(limit, figures), sample=sample
    )
    return entry


def _held_reason(trip: BreakerTrip) -> str:
    return (
        f"held by the volume breaker since {human(trip.tripped_at)} (trip {trip.pk}, "
        f"{trip.limit}), not released"
    )


def _figures(run: Run, name: str, about: int) -> dict[str, Any]:
    """The figures against normal; below ``min_count`` only the counts (nothing is read)."""
    limits = breaker_limits(name)
    row = row_class(name)
    figures: dict[str, Any] = {
        "kind": "rows" if row is not None else "records",
        "about_to_delete": about,
        "min_count": limits.min_count,
        "max_fraction": limits.max_fraction,
        "max_multiple": limits.max_multiple,
        "exceeded": [],
    }
    if about <= 0 or about < limits.min_count:
        return figures
    not_yet = row.queryset().count() if row is not None else records_not_deleted(name)
    not_yet = max(not_yet, about)
    # The window ends at the run's start, fixed: a queued run's arm task,
    # later, reads the same history.
    runs = history_runs(name, now=run.started_at)
    _tallies_keep(runs)
    days = daily_disposals(name, runs, now=run.started_at)
    median = median_daily(days)
    fraction = about / not_yet
    figures.update(
        not_yet_deleted=not_yet,
        fraction=round(fraction, 6),
        fraction_over=round(fraction / limits.max_fraction, 3) if limits.max_fraction else None,
        daily=days,
        history_days=HISTORY_DAYS,
        median_daily=median,
        multiple=round(about / median, 3) if median else None,
        multiple_over=(
            round(about / median / limits.max_multiple, 3)
            if median and limits.max_multiple
            else None
        ),
    )
    if fraction > limits.max_fraction:
        figures["exceeded"].append(FRACTION)
    # No disposal at all in the window (a first sweep): no normal to compare with.
    if any(days) and about > limits.max_multiple * median:
        figures["exceeded"].append(MULTIPLE)
    return figures


def _tallies_keep(runs: list[Run]) -> None:
    """Give each closed run its disposals per class (``DISPOSED_KEY``), once.

    Counted when first needed rather than at every run's close: a run of a
    single class has them in its counts; a run of several reads its own
    events once, by the events' run index. Runs closed before the breaker
    existed, or abandoned by a dead process, are covered the same way.
    """
    for run in runs:
        report = run.report if isinstance(run.report, dict) else {}
        if DISPOSED_KEY in report:
            continue
        tally = _tally(run)
        with transaction.atomic():
            locked = Run.objects.select_for_update().get(pk=run.pk)
            report = dict(locked.report) if isinstance(locked.report, dict) else {}
            report[DISPOSED_KEY] = tally
            Run.objects.filter(pk=run.pk).update(report=report)
        run.report = report


def _tally(run: Run) -> dict[str, int]:
    if len(run.data_classes) == 1:
        return {run.data_classes[0]: run.deleted + run.already_absent + run.redacted}
    rows = (
        DeletionEvent.objects.filter(run=run, outcome__in=DISPOSED)
        .values("data_class")
        .annotate(n=Sum(Coalesce("row_count", Value(1), output_field=IntegerField())))
        .order_by()
    )
    return {row["data_class"]: int(row["n"] or 0) for row in rows}


def _sample(run: Run, name: str, row_figures: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """A few of what the run would dispose of, first by deadline: ids and digests, never keys."""
    size = settings.REPORT_SAMPLE_SIZE
    row = row_class(name)
    if row is not None and row_figures is not None and "_free" in row_figures:
        tenant = row.tenant_field or "pk"
        picked = list(
            row_figures["_free"]
            .order_by(row.time_field, "pk")
            .values_list("pk", row.time_field, tenant)[:size]
        )
        digests = key_digests([f"{row.label}:{pk}" for pk, _, _ in picked])
        return [
            {
                "pk": str(pk),
                "tenant_id": str(tenant_id) if row.tenant_field else None,
                "key_digest": digest,
                "at": at.isoformat() if at is not None else None,
            }
            for (pk, at, tenant_id), digest in zip(picked, digests, strict=True)
        ]
    records = (
        expired_pending(run)
        .filter(data_class=name)
        .not_held()
        .order_by("expires_at", "id")
        .values("id", "tenant_id", "key_digest", "created_at", "expires_at")[:size]
    )
    return [
        {
            "record_id": r["id"],
            "tenant_id": r["tenant_id"],
            "key_digest": r["key_digest"],
            "created_at": r["created_at"].isoformat(),
            "expires_at": r["expires_at"].isoformat(),
        }
        for r in records
    ]
