"""Rejecting a version under review with a reason, in the admin (issue 30, point 2)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse

from retention.models import PolicyVersionStatus
from tests.admin.conftest import messages_of
from tests.helpers import submitted

pytestmark = pytest.mark.django_db

REASON = "The contract with acme says 90 days, not 60."


@pytest.fixture
def version(alice, now):
    return submitted("idv.photo", timedelta(days=60), author=alice, now=now)


def _reject(version) -> str:
    return reverse("admin:retention_policyversion_reject", args=[version.pk])


def test_review_page__offers_approve_and_reject_with_a_reason(version, bob_client):
    html = bob_client.get(
        reverse("admin:retention_policyversion_review", args=[version.pk])
    ).content.decode()

    assert 'id="retention-approve"' in html
    assert f'href="{_reject(version)}"' in html
    assert "Reject with a reason…" in html


def test_reject__returns_the_version_to_its_author_who_sees_why(
    version, bob, bob_client, alice_client
):
    page = bob_client.get(_reject(version))
    response = bob_client.post(_reject(version), {"reason": REASON}, follow=True)

    assert "Rejecting returns idv.photo version 1 to its author, <strong>alice</strong>" in (
        page.content.decode()
    )
    version.refresh_from_db()
    assert version.status == PolicyVersionStatus.DRAFT
    assert version.rejected_by == bob
    assert any("returned to alice as a draft" in m for m in messages_of(response))
    authors_page = alice_client.get(
        reverse("admin:retention_policyversion_change", args=[version.pk])
    ).content.decode()
    assert "Returned to alice</strong> by bob on" in authors_page
    assert "The contract with acme says 90 days, not 60." in authors_page
    assert 'id="retention-submit-version"' in authors_page  # she can submit it again


def test_reject__a_reason_is_required(version, bob_client):
    response = bob_client.post(_reject(version), {"reason": ""})

    assert response.status_code == 200
    assert "This field is required." in response.content.decode()
    version.refresh_from_db()
    assert version.status == PolicyVersionStatus.SUBMITTED


def test_reject__not_by_the_versions_author_even_an_approver(carol, carol_client, now):
    own = submitted("idv.photo", timedelta(days=60), author=carol, now=now)

    change = carol_client.get(reverse("admin:retention_policyversion_change", args=[own.pk]))
    response = carol_client.post(_reject(own), {"reason": "never mind"}, follow=True)

    assert 'id="retention-reject-version"' not in change.content.decode()
    assert any("cannot also review it" in m for m in messages_of(response))
    own.refresh_from_db()
    assert own.status == PolicyVersionStatus.SUBMITTED


def test_reject__approvers_only(version, alice_client):
    assert alice_client.get(_reject(version)).status_code == 403
    assert alice_client.post(_reject(version), {"reason": "no"}).status_code == 403


def test_reject__a_version_no_longer_under_review_is_left_alone(version, bob, bob_client, now):
    from retention import services

    services.policy_version_approve(version=version, approver=bob, now=now)

    response = bob_client.post(_reject(version), {"reason": "too late"}, follow=True)

    assert any("not waiting for approval" in m for m in messages_of(response))
    version.refresh_from_db()
    assert version.status == PolicyVersionStatus.APPROVED


def test_resubmitted__the_next_reviewer_sees_it_was_returned_once(version, bob, bob_client, now):
    from retention import services

    services.policy_version_reject(version=version, by=bob, reason=REASON, now=now)
    services.policy_version_submit(version=version, by=version.author, now=now)

    html = bob_client.get(
        reverse("admin:retention_policyversion_review", args=[version.pk])
    ).content.decode()

    assert "Returned once to alice by bob on" in html
    assert REASON in html
