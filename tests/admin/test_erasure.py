"""Erasure requests in admin: the list with due dates, overdue ones marked, each
request's frozen scope as its approver sees it; filing a request, approving, rejecting
and cancelling it through the service; its runs, kept items and certificate
(issue 29, point 5)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse

from retention import api
from retention.models import ErasureRequest, ErasureState, Run, RunMode, RunStatus, RunTrigger
from retention.reporting import human
from tests.admin.conftest import messages_of
from tests.rowhost.models import Account

pytestmark = pytest.mark.django_db

BASIS = "Invoices: kept 10 years under tax law."


@pytest.fixture
def requests(make_policy, register_accounts, alice, bob, now):
    make_policy("idv.photo")
    register_accounts(subject_field="email")
    make_policy("accounts.redact", timedelta(days=90), disposition="redact")
    make_policy("billing.invoice", timedelta(days=3650), on_erasure="keep", erasure_basis=BASIS)
    ann = Account.objects.create(tenant_id="acme", name="Ann", email="ann@x.test")
    hold = api.place_hold(reason="Dispute", placed_by=bob, subject=ann, now=now)
    late = api.request_erasure(
        requested_by=alice,
        reason="Art. 17 #1",
        subject_id="ann@x.test",
        data_classes=["accounts.redact", "billing.invoice", "idv.photo"],
        now=now - timedelta(days=31),
    )
    on_time = api.request_erasure(
        requested_by=alice, reason="Contract ended", tenant_id="globex", now=now
    )
    return {"late": late, "on_time": on_time, "hold": hold}


def test_list__due_dates_with_the_overdue_ones_marked(requests, bob_client):
    response = bob_client.get(reverse("admin:retention_erasurerequest_changelist"))

    assert response.status_code == 200
    body = response.content.decode()
    assert body.count("OVERDUE") == 1
    assert human(requests["late"].due_at) + " OVERDUE" in body
    assert f"subject {requests['late'].subject_digest[:12]}…" in body
    assert "tenant globex" in body
    assert "ann@x.test" not in body  # the subject's id is never shown


def test_change_page__the_frozen_scope_as_the_approver_sees_it(requests, bob_client):
    late = requests["late"]

    response = bob_client.get(reverse("admin:retention_erasurerequest_change", args=[late.pk]))

    assert response.status_code == 200
    body = response.content.decode()
    assert "Scope, frozen when the request was received (1 item)" in body
    assert "<td>accounts.redact</td><td>rows</td><td>yes</td><td>1</td><td>redact</td>" in body
    assert f"hold #{requests['hold'].pk} (1)" in body
    assert f"keep: {BASIS}" in body
    # The classes asked for as words, not a JSON list.
    assert "accounts.redact, billing.invoice, idv.photo" in body
    assert '["accounts.redact"' not in body
    assert "ann@x.test" not in body


def test_read_only__nobody_changes_or_deletes_a_request_here(requests, superuser_client):
    late = requests["late"]
    change = superuser_client.post(
        reverse("admin:retention_erasurerequest_change", args=[late.pk]), {"reason": "edited"}
    )
    delete = superuser_client.post(
        reverse("admin:retention_erasurerequest_delete", args=[late.pk]), {"post": "yes"}
    )

    assert change.status_code == 403
    assert delete.status_code == 403
    late.refresh_from_db()
    assert late.reason == "Art. 17 #1"


def test_permissions__authors_and_approvers_see_requests(requests, alice_client, client):
    url = reverse("admin:retention_erasurerequest_changelist")

    assert alice_client.get(url).status_code == 200
    assert client.get(url).status_code == 302  # not signed in: to the login page


@pytest.mark.parametrize(
    "query", ["subject_id=ann@x.test", "subject_id__startswith=a", "scope__total=1"]
)
def test_list__refuses_to_filter_by_the_subjects_id_or_the_scope(requests, bob_client, query):
    url = reverse("admin:retention_erasurerequest_changelist")
    bob_client.raise_request_exception = False

    response = bob_client.get(f"{url}?{query}")

    # A lookup the admin does not allow is a suspicious request: 400, nothing listed.
    assert response.status_code == 400
    assert requests["late"].subject_digest[:12] not in response.content.decode()


# ------------------------------------------------------------------- filing

ADD = "admin:retention_erasurerequest_add"


def test_add__a_governance_owner_files_a_request_through_the_service(requests, alice_client, alice):
    response = alice_client.post(
        reverse(ADD),
        {
            "subject_id": "  bob@x.test ",
            "tenant_id": "acme",
            "data_classes": ["accounts.redact", "idv.photo"],
            "reason": "Art. 17 #2",
            "not_before_0": "",
            "not_before_1": "",
        },
        follow=True,
    )

    filed = ErasureRequest.objects.get(reason="Art. 17 #2")
    assert response.redirect_chain[-1][0] == reverse(
        "admin:retention_erasurerequest_change", args=[filed.pk]
    )
    assert (filed.state, filed.requested_by, filed.tenant_id) == ("received", alice, "acme")
    assert filed.data_classes == ["accounts.redact", "idv.photo"]
    assert filed.subject_id == "bob@x.test"
    assert filed.scope["classes"][0]["data_class"] == "accounts.redact"
    (message,) = messages_of(response)
    assert message.startswith(f"Erasure request {filed.pk} received, due {human(filed.due_at)}")
    assert "bob@x.test" not in response.content.decode()


def test_add__an_offboarding_with_a_grace_period(requests, alice_client):
    alice_client.post(
        reverse(ADD),
        {
            "subject_id": "",
            "tenant_id": "initech",
            "reason": "Contract ended",
            "not_before_0": "2027-01-31",
            "not_before_1": "00:00:00",
        },
    )

    filed = ErasureRequest.objects.get(tenant_id="initech")
    assert (filed.subject_digest, filed.data_classes) == ("", [])
    assert human(filed.not_before) == "2027-01-31 00:00 UTC"


def test_add__neither_subject_nor_tenant_is_a_form_error(requests, alice_client):
    response = alice_client.post(reverse(ADD), {"subject_id": " ", "tenant_id": "", "reason": "x"})

    assert response.status_code == 200
    assert "Give a subject id, a tenant (an offboarding), or both" in response.content.decode()
    assert ErasureRequest.objects.count() == 2


def test_add__the_services_refusal_is_an_error_message(requests, alice_client):
    response = alice_client.post(
        reverse(ADD), {"subject_id": "ann@x.test", "reason": "Again"}, follow=True
    )

    (message,) = messages_of(response)
    assert message == (
        f"An erasure request for this subject is open already: {requests['late'].pk} (received)."
    )
    assert ErasureRequest.objects.count() == 2


def test_add__only_those_who_may_file(requests, bob_client, alice_client):
    assert bob_client.get(reverse(ADD)).status_code == 403  # approvers decide, they do not file
    page = alice_client.get(reverse(ADD))
    assert page.status_code == 200
    assert 'value="billing.invoice"' in page.content.decode()


# ----------------------------------------------------------------- deciding


def _page(name, request):
    return reverse(f"admin:retention_erasurerequest_{name}", args=[request.pk])


def test_approve__the_page_shows_the_frozen_scope_then_approves(requests, bob_client, bob):
    late = requests["late"]

    page = bob_client.get(_page("approve", late))
    body = page.content.decode()
    assert "Scope, frozen when the request was received (1 item)" in body
    assert f"Erases <strong>subject {late.subject_digest[:12]}…</strong>" in body
    assert 'id="retention-erasure-decide"' in body
    assert "ann@x.test" not in body

    response = bob_client.post(_page("approve", late), follow=True)

    late.refresh_from_db()
    assert (late.state, late.approved_by) == (ErasureState.APPROVED, bob)
    assert messages_of(response) == [
        f"Erasure request {late.pk} approved: the engine erases what its scope reaches."
    ]


def test_approve__never_by_its_requester(requests, carol_client, carol, now):
    own = api.request_erasure(requested_by=carol, reason="Art. 17 #3", subject_id="c", now=now)

    page = carol_client.get(_page("approve", own))
    refused = carol_client.post(_page("approve", own), follow=True)

    assert "You filed this request: a second person must approve it." in page.content.decode()
    assert 'id="retention-erasure-decide"' not in page.content.decode()
    assert messages_of(refused) == [
        f"carol requested {own} and may not approve it: a second person must."
    ]
    own.refresh_from_db()
    assert own.state == ErasureState.RECEIVED


def test_approve__reject__only_approvers(requests, alice_client):
    late = requests["late"]

    assert alice_client.get(_page("approve", late)).status_code == 403
    assert alice_client.post(_page("reject", late), {"reason": "no"}).status_code == 403
    late.refresh_from_db()
    assert late.state == ErasureState.RECEIVED


def test_reject__with_a_reason(requests, bob_client, bob):
    late = requests["late"]

    without = bob_client.post(_page("reject", late), {"reason": ""})
    assert without.status_code == 200
    assert "This field is required." in without.content.decode()

    bob_client.post(_page("reject", late), {"reason": "Identity not verified"})

    late.refresh_from_db()
    assert (late.state, late.ended_by, late.end_reason) == (
        ErasureState.REJECTED,
        bob,
        "Identity not verified",
    )
    assert late.subject_id == ""


def test_cancel__by_its_requester_before_it_executes(requests, alice_client, alice):
    late = requests["late"]

    alice_client.post(_page("cancel", late), {"reason": "The person withdrew it"})

    late.refresh_from_db()
    assert (late.state, late.ended_by) == (ErasureState.CANCELLED, alice)


def test_cancel__an_executing_request_cannot_be(requests, bob_client):
    late = requests["late"]
    ErasureRequest.objects.filter(pk=late.pk).update(state=ErasureState.EXECUTING)

    response = bob_client.post(_page("cancel", late), {"reason": "too late"}, follow=True)

    assert messages_of(response) == [
        f"Erasure request {late.pk} cannot be cancelled: it is executing."
    ]
    late.refresh_from_db()
    assert late.state == ErasureState.EXECUTING


def test_actions__take_one_request_to_its_page(requests, bob_client):
    url = reverse("admin:retention_erasurerequest_changelist")
    late, on_time = requests["late"], requests["on_time"]

    one = bob_client.post(url, {"action": "approve_request", "_selected_action": [late.pk]})
    two = bob_client.post(
        url,
        {"action": "reject_request", "_selected_action": [late.pk, on_time.pk]},
        follow=True,
    )

    assert one.status_code == 302
    assert one["Location"] == _page("approve", late)
    assert messages_of(two) == ["Reject one request at a time: each is decided on its own page."]


# ---------------------------------------------------------------- following


def test_change_page__runs_kept_items_and_the_certificate(requests, bob_client, now):
    late, hold = requests["late"], requests["hold"]
    erase = Run.objects.create(
        trigger=RunTrigger.COMMAND,
        mode=RunMode.ERASE,
        status=RunStatus.FINISHED,
        erasure=late,
        started_at=now,
        cutoff=now,
        finished_at=now,
        redacted=0,
        skipped_held=1,
    )
    certificate = {"request_id": str(late.pk), "classes": {"accounts.redact": {"kept": 1}}}
    ErasureRequest.objects.filter(pk=late.pk).update(
        state=ErasureState.PARTIALLY_COMPLETED,
        completed_at=now,
        outcome={
            "classes": {
                "accounts.redact": {
                    "on_erasure": "redact",
                    "erased": 0,
                    "redacted": 0,
                    "kept": [{"hold": hold.pk, "reason": "Dispute", "count": 1}],
                    "basis": "",
                    "left": 1,
                    "verified": False,
                }
            },
            "settled_at": "2026-03-14T12:00:00Z",
        },
        certificate=certificate,
    )

    body = bob_client.get(
        reverse("admin:retention_erasurerequest_change", args=[late.pk])
    ).content.decode()

    run_url = reverse("admin:retention_run_change", args=[erase.pk])
    assert f'<a href="{run_url}">{str(erase.pk)[:8]}</a></td><td>finished</td>' in body
    hold_url = reverse("admin:retention_legalhold_change", args=[hold.pk])
    assert f'<a href="{hold_url}">hold #{hold.pk}</a></td><td>Dispute</td><td>1</td>' in body
    assert "<td>accounts.redact</td><td>redact</td><td>0</td><td>0</td><td>1</td><td>1</td>" in body
    assert f'<div class="readonly">{human(now)}</div>' in body  # completed
    assert "&quot;request_id&quot;: &quot;" + str(late.pk) in body
    download = reverse("admin:retention_erasurerequest_certificate", args=[late.pk])
    assert f'href="{download}"' in body
    # Partially completed: nothing left to decide.
    assert 'id="retention-erasure-approve"' not in body
    assert "ann@x.test" not in body


def test_certificate__downloads_as_json_once_issued(requests, bob_client):
    late = requests["late"]
    url = reverse("admin:retention_erasurerequest_certificate", args=[late.pk])

    before = bob_client.get(url, follow=True)
    ErasureRequest.objects.filter(pk=late.pk).update(certificate={"request_id": str(late.pk)})
    after = bob_client.get(url)

    assert messages_of(before) == [f"{late} has no certificate yet."]
    assert after.status_code == 200
    assert after["Content-Disposition"] == (
        f'attachment; filename="erasure-certificate-{late.pk}.json"'
    )
    assert after.json() == {"request_id": str(late.pk)}


def test_change_page__offers_the_decisions_the_user_may_take(requests, bob_client, alice_client):
    url = reverse("admin:retention_erasurerequest_change", args=[requests["late"].pk])

    as_approver = bob_client.get(url).content.decode()
    as_requester = alice_client.get(url).content.decode()

    for name in ("approve", "reject", "cancel"):
        assert f'id="retention-erasure-{name}"' in as_approver
    assert 'id="retention-erasure-cancel"' in as_requester
    assert 'id="retention-erasure-approve"' not in as_requester
