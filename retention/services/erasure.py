"""Erasure requests: received with a frozen scope, approved by a second person, or ended.

received → approved (four eyes: never the requester; the approve
permission) → executing → completed | partially_completed; rejected (by an
approver) or cancelled (by the requester or an approver) before it
executes. Bad input changes nothing and says why; so does a second open
request for the same subject (within a tenant) or tenant, naming the open one.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import datetime
from functools import partial
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction

from retention.broker import publish_task
from retention.conf import settings
from retention.digest import subject_digest, subject_id_text
from retention.exceptions import (
    FourEyesViolation,
    InvalidErasureRequest,
    InvalidTransition,
    NotAllowed,
    RetentionError,
)
from retention.models import ErasureRequest, ErasureState
from retention.models.erasure import OPEN_STATES
from retention.selectors.erasure import Subject, erasure_scope, unknown_classes
from retention.selectors.erasure_execution import erasure_plan
from retention.services.erasure_settle import erasure_settle

APPROVE_ERASURE_PERMISSION = "retention.approve_erasurerequest"
# A task path published to the broker: a contract with tasks already in it.
EXECUTE_TASK = "retention.tasks.erasure_execute"
logger = logging.getLogger("retention.erasure")
# Before it executes: what a rejection or a cancellation may end.
NOT_STARTED = (ErasureState.RECEIVED, ErasureState.APPROVED)


def _subject(subject_id: Any, tenant_id: Any) -> Subject:
    if subject_id is None and tenant_id is None:
        raise InvalidErasureRequest(
            "An erasure request needs a subject_id, a tenant_id, or both (a subject within a "
            "tenant)."
        )
    if tenant_id is not None and (
        not isinstance(tenant_id, str) or not tenant_id.strip() or len(tenant_id) > 100
    ):
        raise InvalidErasureRequest(
            f"tenant_id is a non-empty string of at most 100 characters, not {tenant_id!r}."
        )
    text = ""
    digest = ""
    if subject_id is not None:
        try:
            text = subject_id_text(subject_id)
        except RetentionError as exc:
            raise InvalidErasureRequest(str(exc)) from None
        digest = subject_digest(text)
    return Subject(subject_id=text, subject_digest=digest, tenant_id=tenant_id or "")


def _classes(data_classes: Iterable[str] | None) -> list[str]:
    if data_classes is None:
        return []
    if isinstance(data_classes, str):
        raise InvalidErasureRequest(
            f"data_classes is a list of data classes, not the string {data_classes!r}."
        )
    names = sorted(set(data_classes))
    if not names:
        raise InvalidErasureRequest("data_classes is empty: leave it out to cover every class.")
    unknown = unknown_classes(names)
    if unknown:
        raise InvalidErasureRequest(f"Unknown data class(es): {', '.join(unknown)}.")
    return names


def erasure_request(
    *,
    requested_by: AbstractBaseUser | None,
    reason: str,
    now: datetime,
    subject_id: Any = None,
    tenant_id: str | None = None,
    data_classes: Iterable[str] | None = None,
    not_before: datetime | None = None,
    requested_by_tenant: str = "",
) -> ErasureRequest:
    """Receive a request: state ``received``, due ``RETENTION_ERASURE_DUE`` after ``now``,
    its scope frozen as it is now (``retention.selectors.erasure``).

    ``requested_by``: the person; or None and ``requested_by_tenant``, a
    tenant asking through its API key, which erases its own data subjects
    only, never itself (its offboarding is the provider's act).
    """
    if requested_by is None and not requested_by_tenant:
        raise InvalidErasureRequest("An erasure request needs who requested it.")
    if requested_by_tenant and (subject_id is None or tenant_id != requested_by_tenant):
        raise InvalidErasureRequest(
            "A tenant requests the erasure of one of its own data subjects (a subject_id "
            "within its tenant); its own offboarding is the provider's to request."
        )
    if not isinstance(reason, str) or not reason.strip():
        raise InvalidErasureRequest("An erasure request needs a reason.")
    who = _subject(subject_id, tenant_id)
    classes = _classes(data_classes)
    if not_before is not None and (
        not isinstance(not_before, datetime) or not_before.tzinfo is None
    ):
        raise InvalidErasureRequest("not_before is an aware datetime (UTC), or None.")
    with transaction.atomic():
        _refuse_second_open(who)
        scope = erasure_scope(who, classes or None)
        try:
            with transaction.atomic():
                # The host's AUTH_USER_MODEL, which the stubs see as User.
                return ErasureRequest.objects.create(  # type: ignore[misc]
                    subject_id=who.subject_id,
                    subject_digest=who.subject_digest,
                    tenant_id=who.tenant_id,
                    data_classes=classes,
                    reason=reason.strip(),
                    requested_by=requested_by,
                    requested_by_tenant=requested_by_tenant,
                    received_at=now,
                    due_at=now + settings.ERASURE_DUE,
                    not_before=not_before,
                    scope=scope,
                )
        except IntegrityError:
            # Received by another process since the check above.
            _refuse_second_open(who)
            raise


def _refuse_second_open(who: Subject) -> None:
    open_one = (
        ErasureRequest.objects.filter(
            state__in=OPEN_STATES, subject_digest=who.subject_digest, tenant_id=who.tenant_id
        )
        .only("pk", "state")
        .first()
    )
    if open_one is not None:
        whom = "this subject" if who.subject_digest else f"tenant {who.tenant_id!r}"
        raise InvalidErasureRequest(
            f"An erasure request for {whom} is open already: {open_one.pk} ({open_one.state})."
        )


def _locked(request: ErasureRequest) -> ErasureRequest:
    return ErasureRequest.objects.select_for_update().get(pk=request.pk)


def _may_approve(user: AbstractBaseUser) -> bool:
    return bool(user.has_perm(APPROVE_ERASURE_PERMISSION))  # type: ignore[attr-defined]


def erasure_approve(
    *, request: ErasureRequest, approver: AbstractBaseUser, now: datetime
) -> ErasureRequest:
    """Approve the frozen scope: a second person with the approve permission."""
    if not _may_approve(approver):
        raise NotAllowed(f"{approver} may not approve erasure requests.")
    with transaction.atomic():
        request = _locked(request)
        if request.state != ErasureState.RECEIVED:
            raise InvalidTransition(
                f"{request} cannot be approved: only a received request can (it is "
                f"{request.state})."
            )
        if request.requested_by_id is not None and request.requested_by_id == approver.pk:
            raise FourEyesViolation(
                f"{approver} requested {request} and may not approve it: a second person must."
            )
        request.state = ErasureState.APPROVED
        request.approved_by = approver  # type: ignore[assignment]
        request.approved_at = now
        request.save(update_fields=["state", "approved_by", "approved_at"])
        if not erasure_plan(request) and (request.not_before is None or request.not_before <= now):
            # Nothing to dispose of (an unknown subject, classes that keep): it
            # completes at once, with a certificate that says so.
            request.state = ErasureState.EXECUTING
            request.save(update_fields=["state"])
            return erasure_settle(request=request, now=now)
        transaction.on_commit(partial(_publish_execution, request))
    return request


def _publish_execution(request: ErasureRequest) -> None:
    """Hand the approved request to the workers; should the queue be away, the next
    ``run_retention`` or the watchdog executes it all the same."""
    try:
        publish_task(
            EXECUTE_TASK, {"erasure_id": str(request.pk)}, f"retention-erasure-{request.pk}"
        )
    except Exception as exc:
        logger.warning(
            "erasure request %s approved; its execution could not be queued (%s): the next "
            "run_retention or the watchdog executes it",
            request.pk,
            type(exc).__name__,
            extra={"erasure_id": str(request.pk)},
        )


def _end(
    request: ErasureRequest,
    *,
    by: AbstractBaseUser,
    reason: str,
    now: datetime,
    state: ErasureState,
    allowed: tuple[ErasureState, ...],
) -> ErasureRequest:
    if not isinstance(reason, str) or not reason.strip():
        raise InvalidErasureRequest(f"A request is {state} with a reason.")
    with transaction.atomic():
        request = _locked(request)
        if request.state not in allowed:
            raise InvalidTransition(
                f"{request} cannot be {state}: it is {request.state} "
                f"(only {' or '.join(allowed)} requests can)."
            )
        request.state = state
        request.ended_by = by  # type: ignore[assignment]
        request.ended_at = now
        request.end_reason = reason.strip()
        # Ended without erasing: nothing is left to find by the subject's id.
        request.subject_id = ""
        request.save(update_fields=["state", "ended_by", "ended_at", "end_reason", "subject_id"])
    return request


def erasure_reject(
    *, request: ErasureRequest, by: AbstractBaseUser, reason: str, now: datetime
) -> ErasureRequest:
    """Refuse a received request (an approver's decision, with its reason)."""
    if not _may_approve(by):
        raise NotAllowed(f"{by} may not reject erasure requests.")
    return _end(
        request,
        by=by,
        reason=reason,
        now=now,
        state=ErasureState.REJECTED,
        allowed=(ErasureState.RECEIVED,),
    )


def erasure_cancel(
    *, request: ErasureRequest, by: AbstractBaseUser, reason: str, now: datetime
) -> ErasureRequest:
    """Withdraw a request before it executes: its requester or an approver."""
    if (request.requested_by_id is None or request.requested_by_id != by.pk) and not _may_approve(
        by
    ):
        raise NotAllowed(f"Only the requester of {request} or an approver may cancel it.")
    return _end(
        request, by=by, reason=reason, now=now, state=ErasureState.CANCELLED, allowed=NOT_STARTED
    )
