"""How each data class keeps its promise: backlog, holds, failures, last success, past 30 days.

Read by the admin's dashboard (``dashboard``) and, through
``retention.selectors.health``, by ``retention_check`` and /metrics/, so all
three agree on what is backlog and what is late.

Everything here is counted in the database with a handful of aggregate
queries per data class, never by loading rows, so the pages stay fast on
tables of millions of records. Holds are few; they are turned into a plain
boolean expression over the record's columns (instead of the correlated
EXISTS the engine uses), so a conditional count over a million rows costs one
scan.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, timedelta

from django.db.models import Count, Min, Q, Sum, Value
from django.db.models.functions import Coalesce, TruncDate

from retention.conf import settings
from retention.models import (
    BreakerTrip,
    DataClassMode,
    DeletionEvent,
    Disposition,
    EventOutcome,
    Policy,
    PolicyVersion,
    RecordState,
    RetentionRecord,
    Run,
    RunMode,
    RunStatus,
)
from retention.rows.registry import RowClass, row_class
from retention.selectors.breaker import breaker_trip_open
from retention.selectors.holds import held_q
from retention.selectors.policies import version_governing, version_in_force
from retention.selectors.rows import class_last_success, row_class_figures
from retention.selectors.runs import run_last

CHART_DAYS = 30


@dataclass(frozen=True, slots=True)
class ClassHealth:
    data_class: str
    mode: str
    in_force: PolicyVersion | None
    backlog: int  # expired at the cutoff, not held, not yet deleted
    held: int  # expired but kept under a hold
    oldest_eligible_at: datetime | None
    overdue: timedelta | None  # now - oldest eligible expires_at
    promise: timedelta
    failed_for_review: int
    retrying: int
    last_success: Run | None
    last_dry_run: Run | None
    # The volume breaker's trip holding the class for review, if any.
    breaker: BreakerTrip | None = None
    # What the last successful run disposed of in this class (not the run's total).
    last_success_disposed: int = 0
    # "rows" for a registered model's rows, "records" for tracked objects.
    kind: str = "records"
    disposition: str = Disposition.DELETE

    @property
    def enforced(self) -> bool:
        return self.mode == DataClassMode.ENFORCE

    @property
    def noun(self) -> str:
        return "rows" if self.kind == "rows" else "records"

    @property
    def disposed_verb(self) -> str:
        return "redacted" if self.disposition == Disposition.REDACT else "deleted"

    @property
    def late(self) -> bool:
        return self.enforced and self.overdue is not None and self.overdue > self.promise


@dataclass(frozen=True, slots=True)
class DayPoint:
    day: date
    deleted: int
    backlog: int


@dataclass(slots=True)
class Dashboard:
    now: datetime
    promise: timedelta
    classes: list[ClassHealth] = field(default_factory=list)
    days: list[DayPoint] = field(default_factory=list)
    data_class: str | None = None  # the chart's filter, None = all classes

    @property
    def late_classes(self) -> list[ClassHealth]:
        return [c for c in self.classes if c.late]

    @property
    def tripped_classes(self) -> list[ClassHealth]:
        return [c for c in self.classes if c.breaker is not None]

    @property
    def has_rows(self) -> bool:
        """A class of database rows is shown (its past backlog is not kept: see the chart)."""
        return any(c.kind == "rows" for c in self.classes)


def _row_class_health(policy: Policy, row: RowClass, *, now: datetime) -> ClassHealth:
    """A class of model rows: its rows past its own cutoff, held by the one hold rule."""
    in_force = version_in_force(policy_id=policy.pk)
    version = version_governing(policy)
    figures = row_class_figures(row, version, now=now) if version is not None else None
    oldest = figures.oldest_deadline if figures is not None else None
    last = class_last_success(policy.data_class)
    return ClassHealth(
        data_class=policy.data_class,
        mode=policy.mode,
        in_force=in_force,
        backlog=figures.backlog if figures is not None else 0,
        held=figures.held if figures is not None else 0,
        oldest_eligible_at=oldest,
        overdue=(now - oldest) if oldest is not None else None,
        promise=settings.LAG_PROMISE,
        failed_for_review=0,
        retrying=0,
        last_success=last.run if last is not None else None,
        last_dry_run=run_last(
            policy.data_class, mode=RunMode.DRY_RUN, statuses=[RunStatus.FINISHED]
        ),
        breaker=breaker_trip_open(policy.data_class),
        last_success_disposed=last.disposed if last is not None else 0,
        kind="rows",
        disposition=version.disposition if version is not None else Disposition.DELETE,
    )


def class_health(policy: Policy, *, now: datetime) -> ClassHealth:
    row = row_class(policy.data_class)
    if row is not None:
        return _row_class_health(policy, row, now=now)
    in_force = version_in_force(policy_id=policy.pk)
    margin = in_force.safety_margin if in_force is not None else timedelta(0)
    cutoff = now - margin
    held = held_q(policy.data_class)
    expired = Q(expires_at__lte=cutoff) & (
        Q(state__in=[RecordState.ACTIVE, RecordState.DELETING])
        | Q(state=RecordState.FAILED, retryable=True)
    )
    eligible = expired & ~held if held is not None else expired
    aggregates: dict[str, Count | Min] = {
        "backlog": Count("id", filter=eligible),
        # An object found again after its deletion is late from when it was
        # found, not from its old deadline (retention_check: a promise after).
        "oldest": Min(Coalesce("reappeared_at", "expires_at"), filter=eligible),
        "failed": Count("id", filter=Q(state=RecordState.FAILED, retryable=False)),
        "retrying": Count("id", filter=Q(state=RecordState.FAILED, retryable=True)),
    }
    if held is not None:
        aggregates["held"] = Count("id", filter=expired & held)
    counts = (
        RetentionRecord.objects.filter(data_class=policy.data_class)
        .exclude(state=RecordState.DELETED)
        .aggregate(**aggregates)
    )
    held_count = counts.get("held", 0)
    oldest = counts["oldest"]
    last = class_last_success(policy.data_class)
    return ClassHealth(
        data_class=policy.data_class,
        mode=policy.mode,
        in_force=in_force,
        backlog=counts["backlog"],
        held=held_count,
        oldest_eligible_at=oldest,
        overdue=(now - oldest) if oldest is not None else None,
        promise=settings.LAG_PROMISE,
        failed_for_review=counts["failed"],
        retrying=counts["retrying"],
        last_success=last.run if last is not None else None,
        last_dry_run=run_last(
            policy.data_class, mode=RunMode.DRY_RUN, statuses=[RunStatus.FINISHED]
        ),
        breaker=breaker_trip_open(policy.data_class),
        last_success_disposed=last.disposed if last is not None else 0,
        disposition=in_force.disposition if in_force is not None else Disposition.DELETE,
    )


def _chart_days(
    *, now: datetime, data_classes: list[str], days: int = CHART_DAYS
) -> list[DayPoint]:
    """Deletions per day and the backlog at the end of each day.

    The backlog is reconstructed from each record's expiry and deletion
    times (there is no history table): a record counts on day D when it had
    expired by the end of D and was not deleted by then. Records under a hold
    today, and failed ones waiting for review, are left out, so today's point
    matches the classes' backlogs (safety margins aside).
    """
    today = now.date()
    first = today - timedelta(days=days - 1)
    day_ends = [
        datetime.combine(first + timedelta(days=i + 1), datetime.min.time(), tzinfo=now.tzinfo)
        for i in range(days)
    ]
    day_ends[-1] = now
    start = day_ends[0] - timedelta(days=1)

    deleted_by_day = dict(
        DeletionEvent.objects.filter(
            data_class__in=data_classes,
            outcome__in=[EventOutcome.DELETED, EventOutcome.ALREADY_ABSENT],
            occurred_at__gte=start,
            occurred_at__lte=now,
        )
        .annotate(day=TruncDate("occurred_at"))
        .values("day")
        # An event of a page of rows counts its rows.
        .annotate(n=Sum(Coalesce("row_count", Value(1))))
        .values_list("day", "n")
    )

    backlog = [0] * days
    for data_class in data_classes:
        # Failed rows given up on are counted as failures, not as backlog.
        records = (
            RetentionRecord.objects.filter(data_class=data_class, expires_at__lte=now)
            .filter(Q(deleted_at__isnull=True) | Q(deleted_at__gt=start))
            .exclude(state=RecordState.FAILED, retryable=False)
        )
        held = held_q(data_class)
        if held is not None:
            records = records.exclude(held)
        counts = records.aggregate(
            **{
                f"d{i}": Count(
                    "id",
                    filter=Q(expires_at__lte=end)
                    & (Q(deleted_at__isnull=True) | Q(deleted_at__gt=end)),
                )
                for i, end in enumerate(day_ends)
            }
        )
        for i in range(days):
            backlog[i] += counts[f"d{i}"]

    return [
        DayPoint(
            day=first + timedelta(days=i),
            deleted=deleted_by_day.get(first + timedelta(days=i), 0),
            backlog=backlog[i],
        )
        for i in range(days)
    ]


def dashboard(*, now: datetime, data_class: str | None = None) -> Dashboard:
    policies = list(Policy.objects.order_by("data_class"))
    board = Dashboard(now=now, promise=settings.LAG_PROMISE, data_class=data_class)
    board.classes = [class_health(policy, now=now) for policy in policies]
    names = [p.data_class for p in policies if data_class in (None, p.data_class)]
    board.days = _chart_days(now=now, data_classes=names)
    return board
