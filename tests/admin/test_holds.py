"""Legal holds in admin: place with a scope and reason, release with confirmation."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse

from retention import engine, services
from retention.models import LegalHold, RunMode
from tests.admin.conftest import messages_of
from tests.helpers import put_tracked

pytestmark = pytest.mark.django_db

ADD = "admin:retention_legalhold_add"


@pytest.fixture
def records(make_policy, now):
    make_policy()
    return {
        "old": put_tracked(tenant_id="acme", now=now - timedelta(days=40)),
        "new": put_tracked(tenant_id="acme", now=now - timedelta(days=1)),
        "other": put_tracked(tenant_id="globex", now=now - timedelta(days=40)),
    }


def _place(client, **data):
    form = {"tenant_id": "", "data_class": "", "record_id": "", "reason": ""}
    form.update(data)
    return client.post(reverse(ADD), form, follow=True)


def test_place__from_the_scope_form_says_how_many_records_it_protects(records, bob, bob_client):
    response = _place(bob_client, tenant_id="acme", reason="Case 2026-114")

    hold = LegalHold.objects.get()
    assert (hold.tenant_id, hold.data_class, hold.record_id) == ("acme", None, None)
    assert hold.placed_by == bob
    assert hold.reason == "Case 2026-114"
    assert f"Hold #{hold.pk} (tenant=acme) placed. It protects 2 records now (1 past their " in (
        " ".join(messages_of(response))
    )
    assert "2 records now (1 past their deadline)" in response.content.decode()


def test_place__a_record_scope_narrowed_to_its_class(records, bob_client):
    record = records["other"]

    _place(bob_client, data_class="idv.photo", record_id=str(record.pk), reason="DSAR 7")

    hold = LegalHold.objects.get()
    assert (hold.data_class, hold.record_id) == ("idv.photo", record.pk)


def test_place__without_a_scope_or_reason_is_refused_in_the_form(records, bob_client):
    no_scope = _place(bob_client, reason="why")
    no_reason = _place(bob_client, tenant_id="acme")

    assert "Choose a scope" in no_scope.content.decode()
    assert "reason" in no_reason.context["adminform"].form.errors
    assert not LegalHold.objects.exists()


def test_place__a_record_of_another_tenant_is_refused(records, bob_client):
    response = _place(bob_client, tenant_id="acme", record_id=str(records["other"].pk), reason="x")

    assert "belongs to another tenant" in response.content.decode()
    assert not LegalHold.objects.exists()


def test_place__authors_may_not(records, alice_client):
    assert alice_client.get(reverse(ADD)).status_code == 403


def test_release__confirmation_shows_what_it_protects_and_needs_a_reason(
    records, approver, bob, bob_client, now
):
    hold = services.legal_hold_place(reason="case", placed_by=approver, tenant_id="acme", now=now)
    url = reverse("admin:retention_legalhold_release", args=[hold.pk])

    page = bob_client.get(url)
    without_reason = bob_client.post(url, {"reason": "  "})
    hold.refresh_from_db()
    still_active = hold.released_at is None
    released = bob_client.post(url, {"reason": "Case settled"}, follow=True)

    assert "It protects <strong>2</strong> records now, <strong>1</strong> of them" in (
        page.content.decode()
    )
    assert without_reason.status_code == 200 and still_active
    hold.refresh_from_db()
    assert hold.released_by == bob
    assert hold.release_reason == "Case settled"
    assert any("released" in m for m in messages_of(released))


def test_release__action_leads_to_the_confirmation_page(records, approver, bob_client, now):
    hold = services.legal_hold_place(reason="case", placed_by=approver, tenant_id="acme", now=now)

    response = bob_client.post(
        reverse("admin:retention_legalhold_changelist"),
        {"action": "release_hold", "_selected_action": [hold.pk]},
    )

    assert response["Location"] == reverse("admin:retention_legalhold_release", args=[hold.pk])


def test_hold_page__is_read_only_and_shows_what_it_protects(records, approver, bob_client, now):
    hold = services.legal_hold_place(
        reason="case", placed_by=approver, record=records["old"], now=now
    )
    url = reverse("admin:retention_legalhold_change", args=[hold.pk])

    page = bob_client.get(url)
    post = bob_client.post(url, {"reason": "edited"})

    assert "1 record now (1 past their deadline)" in page.content.decode()
    assert post.status_code == 403
    hold.refresh_from_db()
    assert hold.reason == "case"


@pytest.mark.parametrize(
    ("fields", "shown"),
    [
        ({}, "not mirrored"),
        (
            {"object_lock_status": "applying", "object_lock_done": 350, "object_lock_total": 1200},
            "being set: 350 of 1,200 objects",
        ),
        (
            {"object_lock_status": "applied", "object_lock_done": 1200, "object_lock_total": 1200},
            "set on 1,200 objects in the store",
        ),
        (
            {
                "object_lock_status": "failed",
                "object_lock_done": 500,
                "object_lock_total": 1200,
                "object_lock_error": "3 object(s) could not be locked; the last error: "
                "InvalidRequest: Bucket is missing ObjectLockConfiguration",
            },
            "failed after 500 of 1,200 objects: 3 object(s) could not be locked; the last "
            "error: InvalidRequest: Bucket is missing ObjectLockConfiguration",
        ),
    ],
)
def test_hold_page__shows_the_object_lock_mirror_progress_and_its_error(
    records, approver, bob_client, now, fields, shown
):
    hold = services.legal_hold_place(reason="case", placed_by=approver, tenant_id="acme", now=now)
    LegalHold.objects.filter(pk=hold.pk).update(**fields)

    page = bob_client.get(reverse("admin:retention_legalhold_change", args=[hold.pk]))

    assert "Object Lock legal holds" in page.content.decode()
    assert shown in page.content.decode()


def test_place__says_how_many_covered_records_were_already_being_deleted(records, bob_client, now):
    run = engine.run_start(mode=RunMode.ENFORCE, now=now)
    claim = engine.records_claim(
        run=run, data_class="idv.photo", limit=10, now=now, start_disposal=True
    )
    assert {item.tenant_id for item in claim.items} == {"acme", "globex"}

    response = _place(bob_client, tenant_id="acme", reason="Case 2026-115")

    assert (
        "1 of the records it covers were already being deleted (past their last check): they "
        "are deleted, and their events say the hold came after."
    ) in messages_of(response)
