"""An erasure request carried out the way the engine does it, for its certificate's tests.

A subject (ann@x.test) with photos (tracked, deleted; one under a legal
hold), an account (rows, deleted, per-row evidence), a newsletter
subscription (rows, redacted), an invoice (tracked, kept under a legal
basis) and request logs no request for a subject can reach. The request is
received and approved through ``retention.api``; an ``erase`` run appends
its events with ``events_append`` (an enforcing run's event lands between
them in the chain), and the request's outcome is settled as the engine
settles it.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.contrib.auth.models import Permission
from django.core.files.base import ContentFile
from django.core.files.storage import storages

from retention import api, redaction
from retention.chain.events import NewEvent, events_append
from retention.digest import key_digest
from retention.models import (
    DeletionEvent,
    ErasureRequest,
    ErasureState,
    LegalHold,
    PolicyVersion,
    RetentionRecord,
    Run,
    RunMode,
    RunStatus,
    RunTrigger,
)
from retention.receipts import evidence
from tests.factories import UserFactory
from tests.rowhost.models import Account, RequestLog, Subscriber

SUBJECT = "ann@x.test"
BASIS = "Invoices: kept 10 years under tax law."
HOLD_REASON = "Litigation #4471: keep Ann's photos"


@dataclass
class Settled:
    request: ErasureRequest
    run: Run
    hold: LegalHold
    photos: list[RetentionRecord]
    account: Account
    events: list[DeletionEvent] = field(default_factory=list)
    other: DeletionEvent | None = None


def user_with(username: str, *codenames: str) -> Any:
    user = UserFactory(username=username)
    user.user_permissions.add(
        *Permission.objects.filter(content_type__app_label="retention", codename__in=codenames)
    )
    return type(user).objects.get(pk=user.pk)


def governed_host(make_policy: Any) -> None:
    """Call with the ``row_registry`` fixture in use: it forgets these registrations."""
    make_policy("idv.photo")
    make_policy("billing.invoice", timedelta(days=3650), on_erasure="keep", erasure_basis=BASIS)
    api.register_model(
        Account,
        data_class="accounts.closed",
        age_field="closed_at",
        tenant_field="tenant_id",
        subject_field="email",
    )
    make_policy("accounts.closed", timedelta(days=90))
    api.register_model(
        Subscriber,
        data_class="newsletter.subscriber",
        age_field="created_at",
        subject_field="contact",
        redact={"contact": redaction.Digest()},
    )
    make_policy("newsletter.subscriber", timedelta(days=365), disposition="redact")
    api.register_model(
        RequestLog, data_class="logs.request", age_field="created_at", tenant_field="tenant_id"
    )
    make_policy("logs.request", timedelta(days=7))


def _track(key: str, data_class: str = "idv.photo", subject: str = SUBJECT) -> RetentionRecord:
    storages["default"].save(key, ContentFile(b"x"))
    return api.track(tenant_id="acme", data_class=data_class, object_key=key, subject_id=subject)


def received(subject: str, now: datetime) -> ErasureRequest:
    """A request for ``subject``, received and approved through the API."""
    requester = user_with("dpo", "add_erasurerequest")
    approver = user_with("approver2", "approve_erasurerequest")
    request = api.request_erasure(
        requested_by=requester, reason="Art. 17 request #881", subject_id=subject, now=now
    )
    return api.approve_erasure(request, approver=approver, now=now + timedelta(hours=1))


def erase_run(request: ErasureRequest, now: datetime) -> Run:
    return Run.objects.create(
        trigger=RunTrigger.COMMAND,
        mode=RunMode.ERASE,
        erasure=request,
        status=RunStatus.FINISHED,
        data_classes=[c["data_class"] for c in request.scope["classes"] if c["count"]],
        started_at=now,
        cutoff=now,
        finished_at=now,
    )


def _event(run: Run, version: PolicyVersion, now: datetime, **fields: Any) -> NewEvent:
    base: dict[str, Any] = {
        "idempotency_key": f"erase:{run.pk}:{uuid.uuid4()}",
        "record_id": None,
        "run_id": run.pk,
        "tenant_id": "acme",
        "data_class": version.policy.data_class,
        "policy_version_id": version.pk,
        "policy_key": version.policy.data_class,
        "policy_version_number": version.number,
        "disposition": version.disposition,
        "outcome": "deleted",
        "attempt": 1,
        "reason": "erasure request",
        "key_digest": "",
        "expires_at": now,
        "occurred_at": now,
    }
    return NewEvent(**{**base, **fields})


def _record_event(run: Run, record: RetentionRecord, now: datetime, **fields: Any) -> NewEvent:
    return _event(
        run,
        record.policy_version,
        now,
        record_id=record.pk,
        key_digest=record.key_digest,
        expires_at=record.expires_at,
        **fields,
    )


def _rows_event(
    run: Run, data_class: str, pks: list[Any], now: datetime, **fields: Any
) -> NewEvent:
    """A per-row page event, as the engine writes one: its rows' subjects and their root."""
    version = api.policy_version_in_force(data_class)
    due = evidence.stamp(now)
    digests = [key_digest(f"{data_class}:{pk}") for pk in pks]
    leaves = [evidence.subject_leaf(digest, due) for digest in digests]
    event = _event(
        run,
        version,
        now,
        kind="row",
        row_count=len(pks),
        key_digest=evidence.merkle_root(leaves).hex(),
        **fields,
    )
    event.evidence = evidence.PER_ROW
    event.row_subjects = b"".join(bytes.fromhex(d) + due.encode() for d in digests)
    return event


def settle(request: ErasureRequest, *, classes: dict[str, Any], state: str, now: datetime) -> None:
    request.outcome = {"classes": classes, "settled_at": evidence.stamp(now)}
    request.state = state
    request.completed_at = request.verified_at = now
    request.save(update_fields=["outcome", "state", "completed_at", "verified_at"])


def settled_request(make_policy: Any, now: datetime) -> Settled:
    """The subject's request, partially completed: one photo kept under a hold.

    Call with the ``row_registry`` fixture in use."""
    governed_host(make_policy)
    photos = [_track(f"acme/ann-{i}.jpg") for i in range(3)]
    _track("acme/bob.jpg", subject="bob@x.test")
    _track("acme/invoice-1.pdf", "billing.invoice")
    account = Account.objects.create(tenant_id="acme", name="Ann", email=SUBJECT)
    Account.objects.create(tenant_id="acme", name="Bob", email="bob@x.test")
    subscriber = Subscriber.objects.create(contact=SUBJECT, created_at=now)
    RequestLog.objects.create(tenant_id="acme", path="/", created_at=now)
    hold = api.place_hold(
        reason=HOLD_REASON, placed_by=user_with("counsel"), record=photos[2], now=now
    )

    request = received(SUBJECT, now)
    later = now + timedelta(days=2)
    run = erase_run(request, later)
    first = events_append(
        [
            _record_event(run, photos[0], later),
            _record_event(run, photos[1], later),
            _record_event(run, photos[2], later, outcome="skipped_held", reason=HOLD_REASON),
        ],
        run_id=run.pk,
        now=later,
    )
    # Another run's event between the request's: not the request's, not in its certificate.
    enforcing = Run.objects.create(
        trigger=RunTrigger.SCHEDULE, mode=RunMode.ENFORCE, started_at=later, cutoff=later
    )
    (other,) = events_append(
        [_rows_event(enforcing, "logs.request", [1], later)],
        run_id=enforcing.pk,
        now=later,
    )
    second = events_append(
        [
            _rows_event(run, "accounts.closed", [account.pk], later),
            _rows_event(
                run,
                "newsletter.subscriber",
                [subscriber.pk],
                later,
                outcome="redacted",
                disposition="redact",
                tenant_id="",
            ),
        ],
        run_id=run.pk,
        now=later,
    )
    settle(
        request,
        classes={
            "idv.photo": {
                "on_erasure": "delete",
                "erased": 2,
                "redacted": 0,
                "kept": [{"hold": hold.pk, "reason": HOLD_REASON, "count": 1}],
                "basis": "",
                "left": 0,
                "verified": True,
            },
            "accounts.closed": _done("delete", erased=1),
            "newsletter.subscriber": _done("redact", redacted=1),
            "billing.invoice": _done("keep", basis=BASIS),
        },
        state=ErasureState.PARTIALLY_COMPLETED,
        now=later,
    )
    keys = [e.idempotency_key for e in [*first, *second]]
    events = list(
        DeletionEvent.objects.filter(idempotency_key__in=keys).order_by("batch__seq", "leaf_index")
    )
    recorded = DeletionEvent.objects.get(idempotency_key=other.idempotency_key)
    return Settled(request, run, hold, photos, account, events, recorded)


def _done(action: str, *, erased: int = 0, redacted: int = 0, basis: str = "") -> dict[str, Any]:
    return {
        "on_erasure": action,
        "erased": erased,
        "redacted": redacted,
        "kept": [],
        "basis": basis,
        "left": 0,
        "verified": True,
    }
