"""The inbox on the admin index and the dashboard: what waits for whom, each item a
link to the page where it is acted on (issue 30, point 2)."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.urls import reverse

from retention import api, services
from retention.models import BreakerState, BreakerTrip, Policy, RecordState, RetentionRecord
from tests.helpers import put_tracked, submitted

pytestmark = pytest.mark.django_db

INDEX = "admin:index"


def _inbox(client, url_name: str = INDEX) -> str:
    response = client.get(reverse(url_name))
    assert response.status_code == 200
    html = response.content.decode()
    match = re.search(r'<div class="module retention-inbox".*?</div>', html, re.S)
    assert match is not None, "no inbox on the page"
    return match.group(0)


def _links(inbox: str, kind: str) -> list[str]:
    rows = re.findall(rf'<tr class="retention-inbox-{kind}.*?</tr>', inbox, re.S)
    return [href for row in rows for href in re.findall(r'href="([^"]+)"', row)]


def test_inbox__lists_a_version_waiting_for_another_approver(alice, bob_client, alice_client, now):
    version = submitted("idv.photo", timedelta(days=60), author=alice, now=now)

    inbox = _inbox(bob_client)

    assert "idv.photo version 1 waits for your approval" in inbox
    assert "written by alice" in inbox
    assert _links(inbox, "waiting") == [
        reverse("admin:retention_policyversion_review", args=[version.pk])
    ]
    # Its author may not approve it, and alice approves nothing: it waits for neither.
    assert "waits for your approval" not in _inbox(alice_client)


def test_inbox__the_author_of_a_rejected_version_reads_why(alice, bob, alice_client, now):
    version = submitted("idv.photo", timedelta(days=60), author=alice, now=now)
    api.reject_policy_version(version, by=bob, reason="The contract says 90 days", now=now)

    inbox = _inbox(alice_client)

    assert "idv.photo version 1 returned to you: The contract says 90 days" in inbox
    assert "by bob" in inbox
    assert _links(inbox, "returned") == [
        reverse("admin:retention_policyversion_change", args=[version.pk])
    ]


def test_inbox__a_tripped_breaker_links_to_its_release_page(make_policy, bob_client, now):
    make_policy()
    trip = BreakerTrip.objects.create(
        data_class="idv.photo",
        state=BreakerState.TRIPPED,
        limit="fraction",
        tripped_at=now,
        figures={"about_to_delete": 3, "not_yet_deleted": 3, "fraction": 1.0, "max_fraction": 0.25},
    )

    inbox = _inbox(bob_client)

    assert "idv.photo is held by the volume breaker" in inbox
    assert "about to dispose of 3 of its 3 not-yet-deleted records" in inbox
    link = _links(inbox, "tripped")[0]
    assert link == reverse("admin:retention_breakertrip_release", args=[trip.pk])
    assert bob_client.get(link).status_code == 200


def test_inbox__failed_records_link_to_the_records_waiting_for_review(make_policy, bob_client, now):
    make_policy()
    given_up, retrying, fine = (put_tracked(now=now - timedelta(days=40)) for _ in range(3))
    RetentionRecord.objects.filter(pk=given_up.pk).update(state=RecordState.FAILED, retryable=False)
    RetentionRecord.objects.filter(pk=retrying.pk).update(state=RecordState.FAILED)

    inbox = _inbox(bob_client)

    assert "1 record of idv.photo failed and wait for review" in inbox
    link = _links(inbox, "failed")[0].replace("&amp;", "&")
    listed = bob_client.get(link)
    assert listed.status_code == 200
    assert [r.pk for r in listed.context["cl"].result_list] == [given_up.pk]


def test_inbox__a_class_without_a_recent_dry_run_links_to_its_enable_page(
    make_policy, bob_client, now
):
    make_policy(enforce=False)
    policy = Policy.objects.get()

    inbox = _inbox(bob_client)

    assert "idv.photo is report-only: no recent dry run to enable from" in inbox
    assert "no dry run yet" in inbox
    link = _links(inbox, "stale_dry_run")[0]
    assert link == reverse("admin:retention_policy_enable", args=[policy.pk])
    page = bob_client.get(link).content.decode()
    assert "run_retention --dry-run --data-class idv.photo" in page


def test_inbox__a_drifted_registration_links_to_the_draft_that_adopts_it(
    register_logs, make_policy, alice_client, now
):
    register_logs(tenant_field=None, scope=lambda qs: qs.filter(status=200))
    make_policy("logs.request", timedelta(days=45))
    register_logs(tenant_field=None, scope=lambda qs: qs.filter(status=500))

    inbox = _inbox(alice_client)

    assert "logs.request: the code&#x27;s registration no longer matches v1" in inbox
    link = _links(inbox, "drifted")[0]
    assert link == reverse("admin:retention_policyversion_add") + "?data_class=logs.request"
    assert alice_client.get(link).status_code == 200


def test_inbox__open_erasure_requests_by_due_date_with_the_overdue_marked(
    make_policy, alice, bob_client, now
):
    make_policy()
    late = api.request_erasure(
        requested_by=alice, reason="Art. 17", subject_id="ann@x.test", now=now - timedelta(days=31)
    )
    soon = api.request_erasure(requested_by=alice, reason="Art. 17", subject_id="bea", now=now)

    inbox = _inbox(bob_client)

    assert _links(inbox, "erasure") == [
        reverse("admin:retention_erasurerequest_change", args=[late.pk]),
        reverse("admin:retention_erasurerequest_change", args=[soon.pk]),
    ]
    assert inbox.count("OVERDUE") == 1
    assert f"subject {late.subject_digest[:12]}…" in inbox
    assert "ann@x.test" not in inbox  # the subject's id is never shown


def test_inbox__on_the_dashboard_too(alice, bob_client, now):
    submitted("idv.photo", timedelta(days=60), author=alice, now=now)

    inbox = _inbox(bob_client, "admin:retention_policy_dashboard")

    assert "idv.photo version 1 waits for your approval" in inbox


def test_inbox__says_when_nothing_waits(bob_client):
    assert "Nothing waits for you" in _inbox(bob_client)


def test_inbox__not_shown_to_a_user_without_retention_permissions(client, django_user_model):
    user = django_user_model.objects.create_user("eve", "eve@example.com", "pw", is_staff=True)
    client.force_login(user)

    html = client.get(reverse(INDEX)).content.decode()

    assert "retention-inbox" not in html


def test_inbox__a_version_leaves_the_inbox_once_approved(alice, bob, bob_client, now):
    version = submitted("idv.photo", timedelta(days=60), author=alice, now=now)
    services.policy_version_approve(version=version, approver=bob, now=now)

    assert "waits for your approval" not in _inbox(bob_client)
