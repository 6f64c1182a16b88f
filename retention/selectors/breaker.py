"""The volume breaker's reads: its limits, what is normal for a class, its open trips.

"Normal" is the median of a class's daily disposals over the last
``HISTORY_DAYS`` days, days without any counting as 0. It is read from the
runs, not from the events: the events have no ``(data_class, occurred_at)``
index, and a day of a busy class is millions of them, while the runs of two
weeks are a few dozen rows. Each closed enforcing run keeps what it disposed
of per class in its report (``DISPOSED_KEY``, written once by the engine,
``retention.engine.breaker``); this module only reads it.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import QuerySet

from retention.conf import settings
from retention.models import (
    BreakerState,
    BreakerTrip,
    Policy,
    RetentionRecord,
    Run,
    RunMode,
    RunStatus,
)
from retention.selectors.policies import version_governing
from retention.selectors.runs import runs_covering

HISTORY_DAYS = 14
# A closed enforcing run's report: {data_class: records or rows disposed of}.
DISPOSED_KEY = "disposed_per_class"
# Runs that may have disposed of something: every closed status but refused.
CLOSED = (
    RunStatus.FINISHED,
    RunStatus.STOPPED,
    RunStatus.PAUSED,
    RunStatus.ERROR,
    RunStatus.ABANDONED,
)


@dataclass(frozen=True, slots=True)
class BreakerLimits:
    max_fraction: float
    max_multiple: float
    min_count: int


def breaker_enabled() -> bool:
    """RETENTION_BREAKER_ENABLED; with it off, nothing is checked and no trip holds a class."""
    return settings.BREAKER_ENABLED


def breaker_limits(data_class: str) -> BreakerLimits:
    """The settings' limits, each overridden by the governing version's own when it sets one."""
    policy = Policy.objects.filter(data_class=data_class).first()
    version = version_governing(policy) if policy is not None else None
    fraction = version.breaker_max_fraction if version is not None else None
    multiple = version.breaker_max_multiple if version is not None else None
    count = version.breaker_min_count if version is not None else None
    return BreakerLimits(
        max_fraction=settings.BREAKER_MAX_FRACTION if fraction is None else fraction,
        max_multiple=settings.BREAKER_MAX_MULTIPLE if multiple is None else multiple,
        min_count=settings.BREAKER_MIN_COUNT if count is None else count,
    )


def records_not_deleted(data_class: str) -> int:
    """The class's tracked records not yet deleted: active, deleting, or failed but retryable.

    ``pending()`` is the due index's predicate, so this counts within that
    index. Records failed for review (few, waiting for a person) and
    missing ones are left out.
    """
    return RetentionRecord.objects.filter(data_class=data_class).pending().count()


def history_runs(data_class: str, *, now: datetime) -> list[Run]:
    """Closed enforcing runs covering the class that started in the window before ``now``."""
    since = now - timedelta(days=HISTORY_DAYS)
    return list(
        runs_covering(data_class)
        .filter(mode=RunMode.ENFORCE, status__in=CLOSED, started_at__gte=since, started_at__lt=now)
        .order_by("started_at")
    )


def daily_disposals(data_class: str, runs: Iterable[Run], *, now: datetime) -> list[int]:
    """Records or rows of the class disposed of per day, the newest day first.

    Day ``i`` is the ``i``-th span of 24 hours before ``now``, by the runs'
    start; ``runs`` must carry their ``DISPOSED_KEY`` (the engine's tally).
    """
    days = [0] * HISTORY_DAYS
    for run in runs:
        report = run.report if isinstance(run.report, dict) else {}
        disposed = (report.get(DISPOSED_KEY) or {}).get(data_class, 0)
        index = int((now - run.started_at) // timedelta(days=1))
        if 0 <= index < HISTORY_DAYS:
            days[index] += int(disposed)
    return days


def median_daily(days: list[int]) -> float:
    return float(statistics.median(days)) if days else 0.0


def breaker_trips_open() -> QuerySet[BreakerTrip]:
    """Trips holding their class (tripped, not released), the newest first; none while
    the breaker is off."""
    if not breaker_enabled():
        return BreakerTrip.objects.none()
    return BreakerTrip.objects.filter(state=BreakerState.TRIPPED).order_by("-tripped_at", "-pk")


def breaker_trip_open(data_class: str) -> BreakerTrip | None:
    """The trip holding the class (tripped, not released); None while the breaker is off."""
    return breaker_trips_open().filter(data_class=data_class).first()


def breaker_release_waiting(data_class: str) -> BreakerTrip | None:
    """A release not used yet: the next full enforcing sweep of the class deletes unchecked."""
    return (
        BreakerTrip.objects.filter(data_class=data_class, state=BreakerState.RELEASED)
        .order_by("released_at", "pk")
        .first()
    )


def trip_summary(limit: str, figures: dict[str, Any]) -> str:
    """Which limit a run went over, and by how much, in a sentence for a reviewer."""

    def number(name: str) -> float:
        return float(figures.get(name) or 0)

    about = int(number("about_to_delete"))
    noun = "rows" if figures.get("kind") == "rows" else "records"
    if limit == "fraction":
        return (
            f"about to dispose of {about:,} of its {int(number('not_yet_deleted')):,} "
            f"not-yet-deleted {noun} ({number('fraction'):.1%}), over the limit of "
            f"{number('max_fraction'):.0%} ({number('fraction_over'):.1f}x)"
        )
    median = number("median_daily")
    if not median:
        return (
            f"about to dispose of {about:,} {noun}, while its median day of the last "
            f"{HISTORY_DAYS} disposed of none (limit {number('max_multiple'):g}x the median)"
        )
    return (
        f"about to dispose of {about:,} {noun}, {number('multiple'):.1f}x its median day "
        f"of the last {HISTORY_DAYS} ({median:g}), over the limit of "
        f"{number('max_multiple'):g}x"
    )
