"""Policies and versions in admin: draft, submit, four-eyes, lock, diff, retire."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.urls import reverse

from retention import services
from retention.models import Policy, PolicyVersion, PolicyVersionStatus
from tests.admin.conftest import messages_of

pytestmark = pytest.mark.django_db

ADD_URL = "admin:retention_policyversion_add"
CHANGELIST = "admin:retention_policyversion_changelist"


def _form(**overrides: Any) -> dict[str, Any]:
    data = {
        "data_class": "idv.photo",
        "description": "Identity photos",
        "retention_period": "30 days",
        "safety_margin": "1 hour",
        "locked": "",
        "disposition": "delete",
        "batch_size": "500",
        "rate_limit": "",
        "max_attempts": "",
        "owner": "Data Protection Office",
        "notes": "",
        "_continue": "1",
    }
    data.update(overrides)
    return {k: v for k, v in data.items() if v is not None}


def _draft(author: Any, now: Any, period: timedelta, *, locked: bool = False) -> PolicyVersion:
    return services.policy_version_propose(
        data_class="idv.photo", retention_period=period, author=author, now=now, locked=locked
    )


def _submitted(author: Any, now: Any, period: timedelta, **kwargs: Any) -> PolicyVersion:
    version = _draft(author, now, period, **kwargs)
    return services.policy_version_submit(version=version, by=author, now=now)


def _approved(author: Any, approver: Any, now: Any, period: timedelta, **kwargs: Any) -> Any:
    version = _submitted(author, now, period, **kwargs)
    return services.policy_version_approve(version=version, approver=approver, now=now)


def _review(version: PolicyVersion) -> str:
    return reverse("admin:retention_policyversion_review", args=[version.pk])


def _approve(version: PolicyVersion) -> str:
    return reverse("admin:retention_policyversion_approve", args=[version.pk])


def _action_names(response: Any) -> set[str]:
    return {name for name, _ in response.context["action_form"].fields["action"].choices if name}


def test_draft__author_creates_a_draft_from_the_add_form(alice, alice_client):
    response = alice_client.post(reverse(ADD_URL), _form(locked="on"))

    assert response.status_code == 302
    version = PolicyVersion.objects.get()
    assert version.status == PolicyVersionStatus.DRAFT
    assert version.author == alice
    assert version.retention_period == timedelta(days=30)
    assert version.safety_margin == timedelta(hours=1)
    assert version.locked is True
    assert version.policy.description == "Identity photos"
    assert response["Location"] == reverse(
        "admin:retention_policyversion_change", args=[version.pk]
    )


def test_draft__a_period_that_is_not_a_duration_is_a_form_error(alice_client):
    response = alice_client.post(reverse(ADD_URL), _form(retention_period="a month or so"))

    assert response.status_code == 200
    assert "retention_period" in response.context["adminform"].form.errors
    assert not PolicyVersion.objects.exists()


def test_draft__starts_from_the_rules_of_the_version_in_force(author, approver, alice_client, now):
    _approved(author, approver, now, timedelta(days=45), locked=True)

    response = alice_client.get(reverse(ADD_URL) + "?data_class=idv.photo")

    form = response.context["adminform"].form
    assert form.initial["retention_period"] == timedelta(days=45)
    assert form.initial["locked"] is True
    assert 'value="45 days"' in response.content.decode()


def test_draft__its_author_edits_it_but_nobody_else_can(alice, alice_client, carol_client, now):
    version = _draft(alice, now, timedelta(days=30))
    url = reverse("admin:retention_policyversion_change", args=[version.pk])

    refused = carol_client.post(url, _form(retention_period="5 days"))
    edited = alice_client.post(url, _form(retention_period="60 days"))

    assert refused.status_code == 403
    assert edited.status_code == 302
    version.refresh_from_db()
    assert version.retention_period == timedelta(days=60)


def test_submit__from_the_version_page(alice, alice_client, now):
    version = _draft(alice, now, timedelta(days=30))

    response = alice_client.post(
        reverse("admin:retention_policyversion_submit", args=[version.pk]), follow=True
    )

    version.refresh_from_db()
    assert version.status == PolicyVersionStatus.SUBMITTED
    assert version.submitted_by == alice
    assert any("a second person must now review" in m for m in messages_of(response))


def test_submit__action_on_the_list(alice, alice_client, now):
    version = _draft(alice, now, timedelta(days=30))

    alice_client.post(
        reverse(CHANGELIST), {"action": "submit_versions", "_selected_action": [version.pk]}
    )

    version.refresh_from_db()
    assert version.status == PolicyVersionStatus.SUBMITTED


def test_submitted_version__is_immutable_in_the_form(alice, alice_client, now):
    version = _submitted(alice, now, timedelta(days=30))
    url = reverse("admin:retention_policyversion_change", args=[version.pk])

    page = alice_client.get(url)
    post = alice_client.post(url, _form(retention_period="1 day"))

    assert page.status_code == 200
    assert 'name="_save"' not in page.content.decode()
    assert post.status_code == 403
    version.refresh_from_db()
    assert version.retention_period == timedelta(days=30)


def test_approve_action__an_author_without_the_approve_permission_does_not_see_it(
    alice, alice_client, now
):
    version = _submitted(alice, now, timedelta(days=30))

    changelist = alice_client.get(reverse(CHANGELIST))
    review = alice_client.get(_review(version))
    approve = alice_client.post(_approve(version))

    assert "submit_versions" in _action_names(changelist)
    assert "review_and_approve" not in _action_names(changelist)
    assert "retire_versions" not in _action_names(changelist)
    assert review.status_code == 200
    assert 'id="retention-approve"' not in review.content.decode()
    assert approve.status_code == 403
    version.refresh_from_db()
    assert version.status == PolicyVersionStatus.SUBMITTED


def test_approve_action__an_approver_sees_it_and_it_leads_to_the_review_page(
    alice, bob_client, now
):
    version = _submitted(alice, now, timedelta(days=30))

    changelist = bob_client.get(reverse(CHANGELIST))
    action = bob_client.post(
        reverse(CHANGELIST), {"action": "review_and_approve", "_selected_action": [version.pk]}
    )

    assert {"review_and_approve", "retire_versions"} <= _action_names(changelist)
    assert action.status_code == 302
    assert action["Location"] == _review(version)


def test_approve__an_author_cannot_approve_their_own_version(carol, carol_client, now):
    version = _submitted(carol, now, timedelta(days=30))

    review = carol_client.get(_review(version))
    response = carol_client.post(_approve(version), follow=True)

    assert "a second person must approve it" in review.content.decode()
    assert response.status_code == 200
    assert any("cannot also approve" in m for m in messages_of(response))
    version.refresh_from_db()
    assert version.status == PolicyVersionStatus.SUBMITTED
    assert version.approver is None


def test_approve__a_second_person_approves_from_the_review_page(alice, bob, bob_client, now):
    version = _submitted(alice, now, timedelta(days=30))

    response = bob_client.post(_approve(version), follow=True)

    version.refresh_from_db()
    assert version.status == PolicyVersionStatus.APPROVED
    assert version.approver == bob
    assert any("approved and in force" in m for m in messages_of(response))


def test_approve__a_shorter_version_of_a_locked_policy_is_refused_with_a_message(
    author, approver, alice, bob_client, now
):
    current = _approved(author, approver, now, timedelta(days=30), locked=True)
    shorter = _submitted(alice, now, timedelta(days=7), locked=True)

    review = bob_client.get(_review(shorter))
    response = bob_client.post(_approve(shorter), follow=True)

    assert "a shorter period will be refused" in review.content.decode()
    assert response.status_code == 200
    assert any("is locked" in m and "lengthened" in m for m in messages_of(response))
    shorter.refresh_from_db()
    current.refresh_from_db()
    assert shorter.status == PolicyVersionStatus.SUBMITTED
    assert current.status == PolicyVersionStatus.APPROVED


def test_version_page__shows_a_diff_against_the_version_in_force(
    author, approver, alice, bob_client, now
):
    _approved(author, approver, now, timedelta(days=30))
    longer = _submitted(alice, now, timedelta(days=60))

    response = bob_client.get(reverse("admin:retention_policyversion_change", args=[longer.pk]))

    diff = {row.name: row for row in response.context["diff"]}
    assert response.context["against"].number == 1
    assert diff["retention_period"].before == timedelta(days=30)
    assert diff["retention_period"].after == timedelta(days=60)
    assert diff["retention_period"].changed
    assert not diff["batch_size"].changed
    html = response.content.decode()
    assert "Compared with version 1 (approved (in force))" in html
    assert "30 days" in html and "60 days" in html


def test_review__explains_that_existing_deadlines_do_not_move(alice, bob_client, now):
    version = _submitted(alice, now, timedelta(days=30))

    response = bob_client.get(_review(version))

    html = response.content.decode()
    assert "changes <strong>no existing deadline</strong>" in html
    assert "it applies to new uploads and to renewals" in html
    assert [h.label for h in response.context["preview"].horizons] == [
        "now",
        "in 7 days",
        "in 30 days",
    ]


def test_retire__asks_for_confirmation_then_retires(alice, bob_client, now):
    version = _submitted(alice, now, timedelta(days=30))
    data = {"action": "retire_versions", "_selected_action": [version.pk]}

    confirm = bob_client.post(reverse(CHANGELIST), data)
    version.refresh_from_db()
    status_after_confirm_page = version.status
    bob_client.post(reverse(CHANGELIST), {**data, "post": "yes"})

    assert "Yes, retire" in confirm.content.decode()
    assert status_after_confirm_page == PolicyVersionStatus.SUBMITTED
    version.refresh_from_db()
    assert version.status == PolicyVersionStatus.RETIRED


def test_retire__offered_on_the_version_page_to_approvers_only(
    alice, alice_client, bob_client, now
):
    version = _submitted(alice, now, timedelta(days=30))
    url = reverse("admin:retention_policyversion_change", args=[version.pk])

    assert 'value="retire_versions"' in bob_client.get(url).content.decode()
    assert 'value="retire_versions"' not in alice_client.get(url).content.decode()


def test_policy_list__back_to_report_only_action(author, approver, bob_client, now):
    _approved(author, approver, now, timedelta(days=30))
    policy = Policy.objects.get()
    Policy.objects.filter(pk=policy.pk).update(mode="enforce")

    changelist = reverse("admin:retention_policy_changelist")
    selected = {"action": "back_to_report_only", "_selected_action": [policy.pk]}

    confirmation = bob_client.post(changelist, selected)
    policy.refresh_from_db()
    assert policy.mode == "enforce"  # nothing changes before the confirmation
    assert "no run deletes or redacts anything" in confirmation.content.decode()

    bob_client.post(changelist, {**selected, "post": "yes"})

    policy.refresh_from_db()
    assert policy.mode == "report_only"
