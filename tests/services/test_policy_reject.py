"""Rejecting a submitted version with a reason: back to its author as a draft (issue 30)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import IntegrityError, transaction

from retention import api, services
from retention.exceptions import FourEyesViolation, InvalidTransition, NotAllowed
from retention.models import PolicyVersion, PolicyVersionStatus
from tests.factories import UserFactory
from tests.helpers import submitted

pytestmark = pytest.mark.django_db


@pytest.fixture
def version(author, now) -> PolicyVersion:
    return submitted("idv.photo", timedelta(days=60), author=author, now=now)


def test_reject__returns_a_submitted_version_to_its_author_as_a_draft_with_the_reason(
    version, approver, now
):
    done = services.policy_version_reject(
        version=version, by=approver, reason="  The contract says 90 days.  ", now=now
    )

    version.refresh_from_db()
    assert done.pk == version.pk
    assert version.status == PolicyVersionStatus.DRAFT
    assert version.rejected_by == approver
    assert version.rejected_at == now
    assert version.rejection_reason == "The contract says 90 days."
    assert version.approver is None


def test_reject__the_author_changes_the_draft_and_submits_it_again_for_approval(
    version, author, approver, now
):
    from retention.services.governance import policy_version_update_draft

    services.policy_version_reject(version=version, by=approver, reason="90 days", now=now)
    later = now + timedelta(hours=1)
    policy_version_update_draft(
        version=version, by=author, now=later, retention_period=timedelta(days=90)
    )
    services.policy_version_submit(version=version, by=author, now=later)
    approved = services.policy_version_approve(version=version, approver=approver, now=later)

    assert approved.status == PolicyVersionStatus.APPROVED
    assert approved.retention_period == timedelta(days=90)
    assert approved.rejection_reason == "90 days"  # what was asked for stays on record


def test_reject__refused_to_the_versions_author(version, author, now):
    author.user_permissions.add(*approver_permission())
    author = type(author).objects.get(pk=author.pk)

    with pytest.raises(FourEyesViolation, match="cannot also review it"):
        services.policy_version_reject(version=version, by=author, reason="no", now=now)

    version.refresh_from_db()
    assert version.status == PolicyVersionStatus.SUBMITTED


def test_reject__refused_to_someone_who_may_not_approve(version, now):
    outsider = UserFactory(username="outsider")

    with pytest.raises(NotAllowed, match="approvers only"):
        services.policy_version_reject(version=version, by=outsider, reason="no", now=now)

    version.refresh_from_db()
    assert version.status == PolicyVersionStatus.SUBMITTED


def test_reject__refused_without_a_reason(version, approver, now):
    with pytest.raises(NotAllowed, match="needs a reason"):
        services.policy_version_reject(version=version, by=approver, reason="   ", now=now)

    version.refresh_from_db()
    assert version.status == PolicyVersionStatus.SUBMITTED
    assert version.rejected_at is None


@pytest.mark.parametrize("status", ["draft", "approved"])
def test_reject__only_a_submitted_version(author, approver, now, status):
    draft = services.policy_version_propose(
        data_class="idv.photo", retention_period=timedelta(days=30), author=author, now=now
    )
    if status == "approved":
        services.policy_version_submit(version=draft, by=author, now=now)
        services.policy_version_approve(version=draft, approver=approver, now=now)

    with pytest.raises(InvalidTransition, match="only a submitted version can"):
        services.policy_version_reject(version=draft, by=approver, reason="no", now=now)

    draft.refresh_from_db()
    assert draft.status == status
    assert draft.rejected_at is None


def test_reject__the_database_refuses_a_rejection_without_reason_or_by_the_author(
    version, approver, author, now
):
    rows = PolicyVersion.objects.filter(pk=version.pk)
    with pytest.raises(IntegrityError), transaction.atomic():
        rows.update(rejected_by=approver, rejected_at=now, rejection_reason="")
    with pytest.raises(IntegrityError), transaction.atomic():
        rows.update(rejected_by=author, rejected_at=now, rejection_reason="mine")


def test_reject_policy_version__the_api_reads_the_clock_when_now_is_none(version, approver):
    done = api.reject_policy_version(version, by=approver, reason="Shorter than the contract")

    assert done.status == PolicyVersionStatus.DRAFT
    assert done.rejected_at is not None
    assert done.rejection_reason == "Shorter than the contract"


def approver_permission():
    from django.contrib.auth.models import Permission

    return Permission.objects.filter(
        content_type__app_label="retention", codename="approve_policyversion"
    )
