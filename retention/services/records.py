"""Tracking, renewing and holding records.

``expires_at`` is computed once, when the object is accepted; a later policy
version never moves it. Renewals and hold changes bump ``row_version`` so a
claimer holding an older view of the row cannot act on it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime
from functools import partial
from typing import Any

from django.conf import settings as django_settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import models, transaction
from django.db.models import F

from retention.digest import key_digest, subject_digest
from retention.exceptions import (
    InvalidHold,
    NotAllowed,
    RecordAlreadyDeleted,
    RecordBeingDisposed,
    RetentionError,
)
from retention.models import LegalHold, RecordState, RetentionRecord
from retention.selectors.holds import hold_in_flight, mirrored_storages
from retention.services.hold_mirror import hold_mirror_start, hold_mirrored, record_lock_tracked
from retention.services.policies import APPROVE_PERMISSION, policy_version_in_force
from retention.storage.keys import MalformedKey, validate_object_key

logger = logging.getLogger("retention.records")


class InvalidObjectKey(RetentionError):
    code = "invalid_object_key"


def record_track(
    *,
    tenant_id: str,
    data_class: str,
    object_key: str,
    now: datetime,
    storage: str = "default",
    subject_id: Any = None,
    size: int | None = None,
) -> RetentionRecord:
    """Start the retention clock of an object the host has written.

    ``subject_id`` names the object's data subject; the record keeps its
    keyed digest (``retention.digest.subject_digest``), never the id.
    ``size``, the object's size in bytes, is what a dry run's sample shows;
    None records none (the storage is not asked: tracking costs no round trip).
    A zero period deletes at write time, by a run: the caller has the engine
    sweep the record (``retention.engine.at_write``), as ``retention.api.track`` does.
    """
    if not tenant_id:
        raise RetentionError("tenant_id is required.")
    subject = "" if subject_id is None else subject_digest(subject_id)
    # bool is an int: size=True is a caller's mistake, not one byte.
    if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 0):
        raise RetentionError(f"size is a number of bytes (an int, 0 or more), not {size!r}.")
    if storage not in django_settings.STORAGES:
        known = ", ".join(sorted(django_settings.STORAGES))
        raise RetentionError(f"Unknown storage alias {storage!r}; known: {known}.")
    try:
        validate_object_key(object_key)
    except MalformedKey as exc:
        raise InvalidObjectKey(str(exc)) from exc
    version = policy_version_in_force(data_class=data_class)
    record = RetentionRecord.objects.create(
        tenant_id=tenant_id,
        data_class=data_class,
        storage=storage,
        object_key=object_key,
        key_digest=key_digest(object_key),
        policy_version=version,
        created_at=now,
        expires_at=now + version.retention_period,
        subject_digest=subject,
        size_bytes=size,
    )
    if storage in mirrored_storages():
        # An active hold may already cover it: its object gets the legal hold.
        transaction.on_commit(partial(record_lock_tracked, record=record), robust=True)
    return record


def record_renew(*, record: RetentionRecord, now: datetime) -> RetentionRecord:
    """Restart the period under the version in force now.

    Refused once a claimer has passed its re-check: from then on the object
    may already be gone, and saying it was renewed would be a lie.
    """
    version = policy_version_in_force(data_class=record.data_class)
    with transaction.atomic():
        updated = (
            RetentionRecord.objects.filter(pk=record.pk, disposal_started_at__isnull=True)
            .exclude(state=RecordState.DELETED)
            .update(
                policy_version=version,
                expires_at=now + version.retention_period,
                renewed_at=now,
                row_version=F("row_version") + 1,
                state=RecordState.ACTIVE,
                lease_owner=None,
                lease_expires_at=None,
                attempts=0,
                retryable=True,
                next_attempt_at=None,
                last_error="",
            )
        )
        fresh = RetentionRecord.objects.get(pk=record.pk)
    if not updated:
        if fresh.state == RecordState.DELETED:
            raise RecordAlreadyDeleted(f"Record {record.pk} was already deleted.")
        raise RecordBeingDisposed(
            f"Record {record.pk} is being disposed of and can no longer be renewed."
        )
    return fresh


def _bump_scope(hold: LegalHold) -> int:
    # Rows already past their re-check are left alone: their object may be
    # gone, and their claimer finalizes by row version.
    return (
        RetentionRecord.objects.filter(hold.scope_q(), disposal_started_at__isnull=True)
        .exclude(state=RecordState.DELETED)
        .update(row_version=F("row_version") + 1)
    )


def legal_hold_place(
    *,
    reason: str,
    placed_by: AbstractBaseUser,
    now: datetime,
    tenant_id: str | None = None,
    data_class: str | None = None,
    record: RetentionRecord | None = None,
    subject: models.Model | None = None,
) -> LegalHold:
    """Place a hold; ``subject`` holds one row of a host model (and its files).

    The hold's ``in_flight`` says how many records it covers were past their
    re-check at this moment: their deletion goes on, and its events say the
    hold came after. Objects in a storage of ``RETENTION_OBJECT_LOCK_HOLDS``
    get an Object Lock legal hold once the hold commits (``hold_mirror``):
    here, before this returns, for up to ``SYNC_LIMIT`` of them.
    """
    if not (reason or "").strip():
        raise InvalidHold("A legal hold needs a reason.")
    if not (tenant_id or data_class or record or subject is not None):
        raise InvalidHold(
            "A legal hold needs a scope: a tenant, a data class, a record, a row or some."
        )
    if subject is not None:
        if record is not None or tenant_id or data_class:
            raise InvalidHold("A hold on one row (subject) takes no other scope.")
        if subject.pk is None:
            raise InvalidHold("A hold on a row needs a saved row (its primary key is None).")
    with transaction.atomic():
        hold = LegalHold.objects.create(  # type: ignore[misc]  # AUTH_USER_MODEL
            tenant_id=tenant_id or None,
            data_class=data_class or None,
            record=record,
            subject_type=subject._meta.label if subject is not None else None,
            subject_pk=str(subject.pk) if subject is not None else None,
            reason=reason.strip(),
            placed_by=placed_by,
            placed_at=now,
        )
        _bump_scope(hold)
        hold.in_flight = hold_in_flight(hold)
        if hold_mirrored(hold):
            transaction.on_commit(partial(hold_mirror_start, hold=hold, release=False))
    if hold.in_flight:
        logger.warning(
            "%s placed while %d records it covers were past their re-check: they are deleted "
            "(or, if their claimer died, settled against the store by the next run), and "
            "their events say the hold came after",
            hold,
            hold.in_flight,
            extra={"hold_id": hold.pk, "in_flight": hold.in_flight},
        )
    return hold


def legal_hold_release(
    *, hold: LegalHold, released_by: AbstractBaseUser, reason: str, now: datetime
) -> LegalHold:
    if not (reason or "").strip():
        raise InvalidHold("Releasing a legal hold needs a reason.")
    with transaction.atomic():
        hold = LegalHold.objects.select_for_update().get(pk=hold.pk)
        if hold.released_at is not None:
            raise InvalidHold(f"{hold} was already released.")
        hold.released_at = now
        hold.released_by = released_by  # type: ignore[assignment]
        hold.release_reason = reason.strip()
        hold.save(update_fields=["released_at", "released_by", "release_reason"])
        _bump_scope(hold)
        if hold_mirrored(hold):
            # Only objects no other active hold covers lose their legal hold.
            transaction.on_commit(partial(hold_mirror_start, hold=hold, release=True))
    return hold


def record_failures_retry(*, record_ids: Sequence[int], by: AbstractBaseUser, now: datetime) -> int:
    """After review, give records that failed for good another round of attempts.

    Only rows in state ``failed`` and no longer retryable change; the next run
    claims them again (with probing, since a failed attempt may have deleted
    the object). Returns how many rows were reopened.
    """
    if not by.has_perm(APPROVE_PERMISSION):  # type: ignore[attr-defined]
        raise NotAllowed(f"{by} may not reopen failed records: approvers only.")
    reopened = RetentionRecord.objects.filter(
        pk__in=list(record_ids), state=RecordState.FAILED, retryable=False
    ).update(retryable=True, next_attempt_at=now, attempts=0)
    logger.info(
        "failed records reopened for retry",
        extra={"count": reopened, "user_id": getattr(by, "pk", None)},
    )
    return reopened
