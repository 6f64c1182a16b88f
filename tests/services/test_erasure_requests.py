"""Erasure requests received, approved, rejected and cancelled (issue 29, point 2).

A request freezes its scope when it is received: per class what it reaches,
how many items existed then (and the bound that keeps later ones out), what
the class does on erasure, and the holds that cover some of them. Four eyes
approve it; bad input changes nothing and says why.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.core.files.base import ContentFile
from django.core.files.storage import storages
from django.db import IntegrityError, transaction

from retention import api
from retention.digest import subject_digest
from retention.exceptions import (
    FourEyesViolation,
    InvalidErasureRequest,
    InvalidTransition,
    NotAllowed,
)
from retention.models import ErasureRequest, ErasureState, RecordState, RetentionRecord
from tests.factories import UserFactory, approver_user
from tests.helpers import retention_check, retention_check_json
from tests.rowhost.models import Account, RequestLog

pytestmark = pytest.mark.django_db

BASIS = "Invoices: kept 10 years under tax law."


@pytest.fixture
def requester(db: Any) -> Any:
    return _with_perms("dpo", "add_erasurerequest")


@pytest.fixture
def erasure_approver(db: Any) -> Any:
    return _with_perms("approver2", "approve_erasurerequest")


def _with_perms(username: str, *codenames: str) -> Any:
    user = UserFactory(username=username)
    user.user_permissions.add(
        *Permission.objects.filter(content_type__app_label="retention", codename__in=codenames)
    )
    return type(user).objects.get(pk=user.pk)


def _track(key: str, subject: str | None, tenant: str = "acme", **kwargs: Any) -> Any:
    storages["default"].save(key, ContentFile(b"x"))
    return api.track(
        tenant_id=tenant, data_class="idv.photo", object_key=key, subject_id=subject, **kwargs
    )


@pytest.fixture
def host(make_policy, register_accounts, register_logs, now) -> dict[str, Any]:
    """Photos (tracked, with subjects), accounts (rows, subject by email), request logs
    (rows without a subject link), invoices' class kept under a legal basis."""
    make_policy("idv.photo")
    register_accounts(subject_field="email")
    make_policy("accounts.redact", timedelta(days=90), disposition="redact")
    register_logs()
    make_policy("logs.request", timedelta(days=7))
    make_policy("billing.invoice", timedelta(days=3650), on_erasure="keep", erasure_basis=BASIS)
    photos = [_track(f"acme/{i}.jpg", "ann@x.test") for i in range(3)]
    photos.append(_track("acme/bob.jpg", "bob@x.test"))
    photos.append(_track("globex/ann.jpg", "ann@x.test", tenant="globex"))
    gone = _track("acme/gone.jpg", "ann@x.test")
    RetentionRecord.objects.filter(pk=gone.pk).update(
        state=RecordState.DELETED, deleted_at=now, retryable=False
    )
    accounts = [
        Account.objects.create(tenant_id="acme", name="Ann", email="ann@x.test"),
        Account.objects.create(tenant_id="acme", name="Bob", email="bob@x.test"),
    ]
    RequestLog.objects.create(tenant_id="acme", path="/", created_at=now)
    return {"photos": photos, "accounts": accounts}


def _by_class(request: ErasureRequest) -> dict[str, dict[str, Any]]:
    return {entry["data_class"]: entry for entry in request.scope["classes"]}


def test_request__a_subject_is_received_with_its_scope_frozen(host, requester, now):
    request = api.request_erasure(
        requested_by=requester, reason="Art. 17 request #881", subject_id="ann@x.test", now=now
    )

    request.refresh_from_db()
    assert request.state == ErasureState.RECEIVED
    assert (request.received_at, request.due_at) == (now, now + timedelta(days=30))
    assert request.subject_digest == subject_digest("ann@x.test")
    scope = _by_class(request)
    governed = {"accounts.redact", "billing.invoice", "idv.photo", "logs.request"}
    assert governed <= set(scope)
    # The example host's own row classes have no approved version here: listed, not reached.
    for name in set(scope) - governed:
        assert not scope[name]["reachable"]
        assert scope[name]["not_reachable_because"].startswith("no approved policy version")
    # Her photos in both tenants, not the one deleted already, not Bob's.
    photos = scope["idv.photo"]
    assert (photos["kind"], photos["count"], photos["on_erasure"]) == ("tracked", 4, "delete")
    assert photos["bound"] == {
        "max_record_id": max(RetentionRecord.objects.values_list("pk", flat=True))
    }
    accounts = scope["accounts.redact"]
    assert (accounts["kind"], accounts["count"], accounts["on_erasure"]) == ("rows", 1, "redact")
    assert accounts["bound"] == {"max_pk": host["accounts"][-1].pk}
    logs = scope["logs.request"]
    assert (logs["reachable"], logs["count"]) == (False, 0)
    assert logs["not_reachable_because"].startswith("no subject link")
    invoices = scope["billing.invoice"]
    assert (invoices["on_erasure"], invoices["erasure_basis"]) == ("keep", BASIS)
    assert request.scope["total"] == 5


def test_request__a_subject_within_a_tenant_reaches_only_that_tenant(host, requester, now):
    request = api.request_erasure(
        requested_by=requester,
        reason="Art. 17",
        subject_id="ann@x.test",
        tenant_id="globex",
        data_classes=["idv.photo", "accounts.redact"],
        now=now,
    )

    scope = _by_class(request)
    assert sorted(scope) == ["accounts.redact", "idv.photo"]
    assert (scope["idv.photo"]["count"], scope["accounts.redact"]["count"]) == (1, 0)


def test_request__a_tenants_offboarding_waits_for_its_grace_period(host, requester, now):
    grace = now + timedelta(days=14)

    request = api.request_erasure(
        requested_by=requester, reason="Contract ended", tenant_id="acme", not_before=grace, now=now
    )

    scope = _by_class(request)
    assert request.not_before == grace and request.subject_digest == ""
    assert scope["idv.photo"]["count"] == 4
    assert scope["accounts.redact"]["count"] == 2
    assert scope["logs.request"]["count"] == 1  # a tenant link is enough for a tenant


def test_request__lists_the_holds_that_cover_some_of_the_scope(host, requester, approver, now):
    photo_hold = api.place_hold(reason="Case 12", placed_by=approver, tenant_id="globex", now=now)
    row_hold = api.place_hold(
        reason="Dispute", placed_by=approver, subject=host["accounts"][0], now=now
    )
    api.place_hold(reason="Other", placed_by=approver, subject=host["accounts"][1], now=now)

    request = api.request_erasure(
        requested_by=requester, reason="Art. 17", subject_id="ann@x.test", now=now
    )

    scope = _by_class(request)
    assert scope["idv.photo"]["holds"] == [{"hold": photo_hold.pk, "count": 1}]
    assert scope["accounts.redact"]["holds"] == [{"hold": row_hold.pk, "count": 1}]


def test_request__an_unknown_subject_has_an_empty_scope(host, requester, now):
    request = api.request_erasure(
        requested_by=requester, reason="Art. 17", subject_id="nobody", now=now
    )

    assert request.scope["total"] == 0


def test_request__an_id_a_subject_field_cannot_hold_names_no_row(
    requester, make_policy, register_accounts, now
):
    # The subject is the account's referrer, an integer key: an email names none.
    register_accounts(subject_field="referrer")
    make_policy("accounts.redact", timedelta(days=90), disposition="redact")
    Account.objects.create(tenant_id="acme", name="Ann", email="ann@x.test")

    request = api.request_erasure(
        requested_by=requester, reason="Art. 17", subject_id="ann@x.test", now=now
    )

    accounts = _by_class(request)["accounts.redact"]
    assert (accounts["reachable"], accounts["count"], accounts["holds"]) == (True, 0, [])


def test_request__the_subject_id_is_kept_while_open_without_surrounding_spaces(
    host, requester, now
):
    request = api.request_erasure(
        requested_by=requester, reason="Art. 17", subject_id=" ann@x.test ", now=now
    )

    request.refresh_from_db()
    assert request.subject_id == "ann@x.test"
    assert request.subject_digest == subject_digest("ann@x.test")
    assert _by_class(request)["idv.photo"]["count"] == 4


def test_request__items_written_after_its_receipt_are_outside_its_scope(host, requester, now):
    request = api.request_erasure(
        requested_by=requester, reason="Art. 17", subject_id="ann@x.test", now=now
    )
    later = _track("acme/later.jpg", "ann@x.test")
    Account.objects.create(tenant_id="acme", name="Ann 2", email="ann2@x.test")

    bound = _by_class(request)["idv.photo"]["bound"]["max_record_id"]
    assert later.pk > bound
    assert (
        _by_class(request)["accounts.redact"]["bound"]["max_pk"] < Account.objects.latest("pk").pk
    )


def test_request__due_after_the_setting(host, requester, now, settings):
    settings.RETENTION_ERASURE_DUE = timedelta(days=10)

    request = api.request_erasure(requested_by=requester, reason="Art. 17", subject_id=7, now=now)

    assert request.due_at == now + timedelta(days=10)


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({}, "needs a subject_id, a tenant_id, or both"),
        ({"subject_id": "ann@x.test", "reason": "  "}, "needs a reason"),
        ({"subject_id": ""}, "subject_id is empty"),
        ({"subject_id": 1.5}, "subject_id is a string or an integer"),
        ({"tenant_id": ""}, "tenant_id is a non-empty string"),
        ({"tenant_id": "t" * 101}, "at most 100 characters"),
        ({"subject_id": "a", "data_classes": "idv.photo"}, "not the string 'idv.photo'"),
        ({"subject_id": "a", "data_classes": []}, "data_classes is empty"),
        (
            {"subject_id": "a", "data_classes": ["idv.photo", "x.y"]},
            r"Unknown data class\(es\): x.y",
        ),
    ],
)
def test_request__bad_input_is_refused_and_changes_nothing(host, requester, now, kwargs, says):
    with pytest.raises(InvalidErasureRequest, match=says):
        api.request_erasure(requested_by=requester, **{"reason": "Art. 17", **kwargs}, now=now)

    assert not ErasureRequest.objects.exists()


def test_request__a_naive_not_before_is_refused(host, requester, now):
    with pytest.raises(InvalidErasureRequest, match="aware datetime"):
        api.request_erasure(
            requested_by=requester,
            reason="Contract ended",
            tenant_id="acme",
            not_before=now.replace(tzinfo=None),
            now=now,
        )


def test_request__a_second_open_request_for_the_subject_is_refused_naming_the_open_one(
    host, requester, now
):
    first = api.request_erasure(
        requested_by=requester, reason="Art. 17", subject_id="ann@x.test", now=now
    )

    with pytest.raises(InvalidErasureRequest, match=f"open already: {first.pk} \\(received\\)"):
        api.request_erasure(
            requested_by=requester, reason="again", subject_id="ann@x.test", now=now
        )
    # Another tenant's request for her, or another subject, is another request.
    api.request_erasure(
        requested_by=requester,
        reason="Art. 17",
        subject_id="ann@x.test",
        tenant_id="globex",
        now=now,
    )
    api.request_erasure(requested_by=requester, reason="Art. 17", subject_id="bob@x.test", now=now)
    # Once it is ended, she may ask again.
    api.cancel_erasure(first, by=requester, reason="filed twice", now=now)
    api.request_erasure(requested_by=requester, reason="Art. 17", subject_id="ann@x.test", now=now)

    assert ErasureRequest.objects.count() == 4


def test_database__holds_one_open_request_per_subject_and_four_eyes(host, requester, now):
    request = api.request_erasure(
        requested_by=requester, reason="Art. 17", subject_id="ann@x.test", now=now
    )

    with pytest.raises(IntegrityError), transaction.atomic():
        ErasureRequest.objects.create(
            subject_digest=request.subject_digest,
            reason="copy",
            requested_by=requester,
            received_at=now,
            due_at=now,
        )
    with pytest.raises(IntegrityError), transaction.atomic():
        ErasureRequest.objects.filter(pk=request.pk).update(approved_by=requester)


def test_approve__by_a_second_person_with_the_permission(host, requester, erasure_approver, now):
    request = api.request_erasure(
        requested_by=requester, reason="Art. 17", subject_id="ann@x.test", now=now
    )
    later = now + timedelta(hours=2)

    approved = api.approve_erasure(request, approver=erasure_approver, now=later)

    approved.refresh_from_db()
    assert approved.state == ErasureState.APPROVED
    assert (approved.approved_by, approved.approved_at) == (erasure_approver, later)
    with pytest.raises(InvalidTransition, match="only a received request can"):
        api.approve_erasure(approved, approver=erasure_approver, now=later)


def test_approve__never_by_its_requester_nor_without_the_permission(host, now):
    both = _with_perms("both", "add_erasurerequest", "approve_erasurerequest")
    request = api.request_erasure(requested_by=both, reason="Art. 17", subject_id="a", now=now)
    policy_approver = approver_user("policy-approver")

    with pytest.raises(FourEyesViolation, match="a second person must"):
        api.approve_erasure(request, approver=both, now=now)
    with pytest.raises(NotAllowed, match="may not approve erasure requests"):
        api.approve_erasure(request, approver=policy_approver, now=now)

    request.refresh_from_db()
    assert (request.state, request.approved_by) == (ErasureState.RECEIVED, None)


def test_reject__an_approvers_decision_with_a_reason(host, requester, erasure_approver, now):
    request = api.request_erasure(requested_by=requester, reason="Art. 17", subject_id="a", now=now)

    with pytest.raises(NotAllowed):
        api.reject_erasure(request, by=requester, reason="no", now=now)
    with pytest.raises(InvalidErasureRequest, match="with a reason"):
        api.reject_erasure(request, by=erasure_approver, reason="", now=now)
    rejected = api.reject_erasure(
        request, by=erasure_approver, reason="Identity not verified", now=now
    )

    rejected.refresh_from_db()
    assert rejected.state == ErasureState.REJECTED
    # Ended without erasing: the subject's id is forgotten, its digest stays.
    assert (rejected.subject_id, rejected.subject_digest) == ("", subject_digest("a"))
    assert (rejected.ended_by, rejected.end_reason) == (erasure_approver, "Identity not verified")
    with pytest.raises(InvalidTransition, match="it is rejected"):
        api.cancel_erasure(rejected, by=requester, reason="late", now=now)


def test_cancel__before_it_executes_by_its_requester_or_an_approver(
    host, requester, erasure_approver, now
):
    received = api.request_erasure(
        requested_by=requester, reason="Art. 17", subject_id="a", now=now
    )
    # Bob has a photo: approved, his request waits for its run.
    approved = api.approve_erasure(
        api.request_erasure(
            requested_by=requester, reason="Art. 17", subject_id="bob@x.test", now=now
        ),
        approver=erasure_approver,
        now=now,
    )
    stranger = UserFactory(username="stranger")

    with pytest.raises(NotAllowed, match="requester .* or an approver"):
        api.cancel_erasure(received, by=stranger, reason="no", now=now)
    api.cancel_erasure(received, by=requester, reason="Withdrawn by the person", now=now)
    api.cancel_erasure(approved, by=erasure_approver, reason="Duplicate", now=now)
    # One that has started executing can no longer be cancelled.
    ErasureRequest.objects.filter(pk=received.pk).update(state=ErasureState.EXECUTING)

    assert {r.state for r in ErasureRequest.objects.exclude(pk=received.pk)} == {
        ErasureState.CANCELLED
    }
    assert set(ErasureRequest.objects.values_list("subject_id", flat=True)) == {""}
    with pytest.raises(InvalidTransition, match="it is executing"):
        api.cancel_erasure(received, by=requester, reason="too late", now=now)


def test_retention_check__an_open_request_past_its_due_date_fails_with_erasure_overdue(
    host, requester, erasure_approver, now
):
    # Ann has photos: approved, never run, so still open when it falls due.
    late = api.approve_erasure(
        api.request_erasure(
            requested_by=requester, reason="Art. 17", subject_id="ann@x.test", now=now
        ),
        approver=erasure_approver,
        now=now,
    )
    api.request_erasure(
        requested_by=requester, reason="Art. 17", subject_id="b", now=now + timedelta(days=20)
    )
    ended = api.request_erasure(requested_by=requester, reason="Art. 17", subject_id="c", now=now)
    api.cancel_erasure(ended, by=requester, reason="withdrawn", now=now)

    _, on_time_out, on_time_error = retention_check(at=now + timedelta(days=30))
    code, out, error = retention_check(at=now + timedelta(days=31))
    _, report = retention_check_json(at=now + timedelta(days=31))

    assert "Erasure requests: 1 received, 1 approved, 1 cancelled." in on_time_out
    assert "OVERDUE" not in on_time_out and "erasure_overdue" not in on_time_error
    assert f"  {late.pk} (approved) OVERDUE: due 2026-04-13 12:00 UTC" in out
    assert code == 1
    assert f"erasure_overdue: 1 erasure request(s) past their due date unfinished ({late.pk})" in (
        error
    )
    assert report["ok"] is False
    assert report["erasures"]["overdue"] == [
        {"id": str(late.pk), "state": "approved", "due_at": "2026-04-13T12:00:00Z"}
    ]
    assert report["erasures"]["by_state"]["received"] == 1


def test_metrics__erasure_requests_per_state_and_overdue(host, requester, client, settings, now):
    from django.urls import reverse
    from freezegun import freeze_time
    from prometheus_client.parser import text_string_to_metric_families

    settings.RETENTION_METRICS_ALLOWED_IPS = "127.0.0.1"
    url = reverse("retention-metrics")
    api.request_erasure(requested_by=requester, reason="Art. 17", subject_id="a", now=now)

    def samples(at: Any) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        with freeze_time(at):
            body = client.get(url).content.decode()
        return {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(body)
            for s in family.samples
        }

    early, late = samples(now + timedelta(days=1)), samples(now + timedelta(days=31))

    assert early[("retention_erasure_requests", (("state", "received"),))] == 1
    assert early[("retention_erasure_requests", (("state", "completed"),))] == 0
    assert early[("retention_erasure_overdue", ())] == 0
    assert late[("retention_erasure_overdue", ())] == 1
