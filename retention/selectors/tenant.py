"""What a tenant may read: its deletion receipts, its report, why a record is kept.

Every function takes the tenant id as a required keyword and filters on it
first, so no view can forget the scoping. A record of another tenant is
indistinguishable from one that does not exist (``DoesNotExist``, a 404).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.db.models import BinaryField, Count, F, Q, QuerySet, Sum, Value
from django.db.models.functions import Coalesce, Substr

from retention.models import (
    DeletionEvent,
    EventOutcome,
    RecordQuerySet,
    RecordState,
    RetentionRecord,
)
from retention.receipts import evidence

if TYPE_CHECKING:
    pass

# "missing": reconciliation found the object gone before any deletion run
# reached it. A receipt says so; it is never counted as a deletion.
# "redacted": a row of a class whose disposition is redact, kept with its
# personal fields replaced; a receipt of its own, counted apart from deletions.
RECEIPT_OUTCOMES = (
    EventOutcome.DELETED,
    EventOutcome.ALREADY_ABSENT,
    EventOutcome.REDACTED,
    EventOutcome.MISSING,
)
DELETED_OUTCOMES = (EventOutcome.DELETED, EventOutcome.ALREADY_ABSENT)
# Disposed of by its deadline or late: what on time and late count.
DISPOSED_OUTCOMES = (*DELETED_OUTCOMES, EventOutcome.REDACTED)

RECEIPT_FIELDS = (
    "id",
    "record_id",
    "run_id",
    "data_class",
    "policy_key",
    "policy_version_number",
    "disposition",
    "outcome",
    "expires_at",
    "occurred_at",
    "key_digest",
    "event_hash",
    "batch__seq",
    "leaf_index",
    "kind",
    "row_count",
    "evidence",
)


def tenant_id_required(tenant_id: str) -> str:
    if not tenant_id:
        raise ValueError("a tenant id is required")
    return tenant_id


# --------------------------------------------------------------------------
# Deletion receipts


def deletion_receipts(
    *,
    tenant_id: str,
    since: datetime | None = None,
    until: datetime | None = None,
    data_class: str | None = None,
) -> QuerySet[DeletionEvent]:
    """The tenant's receipts: events whose object or row is gone (deleted or already
    absent), was not found (missing), or was redacted (a row kept, its personal
    fields replaced: disposition ``redact``, outcome ``redacted``).

    Rows of a registered model carry a tenant when it was registered with
    ``tenant_field``; their receipts have ``kind`` "row".

    ``since`` is inclusive and ``until`` exclusive, both on the deletion time.
    """
    # A per-row page event's rows stay behind: ``row_subjects`` reads them.
    receipts = DeletionEvent.objects.defer("row_subjects").filter(
        tenant_id=tenant_id_required(tenant_id), outcome__in=RECEIPT_OUTCOMES
    )
    if since is not None:
        receipts = receipts.filter(occurred_at__gte=since)
    if until is not None:
        receipts = receipts.filter(occurred_at__lt=until)
    if data_class:
        receipts = receipts.filter(data_class=data_class)
    return receipts


def deletion_receipt_rows(
    *,
    tenant_id: str,
    since: datetime | None = None,
    until: datetime | None = None,
    data_class: str | None = None,
    chunk_size: int = 2000,
) -> Iterator[tuple[Any, ...]]:
    """Every receipt as a tuple of RECEIPT_FIELDS, by deletion time, in constant memory.

    Keyset pages on ``(occurred_at, id)``, which the (tenant_id, occurred_at)
    index yields in order: no page sorts, and nothing is held open between
    pages (no server-side cursor), so a slow reader pins no transaction and
    it works the same behind any connection pooler. A run finalizes a whole
    batch at one instant, so the rows sharing the last timestamp of a page
    are drained by id before moving past it.
    """
    receipts = deletion_receipts(
        tenant_id=tenant_id, since=since, until=until, data_class=data_class
    )
    at_index = RECEIPT_FIELDS.index("occurred_at")
    page = receipts.order_by("occurred_at", "id")
    while True:
        rows = list(page.values_list(*RECEIPT_FIELDS)[:chunk_size])
        yield from rows
        if len(rows) < chunk_size:
            return
        at, last_id = rows[-1][at_index], rows[-1][0]
        while True:
            same = list(
                receipts.filter(occurred_at=at, id__gt=last_id)
                .order_by("id")
                .values_list(*RECEIPT_FIELDS)[:chunk_size]
            )
            yield from same
            if len(same) < chunk_size:
                break
            last_id = same[-1][0]
        page = receipts.filter(occurred_at__gt=at).order_by("occurred_at", "id")


# --------------------------------------------------------------------------
# Report: on time, late, overdue


@dataclass(frozen=True, slots=True)
class OverdueRecord:
    record_id: int
    data_class: str
    expires_at: datetime
    overdue_by_seconds: int


@dataclass(frozen=True, slots=True)
class DataClassReport:
    data_class: str
    deleted: int
    already_absent: int
    on_time: int
    late: int
    overdue: int
    held: int
    oldest_overdue: OverdueRecord | None
    missing: int = 0
    redacted: int = 0


@dataclass(frozen=True, slots=True)
class DeletionReport:
    tenant_id: str
    since: datetime | None
    until: datetime | None
    generated_at: datetime
    lag_promise_seconds: int
    data_classes: list[DataClassReport]
    oldest_overdue: OverdueRecord | None


def _overdue_records(*, tenant_id: str, now: datetime, promise: timedelta) -> RecordQuerySet:
    """Not deleted, past their deadline by more than the promise, under no hold."""
    return (
        RetentionRecord.objects.filter(tenant_id=tenant_id, expires_at__lt=now - promise)
        .exclude(state__in=[RecordState.DELETED, RecordState.MISSING])
        .not_held()
    )


def deletion_report(
    *,
    tenant_id: str,
    now: datetime,
    promise: timedelta,
    since: datetime | None = None,
    until: datetime | None = None,
) -> DeletionReport:
    """Receipts in the window per data class, split on time / late against the promise,
    and, as of ``now``, what is overdue and what is kept under a hold.

    Late means deleted (or redacted) more than ``promise`` after ``expires_at``;
    on time and late together count deletions, absences and redactions.
    """
    tenant_id = tenant_id_required(tenant_id)
    per_class: dict[str, dict[str, Any]] = {}

    def entry(name: str) -> dict[str, Any]:
        return per_class.setdefault(
            name,
            {
                "deleted": 0,
                "already_absent": 0,
                "redacted": 0,
                "missing": 0,
                "late": 0,
                "overdue": 0,
                "held": 0,
            },
        )

    receipts = deletion_receipts(tenant_id=tenant_id, since=since, until=until)
    # An event of a page of rows counts its rows; its deadline is the page's
    # latest, so all its rows are late when that one was missed. The rows of
    # a per-row page event whose latest deadline was kept are counted below.
    rows = Coalesce("row_count", Value(1))
    late_rows = Q(occurred_at__gt=F("expires_at") + promise, outcome__in=DISPOSED_OUTCOMES)
    for row in receipts.values("data_class").annotate(
        deleted=Sum(rows, filter=Q(outcome=EventOutcome.DELETED), default=0),
        already_absent=Sum(rows, filter=Q(outcome=EventOutcome.ALREADY_ABSENT), default=0),
        redacted=Sum(rows, filter=Q(outcome=EventOutcome.REDACTED), default=0),
        missing=Sum(rows, filter=Q(outcome=EventOutcome.MISSING), default=0),
        late=Sum(rows, filter=late_rows, default=0),
    ):
        entry(row["data_class"]).update(
            deleted=row["deleted"],
            already_absent=row["already_absent"],
            redacted=row["redacted"],
            missing=row["missing"],
            late=row["late"],
        )
    for name, late in _per_row_pages_late(
        receipts.filter(evidence=evidence.PER_ROW, outcome__in=DISPOSED_OUTCOMES).exclude(
            late_rows
        ),
        promise,
    ).items():
        entry(name)["late"] += late

    overdue = _overdue_records(tenant_id=tenant_id, now=now, promise=promise)
    for late_row in overdue.values("data_class").annotate(n=Count("id")):
        entry(late_row["data_class"])["overdue"] = late_row["n"]
    held = (
        RetentionRecord.objects.filter(tenant_id=tenant_id, expires_at__lte=now)
        .exclude(state__in=[RecordState.DELETED, RecordState.MISSING])
        .held()
    )
    for held_row in held.values("data_class").annotate(n=Count("id")):
        entry(held_row["data_class"])["held"] = held_row["n"]

    reports = []
    for name in sorted(per_class):
        data = per_class[name]
        oldest = None
        if data["overdue"]:
            first = (
                overdue.filter(data_class=name)
                .order_by("expires_at", "id")
                .values("id", "expires_at")
                .first()
            )
            if first is not None:
                oldest = OverdueRecord(
                    record_id=first["id"],
                    data_class=name,
                    expires_at=first["expires_at"],
                    overdue_by_seconds=int((now - first["expires_at"]).total_seconds()),
                )
        receipts_count = data["deleted"] + data["already_absent"] + data["redacted"]
        reports.append(
            DataClassReport(
                data_class=name,
                deleted=data["deleted"],
                already_absent=data["already_absent"],
                redacted=data["redacted"],
                on_time=receipts_count - data["late"],
                late=data["late"],
                missing=data["missing"],
                overdue=data["overdue"],
                held=data["held"],
                oldest_overdue=oldest,
            )
        )
    overall = [r.oldest_overdue for r in reports if r.oldest_overdue is not None]
    return DeletionReport(
        tenant_id=tenant_id,
        since=since,
        until=until,
        generated_at=now,
        lag_promise_seconds=int(promise.total_seconds()),
        data_classes=reports,
        oldest_overdue=min(overall, key=lambda o: (o.expires_at, o.record_id), default=None),
    )


def _per_row_pages_late(pages: QuerySet[DeletionEvent], promise: timedelta) -> Counter[str]:
    """Per data class, the late rows of per-row page events whose latest deadline was kept.

    A page's rows are stored in keyset order, so its first row's deadline is
    its earliest: only a page whose earliest deadline was missed has late rows
    (the one a run crossed the promise in), and only its rows are read.
    """
    late: Counter[str] = Counter()
    first = Substr(
        "row_subjects",
        evidence.SUBJECT_DIGEST_SIZE + 1,
        evidence.SUBJECT_TIME_SIZE,
        output_field=BinaryField(),
    )
    for pk, name, occurred_at, earliest in pages.annotate(first=first).values_list(
        "pk", "data_class", "occurred_at", "first"
    ):
        missed = evidence.stamp(occurred_at - promise)
        if earliest is None or bytes(earliest).decode("ascii") >= missed:
            continue
        blob = DeletionEvent.objects.filter(pk=pk).values_list("row_subjects", flat=True).get()
        subjects = evidence.subjects_unpack(bytes(blob or b""))
        late[name] += sum(1 for _, due in subjects if due < missed)
    return late


def tenant_receipt_get(*, tenant_id: str, receipt_id: int) -> DeletionEvent:
    """The tenant's receipt; ``DeletionEvent.DoesNotExist`` for anyone else's."""
    return deletion_receipts(tenant_id=tenant_id).select_related("batch").get(pk=receipt_id)
