"""Erasure requests in admin: the list with due dates, overdue ones marked, and each
request's frozen scope as its approver sees it (issue 29, part of point 5)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse

from retention import api
from retention.models import ErasureRequest
from retention.reporting import human
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


def test_read_only__nobody_adds_changes_or_deletes_a_request_here(requests, superuser_client):
    late = requests["late"]
    add = superuser_client.get(reverse("admin:retention_erasurerequest_add"))
    delete = superuser_client.post(
        reverse("admin:retention_erasurerequest_delete", args=[late.pk]), {"post": "yes"}
    )

    assert add.status_code == 403
    assert delete.status_code == 403
    assert ErasureRequest.objects.filter(pk=late.pk).exists()


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
