"""Rate gates: requests to a store paced on one schedule shared by every process on every host.

A gate is one row in the database (``RateGateState``), so every ``qcluster``
process on every host that shares the database shares the schedule, with no
service beyond the one the engine already needs for claims and the audit
trail (Redis is optional, the database is not). It is a GCRA (virtual
scheduling) limiter: the row holds the instant from which the next
reservation may start. ``acquire(n)`` locks the row for one short
transaction, reserves ``n / rate`` seconds from ``max(that instant, now)``,
commits, and only then sleeps until its slot starts: no lock is held while
waiting. Time is the database's clock on PostgreSQL, so hosts with skewed
clocks still share one schedule; the sleep is a duration, which skew does not
affect.

A reservation is paid at its start, so a caller sends one slice at a time
(``slice_size``, about a tenth of a second's worth): no one-second window
then carries more than about 1.1 times the rate.

Throttling by the store (429, 503 SlowDown) halves a gate's rate; the rate
climbs back linearly over ``RETENTION_GATE_RECOVERY_SECONDS``, computed when
the row is read, so nothing writes in the background.

Two kinds of request pass the gates: the engine's deletes
(``retention.engine.pacing`` joins a data class's gate with its storages')
and the legal holds the hold mirror sets and clears, which book the
storage's own gate (``storage_gate``), so ``RETENTION_STORAGE_RATE_LIMITS``
caps both together. The gates live here, below the engine, for the mirror.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from django.db import DEFAULT_DB_ALIAS, connections, transaction
from django.db.models import F

from retention import counters
from retention.clock import db_epoch
from retention.conf import settings
from retention.models import RateGateState

# Named as before the gates moved here: hosts route and filter it by this
# name (docs/operations.md, docs/queued-runs.md).
logger = logging.getLogger("retention.pacing")

# A slice is this many seconds' worth of deletes, within these bounds (the
# upper one is S3's DeleteObjects limit).
SLICE_SECONDS = 0.1
MAX_SLICE = 1000
# Multiplicative decrease on throttling. Every key of one throttled request,
# and every worker whose request was in flight at the same moment, reports the
# same overload: signals this close to the previous one do not halve again.
DECREASE = 0.5
THROTTLE_DEBOUNCE_SECONDS = 1.0

STORAGE_PREFIX = "storage:"

Clock = Callable[[], float]


@dataclass(frozen=True, slots=True)
class Reservation:
    """A slot on the gate's schedule, in seconds since the epoch (gate clock)."""

    now: float
    start: float
    end: float

    @property
    def wait(self) -> float:
        return max(0.0, self.start - self.now)


@dataclass(frozen=True, slots=True)
class Limit:
    name: str
    rate: float

    def __post_init__(self) -> None:
        if not 0 < self.rate < math.inf:
            raise ValueError(
                f"rate gate {self.name!r}: rate must be a positive number, got {self.rate!r}"
            )


def slice_size_for(rate: float) -> int:
    return max(1, min(MAX_SLICE, int(rate * SLICE_SECONDS)))


def effective_factor(
    factor: float, throttled_at: float | None, now: float, recovery_seconds: float
) -> float:
    """The stored factor, recovered linearly towards 1.0 since ``throttled_at``."""
    if factor >= 1.0 or throttled_at is None or recovery_seconds <= 0:
        return 1.0
    elapsed = max(0.0, now - throttled_at)
    return min(1.0, factor + (1.0 - factor) * elapsed / recovery_seconds)


def database_clock(using: str = DEFAULT_DB_ALIAS) -> float:
    """Seconds since the epoch on the database's clock (``retention.clock``)."""
    return db_epoch(using)


class SharedRateGate:
    """Deletes per second under one or more limits, shared through the database.

    With several limits (a data class's and its storage's) a reservation
    starts when every one of them is free and is booked on all of them, so a
    slice passes both at the same instant.
    """

    def __init__(
        self,
        limits: Sequence[Limit],
        *,
        clock: Clock | None = None,
        sleep: Callable[[float], None] = time.sleep,
        using: str = DEFAULT_DB_ALIAS,
    ) -> None:
        if not limits:
            raise ValueError("a shared rate gate needs at least one limit")
        by_name = {limit.name: limit for limit in limits}
        if len(by_name) != len(limits):
            raise ValueError("a rate gate's limits must have distinct names")
        self.limits = tuple(sorted(limits, key=lambda limit: limit.name))
        self.using = using
        self._clock = clock
        self._sleep = sleep

    def __repr__(self) -> str:
        limits = ", ".join(f"{limit.name}={limit.rate:g}/s" for limit in self.limits)
        return f"<SharedRateGate {limits}>"

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(limit.name for limit in self.limits)

    @property
    def slice_size(self) -> int:
        return slice_size_for(min(limit.rate for limit in self.limits))

    def for_storage(self, alias: str) -> SharedRateGate:
        """This gate joined with the storage's own limit, if it has one."""
        limit = storage_limit(alias)
        if limit is None or limit.name in self.names:
            return self
        return SharedRateGate(
            [*self.limits, limit], clock=self._clock, sleep=self._sleep, using=self.using
        )

    def acquire(self, n: int) -> None:
        if n <= 0:
            return
        wait = self.reserve(n).wait
        if wait > 0:
            self._sleep(wait)

    def reserve(self, n: int) -> Reservation:
        """Book ``n`` deletes on every limit; the caller waits until ``start``."""
        recovery = settings.GATE_RECOVERY_SECONDS
        with self._locked() as rows:
            now = self._now()
            start = max(now, *(row.next_free_at for row in rows.values()))
            end = start
            for limit in self.limits:
                row = rows[limit.name]
                rate = limit.rate * effective_factor(row.factor, row.throttled_at, now, recovery)
                free_at = start + n / rate
                end = max(end, free_at)
                RateGateState.objects.using(self.using).filter(pk=limit.name).update(
                    next_free_at=free_at
                )
        return Reservation(now=now, start=start, end=end)

    def throttled(self) -> None:
        recovery = settings.GATE_RECOVERY_SECONDS
        min_factor = settings.GATE_MIN_FACTOR
        slowed: list[tuple[Limit, float]] = []
        with self._locked() as rows:
            now = self._now()
            for limit in self.limits:
                row = rows[limit.name]
                if (
                    row.throttled_at is not None
                    and 0 <= now - row.throttled_at < THROTTLE_DEBOUNCE_SECONDS
                ):
                    continue
                current = effective_factor(row.factor, row.throttled_at, now, recovery)
                factor = max(min_factor, current * DECREASE)
                RateGateState.objects.using(self.using).filter(pk=limit.name).update(
                    factor=factor, throttled_at=now, throttle_count=row.throttle_count + 1
                )
                slowed.append((limit, factor))
        for limit, factor in slowed:
            counters.GATE_THROTTLED.labels(gate=limit.name).inc()
            logger.warning(
                "rate gate %s slowed down to %.0f%% of %g deletes/s (%.3g/s) after throttling "
                "by the store; it recovers over %g s",
                limit.name,
                factor * 100,
                limit.rate,
                limit.rate * factor,
                recovery,
                extra={"gate": limit.name, "factor": factor},
            )

    def _now(self) -> float:
        return self._clock() if self._clock is not None else database_clock(self.using)

    @contextmanager
    def _locked(self) -> Iterator[dict[str, RateGateState]]:
        """The gate's rows, locked for one transaction."""
        manager = RateGateState.objects.using(self.using)
        names = list(self.names)
        for _ in range(3):
            with transaction.atomic(using=self.using):
                if not connections[self.using].features.has_select_for_update:
                    # SQLite ignores FOR UPDATE: writing first takes its write
                    # lock, so other processes wait instead of reading a stale
                    # schedule.
                    manager.filter(pk__in=names).update(next_free_at=F("next_free_at"))
                # In name order (ORDER BY, not the scan's order), as every gate
                # locks them: gates sharing some rows never deadlock.
                locked = manager.select_for_update().filter(pk__in=names).order_by("name")
                rows = {row.name: row for row in locked}
                if len(rows) == len(names):
                    yield rows
                    return
            # Creating a row while holding others would take locks out of name
            # order: create the missing ones on their own, then lock again.
            manager.bulk_create(
                [RateGateState(name=name) for name in names if name not in rows],
                ignore_conflicts=True,
            )
        raise RuntimeError(f"rate gate rows {names} could not be created")


def storage_limit(alias: str) -> Limit | None:
    rate = settings.STORAGE_RATE_LIMITS.get(alias)
    return Limit(f"{STORAGE_PREFIX}{alias}", rate) if rate else None


def storage_gate(alias: str) -> SharedRateGate | None:
    """The storage's own gate (``RETENTION_STORAGE_RATE_LIMITS``); None: unpaced."""
    limit = storage_limit(alias)
    return SharedRateGate([limit]) if limit is not None else None
