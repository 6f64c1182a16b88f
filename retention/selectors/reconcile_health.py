"""What the last reconciliation of each store found, and reappeared objects left undeleted.

Read by ``retention_check`` and ``/metrics/`` (through ``health.lag_check``),
so both see the same figures. Both reads stay cheap at scrape time: the
reconcile runs are few (weekly, plus the odd command), and of those only the
per-storage counts are loaded; the records are read through the partial index
on ``reappeared_at``, which holds only reappeared records not deleted again.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Count, Min

from retention.models import (
    RECONCILE_COUNTS,
    RECONCILE_FINDINGS,
    RecordState,
    RetentionRecord,
    Run,
    RunMode,
    RunStatus,
)


@dataclass(frozen=True, slots=True)
class StorageReconciliation:
    """The newest finished reconcile run that compared ``storage`` with the records."""

    storage: str
    run_id: str
    finished_at: datetime
    dry_run: bool  # a dry run observed the store as well; it only acted on nothing
    counts: dict[str, int]  # every name of RECONCILE_COUNTS
    # A store where registered row classes keep files: row_files, files_of_deleted_rows.
    row_files: dict[str, int] | None = None

    def age(self, now: datetime) -> timedelta:
        return now - self.finished_at

    @property
    def findings(self) -> dict[str, int]:
        return {name: self.counts[name] for name in RECONCILE_FINDINGS}


@dataclass(frozen=True, slots=True)
class ReappearedOverdue:
    """Records of one class whose object reappeared longer ago than the promise and is still
    there: the next runs should have deleted it again."""

    data_class: str
    records: int
    oldest_reappeared_at: datetime


def _counts(value: Any) -> dict[str, int]:
    given = value if isinstance(value, dict) else {}
    counts = {}
    for name in RECONCILE_COUNTS:
        try:
            counts[name] = int(given.get(name) or 0)
        except (TypeError, ValueError):
            counts[name] = 0
    return counts


def _row_files(value: Any) -> dict[str, int] | None:
    if not isinstance(value, dict) or "files_of_deleted_rows" not in value:
        return None
    return {name: int(value.get(name) or 0) for name in ("row_files", "files_of_deleted_rows")}


def reconciliations_last() -> tuple[StorageReconciliation, ...]:
    """Per storage alias, the newest finished reconciliation of it, by alias.

    One query, newest run first; a storage's entry is the first run whose
    report names it. Runs that ended ``error`` or ``refused`` observed nothing
    complete and are passed over. A storage never reconciled has no entry.
    """
    rows = (
        Run.objects.filter(
            mode=RunMode.RECONCILE, status=RunStatus.FINISHED, finished_at__isnull=False
        )
        .order_by("-finished_at", "-started_at")
        .values_list("pk", "finished_at", "report__storages", "report__dry_run")
    )
    found: dict[str, StorageReconciliation] = {}
    for pk, finished_at, storages, dry_run in rows.iterator():
        if finished_at is None or not isinstance(storages, dict):
            continue
        for alias, counts in storages.items():
            if alias not in found:
                found[alias] = StorageReconciliation(
                    storage=str(alias),
                    run_id=str(pk),
                    finished_at=finished_at,
                    dry_run=bool(dry_run),
                    counts=_counts(counts),
                    row_files=_row_files(counts),
                )
    return tuple(found[alias] for alias in sorted(found))


def reappeared_overdue(*, now: datetime, promise: timedelta) -> dict[str, ReappearedOverdue]:
    """Per data class, reappeared records not deleted again within ``promise``.

    A record whose object reappeared went back to the claim queue with
    ``deleted_at`` NULL; the next run deletes it again. One still there a
    promise later means the runs do not get to it. Not waiting for a deletion:
    a record found ``missing`` since, one renewed since (no longer expired),
    and one under a hold (kept on purpose, as held records are never overdue).
    The filter is the partial index's predicate, so only the few rows in that
    index are read. Every class is returned; whether its promise applies is
    the caller's verdict.
    """
    rows = (
        RetentionRecord.objects.filter(
            reappeared_at__isnull=False,
            deleted_at__isnull=True,
            reappeared_at__lte=now - promise,
            expires_at__lte=now,
        )
        .exclude(state=RecordState.MISSING)
        .not_held()
        .values("data_class")
        .annotate(records=Count("id"), oldest=Min("reappeared_at"))
        .order_by()
    )
    return {
        row["data_class"]: ReappearedOverdue(
            data_class=row["data_class"],
            records=row["records"],
            oldest_reappeared_at=row["oldest"],
        )
        for row in rows
    }
