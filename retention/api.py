"""The stable Python API for host apps (SPEC §3.4).

A thin facade: each function reads the database's clock (``retention.clock``)
only when ``now`` is None and delegates to a service. Names and signatures
here are a contract; the services behind them may change.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import models
from django.utils import timezone

from retention import engine, services
from retention.clock import db_now
from retention.conf import settings
from retention.exceptions import (
    CertificateNotIssued,
    EnforcementNotAllowed,
    FourEyesViolation,
    InvalidErasureRequest,
    InvalidHold,
    InvalidPolicyVersion,
    InvalidTransition,
    LockedPolicyShortened,
    NoApprovedPolicy,
    NotAllowed,
    RecordAlreadyDeleted,
    RecordBeingDisposed,
    RetentionError,
    RunRefused,
    UnknownDataClass,
)
from retention.models import (
    BreakerTrip,
    ErasureRequest,
    KillSwitch,
    LegalHold,
    Policy,
    PolicyVersion,
    RetentionRecord,
    Run,
)
from retention.rows import registry
from retention.rows.registry import RowClass, register_model, registered
from retention.selectors import holds as selectors
from retention.selectors.explain import RetentionExplanation, record_retention_explain
from retention.selectors.holds import RowHolds, held_rows
from retention.selectors.run_rules import run_rules
from retention.services import erasure

__all__ = [
    "CertificateNotIssued",
    "EnforcementNotAllowed",
    "FourEyesViolation",
    "InvalidErasureRequest",
    "InvalidHold",
    "InvalidPolicyVersion",
    "InvalidTransition",
    "LockedPolicyShortened",
    "NoApprovedPolicy",
    "NotAllowed",
    "RecordAlreadyDeleted",
    "RecordBeingDisposed",
    "RetentionError",
    "RetentionExplanation",
    "RowClass",
    "RowHolds",
    "RunRefused",
    "UnknownDataClass",
    "approve_erasure",
    "approve_policy_version",
    "breaker_release",
    "cancel_erasure",
    "erasure_certificate",
    "disable_enforcement",
    "enable_enforcement",
    "explain_retention",
    "holds",
    "pause",
    "place_hold",
    "policy_version_in_force",
    "propose_policy_version",
    "register_model",
    "registered",
    "registration",
    "reject_erasure",
    "reject_policy_version",
    "release_hold",
    "renew",
    "request_erasure",
    "resume",
    "row_holds",
    "run_row_cutoff",
    "submit_policy_version",
    "track",
]


def _now(now: datetime | None) -> datetime:
    if now is None:
        return db_now()
    if timezone.is_naive(now):
        raise ValueError("now must be an aware datetime (UTC).")
    return now


def track(
    *,
    tenant_id: str,
    data_class: str,
    object_key: str,
    storage: str = "default",
    subject_id: str | int | None = None,
    size: int | None = None,
    now: datetime | None = None,
) -> RetentionRecord:
    """Start the retention clock of an object the host has just written.

    ``subject_id``, the host's stable id of the person the object is about,
    is kept as a keyed digest (``record.subject_digest``), never as given.
    ``size``, the object's size in bytes if the host knows it (it just wrote
    the object), is shown beside the record in a dry run's sample; left None,
    the sample says "not recorded" and the storage is not asked.
    """
    now = _now(now)
    record = services.record_track(
        tenant_id=tenant_id,
        data_class=data_class,
        object_key=object_key,
        storage=storage,
        subject_id=subject_id,
        size=size,
        now=now,
    )
    engine.record_dispose_at_write(record=record, now=now)
    return record


def renew(record: RetentionRecord, *, now: datetime | None = None) -> RetentionRecord:
    return services.record_renew(record=record, now=_now(now))


def propose_policy_version(
    *,
    data_class: str,
    retention_period: timedelta,
    author: AbstractBaseUser,
    locked: bool = False,
    now: datetime | None = None,
    **rules: Any,
) -> PolicyVersion:
    return services.policy_version_propose(
        data_class=data_class,
        retention_period=retention_period,
        author=author,
        locked=locked,
        now=_now(now),
        **rules,
    )


def submit_policy_version(
    version: PolicyVersion, *, by: AbstractBaseUser, now: datetime | None = None
) -> PolicyVersion:
    return services.policy_version_submit(version=version, by=by, now=_now(now))


def approve_policy_version(
    version: PolicyVersion,
    *,
    approver: AbstractBaseUser,
    now: datetime | None = None,
    confirm_disposition_change: bool = False,
) -> PolicyVersion:
    """Put a submitted version in force (four-eyes). A version that changes the
    disposition (redact → delete) needs ``confirm_disposition_change=True``."""
    return services.policy_version_approve(
        version=version,
        approver=approver,
        now=_now(now),
        confirm_disposition_change=confirm_disposition_change,
    )


def reject_policy_version(
    version: PolicyVersion, *, by: AbstractBaseUser, reason: str, now: datetime | None = None
) -> PolicyVersion:
    """Turn a submitted version down with a reason: it goes back to its author as a
    draft (approvers only, never its author)."""
    return services.policy_version_reject(version=version, by=by, reason=reason, now=_now(now))


def enable_enforcement(
    data_class: str, *, by: AbstractBaseUser, now: datetime | None = None
) -> Policy:
    return services.enforcement_enable(data_class=data_class, by=by, now=_now(now))


def disable_enforcement(
    data_class: str, *, by: AbstractBaseUser, now: datetime | None = None
) -> Policy:
    return services.enforcement_disable(data_class=data_class, by=by, now=_now(now))


def place_hold(
    *,
    reason: str,
    placed_by: AbstractBaseUser,
    tenant_id: str | None = None,
    data_class: str | None = None,
    record: RetentionRecord | None = None,
    subject: models.Model | None = None,
    now: datetime | None = None,
) -> LegalHold:
    """Place a legal hold; ``subject=instance`` holds one row of a registered model.

    The hold returned says, in ``in_flight`` (an int), how many records it
    covers were already past their re-check: those are deleted, and their
    events say the hold came after it.
    """
    return services.legal_hold_place(
        reason=reason,
        placed_by=placed_by,
        tenant_id=tenant_id,
        data_class=data_class,
        record=record,
        subject=subject,
        now=_now(now),
    )


def holds(
    *, tenant_id: str | None = None, data_class: str | None = None, active: bool | None = True
) -> models.QuerySet[LegalHold]:
    """The holds that name this tenant and/or data class, oldest first (a QuerySet).

    ``active=True`` (the default) gives holds in force, ``False`` released
    ones, ``None`` both. Pass one to ``release_hold``.
    """
    return selectors.holds_named(tenant_id=tenant_id, data_class=data_class, active=active)


def release_hold(
    hold: LegalHold,
    *,
    released_by: AbstractBaseUser,
    reason: str,
    now: datetime | None = None,
) -> LegalHold:
    return services.legal_hold_release(
        hold=hold, released_by=released_by, reason=reason, now=_now(now)
    )


def pause(*, by: AbstractBaseUser, reason: str, now: datetime | None = None) -> KillSwitch:
    return services.kill_switch_pause(by=by, reason=reason, now=_now(now))


def resume(*, by: AbstractBaseUser, now: datetime | None = None) -> KillSwitch:
    return services.kill_switch_resume(by=by, now=_now(now))


def breaker_release(
    data_class: str, *, by: AbstractBaseUser, reason: str, now: datetime | None = None
) -> BreakerTrip:
    """Let a class the volume breaker holds dispose of its backlog in its next full sweep."""
    return services.breaker_release(data_class=data_class, by=by, reason=reason, now=_now(now))


def request_erasure(
    *,
    requested_by: AbstractBaseUser,
    reason: str,
    subject_id: str | int | None = None,
    tenant_id: str | None = None,
    data_classes: Sequence[str] | None = None,
    not_before: datetime | None = None,
    now: datetime | None = None,
) -> ErasureRequest:
    """Receive an erasure request for a data subject, a tenant, or a subject within a tenant.

    The request is ``received``, due ``RETENTION_ERASURE_DUE`` later, and its
    scope frozen as things are now (``request.scope``): per class, what the
    request reaches and how many items, what the class does on erasure, and
    the holds covering some of them. ``InvalidErasureRequest`` for bad input
    or a second open request for the same subject or tenant.
    """
    return erasure.erasure_request(
        requested_by=requested_by,
        reason=reason,
        subject_id=subject_id,
        tenant_id=tenant_id,
        data_classes=data_classes,
        not_before=not_before,
        now=_now(now),
    )


def approve_erasure(
    request: ErasureRequest, *, approver: AbstractBaseUser, now: datetime | None = None
) -> ErasureRequest:
    """Approve a received request's frozen scope: never its requester (``FourEyesViolation``),
    and only with ``retention.approve_erasurerequest`` (``NotAllowed``)."""
    return erasure.erasure_approve(request=request, approver=approver, now=_now(now))


def reject_erasure(
    request: ErasureRequest, *, by: AbstractBaseUser, reason: str, now: datetime | None = None
) -> ErasureRequest:
    """Refuse a received request, with a reason; an approver's decision."""
    return erasure.erasure_reject(request=request, by=by, reason=reason, now=_now(now))


def cancel_erasure(
    request: ErasureRequest, *, by: AbstractBaseUser, reason: str, now: datetime | None = None
) -> ErasureRequest:
    """Withdraw a request before it executes: its requester or an approver, with a reason."""
    return erasure.erasure_cancel(request=request, by=by, reason=reason, now=_now(now))


def erasure_certificate(request: ErasureRequest) -> dict[str, Any]:
    """The request's certificate, a JSON document (``docs/erasure.md``), as it was issued
    when the request completed or partially completed; ``CertificateNotIssued`` before.

    It names the subject by its digest only, says per class what was erased,
    redacted and kept (with the hold or the legal basis), and carries the
    Merkle root of the request's events and the chain head after them,
    signed with ``RETENTION_SIGNING_KEY`` when set. ``python -m
    retention.receipts verify CERTIFICATE.json`` checks it offline.
    """
    request.refresh_from_db(fields=["certificate", "state"])
    if request.certificate is None:
        raise CertificateNotIssued(
            f"{request} has no certificate yet: one is issued when it completes or "
            "partially completes."
        )
    return dict(request.certificate)


def policy_version_in_force(data_class: str) -> PolicyVersion:
    """The approved version that governs ``data_class`` now.

    Raises ``UnknownDataClass`` (no policy) or ``NoApprovedPolicy`` (none
    approved), as ``track`` would: ask it before writing anything.
    """
    return services.policy_version_in_force(data_class=data_class)


def explain_retention(
    *, tenant_id: str, record_id: int, now: datetime | None = None
) -> RetentionExplanation:
    """Why one of the tenant's records is kept (or when it went), for a person.

    ``RetentionRecord.DoesNotExist`` for another tenant's record. The
    explanation measures lag against ``RETENTION_LAG_PROMISE``.
    """
    return record_retention_explain(
        tenant_id=tenant_id, record_id=record_id, now=_now(now), promise=settings.LAG_PROMISE
    )


def registration(data_class: str) -> RowClass | None:
    """How ``register_model`` governs a class of model rows; None for tracked objects."""
    return registry.row_class(data_class)


def row_holds(data_class: str) -> RowHolds:
    """What the holds in force protect of a class of model rows: ``covers(pk, tenant_id)``.

    ``LookupError`` when ``data_class`` is not a registered model.
    """
    row = registry.row_class_required(data_class)
    return held_rows(data_class, label=row.label, tenant_field=row.tenant_field)


def run_row_cutoff(run: Run, data_class: str) -> datetime | None:
    """The cutoff a run fixed for a class of model rows when it started.

    Rows at or before it were due in that run. None when the run did not
    cover the class, or the class is not model rows cut by age.
    """
    rules = run_rules(run).get(data_class)
    return rules.row_cutoff if rules is not None else None
