"""Is each data class keeping its deletion promise? Read by retention_check and /metrics/.

The figures are the dashboard's (``class_health``), so the command, the
metrics and the admin agree on what is backlog and what is late. What this
module adds is the verdict: which promises are broken, and why. The last
reconciliation of each store rides along (``reconcile_health``): a reappeared
object not deleted again within the promise breaks its class's promise too,
as does an open trip of the volume breaker (its backlog waits for a person).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db.models import Count

from retention.conf import settings
from retention.models import (
    RECONCILE_COUNTS,
    BreakerTrip,
    KillSwitch,
    Policy,
    RecordState,
    RetentionRecord,
    Run,
)
from retention.selectors.class_health import ClassHealth, class_health
from retention.selectors.control import kill_switch_engaged
from retention.selectors.reconcile_health import (
    ReappearedOverdue,
    StorageReconciliation,
    reappeared_overdue,
    reconciliations_last,
)
from retention.selectors.rows import class_last_success
from retention.selectors.version_changes import class_registration_drift

# Why a data class's promise is broken.
OVERDUE = "overdue"  # an eligible record expired longer ago than the promise
FAILED_FOR_REVIEW = "failed_for_review"  # rows the engine gave up on: a human must act
NO_RECENT_SUCCESS = "no_recent_success"  # a backlog, and no full sweep within the promise
REAPPEARED_NOT_DELETED = "reappeared_not_deleted"  # reappeared longer ago than the promise
BREAKER_TRIPPED = "breaker_tripped"  # the volume breaker holds the class for review
# The code's registration of a row class no longer matches its version: nothing is disposed of.
REGISTRATION_CHANGED = "registration_changed"


def last_full_sweep(data_class: str) -> Run | None:
    """The newest finished enforcing run that swept the whole class and did its work there.

    A run narrowed to one tenant, or to the records of a zero-period upload,
    proves the engine works, not that the class's backlog was swept; a run
    in which the breaker held the class, or that disposed of none of what
    it found due, did not sweep it (``class_last_success``).
    """
    last = class_last_success(data_class)
    return last.run if last is not None else None


@dataclass(frozen=True, slots=True)
class ClassCheck:
    health: ClassHealth  # last_success is the last full sweep
    now: datetime
    broken: tuple[str, ...]
    reappeared: ReappearedOverdue | None = None
    registration_changed: str = ""  # why, in words (``selectors.version_changes``)

    @property
    def ok(self) -> bool:
        return not self.broken

    @property
    def last_success_age(self) -> timedelta | None:
        run = self.health.last_success
        if run is None or run.finished_at is None:
            return None
        return self.now - run.finished_at


@dataclass(frozen=True, slots=True)
class LagCheck:
    now: datetime
    promise: timedelta
    paused: KillSwitch | None
    classes: tuple[ClassCheck, ...]
    reconciliations: tuple[StorageReconciliation, ...] = ()

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.classes)

    @property
    def broken(self) -> tuple[ClassCheck, ...]:
        return tuple(c for c in self.classes if not c.ok)


def _verdict(
    health: ClassHealth, *, now: datetime, reappeared: ReappearedOverdue | None
) -> tuple[str, ...]:
    if not health.enforced:
        return ()  # report-only: nothing was promised yet
    reasons = []
    if health.late:
        reasons.append(OVERDUE)
    if health.failed_for_review:
        reasons.append(FAILED_FOR_REVIEW)
    last = health.last_success
    stale = last is None or last.finished_at is None or now - last.finished_at > health.promise
    if health.backlog and stale:
        reasons.append(NO_RECENT_SUCCESS)
    if reappeared is not None:
        reasons.append(REAPPEARED_NOT_DELETED)
    if health.breaker is not None:
        reasons.append(BREAKER_TRIPPED)
    return tuple(reasons)


def class_check(
    policy: Policy, *, now: datetime, reappeared: ReappearedOverdue | None
) -> ClassCheck:
    """``reappeared``: the class's entry of ``reappeared_overdue``, read once for all classes."""
    health = class_health(policy, now=now)  # last_success: the last full sweep of the class
    drift = class_registration_drift(policy) if health.enforced else None
    return ClassCheck(
        health=health,
        now=now,
        broken=_verdict(health, now=now, reappeared=reappeared)
        + ((REGISTRATION_CHANGED,) if drift is not None else ()),
        reappeared=reappeared,
        registration_changed=drift.reason if drift is not None else "",
    )


def lag_check(*, now: datetime) -> LagCheck:
    """Every data class against ``RETENTION_LAG_PROMISE``, as of ``now``."""
    promise = settings.LAG_PROMISE
    reappeared = reappeared_overdue(now=now, promise=promise)
    return LagCheck(
        now=now,
        promise=promise,
        paused=kill_switch_engaged(),
        classes=tuple(
            class_check(policy, now=now, reappeared=reappeared.get(policy.data_class))
            for policy in Policy.objects.order_by("data_class")
        ),
        reconciliations=reconciliations_last(),
    )


def deleting_counts() -> dict[str, int]:
    """Rows in ``deleting`` per data class: in flight, or left by a claimer that died."""
    return dict(
        RetentionRecord.objects.filter(state=RecordState.DELETING)
        .values_list("data_class")
        .annotate(n=Count("id"))
        .order_by()
    )


def _rfc3339(value: datetime | None) -> str | None:
    if value is None:
        return None
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _seconds(value: timedelta | None) -> int | None:
    return int(value.total_seconds()) if value is not None else None


def _trip_as_json(trip: BreakerTrip | None) -> dict[str, Any] | None:
    if trip is None:
        return None
    return {
        "trip_id": trip.pk,
        "limit": trip.limit,
        "tripped_at": _rfc3339(trip.tripped_at),
        "run_id": str(trip.run_id) if trip.run_id else None,
        "about_to_delete": (trip.figures or {}).get("about_to_delete"),
    }


def lag_check_as_json(check: LagCheck) -> dict[str, Any]:
    """The stable JSON form of ``retention_check --json``."""
    return {
        "ok": check.ok,
        "checked_at": _rfc3339(check.now),
        "lag_promise_seconds": _seconds(check.promise),
        "paused": check.paused is not None,
        "broken": [c.health.data_class for c in check.broken],
        "data_classes": [
            {
                "data_class": c.health.data_class,
                "mode": c.health.mode,
                "enforced": c.health.enforced,
                "ok": c.ok,
                "broken": list(c.broken),
                "backlog": c.health.backlog,
                "held": c.health.held,
                "oldest_eligible_at": _rfc3339(c.health.oldest_eligible_at),
                "overdue_seconds": _seconds(c.health.overdue),
                "failed_for_review": c.health.failed_for_review,
                "retrying": c.health.retrying,
                "last_success_at": _rfc3339(
                    c.health.last_success.finished_at if c.health.last_success else None
                ),
                "last_success_age_seconds": _seconds(c.last_success_age),
                "last_success_run_id": (
                    str(c.health.last_success.pk) if c.health.last_success else None
                ),
                "breaker_trip": _trip_as_json(c.health.breaker),
            }
            for c in check.classes
        ],
        "reconciliation": {
            "storages": [
                {
                    "storage": r.storage,
                    "run_id": r.run_id,
                    "finished_at": _rfc3339(r.finished_at),
                    "age_seconds": _seconds(r.age(check.now)),
                    "dry_run": r.dry_run,
                    "counts": {name: r.counts[name] for name in RECONCILE_COUNTS},
                }
                for r in check.reconciliations
            ],
            "reappeared_overdue": [
                {
                    "data_class": c.reappeared.data_class,
                    "records": c.reappeared.records,
                    "oldest_reappeared_at": _rfc3339(c.reappeared.oldest_reappeared_at),
                }
                for c in check.classes
                if c.reappeared is not None
            ],
        },
    }
