"""Reviewing a model-row class's version: its cascade, what it applies to, a stop for review."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.urls import reverse

from retention import services
from retention.models import Policy, PolicyVersion
from retention.rows.cascade import cascade_of
from tests.admin.conftest import messages_of
from tests.helpers import submitted
from tests.rowhost.models import Account, Shipment

pytestmark = pytest.mark.django_db

AGE_SENTENCE = (
    "This class is cut by the rows' own age (<code>closed_at</code>): approving this version "
    "applies its period to the existing rows too, not only to new ones."
)
STOPPED = "deleting rows of rowhost.Account would also touch rowhost.Audit"


@pytest.fixture
def accounts(row_registry: Any) -> Any:
    return row_registry.register_model(Account, data_class="crm.account", age_field="closed_at")


def _submitted(author: Any, now: Any, data_class: str = "crm.account") -> PolicyVersion:
    return submitted(data_class, timedelta(days=30), author=author, now=now)


def _review(version: PolicyVersion) -> str:
    return reverse("admin:retention_policyversion_review", args=[version.pk])


def _change(version: PolicyVersion) -> str:
    return reverse("admin:retention_policyversion_change", args=[version.pk])


def _stop_for_review(data_class: str, now: Any) -> None:
    Policy.objects.filter(data_class=data_class).update(review_reason=STOPPED, review_since=now)


def test_review__a_row_class_shows_what_a_delete_also_deletes_nulls_and_is_blocked_by(
    accounts, alice, bob_client, now
):
    version = _submitted(alice, now)

    response = bob_client.get(_review(version))

    assert response.status_code == 200
    assert response.context["cascade"] == cascade_of(Account)
    html = response.content.decode()
    assert "Rows of rowhost.Account" in html
    deletes, nulls, blocks = (
        html.split(f'id="retention-cascade-{name}"')[1].split("</tr>")[0]
        for name in ("deletes", "nulls", "blocks")
    )
    assert "<code>rowhost.AccountNote</code> by <code>account</code>" in deletes
    assert "<code>rowhost.Account_tags</code>" in deletes and "many-to-many" in deletes
    assert "<code>rowhost.Ticket.account</code>" in nulls
    assert "<code>rowhost.Account.referrer</code>" in nulls
    assert "<code>rowhost.Invoice.account</code>" in blocks
    assert "computed from the model graph as it is now" in html
    assert 'id="retention-approve"' in html


def test_review__an_age_class_says_the_version_applies_to_existing_rows(
    accounts, alice, bob_client, now
):
    html = bob_client.get(_review(_submitted(alice, now))).content.decode()

    assert AGE_SENTENCE in html
    # The records' preview (deadlines fixed at upload) does not describe host rows.
    assert "changes <strong>no existing deadline</strong>" not in html


def test_review__an_expiry_class_says_the_version_applies_to_rows_written_from_now_on(
    row_registry, alice, bob_client, now
):
    row_registry.register_model(Shipment, data_class="logistics.proof", expires_field="expires_at")

    html = bob_client.get(_review(_submitted(alice, now, "logistics.proof"))).content.decode()

    assert "written by the host when it writes a row (<code>expires_at</code>)" in html
    assert "it applies to rows written from now on" in html
    assert "Rows of rowhost.Shipment" in html


def test_review__a_class_of_tracked_objects_shows_no_cascade(alice, bob_client, now):
    response = bob_client.get(_review(_submitted(alice, now, "idv.photo")))

    assert response.context["row_class"] is None
    assert response.context["cascade"] is None
    assert 'id="retention-row-class"' not in response.content.decode()


def test_version_page__a_draft_of_a_row_class_shows_its_cascade(accounts, alice, alice_client, now):
    draft = services.policy_version_propose(
        data_class="crm.account", retention_period=timedelta(days=30), author=alice, now=now
    )

    html = alice_client.get(_change(draft)).content.decode()

    assert 'id="retention-row-class"' in html
    assert "<code>rowhost.Invoice.account</code>" in html
    assert AGE_SENTENCE in html


def test_approve__from_the_review_page_stores_the_cascade_and_ends_the_stop_for_review(
    accounts, alice, bob_client, now
):
    version = _submitted(alice, now)
    _stop_for_review("crm.account", now)

    response = bob_client.post(
        reverse("admin:retention_policyversion_approve", args=[version.pk]), follow=True
    )

    version.refresh_from_db()
    assert version.cascade == cascade_of(Account)
    policy = Policy.objects.get(data_class="crm.account")
    assert (policy.review_reason, policy.review_since) == ("", None)
    assert (
        "crm.account version 1 approved and in force: it governs the rows of rowhost.Account."
        in messages_of(response)
    )


def test_version_page__an_approved_version_shows_the_cascade_it_was_approved_with(
    accounts, alice, bob, bob_client, now
):
    version = services.policy_version_approve(version=_submitted(alice, now), approver=bob, now=now)
    approved = {**cascade_of(Account), "blocks": []}  # as if Invoice came later
    PolicyVersion.objects.filter(pk=version.pk).update(cascade=approved)

    response = bob_client.get(_change(version))

    assert response.context["cascade"] == approved
    html = response.content.decode()
    assert "as approved with version 1" in html
    assert "rowhost.Invoice.account" not in html


def test_policy_page__says_why_a_class_is_stopped_for_review(accounts, alice, bob, bob_client, now):
    services.policy_version_approve(version=_submitted(alice, now), approver=bob, now=now)
    _stop_for_review("crm.account", now)
    policy = Policy.objects.get(data_class="crm.account")

    html = bob_client.get(
        reverse("admin:retention_policy_change", args=[policy.pk])
    ).content.decode()

    assert 'id="retention-review-reason"' in html
    assert "crm.account is stopped for review" in html
    assert STOPPED in html


def test_review__a_stopped_class_says_why_on_the_review_of_its_next_version(
    accounts, alice, bob, bob_client, now
):
    services.policy_version_approve(version=_submitted(alice, now), approver=bob, now=now)
    _stop_for_review("crm.account", now)

    html = bob_client.get(_review(_submitted(alice, now))).content.decode()

    assert STOPPED in html


def test_policy_page__a_class_that_runs_shows_no_review_reason(make_policy, bob_client):
    policy = make_policy("idv.photo").policy

    html = bob_client.get(
        reverse("admin:retention_policy_change", args=[policy.pk])
    ).content.decode()

    assert 'id="retention-review-reason"' not in html
