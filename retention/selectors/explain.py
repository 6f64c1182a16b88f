"""Why is this upload still kept? The plain-language answer a tenant gets (SPEC §3.2)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, TypedDict, cast

from retention.models import (
    DataClassMode,
    DeletionEvent,
    EventOutcome,
    Policy,
    RecordState,
    RetentionRecord,
    active_holds_matching,
)

if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations
from retention.formatting import human
from retention.selectors.tenant import tenant_id_required


@dataclass(frozen=True, slots=True)
class RetentionExplanation:
    record_id: int
    data_class: str
    state: str
    created_at: datetime
    expires_at: datetime
    renewed_at: datetime | None
    deleted_at: datetime | None
    policy_key: str
    policy_version: int
    retention_period_seconds: int
    hold_applies: bool
    enforced: bool
    explanation: str


class _HoldApplies(TypedDict):
    hold_applies: bool


def tenant_record_get(
    *, tenant_id: str, record_id: int
) -> WithAnnotations[RetentionRecord, _HoldApplies]:
    """The tenant's record; ``RetentionRecord.DoesNotExist`` for anyone else's."""
    record = (
        RetentionRecord.objects.filter(tenant_id=tenant_id_required(tenant_id))
        .select_related("policy_version__policy")
        .annotate(hold_applies=active_holds_matching())
        .get(pk=record_id)
    )
    # django-stubs carries annotate() through QuerySet, not through RecordQuerySet.
    return cast("WithAnnotations[RetentionRecord, _HoldApplies]", record)


def record_retention_explain(
    *, tenant_id: str, record_id: int, now: datetime, promise: timedelta
) -> RetentionExplanation:
    record = tenant_record_get(tenant_id=tenant_id, record_id=record_id)
    version = record.policy_version
    enforced = Policy.objects.filter(
        data_class=record.data_class, mode=DataClassMode.ENFORCE
    ).exists()
    held = bool(record.hold_applies)
    return RetentionExplanation(
        record_id=record.pk,
        data_class=record.data_class,
        state=record.state,
        created_at=record.created_at,
        expires_at=record.expires_at,
        renewed_at=record.renewed_at,
        deleted_at=record.deleted_at,
        policy_key=version.policy.key,
        policy_version=version.number,
        retention_period_seconds=int(version.retention_period.total_seconds()),
        hold_applies=held,
        enforced=enforced,
        explanation=_explain(
            record,
            period=version.retention_period,
            policy=f"{version.policy.key} version {version.number}",
            held=held,
            enforced=enforced,
            now=now,
            promise=promise,
        ),
    )


def duration_words(value: timedelta) -> str:
    seconds = int(value.total_seconds())
    if seconds <= 0:
        return "no time at all"
    parts = []
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60), ("second", 1)):
        count, seconds = divmod(seconds, size)
        if count:
            parts.append(f"{count} {unit}{'s' if count != 1 else ''}")
    return " ".join(parts[:2])


def _found_absent(record: RetentionRecord) -> bool:
    """Whether the run that closed this record found its object gone (``already_absent``)."""
    last = (
        DeletionEvent.objects.filter(
            record_id=record.pk,
            outcome__in=[EventOutcome.DELETED, EventOutcome.ALREADY_ABSENT],
        )
        .order_by("-id")
        .values_list("outcome", flat=True)
        .first()
    )
    return last == EventOutcome.ALREADY_ABSENT


def _explain(
    record: RetentionRecord,
    *,
    period: timedelta,
    policy: str,
    held: bool,
    enforced: bool,
    now: datetime,
    promise: timedelta,
) -> str:
    due = human(record.expires_at)
    text = [
        f"This item ({record.data_class}) is governed by policy {policy}, which keeps such "
        f"data for {duration_words(period)}."
    ]
    if record.renewed_at:
        text.append(
            f"Its retention period was restarted on {human(record.renewed_at)}, so it is due "
            f"for deletion on {due}."
        )
    else:
        text.append(
            f"It was stored on {human(record.created_at)}, so it is due for deletion on {due}."
        )
    if record.state == RecordState.DELETED:
        when = human(record.deleted_at) if record.deleted_at else "an unrecorded time"
        if _found_absent(record):
            text.append(
                f"It was not found at deletion time ({when}): it was already gone from the "
                "store, so there was nothing left to delete. Its receipt says so (already "
                "absent)."
            )
        else:
            text.append(f"It was deleted on {when}; its receipt is among the deletion receipts.")
        return " ".join(text)
    if record.state == RecordState.MISSING:
        text.append(
            "It was not found at deletion time: a check of the store found it gone before "
            "any deletion run reached it. Its receipt says so; it is not counted as deleted."
        )
        return " ".join(text)
    text.append("Later policy changes do not move this date; only a renewal restarts it.")
    expired = record.expires_at <= now
    if held:
        text.append(
            "A legal hold applies to it, so it is kept, past that date if need be, until the "
            "hold is released."
        )
    elif record.state == RecordState.DELETING:
        text.append("It is being deleted now.")
    elif record.state == RecordState.FAILED and record.retryable:
        text.append("A deletion attempt met a temporary error; it will be retried.")
    elif record.state == RecordState.FAILED:
        text.append("Deleting it failed; it is kept until an operator reviews the failure.")
    elif not enforced:
        text.append(
            "Deletion is not yet enabled for this data class (it is in report-only mode), so "
            f"it is kept{' past that date' if expired else ''} until deletion is enabled."
        )
    elif expired:
        text.append(
            f"That date has passed; it is waiting for the next deletion run, which the "
            f"operator promises within {duration_words(promise)} of the date."
        )
    else:
        text.append(
            f"Until then it is kept; it will be deleted by the first deletion run after that "
            f"date, within {duration_words(promise)} of it."
        )
    return " ".join(text)
